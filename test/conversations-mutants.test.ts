// The inbox's promises that the broader conversation tests leave open: a status set to the one it already has, and
// a read mark on a conversation already read, change nothing and announce nothing (and a missing one is a 404 in the
// same words for a read, a status change, an edit, a read mark or a contact link); a linked contact counts it as its latest activity; a new conversation is announced
// to accepted members only, titled by the visitor's name when there is one; the first resolution (what the
// analytics count as resolved, and resolved by the AI alone) is the first one only, and an agent who joined live
// makes it no AI resolution; a status change records conversation.updated, and a resolution conversation.resolved too,
// as an edit or a contact link records conversation.updated with the fields it changed; the inbox's search reads the
// visitor's email as well as the name, subject and messages.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { expectApiSuccess } from './helpers/auth.js';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation, widgetKey } from './helpers/live.js';
import { ackData, closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, request, settle } from './helpers/sockets.js';
import { aiClient } from './helpers/tickets.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { captureLogs } from './helpers/logs.js';
import { waitFor } from './helpers/wait.js';
import { refuseWrites } from './helpers/refusals.js';

describe('conversations: changes that change nothing', () => {
  const track = closeAfterEach();
  let owner: SignedUp;
  const t = () => ({ token: owner.accessToken });
  const read = async (id: string) => expectApiSuccess(await owner.api.get(`/conversations/${id}`, t()), 200);

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('a status set to the one the conversation has answers 200, keeps its times and announces nothing', async () => {
    const { baseUrl } = sharedServer();
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    for (const status of ['open', 'pending', 'resolved', 'closed'] as const) {
      const { conversationId } = await startConversation(await newVisitor(owner));
      if (status !== 'open') expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status }, t()), 200);
      const before = await read(conversationId);
      const updates = collect(agentSocket, 'conversation_updated');
      const same = expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status }, t()), 200);
      expect(same.status, status).to.equal(status);
      expect(same.resolvedAt, status).to.equal(before.resolvedAt);
      expect(same.updatedAt, status).to.equal(before.updatedAt);
      expect(await read(conversationId)).to.deep.include({ status, resolvedAt: before.resolvedAt, updatedAt: before.updatedAt });
      await settle(200);
      expect(updates.filter((u) => u.conversation.id === conversationId), `${status} -> ${status} announced`).to.deep.equal([]);
    }
  });

  it('a read, a status change, an edit, a read mark or a contact link of a conversation that does not exist answers 404 "Conversation not found"', async () => {
    const id = randomUUID();
    for (const res of [
      await owner.api.get(`/conversations/${id}`, t()),
      await owner.api.get(`/conversations/${id}/messages`, t()),
      await owner.api.post(`/conversations/${id}/read`, {}, t()),
      await owner.api.patch(`/conversations/${id}/status`, { status: 'resolved' }, t()),
      await owner.api.patch(`/conversations/${id}`, { priority: 'high' }, t()),
      await owner.api.post(`/conversations/${id}/contact`, { email: 'nobody@example.test' }, t()),
    ]) {
      expect(res.status).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
      expect(res.body.message).to.equal('Conversation not found');
    }
  });

  it("linking a contact counts as the contact's latest activity", async () => {
    const created = expectApiSuccess(await owner.api.post('/contacts', { name: 'Quiet Contact', email: 'quiet@example.test' }, t()), 201);
    const { conversationId } = await startConversation(await newVisitor(owner));
    const before = expectApiSuccess(await owner.api.get(`/contacts/${created.id}`, t()), 200).lastActivityAt as string | null;
    const start = Date.now();
    expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/contact`, { contactId: created.id }, t()), 200);
    const after = expectApiSuccess(await owner.api.get(`/contacts/${created.id}`, t()), 200).lastActivityAt as string | null;
    expect(after).to.be.a('string').and.not.equal(before);
    expect(Date.parse(after!)).to.be.at.least(start - 1000);
  });

  it('marking a conversation read when nothing is unread leaves it as it was', async () => {
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'one');
    const first = expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/read`, undefined, t()), 200);
    expect(first.unreadCount).to.equal(0);
    await settle(20);
    const again = expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/read`, undefined, t()), 200);
    expect(again).to.deep.include({ unreadCount: 0, updatedAt: first.updatedAt });
    expect((await read(conversationId)).updatedAt).to.equal(first.updatedAt);
  });
});

describe('conversations: who hears of a new one', () => {
  it('a suspended member is not notified; a visitor without a name gives the plain title', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const suspended = await addMember(server, owner, 'agent', 'Sue Suspended');
    expectApiSuccess(await owner.api.patch(`/memberships/organizations/${owner.orgId}/members/${suspended.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
    const api = new Api(baseUrl);
    const token = expectApiSuccess(await api.post('/widget/auth/token', { publicKey: await widgetKey(owner) }), 201).token;
    const conversationId = expectApiSuccess(await api.post('/widget/conversations', { message: 'hi' }, { token }), 201).conversation.id;
    const notices = async () => (await server.db.knex('notifications').where({ organization_id: owner.orgId, type: 'new_conversation' })).filter((n: any) => n.data.conversationId === conversationId);
    await waitFor(async () => (await notices()).length > 0, { what: "the owner's notification" });
    await settle(200);
    const rows = await notices();
    expect(rows.map((n: any) => n.userId)).to.deep.equal([owner.userId]);
    expect(rows[0].title).to.equal('New conversation');
  });
});

