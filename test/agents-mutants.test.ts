// Agent services, case by case: what an assignment notification says, an automatic pick that finds the
// conversation already taken or closed, nobody told of an assignment that did not happen, the agent's profile
// (avatar, trimmed name) and workload counts, and the order of notifications written at the same moment.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, PASSWORD, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { invite } from './helpers/tenancy.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { collect, connectOk, nextEvent, type ClientSocket } from './helpers/sockets.js';
import { expectApiSuccess } from './helpers/auth.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

type Who = Pick<SignedUp | Member, 'api' | 'accessToken'> & { userId: string };

async function notifications(who: Who): Promise<any[]> {
  return expectApiSuccess(await who.api.get('/notifications?limit=200', { token: who.accessToken }), 200);
}

async function conversation(owner: SignedUp, id: string): Promise<any> {
  return expectApiSuccess(await owner.api.get(`/conversations/${id}`, { token: owner.accessToken }), 200);
}

/** Waits until the owner's new_conversation notice for the conversation exists: the after-start work is done. */
async function welcomed(owner: SignedUp, conversationId: string): Promise<void> {
  await waitFor(async () => (await notifications(owner)).some((n) => n.type === 'new_conversation' && n.data.conversationId === conversationId), { what: 'the after-start work' });
}

describe('Agent services: assignment notices', () => {
  const sockets: ClientSocket[] = [];
  afterEach(() => {
    for (const s of sockets.splice(0)) s.close();
  });

  it("an assignment by hand tells the assignee the conversation's subject, else the visitor's name, else nothing", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const t = { token: owner.accessToken };
    const started = await Promise.all(['Sofia Subject', 'Nina Named', 'Nobody'].map(async (name) => (await startConversation(await newVisitor(owner, { name }))).conversationId));
    const [withSubject, named, anonymous] = started as [string, string, string];
    await server.db.models.Conversation.acrossOrgs().patch({ subject: 'Refund for order 42' } as never).where('id', withSubject);
    await server.db.models.Conversation.acrossOrgs().patch({ visitorName: null } as never).where('id', anonymous);
    for (const id of started) expectApiSuccess(await owner.api.post(`/conversations/${id}/route`, { agentId: agent.userId }, t), 200);

    const assigned = (await notifications(agent)).filter((n) => n.type === 'conversation_assigned');
    const about = (id: string) => assigned.find((n) => n.data.conversationId === id);
    for (const id of started) {
      expect(about(id), id).to.include({ title: 'A conversation was assigned to you', readAt: null });
      // No reason given by hand: the notice says so with null.
      expect(about(id).data).to.deep.equal({ conversationId: id, reason: null });
    }
    expect(about(withSubject).body).to.equal('Refund for order 42');
    expect(about(named).body).to.equal('Nina Named');
    expect(about(anonymous).body).to.equal(null);
  });

  it('an automatic pick keeps a conversation someone took, or closed, before it ran', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const t = { token: owner.accessToken };
    const taken = (await startConversation(await newVisitor(owner))).conversationId;
    const closed = (await startConversation(await newVisitor(owner))).conversationId;
    await welcomed(owner, taken);
    await welcomed(owner, closed);
    expectApiSuccess(await owner.api.post(`/conversations/${taken}/route`, { agentId: owner.userId }, t), 200);
    expectApiSuccess(await owner.api.patch(`/conversations/${closed}/status`, { status: 'closed' }, t), 200);
    // Now the agent is online and available: a pick would choose them.
    sockets.push(await connectOk(baseUrl, owner.orgId, agent.accessToken));
    await waitFor(async () => expectApiSuccess(await agent.api.get('/agent/profile', { token: agent.accessToken }), 200).status === 'online', { what: 'the agent online' });

    const routing = server.services.routing;
    expect((await routing.assignLeastBusy(owner.orgId, taken, 'auto')).assignedTo).to.equal(owner.userId);
    expect((await routing.assignLeastBusy(owner.orgId, closed, 'auto')).assignedTo).to.equal(null);
    expect((await conversation(owner, taken)).assignedTo).to.equal(owner.userId);
    expect((await conversation(owner, closed)).assignedTo).to.equal(null);
    // Nobody is told of an assignment that did not happen: not the agent, not the one who holds it.
    expect((await notifications(agent)).filter((n) => n.type === 'conversation_assigned')).to.deep.equal([]);
    expect((await notifications(owner)).filter((n) => n.type === 'conversation_assigned')).to.deep.equal([]);
    // The same agent takes an open, unassigned conversation (the scene is not simply empty of candidates).
    const open = (await startConversation(await newVisitor(owner))).conversationId;
    await welcomed(owner, open);
    expect((await routing.assignLeastBusy(owner.orgId, open, 'auto')).assignedTo).to.equal(agent.userId);
  });

  it("an assignee who is not an active member is refused with the field named; a missing conversation is 'Conversation not found'", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const stranger = await signUp(server, baseUrl);
    const { conversationId } = await startConversation(await newVisitor(owner));
    const res = await owner.api.post(`/conversations/${conversationId}/route`, { agentId: stranger.userId }, { token: owner.accessToken });
    expect(res.status).to.equal(400);
    expect(res.body.message).to.equal('The assignee is not an active member of this organization');
    expect(res.body.error.details).to.deep.include({ field: 'agentId', message: 'is not an active member' });
    // Assignment by hand and the automatic pick alike, for a conversation that is gone (or never was).
    const routing = server.services.routing;
    for (const attempt of [routing.assign(owner.orgId, randomUUID(), owner.userId, {}), routing.assignLeastBusy(owner.orgId, randomUUID(), 'auto')]) {
      const err = await attempt.then(() => null, (e: { code?: string; message?: string }) => e);
      expect(err).to.include({ code: 'not_found', message: 'Conversation not found' });
    }
  });

  it("an unassignment stamps nobody's round-robin clock: a newcomer invited before it still goes first on a tie", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const ann = await addMember(server, owner, 'agent', 'Ann Agent');
    const t = { token: owner.accessToken };
    expectApiSuccess(await owner.api.patch(`/organizations/${owner.orgId}`, { settings: { autoAssignment: true } }, t), 200);
    // Ben is invited (a membership without a user yet) before Ann is given a conversation and it is taken back.
    const invitation = await invite(server, owner, 'agent');
    const first = (await startConversation(await newVisitor(owner))).conversationId;
    await welcomed(owner, first);
    expectApiSuccess(await owner.api.post(`/conversations/${first}/route`, { agentId: ann.userId }, t), 200);
    expectApiSuccess(await owner.api.post(`/conversations/${first}/route`, { agentId: null }, t), 200);
    const accepted = await new Api(baseUrl).post('/memberships/accept-invite', { token: invitation.token, name: 'Ben Newcomer', password: PASSWORD });
    expect(accepted.status, JSON.stringify(accepted.body)).to.equal(200);
    const ben = { api: new Api(baseUrl), accessToken: accepted.body.data.accessToken as string, userId: accepted.body.data.user.id as string };
    for (const who of [ann, ben]) {
      sockets.push(await connectOk(baseUrl, owner.orgId, who.accessToken));
      await waitFor(async () => expectApiSuccess(await who.api.get('/agent/profile', { token: who.accessToken }), 200).status === 'online', { what: 'the agent online' });
    }
    // Both hold no open conversation; Ann was assigned once, Ben never: Ben.
    const next = (await startConversation(await newVisitor(owner))).conversationId;
    await welcomed(owner, next);
    expect((await conversation(owner, next)).assignedTo).to.equal(ben.userId);
  });

  it('an automatic pick that finds nobody announces no assignment', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    expectApiSuccess(await owner.api.patch(`/organizations/${owner.orgId}`, { settings: { autoAssignment: true } }, { token: owner.accessToken }), 200);
    // Connected but away: online for presence, not a candidate.
    expectApiSuccess(await agent.api.patch('/agent/status', { status: 'away' }, { token: agent.accessToken }), 200);
    const socket = await connectOk(baseUrl, owner.orgId, agent.accessToken);
    sockets.push(socket);
    await waitFor(async () => expectApiSuccess(await agent.api.get('/agent/profile', { token: agent.accessToken }), 200).status === 'away', { what: 'the agent away' });

    const assigned = collect(socket, 'conversation_assigned');
    const visitor = await newVisitor(owner);
    // The new_conversation notice is pushed after the pick is over, on the same socket: whatever the pick
    // announced has arrived before it.
    const noticed = nextEvent(socket, 'notification_created', (p) => p.notification.type === 'new_conversation');
    const { conversationId } = await startConversation(visitor);
    expect((await noticed).notification.data.conversationId).to.equal(conversationId);
    expect(assigned).to.deep.equal([]);
    expect((await conversation(owner, conversationId)).assignedTo).to.equal(null);
  });
});

