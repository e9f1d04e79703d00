// What every ticket change carries beyond its answer: the webhook event it records (in its own transaction; none
// for internal notes and deletions, none for a refused change), the action agents are told, the timeline's
// `created` and `updated` events, the words of the assignee's notification and of each refusal.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, uniqueEmail, type Member, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { expectError } from './helpers/tenancy.js';
import { aiClient, createTicket, events, ok, patchTicket } from './helpers/tickets.js';
import { collect, connectOk, type ClientSocket } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

describe('Tickets: the webhook event of each change', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    // Written directly: a loopback target cannot be saved through the API, and its deliveries fail at once (no
    // request leaves the machine). Only what is recorded matters here.
    await server.db.knex('webhooks').insert({ organization_id: owner.orgId, url: 'http://127.0.0.1:9/hook', events: JSON.stringify(['ticket.*']), secret_encrypted: 'v1.x.y.z' });
    server.services.webhooks.forget(owner.orgId);
  });

  /** The ticket events recorded for the organization so far, oldest first: [type, the ticket's id, its status]. */
  const recorded = async () => {
    const rows = await sharedServer().server.db.knex('webhook_deliveries').where({ organization_id: owner.orgId }).orderBy('created_at').orderBy('id').select('event_type', 'payload');
    return rows.map((r: any) => [r.eventType, r.payload.ticket.id, r.payload.ticket.status]);
  };

  it('records created, status_changed, updated (fields, assignee, link), reply_sent and merged; nothing for notes, deletions or a refused change', async () => {
    const t = { token: owner.accessToken };
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const ticket = await createTicket(owner, { requester: { email: uniqueEmail('hooked') } });
    const [created] = (await sharedServer().server.db.knex('webhook_deliveries').where({ organization_id: owner.orgId }).select('payload')) as { payload: any }[];
    // The payload is the ticket as the API presents it.
    expect(created!.payload).to.deep.equal({ ticket });

    ok(await patchTicket(owner, ticket.id, { status: 'in_progress' }), 200);
    ok(await patchTicket(owner, ticket.id, { assignedTo: owner.userId }), 200);
    ok(await patchTicket(owner, ticket.id, { title: 'Renamed' }), 200);
    ok(await owner.api.post(`/tickets/${ticket.id}/notes`, { content: 'internal' }, t), 201);
    ok(await owner.api.post(`/tickets/${ticket.id}/replies`, { content: 'public' }, t), 201);
    ok(await owner.api.post(`/tickets/${ticket.id}/link`, { conversationId }, t), 200);
    expectError(await patchTicket(owner, ticket.id, { status: 'merged' }), 400, 'validation_failed');
    const target = await createTicket(owner, { title: 'Target' });
    ok(await owner.api.post(`/tickets/${ticket.id}/merge`, { targetTicketId: target.id }, t), 200);
    expectError(await patchTicket(owner, ticket.id, { title: 'After the merge' }), 400, 'invalid_transition');
    ok(await owner.api.delete(`/tickets/${target.id}`, t), 200);

    const all = await recorded();
    expect(all.slice(0, 7)).to.deep.equal([
      ['ticket.created', ticket.id, 'open'],
      ['ticket.status_changed', ticket.id, 'in_progress'],
      ['ticket.updated', ticket.id, 'in_progress'],
      ['ticket.updated', ticket.id, 'in_progress'],
      ['ticket.reply_sent', ticket.id, 'in_progress'],
      ['ticket.updated', ticket.id, 'in_progress'],
      ['ticket.created', target.id, 'open'],
    ]);
    // Both sides of a merge, in one transaction (one moment): in either order.
    expect(all.slice(7)).to.have.deep.members([
      ['ticket.merged', ticket.id, 'merged'],
      ['ticket.merged', target.id, 'open'],
    ]);
  });
});

