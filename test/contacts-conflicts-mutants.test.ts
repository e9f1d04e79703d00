// Contact conflicts at their edges: the words of the review notice (one or several, field or duplicate), which
// conflicts a list shows and in what order, the refusals' words, applying an attribute or an email, and the notes a
// summary or topics alone become.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, uniqueEmail } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { TEST_AI_SECRET } from './helpers/server.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { connectOk, nextEvent } from './helpers/sockets.js';
import { as, contactsTenant, createContact, defineAttribute, ok, type ContactsTenant } from './helpers/contacts.js';

const upsert = (body: unknown) => new Api(sharedServer().baseUrl).post('/contacts/ai/upsert', body, { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } });

describe('Contacts: conflicts, word by word', () => {
  let t: ContactsTenant;
  const notices = async () => (ok(await t.admin.api.get('/notifications?limit=200', { token: t.admin.accessToken }), 200) as any[]).filter((n) => n.type === 'contact_conflict');
  const linked = async (contactId: string) => {
    const conversationId = (await startConversation(await newVisitor(t.owner))).conversationId;
    ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId }), 200);
    return conversationId;
  };

  before(async () => {
    t = await contactsTenant();
    await defineAttribute(t.admin, { key: 'plan', label: 'Plan', type: 'list', options: ['free', 'pro'] });
  });

  it('one conflict asks for a review of one update; several are counted and each named, duplicates as such', async () => {
    const c = await createContact(t.agent, { name: 'Nora', company: 'OldCo' });
    const conversationId = await linked(c.id);
    const one = ok(await upsert({ organizationId: t.owner.orgId, conversationId, name: 'Norah' }), 200).conflicts;
    expect(one.map((x: any) => [x.kind, x.field, x.source, x.conversationId])).to.deep.equal([['field', 'name', 'ai', conversationId]]);
    let [notice] = await notices();
    expect(notice).to.deep.include({ title: 'A contact update needs your review', body: 'Different name proposed' });
    expect(notice!.data).to.deep.equal({ contactId: c.id, conflictIds: one.map((x: any) => x.id), conversationId });

    const email = uniqueEmail('held');
    const holder = await createContact(t.agent, { name: 'Holder', email });
    const two = ok(await upsert({ organizationId: t.owner.orgId, conversationId, email, company: 'NewCo' }), 200).conflicts;
    expect(two.map((x: any) => [x.kind, x.field])).to.deep.equal([['duplicate', 'email'], ['field', 'company']]);
    expect(two[0]).to.include({ otherContactId: holder.id, currentValue: null, proposedValue: email });
    [notice] = await notices();
    expect(notice).to.deep.include({ title: '2 contact updates need your review', body: 'Possible duplicate contact (email); Different company proposed' });
    expect(notice!.data.conflictIds).to.deep.equal(two.map((x: any) => x.id));
  });

  it('lists a contact\'s conflicts on either side, newest first, with the total; says why a conflict cannot be resolved', async () => {
    const email = uniqueEmail('side');
    const older = await createContact(t.agent, { name: 'Side Older', email });
    const newer = await createContact(t.agent, { name: 'Side Newer', company: 'A' });
    const conversationId = await linked(newer.id);
    const first = ok(await upsert({ organizationId: t.owner.orgId, conversationId, email }), 200).conflicts[0];
    const second = ok(await upsert({ organizationId: t.owner.orgId, conversationId, company: 'B' }), 200).conflicts[0];
    const res = await as(t.agent).get(`/contacts/conflicts?contactId=${newer.id}&limit=1`);
    expect(ok(res, 200).map((x: any) => x.id)).to.deep.equal([second.id]);
    expect(res.body.pagination).to.deep.equal({ limit: 1, offset: 0, total: 2 });
    expect(ok(await as(t.agent).get(`/contacts/conflicts?contactId=${older.id}`), 200).map((x: any) => x.id)).to.deep.equal([first.id]);
    // Without a contact: the organization's open conflicts, these two the newest.
    expect(ok(await as(t.agent).get('/contacts/conflicts?limit=2'), 200).map((x: any) => x.id)).to.deep.equal([second.id, first.id]);
    const nowhere = await upsert({ organizationId: t.owner.orgId, conversationId: randomUUID(), company: 'C' });
    expect([nowhere.status, nowhere.body.message]).to.deep.equal([404, 'Conversation not found']);

    ok(await as(t.agent).post(`/contacts/conflicts/${second.id}/resolve`, { action: 'dismiss' }), 200);
    const again = await as(t.agent).post(`/contacts/conflicts/${second.id}/resolve`, { action: 'apply' });
    expect([again.status, again.body.message]).to.deep.equal([409, 'This conflict was already dismissed']);
    const missing = await as(t.agent).post(`/contacts/conflicts/${randomUUID()}/resolve`, { action: 'dismiss' });
    expect([missing.status, missing.body.message]).to.deep.equal([404, 'Conflict not found']);
  });

  it('applying an attribute writes it; applying an email writes it unverified', async () => {
    const c = await createContact(t.agent, { name: 'Applied', email: uniqueEmail('was'), attributes: { plan: 'pro' } });
    await sharedServer().server.db.knex('contacts').where({ id: c.id }).update({ emailVerifiedAt: new Date() });
    const conversationId = await linked(c.id);
    const email = uniqueEmail('now');
    const conflicts = ok(await upsert({ organizationId: t.owner.orgId, conversationId, name: 'Applied Again', email, attributes: { plan: 'free' } }), 200).conflicts;
    const byField = Object.fromEntries(conflicts.map((x: any) => [x.field, x]));
    // Another field applied leaves the email's verification alone.
    expect(ok(await as(t.agent).post(`/contacts/conflicts/${byField.name.id}/resolve`, { action: 'apply' }), 200).contact.emailVerifiedAt).to.be.a('string');
    expect(ok(await as(t.agent).post(`/contacts/conflicts/${byField['attributes.plan'].id}/resolve`, { action: 'apply' }), 200).contact.attributes).to.deep.equal({ plan: 'free' });
    const after = ok(await as(t.agent).post(`/contacts/conflicts/${byField.email.id}/resolve`, { action: 'apply' }), 200).contact;
    expect(after).to.include({ email, emailVerifiedAt: null });
  });

  it('a summary alone, or topics alone, become one note each', async () => {
    const c = await createContact(t.agent, { name: 'Noted' });
    const conversationId = await linked(c.id);
    const row = () => sharedServer().server.db.knex('conversations').where({ id: conversationId }).first();
    const before = await row();
    ok(await upsert({ organizationId: t.owner.orgId, conversationId, summary: 'Asked about invoices' }), 200);
    // Already the contact's conversation: it is not written again.
    expect((await row()).updatedAt).to.deep.equal(before.updatedAt);
    ok(await upsert({ organizationId: t.owner.orgId, conversationId, topics: ['billing', 'tax'] }), 200);
    const notes = ok(await as(t.agent).get(`/contacts/${c.id}/notes`), 200).map((n: any) => n.content);
    expect(notes.sort()).to.deep.equal(['Summary: Asked about invoices', 'Topics: billing, tax']);
  });

  it('a phone another contact holds opens a duplicate conflict naming it; nothing is written over', async () => {
    const holder = await createContact(t.agent, { name: 'Phone Holder', phone: '+1 415 555 0142' });
    const c = await createContact(t.agent, { name: 'Phone Seeker' });
    const conversationId = await linked(c.id);
    const { contact, conflicts } = ok(await upsert({ organizationId: t.owner.orgId, conversationId, phone: '+1 (415) 555-0142', company: 'SeekCo' }), 200);
    expect(conflicts.map((x: any) => [x.kind, x.field, x.contactId, x.otherContactId, x.currentValue])).to.deep.equal([['duplicate', 'phone', c.id, holder.id, null]]);
    // The other field proposed is filled in: only the phone is someone else's.
    expect(contact).to.include({ id: c.id, phone: null, company: 'SeekCo' });
  });

  it('fills the attributes a contact lacks, keeps the ones it has (a conflict for a different value)', async () => {
    await defineAttribute(t.admin, { key: 'seats', label: 'Seats', type: 'number' });
    const c = await createContact(t.agent, { name: 'Attributed', attributes: { plan: 'pro' } });
    const conversationId = await linked(c.id);
    const { contact, conflicts } = ok(await upsert({ organizationId: t.owner.orgId, conversationId, attributes: { plan: 'free', seats: 12 } }), 200);
    expect(contact.attributes).to.deep.equal({ plan: 'pro', seats: 12 });
    expect(conflicts.map((x: any) => [x.field, x.currentValue, x.proposedValue])).to.deep.equal([['attributes.plan', 'pro', 'free']]);
    expect(ok(await as(t.agent).get(`/contacts/${c.id}`), 200).attributes).to.deep.equal({ plan: 'pro', seats: 12 });
    // The values it holds, proposed again: nothing to review.
    expect(ok(await upsert({ organizationId: t.owner.orgId, conversationId, attributes: { plan: 'pro', seats: 12 } }), 200).conflicts).to.deep.equal([]);
  });

  it('cuts a summary-and-topics note to the longest note a contact may hold', async () => {
    const c = await createContact(t.agent, { name: 'Long Talker' });
    const conversationId = await linked(c.id);
    const summary = 's'.repeat(4000);
    const topics = Array.from({ length: 20 }, (_, i) => `${i}`.padEnd(100, 't'));
    ok(await upsert({ organizationId: t.owner.orgId, conversationId, summary, topics }), 200);
    const [note] = ok(await as(t.agent).get(`/contacts/${c.id}/notes`), 200);
    expect(note.content).to.have.length(5000);
    expect(note.content).to.equal(`Summary: ${summary}\nTopics: ${topics.join(', ')}`.slice(0, 5000));
  });
});