describe('Agent services: notifications', () => {
  it('notifying nobody writes nothing and succeeds; a recipient named twice gets one notification', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const service = server.services.notifications;
    // A new conversation auto-assigned to an organization's only member has nobody else to tell.
    expect(await service.notify(owner.orgId, [], { type: 'new_conversation', title: 'Nobody to tell' })).to.deep.equal([]);
    const rows = await service.notify(owner.orgId, [agent.userId, agent.userId], { type: 'note', title: 'Once', data: { n: 1 } });
    expect(rows.map((r) => r.userId)).to.deep.equal([agent.userId]);
    const listed = (await notifications(agent)).filter((n) => n.type === 'note');
    expect(listed.map((n) => ({ title: n.title, body: n.body, data: n.data }))).to.deep.equal([{ title: 'Once', body: null, data: { n: 1 } }]);
  });

  it('a notification read stays in the list, counted, unless only unread ones are asked for', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const [kept, read] = [
      ...(await server.services.notifications.notify(owner.orgId, [agent.userId], { type: 'note', title: 'Kept unread' })),
      ...(await server.services.notifications.notify(owner.orgId, [agent.userId], { type: 'note', title: 'Read' })),
    ];
    expectApiSuccess(await agent.api.patch(`/notifications/${read!.id}/read`, undefined, { token: agent.accessToken }), 200);
    const all = await agent.api.get('/notifications', { token: agent.accessToken });
    expect(expectApiSuccess(all, 200).map((n: any) => [n.title, n.readAt === null])).to.deep.equal([['Read', false], ['Kept unread', true]]);
    expect(all.body.pagination.total).to.equal(2);
    const unreadOnly = await agent.api.get('/notifications?unreadOnly=true', { token: agent.accessToken });
    expect(expectApiSuccess(unreadOnly, 200).map((n: any) => n.id)).to.deep.equal([kept!.id]);
    expect(unreadOnly.body.pagination.total).to.equal(1);
  });

  it("marking a missing notification read answers 404 'Notification not found'", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const res = await owner.api.patch(`/notifications/${randomUUID()}/read`, undefined, { token: owner.accessToken });
    expect(res.status).to.equal(404);
    expect(res.body.message).to.equal('Notification not found');
  });
});

