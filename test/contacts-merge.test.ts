// Contact notes (author or admin edits) and merges: one transaction moves conversations, tickets, notes, tags,
// identities and missing attributes; the source then answers 404; a failed merge changes nothing.
import { randomInt, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { uniqueEmail } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { expectError } from './helpers/tenancy.js';
import { as, contactsTenant, createContact, defineAttribute, ok, type ContactsTenant } from './helpers/contacts.js';

describe('Contact notes', () => {
  let t: ContactsTenant;
  let contact: any;
  before(async () => {
    t = await contactsTenant();
    contact = await createContact(t.agent, { name: 'Noted' });
  });

  it('any agent writes and lists notes, newest first, with pagination; 5,000 characters at most', async () => {
    const first = ok(await as(t.agent).post(`/contacts/${contact.id}/notes`, { content: 'first' }), 201);
    expect(first).to.include({ contactId: contact.id, content: 'first', authorId: t.agent.userId, source: 'agent' });
    const second = ok(await as(t.agent2).post(`/contacts/${contact.id}/notes`, { content: 'x'.repeat(5000) }), 201);
    expectError(await as(t.agent).post(`/contacts/${contact.id}/notes`, { content: 'x'.repeat(5001) }), 400, 'validation_failed');
    expectError(await as(t.agent).post(`/contacts/${contact.id}/notes`, { content: '   ' }), 400, 'validation_failed');
    const res = await as(t.agent).get(`/contacts/${contact.id}/notes?limit=1`);
    expect(ok(res, 200).map((n: any) => n.id)).to.deep.equal([second.id]);
    expect(res.body.pagination).to.deep.equal({ limit: 1, offset: 0, total: 2 });
    expectError(await as(t.agent).post(`/contacts/${randomUUID()}/notes`, { content: 'x' }), 404, 'not_found');
  });

  it('the author edits and deletes; another agent is 403; an admin may; a note of another contact is 404', async () => {
    const note = ok(await as(t.agent).post(`/contacts/${contact.id}/notes`, { content: 'mine' }), 201);
    expectError(await as(t.agent2).patch(`/contacts/${contact.id}/notes/${note.id}`, { content: 'theirs now' }), 403, 'forbidden');
    expectError(await as(t.agent2).delete(`/contacts/${contact.id}/notes/${note.id}`), 403, 'forbidden');
    expect(ok(await as(t.agent).patch(`/contacts/${contact.id}/notes/${note.id}`, { content: 'edited' }), 200).content).to.equal('edited');
    expectError(await as(t.agent).patch(`/contacts/${contact.id}/notes/${note.id}`, { content: 'x'.repeat(5001) }), 400, 'validation_failed');
    expect(ok(await as(t.admin).patch(`/contacts/${contact.id}/notes/${note.id}`, { content: 'by admin' }), 200).content).to.equal('by admin');
    const other = await createContact(t.agent, { name: 'Other' });
    expectError(await as(t.agent).patch(`/contacts/${other.id}/notes/${note.id}`, { content: 'x' }), 404, 'not_found');
    ok(await as(t.owner).delete(`/contacts/${contact.id}/notes/${note.id}`), 200);
    expectError(await as(t.agent).delete(`/contacts/${contact.id}/notes/${note.id}`), 404, 'not_found');
    const own = ok(await as(t.agent2).post(`/contacts/${contact.id}/notes`, { content: 'own' }), 201);
    ok(await as(t.agent2).delete(`/contacts/${contact.id}/notes/${own.id}`), 200);
  });
});

/** A ticket row for the contact, when the tickets table exists (it arrives with its own migration). */
async function ticketFor(orgId: string, contactId: string): Promise<string | null> {
  const { knex } = sharedServer().server.db;
  const { rows } = await knex.raw(`select to_regclass('tickets') is not null as present`);
  if (!rows[0].present) return null;
  const [row] = await knex('tickets').insert({ organization_id: orgId, number: randomInt(1_000_000, 2_000_000_000), title: 'Printer on fire', source: 'agent', contact_id: contactId }).returning('id');
  return row.id;
}

async function linkedConversation(t: ContactsTenant, contactId: string): Promise<string> {
  const { conversationId } = await startConversation(await newVisitor(t.owner));
  ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId }), 200);
  return conversationId;
}

