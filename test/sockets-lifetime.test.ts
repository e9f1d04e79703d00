// Sockets are cut when access ends: logout, password change, token expiry, suspension and removal.
import { expect } from 'chai';
import { login } from './helpers/auth.js';
import { addMember, PASSWORD, signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { ackData, closeAfterEach } from './helpers/socket-acks.js';
import { connectOk, disconnected, nextEvent, refusal, request, settle, type ClientSocket } from './helpers/sockets.js';

/** A socket still connected answers a round trip. */
async function stillConnected(socket: ClientSocket): Promise<void> {
  expect(socket.connected, 'still connected').to.equal(true);
  const ack = await request(socket, 'sync', { conversationId: '00000000-0000-4000-8000-000000000000', afterSeq: 0 }, 2000);
  expect(ack.success).to.equal(false);
  expect(ack.error!.code).to.equal('not_found');
}

describe('socket lifetime', () => {
  const track = closeAfterEach();

  describe('sessions', () => {
    it("logout disconnects that session's sockets at once and only those", async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const other = await login(new Api(baseUrl), owner.email, owner.password);
      const visitor = await newVisitor(owner);
      const loggedOut = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
      const loggedOutToo = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
      const otherSession = track(await connectOk(baseUrl, owner.orgId, other.accessToken));
      const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      const gone = [disconnected(loggedOut), disconnected(loggedOutToo)];
      const res = await owner.api.post('/auth/logout', {}, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(await Promise.all(gone)).to.deep.equal(['io server disconnect', 'io server disconnect']);
      await settle(150);
      await stillConnected(otherSession);
      await stillConnected(visitorSocket);
      expect(await refusal(baseUrl, owner.orgId, owner.accessToken)).to.equal('unauthorized');
    });

    it('a password change disconnects the sockets of every other session and keeps its own', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const other = await login(new Api(baseUrl), owner.email, owner.password);
      const mine = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
      const theirs = track(await connectOk(baseUrl, owner.orgId, other.accessToken));
      const gone = disconnected(theirs);
      const res = await owner.api.post('/auth/change-password', { currentPassword: PASSWORD, newPassword: 'a brand new passphrase 42' }, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(await gone).to.equal('io server disconnect');
      await settle(150);
      await stillConnected(mine);
    });
  });

  describe('membership', () => {
    it('suspension disconnects the member in that organization only, tells the agents and keeps them out', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const member = await addMember(server, owner, 'agent');
      // The member also owns an organization of their own, with a socket there.
      const created = await member.api.post('/organizations', { name: 'Side Org' }, { token: member.accessToken });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const switched = await member.api.post(`/organizations/${created.body.data.id}/switch`, {}, { token: member.accessToken });
      expect(switched.status, JSON.stringify(switched.body)).to.equal(200);
      const elsewhere = track(await connectOk(baseUrl, created.body.data.id, switched.body.data.accessToken));

      const ownerSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
      const online = nextEvent(ownerSocket, 'user_status_update', (p) => p.userId === member.userId && p.status === 'online');
      const memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      await online;
      const gone = disconnected(memberSocket);
      const offline = nextEvent(ownerSocket, 'user_status_update', (p) => p.userId === member.userId && p.status === 'offline');
      const res = await owner.api.patch(`/memberships/organizations/${owner.orgId}/members/${member.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(await gone).to.equal('io server disconnect');
      expect(await offline).to.deep.equal({ userId: member.userId, status: 'offline' });
      await settle(150);
      await stillConnected(ownerSocket);
      await stillConnected(elsewhere);
      expect(await refusal(baseUrl, owner.orgId, member.accessToken)).to.equal('forbidden');
    });

    it('removal disconnects the member and keeps them out', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const member = await addMember(server, owner, 'agent');
      const memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      const second = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      const gone = [disconnected(memberSocket), disconnected(second)];
      const res = await owner.api.delete(`/memberships/organizations/${owner.orgId}/members/${member.membershipId}`, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(await Promise.all(gone)).to.deep.equal(['io server disconnect', 'io server disconnect']);
      expect(await refusal(baseUrl, owner.orgId, member.accessToken)).to.equal('forbidden');
    });

    it('a role change keeps the socket connected', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const member = await addMember(server, owner, 'agent');
      const memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      const res = await owner.api.patch(`/memberships/organizations/${owner.orgId}/members/${member.membershipId}/role`, { role: 'admin' }, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      await settle(150);
      await stillConnected(memberSocket);
    });
  });

  describe('token expiry', () => {
    let dedicated: TestServer;

    before(async function () {
      this.timeout(60_000);
      dedicated = await startTestServer({ ACCESS_TOKEN_TTL: '2', WIDGET_TOKEN_TTL: '2' });
    });

    after(async () => {
      await dedicated?.stop();
    });

    it('sends session_expired and then disconnects, for an agent and for a visitor, when the token expires', async function () {
      this.timeout(15_000);
      const { server, baseUrl } = dedicated;
      const owner = await signUp(server, baseUrl);
      const visitor = await newVisitor(owner);
      const fresh = await login(new Api(baseUrl), owner.email, owner.password);
      const agentSocket = track(await connectOk(baseUrl, owner.orgId, fresh.accessToken));
      const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      const order = (socket: ClientSocket) => {
        const seen: string[] = [];
        socket.on('session_expired', (p) => seen.push(`session_expired ${JSON.stringify(p)}`));
        socket.on('disconnect', (reason) => seen.push(`disconnect ${reason}`));
        return seen;
      };
      const agentSeen = order(agentSocket);
      const visitorSeen = order(visitorSocket);
      // Still usable before the expiry.
      const { conversationId } = await startConversation(visitor);
      ackData(await request(agentSocket, 'join_conversation', { conversationId }));
      const expired = nextEvent(agentSocket, 'session_expired', () => true, 5000);
      await Promise.all([expired, disconnected(agentSocket, 5000), disconnected(visitorSocket, 5000)]);
      const expAt = JSON.parse(Buffer.from(fresh.accessToken.split('.')[1], 'base64url').toString()).exp * 1000;
      expect(Date.now()).to.be.at.least(expAt - 50);
      expect(agentSeen).to.deep.equal(['session_expired {}', 'disconnect io server disconnect']);
      expect(visitorSeen).to.deep.equal(['session_expired {}', 'disconnect io server disconnect']);
      expect(await refusal(baseUrl, owner.orgId, fresh.accessToken)).to.equal('unauthorized');
      expect(await refusal(baseUrl, owner.orgId, visitor.token)).to.equal('unauthorized');
    });
  });
});