describe('Contacts: who is told of a conflict in an unassigned conversation', () => {
  it('the organization\'s admins and owner, not a suspended admin', async () => {
    const t = await contactsTenant();
    const { server } = sharedServer();
    const suspended = await addMember(server, t.owner, 'admin', 'Sus Pended');
    ok(await t.owner.api.patch(`/memberships/organizations/${t.owner.orgId}/members/${suspended.membershipId}/status`, { status: 'suspended' }, { token: t.owner.accessToken }), 200);
    const c = await createContact(t.agent, { name: 'Told', company: 'Before' });
    const conversationId = (await startConversation(await newVisitor(t.owner))).conversationId;
    ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId: c.id }), 200);
    ok(await upsert({ organizationId: t.owner.orgId, conversationId, company: 'After' }), 200);
    const told = await server.db.knex('notifications').where({ type: 'contact_conflict' }).whereIn('userId', [t.owner.userId, t.admin.userId, t.agent.userId, suspended.userId]).select('userId');
    expect(told.map((n: { userId: string }) => n.userId).sort()).to.deep.equal([t.owner.userId, t.admin.userId].sort());
  });
});

describe('Contacts: at most 100 attributes, however they come', () => {
  it('a source may fill a contact up to 100 attributes, not past them; neither may a person', async () => {
    const t = await contactsTenant();
    const keys = Array.from({ length: 101 }, (_, i) => `k${String(i).padStart(3, '0')}`);
    for (const key of keys) await defineAttribute(t.admin, { key, label: key, type: 'text' });
    const c = await createContact(t.agent, { name: 'Full', attributes: Object.fromEntries(keys.slice(0, 99).map((k) => [k, 'v'])) });
    const conversationId = (await startConversation(await newVisitor(t.owner))).conversationId;
    ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId: c.id }), 200);

    // The 100th is filled in.
    const filled = ok(await upsert({ organizationId: t.owner.orgId, conversationId, attributes: { k099: 'x' } }), 200).contact;
    expect(Object.keys(filled.attributes)).to.have.length(100);
    expect(filled.attributes.k099).to.equal('x');

    // The 101st is refused, and nothing else of the upsert is written either.
    const refused = await upsert({ organizationId: t.owner.orgId, conversationId, company: 'Acme', attributes: { k100: 'y' } });
    const words = [400, 'A contact has at most 100 attributes', [{ field: 'attributes', message: 'at most 100 attributes' }]];
    expect([refused.status, refused.body.message, refused.body.error.details]).to.deep.equal(words);
    const patched = await as(t.agent).patch(`/contacts/${c.id}`, { attributes: { k100: 'y' } });
    expect([patched.status, patched.body.message, patched.body.error.details]).to.deep.equal(words);
    const stored = ok(await as(t.agent).get(`/contacts/${c.id}`), 200);
    expect([Object.keys(stored.attributes).length, stored.attributes.k100, stored.company]).to.deep.equal([100, undefined, null]);
  });
});

