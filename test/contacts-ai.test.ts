// The AI service's contact routes (seek, upsert), the conflicts they open (apply, dismiss, duplicate -> merge),
// contact_conflict notifications, and the contact socket events: agents hear them, visitors never do.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { uniqueEmail } from './helpers/factories.js';
import { Api, type ApiResponse } from './helpers/http.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { TEST_AI_SECRET } from './helpers/server.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, nextEvent, settle } from './helpers/sockets.js';
import { expectError } from './helpers/tenancy.js';
import { as, contactsTenant, createContact, defineAttribute, ok, type ContactsTenant } from './helpers/contacts.js';

const secret = { 'x-ai-tool-secret': TEST_AI_SECRET };
function aiApi() {
  const api = new Api(sharedServer().baseUrl);
  return {
    seek: (query: string, headers: Record<string, string> = secret) => api.get(`/contacts/ai/seek?${query}`, { headers }),
    upsert: (body: unknown, headers: Record<string, string> = secret) => api.post('/contacts/ai/upsert', body, { headers }),
  };
}

async function conversationOf(t: ContactsTenant): Promise<string> {
  return (await startConversation(await newVisitor(t.owner))).conversationId;
}

const notificationsOf = async (m: { api: Api; accessToken: string }) => (ok(await m.api.get('/notifications', { token: m.accessToken }), 200) as any[]).filter((n) => n.type === 'contact_conflict');

describe('Contacts AI: seek', () => {
  it('finds by email, phone (any spelling) or exact name; nothing found is 200 {found:false}; checks the secret and organization', async () => {
    const t = await contactsTenant();
    const email = uniqueEmail('seek');
    const c = await createContact(t.agent, { name: 'Sam Seek', email, phone: '+49 30 901820' });
    const ai = aiApi();
    const org = `organizationId=${t.owner.orgId}`;
    for (const q of [`email=${encodeURIComponent(email.toUpperCase())}`, `phone=${encodeURIComponent('+49 30 90 18 20')}`, 'name=sam%20seek']) {
      const data = ok(await ai.seek(`${org}&${q}`), 200);
      expect(data.found, q).to.equal(true);
      expect(data.contact.id).to.equal(c.id);
    }
    expect(ok(await ai.seek(`${org}&email=nobody%40example.test`), 200)).to.deep.equal({ found: false, contact: null });
    expect(ok(await ai.seek(`${org}&name=${encodeURIComponent('Sam%')}`), 200).found).to.equal(false);
    // The same contact is not found through another organization.
    const other = await contactsTenant();
    expect(ok(await ai.seek(`organizationId=${other.owner.orgId}&email=${encodeURIComponent(email)}`), 200).found).to.equal(false);
    expectError(await ai.seek(org), 400, 'validation_failed');
    expectError(await ai.seek(`email=${encodeURIComponent(email)}`), 400, 'validation_failed');
    expectError(await ai.seek(`${org}&phone=abc`), 400, 'validation_failed');
    expectError(await ai.seek(`${org}&email=${encodeURIComponent(email)}`, { 'x-ai-tool-secret': 'wrong' }), 401, 'unauthorized');
    expectError(await ai.seek(`${org}&email=${encodeURIComponent(email)}`, {}), 401, 'unauthorized');
  });
});

