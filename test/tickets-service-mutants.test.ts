// Ticket actions whose details the broader ticket tests leave open: the source of a ticket made from a chat on each
// channel, a chat's visitor known only by name, a link that changes nothing, the timeline's `after` of another
// ticket, a reply's copies (lowercased, once each, never the requester again), what became of its mail and why a
// reply is refused, and a search query with spaces around it.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { expectError } from './helpers/tenancy.js';
import { createTicket, events, ok } from './helpers/tickets.js';

describe('Tickets: a chat turned into a ticket', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  const fromChat = async (conversationId: string) => ok(await owner.api.post(`/conversations/${conversationId}/tickets`, { title: 'From chat' }, { token: owner.accessToken }), 201);

  it("takes its source from the conversation's channel: email, whatsapp, telegram; any other channel is agent", async () => {
    const { knex } = sharedServer().server.db;
    const sources: Record<string, string> = {};
    for (const channel of ['email', 'whatsapp', 'telegram', 'api']) {
      const [row] = (await knex('conversations').insert({ organization_id: owner.orgId, channel }).returning('id')) as { id: string }[];
      sources[channel] = (await fromChat(row!.id)).source;
    }
    expect(sources).to.deep.equal({ email: 'email', whatsapp: 'whatsapp', telegram: 'telegram', api: 'agent' });
  });

  it('names a visitor who gave no email as the requester, without a contact', async () => {
    const visitor = await newVisitor(owner, { name: 'Nora Noemail' });
    const { conversationId } = await startConversation(visitor);
    const t = await fromChat(conversationId);
    expect(t.requester).to.deep.equal({ name: 'Nora Noemail', email: null });
    expect(t.contactId).to.equal(null);
    expect(t.source).to.equal('widget');
  });
});

describe('Tickets: links, the timeline and replies', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('a link to the conversation already linked changes nothing: no event, the same ticket', async () => {
    const t = { token: owner.accessToken };
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const ticket = await createTicket(owner);
    expect(ok(await owner.api.post(`/tickets/${ticket.id}/link`, { conversationId: null }, t), 200)).to.deep.equal(ticket);
    const linked = ok(await owner.api.post(`/tickets/${ticket.id}/link`, { conversationId }, t), 200);
    expect(ok(await owner.api.post(`/tickets/${ticket.id}/link`, { conversationId }, t), 200)).to.deep.equal(linked);
    expect((await events(owner, ticket.id)).map((e) => e.type)).to.deep.equal(['created', 'linked']);
  });

  it("refuses as `after` another ticket's event (400)", async () => {
    const a = await createTicket(owner);
    const b = await createTicket(owner);
    const [created] = await events(owner, b.id);
    const res = await owner.api.get(`/tickets/${a.id}/events?after=${created.id}`, { token: owner.accessToken });
    expectError(res, 400, 'validation_failed');
    expect(res.body.error.details).to.deep.equal([{ field: 'after', message: 'no event of this ticket' }]);
  });

  it('copies a reply to each cc once, lowercased, never to the requester again; without SMTP the mail is logged', async () => {
    const requester = uniqueEmail('req');
    const ticket = await createTicket(owner, { requester: { email: requester } });
    const cc = `copy-${randomUUID()}@example.test`;
    const res = await owner.api.post(`/tickets/${ticket.id}/replies`, { content: 'Copied', cc: [cc.toUpperCase(), cc, requester.toUpperCase()] }, { token: owner.accessToken });
    const { delivery, event } = ok(res, 201);
    expect(delivery).to.include({ to: requester, status: 'logged' });
    expect(delivery.cc).to.deep.equal([cc]);
    expect(event.data).to.deep.equal({ delivery });
    const plain = ok(await owner.api.post(`/tickets/${ticket.id}/replies`, { content: 'Uncopied' }, { token: owner.accessToken }), 201);
    expect(plain.delivery.cc).to.deep.equal([]);
  });

  it('says why a ticket without requester email takes no reply', async () => {
    const ticket = await createTicket(owner);
    const res = await owner.api.post(`/tickets/${ticket.id}/replies`, { content: 'Anyone?' }, { token: owner.accessToken });
    expectError(res, 400, 'validation_failed');
    expect(res.body.error.details).to.deep.equal([{ field: 'requester', message: 'no email address' }]);
  });
});

describe('Tickets: a search query with spaces around it', () => {
  it('reads " #1 " as ticket number 1, and a query of spaces as no search at all', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    // Titles without digits: a ticket found by " #1 " was found by its number.
    const first = await createTicket(owner, { title: 'Alpha' });
    expect(first.number).to.equal(1);
    await createTicket(owner, { title: 'Beta' });
    const titles = async (q: string) => (ok(await owner.api.get(`/tickets?q=${encodeURIComponent(q)}`, { token: owner.accessToken }), 200) as any[]).map((t) => t.title);
    expect(await titles(' #1 ')).to.deep.equal(['Alpha']);
    expect(await titles('   ')).to.deep.equal(['Beta', 'Alpha']);
  });
});
