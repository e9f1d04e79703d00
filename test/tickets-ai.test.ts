// AI service ticket routes (x-ai-tool-secret): idempotent create (replayed concurrently and while the first request
// still runs; another body 409), update, close, status of a conversation's contact, and organizationId checks (404).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { expectError } from './helpers/tenancy.js';
import { aiClient, createTicket, events, ok } from './helpers/tickets.js';
import { settle } from './helpers/sockets.js';

describe('Tickets: AI service routes', () => {
  let owner: SignedUp;
  let other: SignedUp;
  let ai: ReturnType<typeof aiClient>;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    other = await signUp(server, baseUrl);
    ai = aiClient(baseUrl);
  });

  const countTickets = async (orgId: string, title: string) => sharedServer().server.db.models.Ticket.forOrg(orgId).where('title', title).resultSize();

  it('creates a source-ai ticket (201); replays of the same key and body answer 200 with that ticket, concurrently too', async () => {
    const key = `create-${randomUUID()}`;
    const email = uniqueEmail('ai-requester');
    const body = { organizationId: owner.orgId, idempotencyKey: key, title: 'Refund request', description: 'Wants a refund', priority: 'high', requesterName: 'Al', requesterEmail: email };
    const results = await Promise.all(Array.from({ length: 6 }, () => ai.post('/tickets/ai', body)));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses, JSON.stringify(results.map((r) => r.body))).to.deep.equal([200, 200, 200, 200, 200, 201]);
    const ids = new Set(results.map((r) => r.body.data.id));
    expect(ids.size).to.equal(1);
    const first = results.find((r) => r.status === 201)!.body.data;
    expect(first).to.include({ status: 'open', source: 'ai', priority: 'high', title: 'Refund request', createdBy: null });
    expect(first.requester).to.deep.equal({ name: 'Al', email });
    expect(await countTickets(owner.orgId, 'Refund request')).to.equal(1);
    // Key order in the body does not matter.
    const reordered = Object.fromEntries(Object.entries(body).reverse());
    expect(ok(await ai.post('/tickets/ai', reordered), 200).id).to.equal(first.id);
    // The same key with another body: 409, nothing created.
    expectError(await ai.post('/tickets/ai', { ...body, title: 'Something else' }), 409, 'conflict');
    expectError(await ai.post('/tickets/ai', { ...body, priority: 'low' }), 409, 'conflict');
    expect(await countTickets(owner.orgId, 'Something else')).to.equal(0);
    // Keys are per organization.
    expect(ok(await ai.post('/tickets/ai', { ...body, organizationId: other.orgId, requesterEmail: uniqueEmail('x') }), 201).id).to.not.equal(first.id);
    const timeline = await events(owner, first.id);
    expect(timeline.map((e) => [e.type, e.actorType])).to.deep.equal([['created', 'ai']]);
  });

  it('a key is free again once its 30 days are over', async () => {
    const { server } = sharedServer();
    const key = `expire-${randomUUID()}`;
    const first = ok(await ai.post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: key, title: 'Old key' }), 201);
    const row = await server.db.models.IdempotencyKey.forOrg(owner.orgId).where({ key }).first();
    expect(row!.resourceId).to.equal(first.id);
    expect(row!.expiresAt.getTime() - row!.createdAt.getTime()).to.equal(30 * 86_400_000);
    expectError(await ai.post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: key, title: 'New use' }), 409, 'conflict');
    await server.db.models.IdempotencyKey.acrossOrgs().patch({ expiresAt: new Date(Date.now() - 1000) }).where('id', row!.id);
    const second = ok(await ai.post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: key, title: 'New use' }), 201);
    expect(second.id).to.not.equal(first.id);
  });

  it('a replay sent while the first request still runs waits for it and answers its ticket', async () => {
    const { server } = sharedServer();
    await createTicket(owner);
    const key = `wait-${randomUUID()}`;
    const body = { organizationId: owner.orgId, idempotencyKey: key, title: 'Slow one' };
    // Hold the organization's ticket counter: the first request claims the key, then waits for the counter.
    let first: Promise<any> = Promise.resolve();
    let replay: Promise<any> = Promise.resolve();
    let settledEarly = false;
    await server.db.knex.transaction(async (trx) => {
      await trx.raw('select * from ticket_counters where organization_id = ? for update', [owner.orgId]);
      first = ai.post('/tickets/ai', body);
      await settle(300);
      replay = ai.post('/tickets/ai', body);
      void Promise.race([first, replay]).then(() => (settledEarly = true));
      await settle(500);
    });
    expect(settledEarly, 'no answer while the first request was held').to.equal(false);
    const [a, b] = await Promise.all([first, replay]);
    expect(a.status, JSON.stringify(a.body)).to.equal(201);
    expect(b.status, JSON.stringify(b.body)).to.equal(200);
    expect(b.body.data.id).to.equal(a.body.data.id);
    expect(await countTickets(owner.orgId, 'Slow one')).to.equal(1);
  });

  it('takes the requester from the conversation (its contact, else its visitor) and refuses another organization\'s references (404)', async () => {
    const email = uniqueEmail('chat');
    const visitor = await newVisitor(owner, { name: 'Chatty', email });
    const { conversationId } = await startConversation(visitor);
    const t = ok(await ai.post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: randomUUID(), title: 'From the bot', conversationId }), 201);
    expect(t).to.include({ conversationId, source: 'ai' });
    expect(t.requester).to.deep.equal({ name: 'Chatty', email });

    const theirVisitor = await newVisitor(other);
    const { conversationId: theirConversation } = await startConversation(theirVisitor);
    const theirTicket = await createTicket(other, { requester: { email: uniqueEmail('theirs') } });
    const nf = (res: any) => expectError(res, 404, 'not_found');
    nf(await ai.post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: randomUUID(), title: 'x', conversationId: theirConversation }));
    nf(await ai.post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: randomUUID(), title: 'x', contactId: theirTicket.contactId }));
    nf(await ai.patch(`/tickets/ai/${theirTicket.id}`, { organizationId: owner.orgId, priority: 'low' }));
    nf(await ai.patch(`/tickets/ai/${theirTicket.id}/close`, { organizationId: owner.orgId }));
    nf(await ai.get(`/tickets/ai/status?organizationId=${owner.orgId}&conversationId=${theirConversation}`));
    nf(await ai.post('/tickets/ai', { organizationId: randomUUID(), idempotencyKey: randomUUID(), title: 'x', conversationId }));
    const still = ok(await other.api.get(`/tickets/${theirTicket.id}`, { token: other.accessToken }), 200);
    expect(still).to.include({ status: 'open', priority: 'medium' });
  });

  it('updates fields and status with the transition rules; a key replays without applying again', async () => {
    const t = await createTicket(owner);
    const key = randomUUID();
    const updated = ok(await ai.patch(`/tickets/ai/${t.id}`, { organizationId: owner.orgId, idempotencyKey: key, status: 'pending', priority: 'urgent', tags: ['Bot'] }), 200);
    expect(updated).to.include({ status: 'pending', priority: 'urgent' });
    expect(updated.tags).to.deep.equal(['bot']);
    ok(await ai.patch(`/tickets/ai/${t.id}`, { organizationId: owner.orgId, status: 'open' }), 200);
    // The replay answers the ticket as it is now and does not set pending again.
    expect(ok(await ai.patch(`/tickets/ai/${t.id}`, { organizationId: owner.orgId, idempotencyKey: key, status: 'pending', priority: 'urgent', tags: ['Bot'] }), 200).status).to.equal('open');
    expectError(await ai.patch(`/tickets/ai/${t.id}`, { organizationId: owner.orgId, idempotencyKey: key, status: 'resolved' }), 409, 'conflict');
    expectError(await ai.patch(`/tickets/ai/${t.id}`, { organizationId: owner.orgId, status: 'merged' }), 400, 'validation_failed');
    expectError(await ai.patch(`/tickets/ai/${t.id}`, { organizationId: owner.orgId }), 400, 'validation_failed');
    expectError(await ai.patch(`/tickets/ai/${t.id}`, { organizationId: owner.orgId, assignedTo: owner.userId }), 400, 'validation_failed');
    ok(await ai.patch(`/tickets/ai/${t.id}/close`, { organizationId: owner.orgId, resolutionNote: 'Fixed by a restart' }), 200);
    expectError(await ai.patch(`/tickets/ai/${t.id}`, { organizationId: owner.orgId, status: 'open' }), 400, 'invalid_transition');
    const closedEvent = (await events(owner, t.id)).at(-1);
    expect(closedEvent).to.deep.include({ type: 'status_changed', actorType: 'ai', content: 'Fixed by a restart', data: { from: 'open', to: 'closed' } });
  });

  it('closes once: the second close changes nothing and queues no mail; a merged ticket cannot be closed', async () => {
    const { server } = sharedServer();
    const email = uniqueEmail('close-twice');
    const t = await createTicket(owner, { requester: { email } });
    const first = ok(await ai.patch(`/tickets/ai/${t.id}/close`, { organizationId: owner.orgId }), 200);
    const second = ok(await ai.patch(`/tickets/ai/${t.id}/close`, { organizationId: owner.orgId, resolutionNote: 'again' }), 200);
    expect(second).to.deep.equal(first);
    expect(await server.db.models.OutboxEmail.query().where({ toAddress: email, kind: 'ticket_closed' }).resultSize()).to.equal(1);
    expect((await events(owner, t.id)).filter((e) => e.type === 'status_changed')).to.have.length(1);
    const source = await createTicket(owner);
    const target = await createTicket(owner);
    ok(await owner.api.post(`/tickets/${source.id}/merge`, { targetTicketId: target.id }, { token: owner.accessToken }), 200);
    expectError(await ai.patch(`/tickets/ai/${source.id}/close`, { organizationId: owner.orgId }), 400, 'invalid_transition');
  });

  it('status lists the tickets of the conversation\'s contact (not other contacts\', not merged ones)', async () => {
    const email = uniqueEmail('status');
    const visitor = await newVisitor(owner, { email });
    const { conversationId } = await startConversation(visitor);
    ok(await owner.api.post(`/conversations/${conversationId}/contact`, { email }, { token: owner.accessToken }), 200);
    const mine1 = await createTicket(owner, { title: 'Mine 1', requester: { email } });
    const mine2 = await createTicket(owner, { title: 'Mine 2', requester: { email } });
    const dup = await createTicket(owner, { title: 'Mine dup', requester: { email } });
    ok(await owner.api.post(`/tickets/${dup.id}/merge`, { targetTicketId: mine1.id }, { token: owner.accessToken }), 200);
    await createTicket(owner, { title: 'Someone else', requester: { email: uniqueEmail('else') } });
    const res = ok(await ai.get(`/tickets/ai/status?organizationId=${owner.orgId}&conversationId=${conversationId}`), 200);
    expect(res.contactId).to.equal(mine1.contactId);
    expect(res.tickets.map((t: any) => t.id)).to.deep.equal([mine2.id, mine1.id]);
    expectError(await ai.get(`/tickets/ai/status?organizationId=${owner.orgId}`), 400, 'validation_failed');
  });

  it('refuses a missing or wrong secret (401) and bad input (400)', async () => {
    const { baseUrl } = sharedServer();
    const wrong = aiClient(baseUrl, 'not-the-secret');
    expectError(await wrong.post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: 'k', title: 'x' }), 401, 'unauthorized');
    expectError(await wrong.get(`/tickets/ai/status?organizationId=${owner.orgId}&conversationId=${randomUUID()}`), 401, 'unauthorized');
    const bad = async (body: Record<string, unknown>) => expectError(await ai.post('/tickets/ai', body), 400, 'validation_failed');
    await bad({ organizationId: owner.orgId, title: 'no key' });
    await bad({ organizationId: owner.orgId, idempotencyKey: '', title: 'x' });
    await bad({ organizationId: owner.orgId, idempotencyKey: 'has space', title: 'x' });
    await bad({ organizationId: owner.orgId, idempotencyKey: 'k'.repeat(201), title: 'x' });
    await bad({ idempotencyKey: 'k', title: 'x' });
    await bad({ organizationId: owner.orgId, idempotencyKey: 'k', title: 'x'.repeat(301) });
    await bad({ organizationId: owner.orgId, idempotencyKey: 'k', title: 'x', status: 'open' });
    await bad({ organizationId: owner.orgId, idempotencyKey: 'k', title: 'x', requesterEmail: 'nope' });
  });
});