describe('Contacts AI: upsert and conflicts', () => {
  let t: ContactsTenant;
  before(async () => {
    t = await contactsTenant();
    await defineAttribute(t.admin, { key: 'plan', label: 'Plan', type: 'list', options: ['free', 'pro'] });
  });

  it('creates a contact when none is found (201), links the conversation, writes the note and summary', async () => {
    const conversationId = await conversationOf(t);
    const email = uniqueEmail('new');
    const res = await aiApi().upsert({ organizationId: t.owner.orgId, conversationId, name: 'Nina New', email, phone: '+1 (415) 555-0100', attributes: { plan: 'free' }, note: 'Wants a refund', summary: 'Billing question', topics: ['billing', 'refund'] });
    const data = ok(res, 201);
    expect(data.created).to.equal(true);
    expect(data.conflicts).to.deep.equal([]);
    expect(data.contact).to.include({ name: 'Nina New', email, phone: '+14155550100' });
    expect(data.contact.attributes).to.deep.equal({ plan: 'free' });
    expect(data.contact.lastActivityAt).to.be.a('string');
    expect(ok(await as(t.agent).get(`/conversations/${conversationId}`), 200).contactId).to.equal(data.contact.id);
    const notes = ok(await as(t.agent).get(`/contacts/${data.contact.id}/notes`), 200);
    expect(notes.map((n: any) => n.content).sort()).to.deep.equal(['Summary: Billing question\nTopics: billing, refund', 'Wants a refund']);
    expect(notes.every((n: any) => n.source === 'ai' && n.authorId === null && n.conversationId === conversationId)).to.equal(true);
    // Only an admin may edit an AI note.
    expectError(await as(t.agent).patch(`/contacts/${data.contact.id}/notes/${notes[0].id}`, { content: 'x' }), 403, 'forbidden');
    ok(await as(t.admin).patch(`/contacts/${data.contact.id}/notes/${notes[0].id}`, { content: 'x' }), 200);
  });

  it('fills empty fields (200) and never overwrites: a different value opens a field conflict, once; admins are notified', async () => {
    const email = uniqueEmail('known');
    const c = await createContact(t.agent, { name: 'Kim Known', email, attributes: { plan: 'pro' } });
    const conversationId = await conversationOf(t);
    const before = (await notificationsOf(t.admin)).length;
    const body = { organizationId: t.owner.orgId, conversationId, email: email.toUpperCase(), name: 'Kimberly', company: 'Known Inc', attributes: { plan: 'free' } };
    const data = ok(await aiApi().upsert(body), 200);
    expect(data.created).to.equal(false);
    expect(data.contact).to.include({ id: c.id, name: 'Kim Known', company: 'Known Inc' });
    expect(data.contact.attributes).to.deep.equal({ plan: 'pro' });
    expect(data.conflicts.map((x: any) => [x.kind, x.field, x.currentValue, x.proposedValue, x.status, x.source]).sort()).to.deep.equal([
      ['field', 'attributes.plan', 'pro', 'free', 'open', 'ai'],
      ['field', 'name', 'Kim Known', 'Kimberly', 'open', 'ai'],
    ]);
    expect(ok(await as(t.agent).get(`/conversations/${conversationId}`), 200).contactId).to.equal(c.id);
    // Repeating the same proposal opens nothing new.
    expect(ok(await aiApi().upsert(body), 200).conflicts).to.deep.equal([]);
    const listed = ok(await as(t.agent).get(`/contacts/conflicts?contactId=${c.id}`), 200);
    expect(listed).to.have.length(2);
    // The conversation is unassigned: the organization's admins (owner and admin) are notified, agents are not.
    expect((await notificationsOf(t.admin)).length).to.equal(before + 1);
    expect((await notificationsOf(t.owner)).length).to.be.greaterThan(0);
    expect(await notificationsOf(t.agent2)).to.deep.equal([]);
    expect((await notificationsOf(t.admin))[0].data).to.include({ contactId: c.id, conversationId });
  });

  it('apply writes the proposed value, dismiss keeps the recorded one; a resolved conflict is 409', async () => {
    const c = await createContact(t.agent, { name: 'Resolve Me', company: 'OldCo', attributes: { plan: 'pro' } });
    const conversationId = await conversationOf(t);
    ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId: c.id }), 200);
    const { conflicts } = ok(await aiApi().upsert({ organizationId: t.owner.orgId, conversationId, company: 'NewCo', attributes: { plan: 'free' } }), 200);
    const company = conflicts.find((x: any) => x.field === 'company');
    const plan = conflicts.find((x: any) => x.field === 'attributes.plan');
    const applied = ok(await as(t.agent).post(`/contacts/conflicts/${company.id}/resolve`, { action: 'apply' }), 200);
    expect(applied.conflict).to.include({ status: 'applied', resolvedBy: t.agent.userId });
    expect(applied.contact.company).to.equal('NewCo');
    const dismissed = ok(await as(t.agent).post(`/contacts/conflicts/${plan.id}/resolve`, { action: 'dismiss' }), 200);
    expect(dismissed.conflict.status).to.equal('dismissed');
    expect(dismissed.contact.attributes).to.deep.equal({ plan: 'pro' });
    expectError(await as(t.agent).post(`/contacts/conflicts/${plan.id}/resolve`, { action: 'apply' }), 409, 'conflict');
    expectError(await as(t.agent).post(`/contacts/conflicts/${randomUUID()}/resolve`, { action: 'apply' }), 404, 'not_found');
    expectError(await as(t.agent).post(`/contacts/conflicts/${company.id}/resolve`, { action: 'merge' }), 400, 'validation_failed');
    expect(ok(await as(t.agent).get(`/contacts/conflicts?contactId=${c.id}`), 200)).to.deep.equal([]);
    expect(ok(await as(t.agent).get(`/contacts/conflicts?contactId=${c.id}&status=all`), 200)).to.have.length(2);
    expect(ok(await as(t.agent).get(`/contacts/conflicts?contactId=${c.id}&status=dismissed`), 200).map((x: any) => x.id)).to.deep.equal([plan.id]);
  });

  it('an email another contact holds opens a duplicate conflict; applying it merges the newer contact into the older', async () => {
    const olderEmail = uniqueEmail('older');
    const older = await createContact(t.agent, { name: 'Older', email: olderEmail });
    const newer = await createContact(t.agent, { name: 'Newer', phone: '+44 7700 900123' });
    const conversationId = await conversationOf(t);
    ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId: newer.id }), 200);
    const { contact, conflicts } = ok(await aiApi().upsert({ organizationId: t.owner.orgId, conversationId, email: olderEmail }), 200);
    expect(contact.id).to.equal(newer.id);
    expect(contact.email).to.equal(null);
    expect(conflicts).to.have.length(1);
    expect(conflicts[0]).to.include({ kind: 'duplicate', contactId: newer.id, otherContactId: older.id, field: 'email', proposedValue: olderEmail });
    const { contact: survivor, conflict } = ok(await as(t.agent).post(`/contacts/conflicts/${conflicts[0].id}/resolve`, { action: 'apply' }), 200);
    expect(conflict.status).to.equal('applied');
    expect(survivor).to.include({ id: older.id, name: 'Older', email: olderEmail, phone: '+447700900123' });
    expectError(await as(t.agent).get(`/contacts/${newer.id}`), 404, 'not_found');
    expect(ok(await as(t.agent).get(`/conversations/${conversationId}`), 200).contactId).to.equal(older.id);
  });

  it('notifies the assignee (only) when the conversation is assigned', async () => {
    const c = await createContact(t.agent, { name: 'Assigned', company: 'A' });
    const conversationId = await conversationOf(t);
    ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId: c.id }), 200);
    ok(await as(t.owner).post(`/conversations/${conversationId}/route`, { agentId: t.agent2.userId }), 200);
    const adminBefore = (await notificationsOf(t.admin)).length;
    ok(await aiApi().upsert({ organizationId: t.owner.orgId, conversationId, company: 'B' }), 200);
    const mine = await notificationsOf(t.agent2);
    expect(mine).to.have.length(1);
    expect(mine[0].data).to.include({ contactId: c.id, conversationId });
    expect((await notificationsOf(t.admin)).length).to.equal(adminBefore);
  });

  it('checks input and tenancy: a conversation of another organization is 404 and changes nothing', async () => {
    const other = await contactsTenant();
    const theirConversation = await conversationOf(other);
    const email = uniqueEmail('cross');
    expectError(await aiApi().upsert({ organizationId: t.owner.orgId, conversationId: theirConversation, email }), 404, 'not_found');
    expect(ok(await aiApi().seek(`organizationId=${t.owner.orgId}&email=${encodeURIComponent(email)}`), 200).found).to.equal(false);
    expect(ok(await as(other.agent).get(`/conversations/${theirConversation}`), 200).contactId).to.equal(null);
    expectError(await aiApi().upsert({ organizationId: t.owner.orgId, conversationId: randomUUID() }), 404, 'not_found');
    expectError(await aiApi().upsert({ organizationId: t.owner.orgId, phone: 'garbage' }), 400, 'validation_failed');
    expectError(await aiApi().upsert({ organizationId: t.owner.orgId, attributes: { undefined_key: 1 } }), 400, 'validation_failed');
    expectError(await aiApi().upsert({ organizationId: t.owner.orgId, note: 'x'.repeat(5001) }), 400, 'validation_failed');
    expectError(await aiApi().upsert({ organizationId: t.owner.orgId, role: 'admin' }), 400, 'validation_failed');
    expectError(await aiApi().upsert({ email }), 400, 'validation_failed');
    expectError(await aiApi().upsert({ organizationId: t.owner.orgId, email }, { 'x-ai-tool-secret': 'nope' }), 401, 'unauthorized');
  });
});