describe('Agent services: profile and workload', () => {
  it('changes the avatar alone, trims the name, and keeps what was not sent', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent', 'Pia Profile');
    const t = { token: agent.accessToken };
    const avatar = expectApiSuccess(await agent.api.put('/agent/profile', { avatarUrl: 'https://cdn.example.test/pia.png' }, t), 200);
    expect(avatar.user).to.include({ name: 'Pia Profile', avatarUrl: 'https://cdn.example.test/pia.png' });
    const renamed = expectApiSuccess(await agent.api.put('/agent/profile', { name: '  Pia P.  ', maxOpenConversations: 4 }, t), 200);
    expect(renamed.user).to.include({ name: 'Pia P.', avatarUrl: 'https://cdn.example.test/pia.png' });
    expect(renamed).to.include({ maxOpenConversations: 4, signature: null });
    const cleared = expectApiSuccess(await agent.api.put('/agent/profile', { avatarUrl: null }, t), 200);
    expect(cleared.user).to.include({ name: 'Pia P.', avatarUrl: null });
    expect(cleared.maxOpenConversations).to.equal(4);
    expect(expectApiSuccess(await agent.api.get('/agent/profile', t), 200).user).to.include({ name: 'Pia P.', avatarUrl: null });
  });

  it("someone who is no member of the organization has no agent profile there ('Agent not found')", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const elsewhere = await signUp(server, baseUrl);
    // The route only serves members; a membership removed while the request runs meets this answer.
    for (const userId of [elsewhere.userId, randomUUID()]) {
      const err = await server.services.agents.profile(owner.orgId, userId).then(() => null, (e: { code?: string; message?: string }) => e);
      expect(err, userId).to.include({ code: 'not_found', message: 'Agent not found' });
    }
    expect((await server.services.agents.profile(owner.orgId, owner.userId)).membership.role).to.equal('owner');
  });

  it("counts the agent's closed conversations apart from resolved and open ones", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const t = { token: owner.accessToken };
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const id = (await startConversation(await newVisitor(owner))).conversationId;
      expectApiSuccess(await owner.api.post(`/conversations/${id}/route`, { agentId: agent.userId }, t), 200);
      ids.push(id);
    }
    expectApiSuccess(await owner.api.patch(`/conversations/${ids[0]}/status`, { status: 'closed' }, t), 200);
    expectApiSuccess(await owner.api.patch(`/conversations/${ids[1]}/status`, { status: 'closed' }, t), 200);
    expectApiSuccess(await owner.api.patch(`/conversations/${ids[2]}/status`, { status: 'resolved' }, t), 200);
    const stats = expectApiSuccess(await agent.api.get('/agent/stats', { token: agent.accessToken }), 200);
    expect(stats).to.include({ openConversations: 1, resolvedConversations: 1, closedConversations: 2, avgFirstResponseSeconds: null });
  });
});