describe('Contact merge', () => {
  let t: ContactsTenant;
  before(async () => {
    t = await contactsTenant();
    await defineAttribute(t.admin, { key: 'plan', label: 'Plan', type: 'list', options: ['free', 'pro'] });
    await defineAttribute(t.admin, { key: 'seats', label: 'Seats', type: 'number' });
  });

  it('moves conversations, tickets, notes, identities, tags and missing attributes in one go; the source answers 404', async () => {
    const targetEmail = uniqueEmail('target');
    const sourceEmail = uniqueEmail('source');
    const target = await createContact(t.agent, { name: 'Target', email: targetEmail, tags: ['a'], attributes: { plan: 'pro' }, identities: [{ channel: 'telegram', externalId: `t-${randomUUID()}` }] });
    const source = await createContact(t.agent, { name: 'Source', email: sourceEmail, phone: '+33 6 12 34 56 78', company: 'SourceCo', tags: ['b', 'a'], attributes: { plan: 'free', seats: 3 }, identities: [{ channel: 'whatsapp', externalId: '33612345678' }] });
    const conversationId = await linkedConversation(t, source.id);
    const note = ok(await as(t.agent).post(`/contacts/${source.id}/notes`, { content: 'about source' }), 201);
    const ticketId = await ticketFor(t.owner.orgId, source.id);

    const survivor = ok(await as(t.agent).post(`/contacts/${target.id}/merge`, { sourceContactId: source.id, prefer: { name: 'source' } }), 200);
    expect(survivor).to.include({ id: target.id, name: 'Source', email: targetEmail, phone: '+33612345678', company: 'SourceCo' });
    expect(survivor.tags).to.deep.equal(['a', 'b']);
    expect(survivor.attributes).to.deep.equal({ plan: 'pro', seats: 3 });
    expect(survivor.identities.map((i: any) => i.channel).sort()).to.deep.equal(['telegram', 'whatsapp']);
    expect(survivor.mergedFrom).to.have.length(1);
    expect(survivor.mergedFrom[0]).to.include({ contactId: source.id, name: 'Source', email: sourceEmail, mergedBy: t.agent.userId });

    expectError(await as(t.agent).get(`/contacts/${source.id}`), 404, 'not_found');
    expectError(await as(t.agent).post(`/contacts/${target.id}/merge`, { sourceContactId: source.id }), 404, 'not_found');
    const conversation = ok(await as(t.agent).get(`/conversations/${conversationId}`), 200);
    expect(conversation.contactId).to.equal(target.id);
    expect(conversation.contact.id).to.equal(target.id);
    expect(ok(await as(t.agent).get(`/contacts/${target.id}/notes`), 200).map((n: any) => n.id)).to.deep.equal([note.id]);
    if (ticketId) {
      const [row] = await sharedServer().server.db.knex('tickets').where({ id: ticketId }).select('contact_id');
      expect(row.contactId ?? row.contact_id).to.equal(target.id);
    }
    // Linking a conversation with the source's old id links the survivor.
    const relinked = ok(await as(t.agent).post(`/conversations/${conversationId}/contact`, { contactId: source.id }), 200);
    expect(relinked.contactId).to.equal(target.id);
    expect(ok(await as(t.agent).get(`/contacts/${target.id}`), 200).mergedFrom[0].contactId).to.equal(source.id);
  });

  it('merging into itself is 400; a missing or foreign source is 404', async () => {
    const c = await createContact(t.agent, { name: 'Self' });
    const self = await as(t.agent).post(`/contacts/${c.id}/merge`, { sourceContactId: c.id });
    expectError(self, 400, 'validation_failed');
    // The refusal names the field at fault, for a client to show next to it.
    expect(self.body.message).to.equal('A contact cannot be merged into itself');
    expect(self.body.error.details).to.deep.equal([{ field: 'sourceContactId', message: 'must differ from the contact merged into' }]);
    const missing = await as(t.agent).post(`/contacts/${c.id}/merge`, { sourceContactId: randomUUID() });
    expectError(missing, 404, 'not_found');
    expect(missing.body.message).to.equal('Contact not found');
    expectError(await as(t.agent).post(`/contacts/${c.id}/merge`, {}), 400, 'validation_failed');
    expectError(await as(t.agent).post(`/contacts/${c.id}/merge`, { sourceContactId: randomUUID(), prefer: { name: 'both' } }), 400, 'validation_failed');
  });

  it('a merge that fails part way (together over 50 tags) leaves everything where it was', async () => {
    const target = await createContact(t.agent, { name: 'T', tags: Array.from({ length: 30 }, (_, i) => `t${i}`) });
    const source = await createContact(t.agent, { name: 'S', email: uniqueEmail('s'), tags: Array.from({ length: 30 }, (_, i) => `s${i}`), identities: [{ channel: 'sms', externalId: `s-${randomUUID()}` }] });
    const conversationId = await linkedConversation(t, source.id);
    const note = ok(await as(t.agent).post(`/contacts/${source.id}/notes`, { content: 'stays' }), 201);
    const ticketId = await ticketFor(t.owner.orgId, source.id);

    expectError(await as(t.agent).post(`/contacts/${target.id}/merge`, { sourceContactId: source.id }), 400, 'validation_failed');

    const stillSource = ok(await as(t.agent).get(`/contacts/${source.id}`), 200);
    expect(stillSource.identities).to.have.length(1);
    expect(stillSource.mergedFrom).to.deep.equal([]);
    expect(ok(await as(t.agent).get(`/conversations/${conversationId}`), 200).contactId).to.equal(source.id);
    expect(ok(await as(t.agent).get(`/contacts/${source.id}/notes`), 200).map((n: any) => n.id)).to.deep.equal([note.id]);
    expect(ok(await as(t.agent).get(`/contacts/${target.id}/notes`), 200)).to.deep.equal([]);
    const stillTarget = ok(await as(t.agent).get(`/contacts/${target.id}`), 200);
    expect(stillTarget.tags).to.have.length(30);
    expect(stillTarget.identities).to.deep.equal([]);
    expect(stillTarget.mergedFrom).to.deep.equal([]);
    if (ticketId) {
      const [row] = await sharedServer().server.db.knex('tickets').where({ id: ticketId }).select('contact_id');
      expect(row.contactId ?? row.contact_id).to.equal(source.id);
    }
  });

  it('a survivor merged into a third contact passes its merge record on', async () => {
    const a = await createContact(t.agent, { name: 'A' });
    const b = await createContact(t.agent, { name: 'B' });
    const c = await createContact(t.agent, { name: 'C' });
    ok(await as(t.agent).post(`/contacts/${b.id}/merge`, { sourceContactId: a.id }), 200);
    const last = ok(await as(t.agent).post(`/contacts/${c.id}/merge`, { sourceContactId: b.id }), 200);
    expect(last.mergedFrom.map((m: any) => m.contactId).sort()).to.deep.equal([a.id, b.id].sort());
  });
});