describe('Contacts: what agents hear of an upsert and a resolution', () => {
  const track = closeAfterEach();

  it('a conversation linked to another contact by an upsert is announced; so are an applied field and a merged duplicate', async () => {
    const t = await contactsTenant();
    const agentSocket = track(await connectOk(sharedServer().baseUrl, t.owner.orgId, t.agent.accessToken));
    const email = uniqueEmail('known');
    const known = await createContact(t.agent, { name: 'Known', email });
    const conversationId = (await startConversation(await newVisitor(t.owner))).conversationId;

    // The conversation had no contact: the upsert links it to the one holding the email.
    const relinked = nextEvent(agentSocket, 'conversation_updated', (p) => p.conversation.id === conversationId);
    ok(await upsert({ organizationId: t.owner.orgId, conversationId, email, company: 'KnownCo' }), 200);
    expect((await relinked).conversation.contactId).to.equal(known.id);

    const proposal = ok(await upsert({ organizationId: t.owner.orgId, conversationId, company: 'OtherCo' }), 200).conflicts[0];
    // (The upsert's own contact_updated may still be on its way: the resolution's is the one with the new company.)
    const updated = nextEvent(agentSocket, 'contact_updated', (p) => p.contact.id === known.id && p.contact.company === 'OtherCo');
    ok(await as(t.agent).post(`/contacts/conflicts/${proposal.id}/resolve`, { action: 'apply' }), 200);
    expect((await updated).contact).to.include({ id: known.id, company: 'OtherCo' });

    const newer = await createContact(t.agent, { name: 'Newer', phone: '+1 415 555 0177' });
    const duplicate = ok(await upsert({ organizationId: t.owner.orgId, conversationId, phone: '+14155550177' }), 200).conflicts[0];
    expect(duplicate).to.include({ kind: 'duplicate', otherContactId: newer.id });
    const merged = nextEvent(agentSocket, 'contact_merged', (p) => p.contact.id === known.id);
    ok(await as(t.agent).post(`/contacts/conflicts/${duplicate.id}/resolve`, { action: 'apply' }), 200);
    expect((await merged).sourceContactId).to.equal(newer.id);
  });

  it('an upsert announces the contact it created or updated; a dismissed conflict announces nothing', async () => {
    const t = await contactsTenant();
    const socket = track(await connectOk(sharedServer().baseUrl, t.owner.orgId, t.agent.accessToken));
    const email = uniqueEmail('heard');
    const companies: (string | null)[] = [];
    let id = '';
    socket.on('contact_updated', (p: any) => {
      if (p.contact.id === id) companies.push(p.contact.company);
    });
    const created = nextEvent(socket, 'contact_created', (p) => p.contact.email === email);
    id = ok(await upsert({ organizationId: t.owner.orgId, name: 'Heard', email, company: 'FirstCo' }), 201).contact.id;
    expect((await created).contact).to.include({ id, company: 'FirstCo' });

    const opened = ok(await upsert({ organizationId: t.owner.orgId, email, name: 'Heard Again', company: 'SecondCo' }), 200).conflicts;
    const byField = Object.fromEntries(opened.map((x: any) => [x.field, x.id]));
    ok(await as(t.agent).post(`/contacts/conflicts/${byField.name}/resolve`, { action: 'dismiss' }), 200);
    const applied = nextEvent(socket, 'contact_updated', (p) => p.contact.id === id && p.contact.company === 'SecondCo');
    ok(await as(t.agent).post(`/contacts/conflicts/${byField.company}/resolve`, { action: 'apply' }), 200);
    await applied;
    // The second upsert's announcement, then the applied company's: the dismissal's none between them.
    expect(companies).to.deep.equal(['FirstCo', 'SecondCo']);
  });
});
