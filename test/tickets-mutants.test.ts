// Ticket rules the transition table and search tests leave open: what a status change stamps and leaves alone, the
// words of each refusal, and which queries count as a ticket number (two digits and more, never past nine).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { expectError } from './helpers/tenancy.js';
import { aiClient, createTicket, ok, patchTicket } from './helpers/tickets.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';
import { connectOk, nextEvent, settle, type ClientSocket } from './helpers/sockets.js';

describe('Tickets: the timestamps of a status change', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  const to = async (id: string, status: string) => ok(await patchTicket(owner, id, { status }), 200);

  it('closing an open ticket stamps closedAt only: it was never resolved', async () => {
    const t = await createTicket(owner);
    const closed = await to(t.id, 'closed');
    expect(closed.closedAt).to.be.a('string');
    expect(closed.resolvedAt).to.equal(null);
  });

  it('closing a resolved ticket keeps the moment it was resolved', async () => {
    const t = await createTicket(owner);
    const resolved = await to(t.id, 'resolved');
    expect(resolved.resolvedAt).to.be.a('string');
    expect(resolved.closedAt).to.equal(null);
    const closed = await to(t.id, 'closed');
    expect(closed.resolvedAt).to.equal(resolved.resolvedAt);
    expect(closed.closedAt).to.be.a('string');
  });

  it('working on a ticket stamps neither: in progress, pending, open again', async () => {
    const t = await createTicket(owner);
    for (const status of ['in_progress', 'pending', 'open', 'resolved', 'open']) {
      const changed = await to(t.id, status);
      expect(changed.closedAt, status).to.equal(null);
      if (status !== 'resolved') expect(changed.resolvedAt, status).to.equal(null);
    }
  });
});

describe('Tickets: the words of a refusal', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('names both statuses of a refused change', async () => {
    const t = await createTicket(owner);
    ok(await patchTicket(owner, t.id, { status: 'resolved' }), 200);
    const res = await patchTicket(owner, t.id, { status: 'pending' });
    expectError(res, 400, 'invalid_transition');
    expect(res.body.message).to.equal('A resolved ticket cannot become pending');
  });

  it('says which side of a merge is final: the source cannot be merged, the target cannot be merged into', async () => {
    const open = await createTicket(owner);
    const closed = await createTicket(owner);
    ok(await patchTicket(owner, closed.id, { status: 'closed' }), 200);
    const merge = (source: string, target: string) => owner.api.post(`/tickets/${source}/merge`, { targetTicketId: target }, { token: owner.accessToken });
    const asSource = await merge(closed.id, open.id);
    expectError(asSource, 400, 'invalid_transition');
    expect(asSource.body.message).to.equal('A closed ticket cannot be merged');
    const asTarget = await merge(open.id, closed.id);
    expectError(asTarget, 400, 'invalid_transition');
    expect(asTarget.body.message).to.equal('A closed ticket cannot be merged into');
  });
});

describe('Tickets: a search query as a ticket number', () => {
  let owner: SignedUp;
  const byNumber = new Map<number, string>();

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    // Titles without digits: whatever a query finds by number, it did not find by its text.
    for (let i = 0; i < 12; i++) {
      const t = await createTicket(owner, { title: `Ticket ${'abcdefghijkl'[i]}` });
      byNumber.set(t.number, t.title);
    }
  });

  const titles = async (q: string) =>
    (ok(await owner.api.get(`/tickets?q=${encodeURIComponent(q)}`, { token: owner.accessToken }), 200) as any[]).map((t) => t.title);

  it('finds a two-digit number, with and without #', async () => {
    expect(await titles('12')).to.deep.equal([byNumber.get(12)]);
    expect(await titles('#11')).to.deep.equal([byNumber.get(11)]);
  });

  it('reads only a whole query as a number: digits before or after other text are text', async () => {
    expect(await titles('x1')).to.deep.equal([]);
    expect(await titles('1x')).to.deep.equal([]);
    expect(await titles('a#1')).to.deep.equal([]);
    expect(await titles('##1')).to.deep.equal([]);
  });

  it('takes ten digits and more as text, not as a number the database would refuse', async () => {
    expect(await titles('9999999999')).to.deep.equal([]);
    expect(await titles('#12345678901')).to.deep.equal([]);
  });
});

