// Two instances sharing PostgreSQL and Redis: emits, presence and disconnects cross from one to the other.
import { expect } from 'chai';
import { addMember, signUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { connectOk, disconnected, nextEvent, refusal, request } from './helpers/sockets.js';
import { Api } from './helpers/http.js';

describe('two instances over Redis', function () {
  let a: TestServer;
  let b: TestServer;

  before(async function () {
    // Two processes can only share a real PostgreSQL and Redis; the embedded defaults are one instance by design.
    if (!process.env.REDIS_URL || !process.env.DATABASE_URL) this.skip();
    a = await startTestServer();
    b = await startTestServer();
  });

  after(async () => {
    await a?.stop();
    await b?.stop();
  });

  it("delivers a visitor's message sent through one instance to an agent on the other", async () => {
    const owner = await signUp(a.server, a.baseUrl);
    const agentOnA = await connectOk(a.baseUrl, owner.orgId, owner.accessToken);
    const visitor = await newVisitor(owner);
    const visitorOnB = await connectOk(b.baseUrl, owner.orgId, visitor.token);
    try {
      const started = nextEvent(agentOnA, 'new_widget_conversation');
      const viaB = new Api(b.baseUrl);
      const res = await viaB.post('/widget/conversations', { message: 'started on B' }, { token: visitor.token });
      expect(res.status).to.equal(201);
      const conversationId = res.body.data.conversation.id;
      expect((await started).conversation.id).to.equal(conversationId);

      const arrived = nextEvent(agentOnA, 'new_message', (p) => p.message.content === 'socket on B');
      const ack = await request(visitorOnB, 'send_message', { conversationId, content: 'socket on B' });
      expect(ack.success).to.equal(true);
      expect((await arrived).message.seq).to.equal(2);

      // And back: an agent reply through A's REST reaches the visitor's socket on B.
      const reply = nextEvent(visitorOnB, 'new_message', (p) => p.message.content === 'reply via A');
      const sent = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'reply via A' }, { token: owner.accessToken });
      expect(sent.status).to.equal(201);
      expect((await reply).message.senderType).to.equal('agent');
    } finally {
      agentOnA.close();
      visitorOnB.close();
    }
  });

  it('sees presence across both instances and routes to an agent connected only to the other', async () => {
    const owner = await signUp(a.server, a.baseUrl);
    await owner.api.patch(`/organizations/${owner.orgId}`, { settings: { autoAssignment: true } }, { token: owner.accessToken });
    const agent = await addMember(a.server, owner, 'agent');
    const ownerOnA = await connectOk(a.baseUrl, owner.orgId, owner.accessToken);
    try {
      // The owner is connected but busy, so routing must skip them.
      expect((await request(ownerOnA, 'update_status', { status: 'busy' })).success).to.equal(true);
      expect(await a.server.presence.isOnline(owner.orgId, agent.userId)).to.equal(false);
      const online = nextEvent(ownerOnA, 'user_status_update', (p) => p.userId === agent.userId);
      const agentOnB = await connectOk(b.baseUrl, owner.orgId, agent.accessToken);
      try {
        expect(await online).to.deep.equal({ userId: agent.userId, status: 'online' });
        expect(await a.server.presence.isOnline(owner.orgId, agent.userId)).to.equal(true);
        const visitor = await newVisitor(owner);
        const assigned = nextEvent(ownerOnA, 'conversation_assigned');
        const notified = nextEvent(agentOnB, 'notification_created', (p) => p.notification.type === 'conversation_assigned');
        const { conversationId } = await startConversation(visitor);
        expect(await assigned).to.deep.equal({ conversationId, assignedTo: agent.userId });
        expect((await notified).notification.data).to.include({ conversationId });
        const offline = nextEvent(ownerOnA, 'user_status_update', (p) => p.userId === agent.userId && p.status === 'offline');
        agentOnB.close();
        await offline;
        expect(await a.server.presence.isOnline(owner.orgId, agent.userId)).to.equal(false);
      } finally {
        agentOnB.close();
      }
    } finally {
      ownerOnA.close();
    }
  });

  it('cuts a socket held on one instance when its session logs out through the other', async () => {
    const owner = await signUp(a.server, a.baseUrl);
    const onB = await connectOk(b.baseUrl, owner.orgId, owner.accessToken);
    const gone = disconnected(onB);
    const res = await new Api(a.baseUrl).post('/auth/logout', {}, { token: owner.accessToken });
    expect(res.status).to.equal(200);
    expect(await gone).to.equal('io server disconnect');
  });

  // Each instance answers a token it saw moments ago from memory for 10 s; a revocation made through the other
  // instance reaches it by PostgreSQL NOTIFY, and an instance hears every notice committed before a handshake before
  // it answers from memory: refused at once.
  it('refuses, on the instance that just let it in, a session logged out through the other', async () => {
    const owner = await signUp(a.server, a.baseUrl);
    (await connectOk(b.baseUrl, owner.orgId, owner.accessToken)).close();
    const res = await new Api(a.baseUrl).post('/auth/logout', {}, { token: owner.accessToken });
    expect(res.status).to.equal(200);
    expect(await refusal(b.baseUrl, owner.orgId, owner.accessToken)).to.equal('unauthorized');
    expect(await refusal(a.baseUrl, owner.orgId, owner.accessToken)).to.equal('unauthorized');
  });

  it('refuses, on the instance that just let them in, a member suspended or removed through the other, and lets them back once reactivated', async () => {
    const owner = await signUp(a.server, a.baseUrl);
    const agent = await addMember(a.server, owner, 'agent');
    (await connectOk(b.baseUrl, owner.orgId, agent.accessToken)).close();
    const path = `/memberships/organizations/${owner.orgId}/members/${agent.membershipId}`;
    expect((await owner.api.patch(`${path}/status`, { status: 'suspended' }, { token: owner.accessToken })).status).to.equal(200);
    expect(await refusal(b.baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
    expect((await owner.api.patch(`${path}/status`, { status: 'active' }, { token: owner.accessToken })).status).to.equal(200);
    (await connectOk(b.baseUrl, owner.orgId, agent.accessToken)).close();
    expect((await owner.api.delete(path, { token: owner.accessToken })).status).to.equal(200);
    expect(await refusal(b.baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
  });
});