describe('Tickets: what a create writes, and a change that repeats every value', () => {
  let owner: SignedUp;
  let agent: Member;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    agent = await addMember(server, owner, 'agent');
  });

  it('the created event names the number, the source, the assignee and the conversation', async () => {
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const t = await createTicket(owner, { assignedTo: agent.userId, conversationId });
    const [created] = await events(owner, t.id);
    expect(created).to.include({ type: 'created', actorType: 'agent', actorId: owner.userId, content: null });
    expect(created.data).to.deep.equal({ number: t.number, source: 'agent', assignedTo: agent.userId, conversationId });
    const plain = await createTicket(owner);
    expect((await events(owner, plain.id))[0].data).to.deep.equal({ number: plain.number, source: 'agent', assignedTo: null, conversationId: null });
  });

  it('tells the assignee which ticket is theirs now, by number', async () => {
    const t = await createTicket(owner, { title: 'Numbered' });
    ok(await patchTicket(owner, t.id, { assignedTo: agent.userId }), 200);
    const notes = ok(await agent.api.get('/notifications', { token: agent.accessToken }), 200) as any[];
    const [note] = notes.filter((n) => n.type === 'ticket_assigned' && n.data.ticketId === t.id);
    expect(note).to.include({ title: `Ticket #${t.number} was assigned to you`, body: 'Numbered' });
  });

  it('writes nothing for a change that repeats every current value, a due date in another form included', async () => {
    const email = uniqueEmail('same');
    const t = await createTicket(owner, { description: 'Same words', dueAt: '2031-05-05T00:00:00Z', priority: 'high', tags: ['a', 'b'], requester: { email }, assignedTo: agent.userId });
    const before = await events(owner, t.id);
    const same = ok(await patchTicket(owner, t.id, {
      title: ` ${t.title} `, description: 'Same words', dueAt: '2031-05-05T02:00:00+02:00', priority: 'high', tags: ['A', ' b ', 'a'],
      contactId: t.contactId, assignedTo: agent.userId, status: 'open',
    }), 200);
    expect(same).to.deep.equal(t);
    expect(await events(owner, t.id)).to.deep.equal(before);
    // Without a description or a due date, null again is no change either.
    const bare = await createTicket(owner);
    ok(await patchTicket(owner, bare.id, { description: null, dueAt: null, contactId: null, assignedTo: null }), 200);
    expect(await events(owner, bare.id)).to.have.length(1);
  });
});

describe('Tickets: the action agents hear, the fields a change names, and what a refusal says', () => {
  let owner: SignedUp;
  let agent: Member;
  const sockets: ClientSocket[] = [];

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    agent = await addMember(server, owner, 'agent');
  });

  after(() => {
    for (const s of sockets) s.close();
  });

  it('a new assignee alone is "assigned"; with another field or the priority it is "updated"', async () => {
    const socket = await connectOk(sharedServer().baseUrl, owner.orgId, owner.accessToken);
    sockets.push(socket);
    const t = await createTicket(owner);
    const heard = collect(socket, 'ticket_updated');
    ok(await patchTicket(owner, t.id, { assignedTo: agent.userId }), 200);
    ok(await patchTicket(owner, t.id, { assignedTo: owner.userId, title: 'Both' }), 200);
    ok(await patchTicket(owner, t.id, { assignedTo: agent.userId, priority: 'low' }), 200);
    ok(await patchTicket(owner, t.id, { assignedTo: null, tags: ['x'] }), 200);
    // The create's own announcement may arrive after listening began: only the changes count here.
    const mine = () => heard.filter((p) => p.ticket.id === t.id && p.action !== 'created');
    await waitFor(() => mine().length >= 4, { what: 'four ticket_updated' });
    expect(mine().map((p) => p.action)).to.deep.equal(['assigned', 'updated', 'updated', 'updated']);
  });

  it('trims a new title, and names a new requester as contactId in the updated event', async () => {
    const t = await createTicket(owner);
    expect(ok(await patchTicket(owner, t.id, { title: '  Spaced out  ' }), 200).title).to.equal('Spaced out');
    const other = await createTicket(owner, { requester: { email: uniqueEmail('other') } });
    const moved = ok(await patchTicket(owner, t.id, { contactId: other.contactId }), 200);
    expect(moved.contactId).to.equal(other.contactId);
    const updated = (await events(owner, t.id)).filter((e) => e.type === 'updated');
    expect(updated.map((e) => e.data)).to.deep.equal([{ fields: ['title'] }, { fields: ['contactId'] }]);
  });

  it('a ticket made from a chat starts without tags', async () => {
    const visitor = await newVisitor(owner, { name: 'Tagless' });
    const { conversationId } = await startConversation(visitor);
    const t = ok(await owner.api.post(`/conversations/${conversationId}/tickets`, { title: 'From chat' }, { token: owner.accessToken }), 201);
    expect(t.tags).to.deep.equal([]);
  });

  it('says which ticket or conversation is missing, and why an assignee is refused', async () => {
    const t = { token: owner.accessToken };
    const missing = await patchTicket(owner, randomUUID(), { title: 'Nobody' });
    expectError(missing, 404, 'not_found');
    expect(missing.body.message).to.equal('Ticket not found');
    // The AI service's routes find the ticket when they lock it.
    const ai = aiClient(sharedServer().baseUrl);
    const lockedMissing = await ai.patch(`/tickets/ai/${randomUUID()}`, { organizationId: owner.orgId, idempotencyKey: randomUUID(), priority: 'low' });
    expectError(lockedMissing, 404, 'not_found');
    expect(lockedMissing.body.message).to.equal('Ticket not found');
    const ticket = await createTicket(owner);
    const noConversation = await owner.api.post(`/tickets/${ticket.id}/link`, { conversationId: randomUUID() }, t);
    expectError(noConversation, 404, 'not_found');
    expect(noConversation.body.message).to.equal('Conversation not found');
    const stranger = await signUp(sharedServer().server, sharedServer().baseUrl);
    const refused = await patchTicket(owner, ticket.id, { assignedTo: stranger.userId });
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.error.details).to.deep.equal([{ field: 'assignedTo', message: 'not an accepted member of the organization' }]);
  });
});