describe('Tickets: what a merge tells and what its refusals say', () => {
  let owner: SignedUp;
  const sockets: ClientSocket[] = [];

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  after(() => {
    for (const s of sockets) s.close();
  });

  const merge = (sourceId: string, targetTicketId: string) => owner.api.post(`/tickets/${sourceId}/merge`, { targetTicketId }, { token: owner.accessToken });

  it('announces both sides as merged, and the target counts as just updated', async () => {
    const socket = await connectOk(sharedServer().baseUrl, owner.orgId, owner.accessToken);
    sockets.push(socket);
    const source = await createTicket(owner, { title: 'Source' });
    const target = await createTicket(owner, { title: 'Target' });
    const heardSource = nextEvent(socket, 'ticket_updated', (p) => p.ticket.id === source.id && p.action === 'merged');
    const heardTarget = nextEvent(socket, 'ticket_updated', (p) => p.ticket.id === target.id && p.action === 'merged');
    const answered = ok(await merge(source.id, target.id), 200);
    expect((await heardSource).ticket.status).to.equal('merged');
    expect((await heardTarget).ticket.updatedAt).to.equal(answered.updatedAt);
    expect(Date.parse(answered.updatedAt)).to.be.greaterThan(Date.parse(target.updatedAt));
  });

  it('names the field of a merge into itself, and which ticket is missing', async () => {
    const t = await createTicket(owner);
    const self = await merge(t.id, t.id);
    expectError(self, 400, 'validation_failed');
    expect(self.body.error.details).to.deep.equal([{ field: 'targetTicketId', message: 'is the ticket itself' }]);
    const noSource = await merge(randomUUID(), t.id);
    expectError(noSource, 404, 'not_found');
    expect(noSource.body.message).to.equal('Ticket not found');
    const noTarget = await merge(t.id, randomUUID());
    expectError(noTarget, 404, 'not_found');
    expect(noTarget.body.message).to.equal('Target ticket not found');
  });
});

describe('Tickets: the requester taken away, and one that does not exist', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('a contactId of null leaves the ticket without requester', async () => {
    const t = await createTicket(owner, { requester: { name: 'Rory', email: `rory-${randomUUID()}@example.test` } });
    expect(t.contactId).to.be.a('string');
    const cleared = ok(await patchTicket(owner, t.id, { contactId: null }), 200);
    expect(cleared).to.include({ contactId: null, requester: null });
  });

  it('an unknown contact is 404 "Contact not found"', async () => {
    const res = await owner.api.post('/tickets', { title: 'x', contactId: randomUUID() }, { token: owner.accessToken });
    expectError(res, 404, 'not_found');
    expect(res.body.message).to.equal('Contact not found');
  });
});

describe('Tickets: idempotency keys past their 30 days are deleted', function () {
  this.timeout(120_000);
  let test: TestServer;

  before(async () => {
    test = await startTestServer();
  });

  after(async () => {
    await test?.stop();
  });

  it("the first claim of an instance deletes every organization's expired keys, and keeps the others", async () => {
    const a = await signUp(test.server, test.baseUrl);
    const b = await signUp(test.server, test.baseUrl);
    const { knex } = test.server.db;
    const row = (key: string, expiresAt: Date) => ({ organization_id: b.orgId, scope: 'tickets.ai.create', key, request_hash: 'x', expires_at: expiresAt });
    const expired = `expired-${randomUUID()}`;
    const live = `live-${randomUUID()}`;
    await knex('idempotency_keys').insert([row(expired, new Date(Date.now() - 60_000)), row(live, new Date(Date.now() + 60_000))]);
    ok(await aiClient(test.baseUrl).post('/tickets/ai', { organizationId: a.orgId, idempotencyKey: randomUUID(), title: 'Sweeps' }), 201);
    await waitFor(async () => (await knex('idempotency_keys').where({ key: expired }).first()) === undefined, { what: 'the expired key deleted' });
    expect(await knex('idempotency_keys').where({ key: live }).first()).to.not.equal(undefined);
  });
});