describe('Agent services: the conversation.assigned webhook', function () {
  this.timeout(60_000);
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: 'true' });
  });
  after(async () => {
    await server?.stop();
  });

  it('records the assignee with the conversation for an assignment and an unassignment, nothing for a repeat', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const agent = await addMember(server.server, owner, 'agent');
    const t = { token: owner.accessToken };
    expectApiSuccess(await owner.api.post('/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['conversation.assigned'] }, t), 201);
    const { conversationId } = await startConversation(await newVisitor(owner));
    const recorded = async () =>
      (await server.server.db.knex('webhook_deliveries').where({ organization_id: owner.orgId }).orderBy('created_at').select('event_type', 'payload')).map((d: any) => ({
        type: d.eventType ?? d.event_type,
        assignedTo: d.payload.assignedTo,
        id: d.payload.conversation?.id,
        conversationAssignedTo: d.payload.conversation?.assignedTo,
      }));
    const path = `/conversations/${conversationId}/route`;
    expectApiSuccess(await owner.api.post(path, { agentId: agent.userId }, t), 200);
    const assigned = { type: 'conversation.assigned', assignedTo: agent.userId, id: conversationId, conversationAssignedTo: agent.userId };
    expect(await recorded()).to.deep.equal([assigned]);
    expectApiSuccess(await owner.api.post(path, { agentId: agent.userId }, t), 200);
    expect(await recorded()).to.deep.equal([assigned]);
    expectApiSuccess(await owner.api.post(path, { agentId: null }, t), 200);
    expect(await recorded()).to.deep.equal([assigned, { type: 'conversation.assigned', assignedTo: null, id: conversationId, conversationAssignedTo: null }]);
  });
});
