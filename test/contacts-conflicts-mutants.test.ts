// Contact conflicts at their edges: the words of the review notice (one or several, field or duplicate), which
// conflicts a list shows and in what order, the refusals' words, applying an attribute or an email, and the notes a
// summary or topics alone become.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { uniqueEmail } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { TEST_AI_SECRET } from './helpers/server.js';
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
    const conflicts = ok(await upsert({ organizationId: t.owner.orgId, conversationId, email, attributes: { plan: 'free' } }), 200).conflicts;
    const byField = Object.fromEntries(conflicts.map((x: any) => [x.field, x]));
    expect(ok(await as(t.agent).post(`/contacts/conflicts/${byField['attributes.plan'].id}/resolve`, { action: 'apply' }), 200).contact.attributes).to.deep.equal({ plan: 'free' });
    const after = ok(await as(t.agent).post(`/contacts/conflicts/${byField.email.id}/resolve`, { action: 'apply' }), 200).contact;
    expect(after).to.include({ email, emailVerifiedAt: null });
  });

  it('a summary alone, or topics alone, become one note each', async () => {
    const c = await createContact(t.agent, { name: 'Noted' });
    const conversationId = await linked(c.id);
    ok(await upsert({ organizationId: t.owner.orgId, conversationId, summary: 'Asked about invoices' }), 200);
    ok(await upsert({ organizationId: t.owner.orgId, conversationId, topics: ['billing', 'tax'] }), 200);
    const notes = ok(await as(t.agent).get(`/contacts/${c.id}/notes`), 200).map((n: any) => n.content);
    expect(notes.sort()).to.deep.equal(['Summary: Asked about invoices', 'Topics: billing, tax']);
  });
});
