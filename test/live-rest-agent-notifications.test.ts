// REST agent profile, availability and stats; notifications (spec endpoint 7) from assignments and new widget
// conversations; the monthly conversation usage.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { connectOk, settle } from './helpers/sockets.js';
import { expectApiError, expectApiSuccess, withoutRequestId } from './helpers/auth.js';
import { waitFor } from './helpers/wait.js';

type Who = Pick<SignedUp | Member, 'api' | 'accessToken'>;

async function notifications(who: Who, query = ''): Promise<{ data: any[]; pagination: any }> {
  const res = await who.api.get(`/notifications${query}`, { token: who.accessToken });
  expectApiSuccess(res, 200);
  return { data: res.body.data, pagination: res.body.pagination };
}

async function unread(who: Who): Promise<number> {
  return expectApiSuccess(await who.api.get('/notifications/unread-count', { token: who.accessToken }), 200).count;
}

/** Waits until `who` has a new_conversation notification for the conversation (created after the response). */
async function newConversationNotice(who: Who, conversationId: string): Promise<any> {
  return waitFor(async () => (await notifications(who, '?limit=200')).data.find((n) => n.type === 'new_conversation' && n.data.conversationId === conversationId), {
    what: `a new_conversation notification for ${conversationId}`,
  });
}