describe('conversations: the first resolution', () => {
  const track = closeAfterEach();
  // What the analytics read (their own tests turn these columns into figures).
  const first = async (id: string) => {
    const row = await sharedServer().server.db.knex('conversations').where({ id }).first('first_resolved_at', 'first_resolved_by_ai');
    return { at: row.firstResolvedAt ?? row.first_resolved_at, byAi: row.firstResolvedByAi ?? row.first_resolved_by_ai };
  };

  it('an AI resolution after an agent joined live (without a reply) is no AI resolution', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const org = { organizationId: owner.orgId };
    const { conversationId } = await startConversation(await newVisitor(owner));
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    expect(ackData(await request(agentSocket, 'join_conversation', { conversationId }))).to.deep.equal({});
    expectApiSuccess(await aiClient(baseUrl).post(`/conversations/ai/${conversationId}/resolve`, org), 200);
    const r = await first(conversationId);
    expect(r.at).to.be.an.instanceOf(Date);
    expect(r.byAi).to.equal(false);
  });

  it('resolving again after a reopening keeps the first resolution and who made it', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    const { conversationId } = await startConversation(await newVisitor(owner));
    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'pending' }, t), 200);
    expect((await first(conversationId)).at ?? null, 'pending is no resolution').to.equal(null);
    const resolved = expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'resolved' }, t), 200);
    const before = await first(conversationId);
    expect(before.byAi).to.equal(false);
    expect(before.at.toISOString()).to.equal(resolved.resolvedAt);
    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'open' }, t), 200);
    await settle(20);
    const again = expectApiSuccess(await aiClient(baseUrl).post(`/conversations/ai/${conversationId}/resolve`, { organizationId: owner.orgId }), 200);
    expect(again.resolvedAt).to.not.equal(resolved.resolvedAt);
    expect(await first(conversationId)).to.deep.equal(before);
  });
});

describe('conversations: search', () => {
  it("finds a conversation by its visitor's email, in any case, in the caller's organization only", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const other = await signUp(server, baseUrl);
    await startConversation(await newVisitor(other, { name: 'Olga Other', email: 'olga.findme@example.test' }), 'hello');
    const { conversationId } = await startConversation(await newVisitor(owner, { name: 'Olga Owner', email: 'olga.findme@example.test' }), 'hello');
    await startConversation(await newVisitor(owner, { name: 'Vera Visitor', email: 'vera@example.test' }), 'hello');
    const found = expectApiSuccess(await owner.api.get('/conversations?q=FINDME', { token: owner.accessToken }), 200);
    expect(found.map((c: any) => c.id)).to.deep.equal([conversationId]);
  });
});