describe('Tickets: an idempotency key given up by a failed request, and one taken again after its 30 days', () => {
  let owner: SignedUp;
  let ai: ReturnType<typeof aiClient>;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    ai = aiClient(baseUrl);
  });

  it('a request waiting on a key takes it, with its own body, once the request holding it fails', async () => {
    const { server } = sharedServer();
    const t = await createTicket(owner);
    const path = `/tickets/ai/${t.id}`;
    const change = (status: string) => ({ organizationId: owner.orgId, idempotencyKey: `given-up-${t.id}`, status });
    let first: Promise<any> = Promise.resolve();
    let second: Promise<any> = Promise.resolve();
    // Hold the ticket and resolve it meanwhile: the first request claims the key, then waits for the ticket and finds
    // it resolved, which cannot become pending; the second, with the same key and another body, waits for the key.
    await server.db.knex.transaction(async (trx) => {
      await trx('tickets').where({ id: t.id }).forUpdate();
      await trx('tickets').where({ id: t.id }).update({ status: 'resolved', resolved_at: new Date() });
      first = ai.patch(path, change('pending'));
      await settle(300);
      second = ai.patch(path, change('open'));
      await settle(300);
    });
    const [a, b] = await Promise.all([first, second]);
    expectError(a, 400, 'invalid_transition');
    expect(ok(b, 200).status).to.equal('open');
    // The key is the second request's: its replay answers without applying again (open cannot become open), and
    // the first request's body is another request.
    expect(ok(await ai.patch(path, change('open')), 200).status).to.equal('open');
    expectError(await ai.patch(path, change('pending')), 409, 'conflict');
  });

  it('a key taken again after its 30 days keeps the new request for 30 days more', async () => {
    const { server } = sharedServer();
    const key = `again-${randomUUID()}`;
    const create = (title: string) => ai.post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: key, title });
    const first = ok(await create('Before'), 201);
    await server.db.knex('idempotency_keys').where({ organization_id: owner.orgId, key }).update({ expires_at: new Date(Date.now() - 1000) });
    const second = ok(await create('After'), 201);
    expect(second.id).to.not.equal(first.id);
    const row = await server.db.models.IdempotencyKey.forOrg(owner.orgId).where({ key }).first();
    expect(row!.resourceId).to.equal(second.id);
    expect(row!.createdAt.getTime()).to.be.above(Date.now() - 60_000);
    expect(row!.expiresAt.getTime() - row!.createdAt.getTime()).to.equal(30 * 86_400_000);
    // A replay answers the second ticket; the first body is now another request.
    const replay = await create('After');
    expect(replay.status, JSON.stringify(replay.body)).to.equal(200);
    expect(replay.body.data.id).to.equal(second.id);
    expectError(await create('Before'), 409, 'conflict');
  });
});

describe('Tickets: what the AI service names, and what it is told when something is missing', () => {
  let owner: SignedUp;
  let ai: ReturnType<typeof aiClient>;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    ai = aiClient(baseUrl);
  });

  const create = async (body: Record<string, unknown>) => ok(await ai.post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: randomUUID(), title: 'From the bot', ...body }), 201);

  it('keeps a requester\'s name without an email: the one given, else the visitor\'s', async () => {
    expect((await create({ requesterName: 'Al' })).requester).to.deep.equal({ name: 'Al', email: null });
    const visitor = await newVisitor(owner, { name: 'Nameonly' });
    const { conversationId } = await startConversation(visitor);
    const t = await create({ conversationId });
    expect(t.requester).to.deep.equal({ name: 'Nameonly', email: null });
    expect(t.contactId).to.equal(null);
    expect((await create({ conversationId, requesterName: 'Given' })).requester).to.deep.equal({ name: 'Given', email: null });
  });

  it('takes the contact an agent linked to a conversation whose visitor gave no email', async () => {
    const visitor = await newVisitor(owner, { name: 'Anon' });
    const { conversationId } = await startConversation(visitor);
    const email = uniqueEmail('linked');
    const linked = ok(await owner.api.post(`/conversations/${conversationId}/contact`, { email }, { token: owner.accessToken }), 200);
    const t = await create({ conversationId });
    expect(t.contactId).to.be.a('string');
    expect(t.contactId).to.equal(linked.contactId);
    expect(t.requester.email).to.equal(email);
  });

  it('a close with the same key and another note is another request (409)', async () => {
    const t = await createTicket(owner);
    const key = randomUUID();
    const close = (resolutionNote: string) => ai.patch(`/tickets/ai/${t.id}/close`, { organizationId: owner.orgId, idempotencyKey: key, resolutionNote });
    expect(ok(await close('Solved'), 200).status).to.equal('closed');
    expect(ok(await close('Solved'), 200).status).to.equal('closed');
    expectError(await close('Solved otherwise'), 409, 'conflict');
  });

  it('status of a conversation without contact lists the tickets made from it, whoever their requester', async () => {
    const visitor = await newVisitor(owner, { name: 'No contact' });
    const { conversationId } = await startConversation(visitor);
    const plain = await create({ conversationId });
    const withRequester = await create({ conversationId, requesterEmail: uniqueEmail('req') });
    await create({ title: 'Elsewhere' });
    const res = ok(await ai.get(`/tickets/ai/status?organizationId=${owner.orgId}&conversationId=${conversationId}`), 200);
    expect(res.contactId).to.equal(null);
    expect(res.tickets.map((x: any) => x.id)).to.deep.equal([withRequester.id, plain.id]);
  });

  it('says what is missing: the conversation, or the organization of a call with a key', async () => {
    const t = await createTicket(owner);
    const status = await ai.get(`/tickets/ai/status?organizationId=${owner.orgId}&conversationId=${randomUUID()}`);
    expectError(status, 404, 'not_found');
    expect(status.body.message).to.equal('Conversation not found');
    const update = await ai.patch(`/tickets/ai/${t.id}`, { organizationId: randomUUID(), idempotencyKey: randomUUID(), priority: 'low' });
    expectError(update, 404, 'not_found');
    expect(update.body.message).to.equal('Organization not found');
  });
});