describe('REST agent profile, status and stats', () => {
  it('reads and updates the profile (signature, maxOpenConversations) and validates input', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent', 'Pat Profile');
    const t = { token: agent.accessToken };
    const profile = expectApiSuccess(await agent.api.get('/agent/profile', t), 200);
    expect(profile.user).to.include({ id: agent.userId, name: 'Pat Profile', email: agent.email });
    expect(profile.user).to.not.have.property('passwordHash');
    expect(profile).to.include({ role: 'agent', signature: null, maxOpenConversations: 20, availability: 'online', status: 'offline' });

    const updated = expectApiSuccess(await agent.api.put('/agent/profile', { signature: '-- Pat, Support', maxOpenConversations: 3, name: 'Pat P.' }, t), 200);
    expect(updated).to.include({ signature: '-- Pat, Support', maxOpenConversations: 3 });
    expect(updated.user.name).to.equal('Pat P.');
    const again = expectApiSuccess(await agent.api.get('/agent/profile', t), 200);
    expect(again).to.include({ signature: '-- Pat, Support', maxOpenConversations: 3 });
    // The owner's profile in the same organization is their own.
    expect(expectApiSuccess(await owner.api.get('/agent/profile', { token: owner.accessToken }), 200)).to.include({ role: 'owner', signature: null, maxOpenConversations: 20 });

    expectApiSuccess(await agent.api.put('/agent/profile', { signature: null }, t), 200);
    expect(expectApiSuccess(await agent.api.get('/agent/profile', t), 200)).to.include({ signature: null, maxOpenConversations: 3 });
    expectApiError(await agent.api.put('/agent/profile', {}, t), 400, 'validation_failed');
    expectApiError(await agent.api.put('/agent/profile', { maxOpenConversations: -1 }, t), 400, 'validation_failed');
    expectApiError(await agent.api.put('/agent/profile', { role: 'owner' }, t), 400, 'validation_failed');
    expectApiError(await agent.api.get('/agent/profile'), 401, 'unauthorized');
    expect(expectApiSuccess(await agent.api.get('/agent/profile', t), 200).role).to.equal('agent');
  });

  it('PATCH /agent/status stores the availability; the visible status is offline without a socket', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    const away = expectApiSuccess(await owner.api.patch('/agent/status', { status: 'away' }, t), 200);
    expect(away).to.deep.equal({ availability: 'away', status: 'offline' });
    expect(expectApiSuccess(await owner.api.get('/agent/profile', t), 200)).to.include({ availability: 'away', status: 'offline' });

    const socket = await connectOk(baseUrl, owner.orgId, owner.accessToken);
    try {
      await waitFor(async () => expectApiSuccess(await owner.api.get('/agent/profile', t), 200).status === 'away', { what: 'status away while connected' });
      expect(expectApiSuccess(await owner.api.patch('/agent/status', { status: 'busy' }, t), 200)).to.deep.equal({ availability: 'busy', status: 'busy' });
      expect(expectApiSuccess(await owner.api.patch('/agent/status', { status: 'online' }, t), 200)).to.deep.equal({ availability: 'online', status: 'online' });
      expect(expectApiSuccess(await owner.api.get('/agent/profile', t), 200)).to.include({ availability: 'online', status: 'online' });
    } finally {
      socket.close();
    }
    await waitFor(async () => expectApiSuccess(await owner.api.get('/agent/profile', t), 200).status === 'offline', { what: 'offline after disconnect' });
    expectApiError(await owner.api.patch('/agent/status', { status: 'invisible' }, t), 400, 'validation_failed');
    expectApiError(await owner.api.patch('/agent/status', {}, t), 400, 'validation_failed');
  });

  it('GET /agent/stats counts own open/resolved conversations and the first-response time after a reply', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const t = { token: agent.accessToken };
    const stats = async () => expectApiSuccess(await agent.api.get('/agent/stats', t), 200);
    expect(await stats()).to.deep.equal({ openConversations: 0, resolvedConversations: 0, closedConversations: 0, avgFirstResponseSeconds: null, avgResolutionSeconds: null });

    const a = await startConversation(await newVisitor(owner));
    const b = await startConversation(await newVisitor(owner));
    await startConversation(await newVisitor(owner)); // unassigned: not the agent's
    for (const { conversationId } of [a, b]) {
      expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/route`, { agentId: agent.userId }, { token: owner.accessToken }), 200);
    }
    expect(await stats()).to.include({ openConversations: 2, resolvedConversations: 0, avgFirstResponseSeconds: null });

    // An internal note is no first response; a public reply is.
    expectApiSuccess(await agent.api.post(`/conversations/${a.conversationId}/messages`, { content: 'note', private: true }, t), 201);
    expect((await stats()).avgFirstResponseSeconds).to.equal(null);
    expectApiSuccess(await agent.api.post(`/conversations/${a.conversationId}/messages`, { content: 'Hello!' }, t), 201);
    const replied = await stats();
    expect(replied.avgFirstResponseSeconds).to.be.a('number').and.at.least(0).and.below(120);

    expectApiSuccess(await agent.api.patch(`/conversations/${b.conversationId}/status`, { status: 'resolved' }, t), 200);
    const resolved = await stats();
    expect(resolved).to.include({ openConversations: 1, resolvedConversations: 1, closedConversations: 0 });
    expect(resolved.avgResolutionSeconds).to.be.a('number').and.at.least(0);

    // The owner's stats are their own.
    expect(expectApiSuccess(await owner.api.get('/agent/stats', { token: owner.accessToken }), 200)).to.include({ openConversations: 0, resolvedConversations: 0 });
  });
});

describe('REST notifications', () => {
  it('new widget conversations notify every member unless the organization turns it off', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const { conversationId } = await startConversation(await newVisitor(owner, { name: 'Nora New' }));
    const forOwner = await newConversationNotice(owner, conversationId);
    const forAgent = await newConversationNotice(agent, conversationId);
    expect(forOwner).to.include({ userId: owner.userId, organizationId: owner.orgId, readAt: null });
    expect(forOwner.title).to.contain('Nora New');
    expect(forAgent.userId).to.equal(agent.userId);
    expect(forAgent.id).to.not.equal(forOwner.id);

    expectApiSuccess(await owner.api.patch(`/organizations/${owner.orgId}`, { settings: { notifyAgentsOnNewConversation: false } }, { token: owner.accessToken }), 200);
    const quiet = await startConversation(await newVisitor(owner));
    await settle(500);
    for (const who of [owner, agent]) {
      const all = (await notifications(who, '?limit=200')).data;
      expect(all.filter((n) => n.data.conversationId === quiet.conversationId), 'no notification when turned off').to.deep.equal([]);
    }
  });

  it('lists newest first with unreadOnly and pagination; marks one read (spec endpoint 7) or all', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const conversations: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { conversationId } = await startConversation(await newVisitor(owner));
      await newConversationNotice(agent, conversationId);
      conversations.push(conversationId);
    }
    const all = await notifications(agent);
    expect(all.pagination).to.deep.equal({ limit: 50, offset: 0, total: 3 });
    expect(all.data.map((n) => n.data.conversationId)).to.deep.equal([...conversations].reverse());
    expect(await unread(agent)).to.equal(3);

    const page = await notifications(agent, '?limit=1&offset=1');
    expect(page.pagination).to.deep.equal({ limit: 1, offset: 1, total: 3 });
    expect(page.data.map((n) => n.id)).to.deep.equal([all.data[1].id]);

    const target = all.data[1];
    const read = await agent.api.patch(`/notifications/${target.id}/read`, undefined, { token: agent.accessToken });
    const marked = expectApiSuccess(read, 200);
    expect(marked).to.include({ id: target.id, userId: agent.userId, type: 'new_conversation' });
    expect(marked.readAt).to.be.a('string');
    expect(Date.now() - Date.parse(marked.readAt)).to.be.within(0, 60_000);
    // Idempotent: reading again keeps the first readAt.
    expect(expectApiSuccess(await agent.api.patch(`/notifications/${target.id}/read`, undefined, { token: agent.accessToken }), 200).readAt).to.equal(marked.readAt);
    expect(await unread(agent)).to.equal(2);
    const unreadOnly = await notifications(agent, '?unreadOnly=true');
    expect(unreadOnly.pagination.total).to.equal(2);
    expect(unreadOnly.data.map((n) => n.id)).to.deep.equal([all.data[0].id, all.data[2].id]);
    expect(unreadOnly.data.every((n) => n.readAt === null)).to.equal(true);
    // The owner's copies are untouched.
    expect(await unread(owner)).to.equal(3);

    const readAll = expectApiSuccess(await agent.api.patch('/notifications/read-all', undefined, { token: agent.accessToken }), 200);
    expect(readAll.updated).to.equal(2);
    expect(await unread(agent)).to.equal(0);
    expect((await notifications(agent, '?unreadOnly=true')).data).to.deep.equal([]);
    expect((await notifications(agent)).data.every((n) => typeof n.readAt === 'string')).to.equal(true);
    expect(await unread(owner)).to.equal(3);
    expectApiError(await agent.api.get('/notifications'), 401, 'unauthorized');
  });

  it("another user's or another organization's notification id answers 404 like a missing one", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const other = await signUp(server, baseUrl);
    const otherAgent = await addMember(server, other, 'agent');
    const mine = await startConversation(await newVisitor(owner));
    const theirs = await startConversation(await newVisitor(other));
    const ownerNotice = await newConversationNotice(owner, mine.conversationId);
    await newConversationNotice(agent, mine.conversationId);
    const foreignNotice = await newConversationNotice(other, theirs.conversationId);
    // Assignment in the other organization gives its agent one more notification.
    expectApiSuccess(await other.api.post(`/conversations/${theirs.conversationId}/route`, { agentId: otherAgent.userId }, { token: other.accessToken }), 200);
    const assignedNotice = (await notifications(otherAgent)).data.find((n) => n.type === 'conversation_assigned');
    expect(assignedNotice.data.conversationId).to.equal(theirs.conversationId);

    const t = { token: agent.accessToken };
    const missing = await agent.api.patch(`/notifications/${randomUUID()}/read`, undefined, t);
    expectApiError(missing, 404, 'not_found');
    for (const id of [ownerNotice.id, foreignNotice.id, assignedNotice.id]) {
      const res = await agent.api.patch(`/notifications/${id}/read`, undefined, t);
      expectApiError(res, 404, 'not_found');
      expect(withoutRequestId(res.body)).to.deep.equal(withoutRequestId(missing.body));
    }
    expectApiError(await agent.api.patch('/notifications/not-a-uuid/read', undefined, t), 404, 'not_found');
    // Nothing was marked: the rightful owners still see them unread.
    expect((await notifications(owner)).data.find((n) => n.id === ownerNotice.id).readAt).to.equal(null);
    expect((await notifications(other)).data.find((n) => n.id === foreignNotice.id).readAt).to.equal(null);
    expect((await notifications(agent)).data.every((n) => n.userId === agent.userId && n.organizationId === owner.orgId)).to.equal(true);
    // read-all only touches the caller's own.
    expectApiSuccess(await agent.api.patch('/notifications/read-all', undefined, t), 200);
    expect(await unread(owner)).to.equal(1);
    expect(await unread(other)).to.equal(1);
  });
});

describe('REST billing usage', () => {
  it('counts the conversations started this month in the active organization', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const other = await signUp(server, baseUrl);
    const usage = async (who: Who = owner) => expectApiSuccess(await who.api.get('/organizations/billing/usage', { token: who.accessToken }), 200);
    const before = await usage();
    const now = new Date();
    expect(before.periodStart).to.equal(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString());
    expect(Date.parse(before.periodEnd)).to.be.greaterThan(Date.now());
    expect(before.usage.conversations).to.equal(0);
    expect(before.usage.humanAgents).to.equal(2);

    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    await startConversation(await newVisitor(owner));
    await startConversation(await newVisitor(other));
    expect((await usage()).usage.conversations).to.equal(2);
    // A visitor writing to a closed conversation starts (and counts) a new one.
    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'closed' }, { token: owner.accessToken }), 200);
    expectApiSuccess(await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'again' }, { token: visitor.token }), 201);
    expect((await usage(agent)).usage.conversations).to.equal(3);
    expect((await usage(other)).usage.conversations).to.equal(1);
    // Last month's conversations do not count.
    const lastMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1) - 24 * 3600_000);
    await server.db.models.Conversation.acrossOrgs().patch({ createdAt: lastMonth } as never).where('id', conversationId);
    expect((await usage()).usage.conversations).to.equal(2);
  });
});