describe('conversations: the webhooks of a change', function () {
  this.timeout(60_000);
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: 'true' });
  });
  after(async () => {
    await server?.stop();
  });

  it('records conversation.updated for every change and conversation.resolved for a resolution only', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    expectApiSuccess(await owner.api.post('/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['conversation.updated', 'conversation.resolved'] }, t), 201);
    const { conversationId } = await startConversation(await newVisitor(owner));
    const recorded = async () =>
      (await server.server.db.knex('webhook_deliveries').where({ organization_id: owner.orgId }).orderBy('created_at').orderBy('event_type', 'desc').select('event_type', 'payload')).map((d: any) => ({
        type: d.eventType ?? d.event_type,
        id: d.payload.conversation?.id,
        status: d.payload.conversation?.status,
      }));
    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'pending' }, t), 200);
    expect(await recorded()).to.deep.equal([{ type: 'conversation.updated', id: conversationId, status: 'pending' }]);
    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'resolved' }, t), 200);
    expect(await recorded()).to.deep.equal([
      { type: 'conversation.updated', id: conversationId, status: 'pending' },
      { type: 'conversation.updated', id: conversationId, status: 'resolved' },
      { type: 'conversation.resolved', id: conversationId, status: 'resolved' },
    ]);
  });

  it('records conversation.updated with the fields an edit or a contact link changed; an edit that changes nothing records nothing', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    expectApiSuccess(await owner.api.post('/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['conversation.updated'] }, t), 201);
    const { conversationId } = await startConversation(await newVisitor(owner));
    const recorded = async () =>
      (await server.server.db.knex('webhook_deliveries').where({ organization_id: owner.orgId }).orderBy('created_at').select('event_type', 'payload')).map((d: any) => ({
        type: d.eventType ?? d.event_type,
        changes: d.payload.changes,
        id: d.payload.conversation?.id,
        priority: d.payload.conversation?.priority,
        tags: d.payload.conversation?.tags,
        contactId: d.payload.conversation?.contactId,
      }));
    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}`, { priority: 'high', tags: [' VIP ', 'vip'] }, t), 200);
    const edit = { type: 'conversation.updated', changes: ['priority', 'tags'], id: conversationId, priority: 'high', tags: ['vip'], contactId: null };
    expect(await recorded()).to.deep.equal([edit]);
    // The same values again: nothing changed, nothing recorded.
    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}`, { priority: 'high', tags: ['vip'] }, t), 200);
    expect(await recorded()).to.deep.equal([edit]);

    const linked = expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/contact`, { name: 'Carla Contact', email: 'carla@example.test' }, t), 200);
    const link = { type: 'conversation.updated', changes: ['contactId'], id: conversationId, priority: 'high', tags: ['vip'], contactId: linked.contactId };
    expect(linked.contactId).to.be.a('string');
    expect(await recorded()).to.deep.equal([edit, link]);
    expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/contact`, { contactId: null }, t), 200);
    expect(await recorded()).to.deep.equal([edit, link, { ...link, contactId: null }]);
    // Tags alone: only the tags changed (the priority, not sent, is not one of the changes).
    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}`, { tags: ['vip', 'billing'] }, t), 200);
    expect((await recorded()).at(-1)).to.deep.equal({ ...edit, changes: ['tags'], tags: ['vip', 'billing'] });
  });
});

describe('conversations: a new one whose routing or notice fails', function () {
  this.timeout(120_000);
  let app: TestServer;
  const logs = captureLogs('error');
  before(async () => {
    app = await startTestServer({}, { logger: logs.logger });
  });
  after(async () => {
    await app?.stop();
  });

  it('is logged as an error naming the conversation and the cause; the conversation stands', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const knex = app.server.db.knex;
    // The database refuses this organization's new-conversation notices: the welcome after the commit fails.
    const refusal = await refuseWrites(knex, { table: 'notifications', on: 'insert', when: `new.organization_id = '${owner.orgId}'`, message: 'notices are refused' });
    let conversationId: string;
    try {
      ({ conversationId } = await startConversation(await newVisitor(owner)));
      await waitFor(async () => logs.matching(50, 'routing a new conversation failed').some((l) => l.conversationId === conversationId), { what: 'the failed welcome logged' });
    } finally {
      await refusal.lift();
    }
    const [logged] = logs.matching(50, 'routing a new conversation failed').filter((l) => l.conversationId === conversationId);
    expect(logged!.msg).to.equal('routing a new conversation failed');
    expect((logged!.err as { message?: string } | undefined)?.message).to.match(/notices are refused/);
    expect(expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken }), 200).id).to.equal(conversationId);
  });
});