describe('Contacts: socket events reach agents only', () => {
  const track = closeAfterEach();

  it('contact_created, contact_updated, contact_merged and contact_conflict_created go to agents, never to a visitor or another organization', async () => {
    const { baseUrl } = sharedServer();
    const t = await contactsTenant();
    const other = await contactsTenant();
    const visitor = await newVisitor(t.owner);
    const { conversationId } = await startConversation(visitor);
    const agentSocket = track(await connectOk(baseUrl, t.owner.orgId, t.agent.accessToken));
    const visitorSocket = track(await connectOk(baseUrl, t.owner.orgId, visitor.token));
    const outsider = track(await connectOk(baseUrl, other.owner.orgId, other.agent.accessToken));
    const events = ['contact_created', 'contact_updated', 'contact_merged', 'contact_conflict_created'] as const;
    const visitorSaw = events.map((e) => collect(visitorSocket, e));
    const outsiderSaw = events.map((e) => collect(outsider, e));

    const created = nextEvent(agentSocket, 'contact_created', (p) => p.contact.name === 'Live One');
    const one = await createContact(t.agent, { name: 'Live One', company: 'X' });
    expect((await created).contact).to.deep.equal(one);

    const updated = nextEvent(agentSocket, 'contact_updated', (p) => p.contact.id === one.id);
    ok(await as(t.agent).patch(`/contacts/${one.id}`, { name: 'Live Uno' }), 200);
    expect((await updated).contact.name).to.equal('Live Uno');

    ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId: one.id }), 200);
    const conflict = nextEvent(agentSocket, 'contact_conflict_created', (p) => p.conflict.contactId === one.id);
    const { conflicts } = ok(await aiApi().upsert({ organizationId: t.owner.orgId, conversationId, company: 'Y' }), 200);
    expect((await conflict).conflict).to.deep.equal(conflicts[0]);

    const two = await createContact(t.agent, { name: 'Live Two' });
    const merged = nextEvent(agentSocket, 'contact_merged', (p) => p.contact.id === one.id);
    ok(await as(t.agent).post(`/contacts/${one.id}/merge`, { sourceContactId: two.id }), 200);
    expect((await merged).sourceContactId).to.equal(two.id);

    await settle();
    for (const seen of [...visitorSaw, ...outsiderSaw]) expect(seen).to.deep.equal([]);
  });
});
