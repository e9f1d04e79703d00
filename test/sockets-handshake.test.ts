// Socket.IO handshake: who may open a tenant namespace, and the exact refusal (connect_error unauthorized / forbidden).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { forgeAccessToken, jwtPayload } from './helpers/auth.js';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor } from './helpers/live.js';
import { startTestServer, TEST_SECRETS, type TestServer } from './helpers/server.js';
import { closeAfterEach, expectAckError } from './helpers/socket-acks.js';
import { collect, connect, connected, connectOk, disconnected, refusal, request, settle } from './helpers/sockets.js';

/** The claims of a real access token, to forge variants of it. */
function claimsOf(owner: SignedUp) {
  const p = jwtPayload(owner.accessToken);
  return { sub: p.sub, email: p.email, orgId: p.orgId, sid: p.sid };
}

describe('socket handshake', () => {
  const track = closeAfterEach();

  describe('unauthorized', () => {
    it('refuses a missing, empty, non-string or garbage token', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      expect(await refusal(baseUrl, owner.orgId, undefined)).to.equal('unauthorized');
      expect(await refusal(baseUrl, owner.orgId, '')).to.equal('unauthorized');
      expect(await refusal(baseUrl, owner.orgId, 'not-a-jwt')).to.equal('unauthorized');
      expect(await refusal(baseUrl, owner.orgId, 'a.b.c')).to.equal('unauthorized');
      expect(await refusal(baseUrl, owner.orgId, 12345 as unknown as string)).to.equal('unauthorized');
      // A JWT without any typ is no token of ours.
      expect(await refusal(baseUrl, owner.orgId, jwt.sign({ sub: owner.userId, orgId: owner.orgId }, TEST_SECRETS.JWT_ACCESS_SECRET))).to.equal('unauthorized');
    });

    it('refuses an expired token and one signed with the wrong secret, while the same claims signed right connect', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const claims = claimsOf(owner);
      // The control: the forging helper makes tokens this server accepts.
      track(await connectOk(baseUrl, owner.orgId, forgeAccessToken(claims)));
      expect(await refusal(baseUrl, owner.orgId, forgeAccessToken(claims, { expiresInSeconds: -30 }))).to.equal('unauthorized');
      expect(await refusal(baseUrl, owner.orgId, forgeAccessToken(claims, { secret: 'another-secret-0123456789abcdef0123456789ab' }))).to.equal('unauthorized');
      expect(await refusal(baseUrl, owner.orgId, forgeAccessToken(claims, { audience: 'support-platform:widget' }))).to.equal('unauthorized');
      // An access token signed with the widget secret and widget audience is still not a widget token.
      expect(await refusal(baseUrl, owner.orgId, forgeAccessToken(claims, { secret: TEST_SECRETS.WIDGET_JWT_SECRET, audience: 'support-platform:widget' }))).to.equal('unauthorized');
      // A session id that does not exist.
      expect(await refusal(baseUrl, owner.orgId, forgeAccessToken({ ...claims, sid: randomUUID() }))).to.equal('unauthorized');
    });

    it('refuses a refresh token presented as the socket token', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      expect(jwtPayload(owner.refreshToken).typ).to.equal('refresh');
      expect(await refusal(baseUrl, owner.orgId, owner.refreshToken)).to.equal('unauthorized');
    });

    it('refuses the access token of a session that logged out', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      track(await connectOk(baseUrl, owner.orgId, owner.accessToken)).close();
      const res = await owner.api.post('/auth/logout', {}, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(await refusal(baseUrl, owner.orgId, owner.accessToken)).to.equal('unauthorized');
    });

    it('refuses a forged or expired widget token', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const visitor = await newVisitor(owner);
      const claims = jwtPayload(visitor.token);
      const forge = (secret: string, exp: number) =>
        jwt.sign({ typ: 'widget_session', orgId: claims.orgId, widgetId: claims.widgetId, sessionId: claims.sessionId, exp }, secret, { algorithm: 'HS256', audience: claims.aud, issuer: claims.iss });
      const now = Math.floor(Date.now() / 1000);
      track(await connectOk(baseUrl, owner.orgId, forge(TEST_SECRETS.WIDGET_JWT_SECRET, now + 60)));
      expect(await refusal(baseUrl, owner.orgId, forge(TEST_SECRETS.WIDGET_JWT_SECRET, now - 30))).to.equal('unauthorized');
      expect(await refusal(baseUrl, owner.orgId, forge(TEST_SECRETS.JWT_ACCESS_SECRET, now + 60))).to.equal('unauthorized');
    });
  });

  describe('forbidden', () => {
    it("refuses an operator token of organization A on B's namespace", async () => {
      const { server, baseUrl } = sharedServer();
      const a = await signUp(server, baseUrl);
      const b = await signUp(server, baseUrl);
      expect(await refusal(baseUrl, b.orgId, a.accessToken)).to.equal('forbidden');
      track(await connectOk(baseUrl, a.orgId, a.accessToken));
    });

    it('refuses a suspended member, and lets them in again once reactivated', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const agent = await addMember(server, owner, 'agent');
      track(await connectOk(baseUrl, owner.orgId, agent.accessToken)).close();
      const path = `/memberships/organizations/${owner.orgId}/members/${agent.membershipId}/status`;
      expect((await owner.api.patch(path, { status: 'suspended' }, { token: owner.accessToken })).status).to.equal(200);
      expect(await refusal(baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
      expect((await owner.api.patch(path, { status: 'active' }, { token: owner.accessToken })).status).to.equal(200);
      track(await connectOk(baseUrl, owner.orgId, agent.accessToken));
    });

    it('refuses a removed member', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const agent = await addMember(server, owner, 'agent');
      const res = await owner.api.delete(`/memberships/organizations/${owner.orgId}/members/${agent.membershipId}`, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(await refusal(baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
    });

    it("refuses a visitor token of organization A on B's namespace", async () => {
      const { server, baseUrl } = sharedServer();
      const a = await signUp(server, baseUrl);
      const b = await signUp(server, baseUrl);
      const visitor = await newVisitor(a);
      expect(visitor.orgId).to.equal(a.orgId);
      expect(await refusal(baseUrl, b.orgId, visitor.token)).to.equal('forbidden');
      track(await connectOk(baseUrl, a.orgId, visitor.token));
    });
  });

  describe('namespaces', () => {
    it('refuses a namespace for an organization that does not exist, or that is not an organization id', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const missing = await refusal(baseUrl, randomUUID(), owner.accessToken);
      expect(missing).to.not.equal('the handshake was accepted');
      expect(missing).to.equal('Invalid namespace');
      expect(await refusal(baseUrl, 'not-an-id', owner.accessToken)).to.equal('Invalid namespace');
      expect(await refusal(baseUrl, `${owner.orgId}/extra`, owner.accessToken)).to.equal('Invalid namespace');
    });

    it("disconnects everyone from a deleted organization's namespace and refuses it from then on", async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const visitor = await newVisitor(owner);
      const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
      const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      const gone = [disconnected(agentSocket), disconnected(visitorSocket)];
      const res = await owner.api.delete(`/organizations/${owner.orgId}`, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(await Promise.all(gone)).to.deep.equal(['io server disconnect', 'io server disconnect']);
      expect(await refusal(baseUrl, owner.orgId, visitor.token)).to.equal('Invalid namespace');
    });
  });

  describe('on a server with CORS_ORIGINS and 30-day tokens', () => {
    let dedicated: TestServer;

    before(async function () {
      this.timeout(60_000);
      dedicated = await startTestServer({ CORS_ORIGINS: 'https://app.example.test', WIDGET_TOKEN_TTL: '30d', ACCESS_TOKEN_TTL: '40d' });
    });

    after(async () => {
      await dedicated?.stop();
    });

    it('lets operators in only from CORS_ORIGINS (or without an Origin, as non-browser clients do)', async () => {
      const { server, baseUrl } = dedicated;
      const owner = await signUp(server, baseUrl);
      expect(await refusal(baseUrl, owner.orgId, owner.accessToken, { origin: 'https://evil.example.test' })).to.equal('forbidden');
      expect(await refusal(baseUrl, owner.orgId, owner.accessToken, { origin: 'https://app.example.test.evil.test' })).to.equal('forbidden');
      track(await connectOk(baseUrl, owner.orgId, owner.accessToken, { origin: 'https://app.example.test' }));
      track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    });

    it("checks visitors against the widget's allowedOrigins, not CORS_ORIGINS", async () => {
      const { server, baseUrl } = dedicated;
      const owner = await signUp(server, baseUrl);
      const visitor = await newVisitor(owner);
      // No allowedOrigins: a visitor from any website may connect, even one that is not an operator origin.
      track(await connectOk(baseUrl, owner.orgId, visitor.token, { origin: 'https://shop.example.test' }));
    });

    it('keeps sockets whose tokens live longer than one timer can wait (about 24.8 days)', async () => {
      const { server, baseUrl } = dedicated;
      const owner = await signUp(server, baseUrl);
      const visitor = await newVisitor(owner);
      const sockets = [track(connect(baseUrl, owner.orgId, visitor.token)), track(connect(baseUrl, owner.orgId, owner.accessToken))];
      const expired = sockets.map((s) => collect(s, 'session_expired'));
      await Promise.all(sockets.map((s) => connected(s)));
      await settle(300);
      expect(expired.flat()).to.deep.equal([]);
      for (const socket of sockets) {
        expect(socket.connected).to.equal(true);
        expectAckError(await request(socket, 'sync', { conversationId: randomUUID(), afterSeq: 0 }), 'not_found');
      }
    });
  });

  describe("on a server whose CORS_ORIGINS holds '*'", () => {
    let open: TestServer;
    before(async function () {
      this.timeout(60_000);
      open = await startTestServer({ CORS_ORIGINS: 'https://app.example.test,*' });
    });
    after(async () => {
      await open?.stop();
    });

    it('lets operators in from any origin', async () => {
      const owner = await signUp(open.server, open.baseUrl);
      track(await connectOk(open.baseUrl, owner.orgId, owner.accessToken, { origin: 'https://anywhere.example.test' }));
    });
  });

  it("refuses a visitor socket from an origin the widget's allowedOrigins does not list", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    // A token issued before the widget was restricted is checked at the handshake too.
    const early = await newVisitor(owner);
    const put = await owner.api.put('/widget/manage', { allowedOrigins: ['https://shop.example.test'] }, { token: owner.accessToken });
    expect(put.status, JSON.stringify(put.body)).to.equal(200);
    expect(await refusal(baseUrl, owner.orgId, early.token, { origin: 'https://evil.example.test' })).to.equal('forbidden');
    expect(await refusal(baseUrl, owner.orgId, early.token)).to.equal('forbidden');

    const visitor = await newVisitor(owner, { origin: 'https://shop.example.test' });
    expect(await refusal(baseUrl, owner.orgId, visitor.token, { origin: 'https://evil.example.test' })).to.equal('forbidden');
    expect(await refusal(baseUrl, owner.orgId, visitor.token, { origin: 'https://shop.example.test.evil.test' })).to.equal('forbidden');
    track(await connectOk(baseUrl, owner.orgId, visitor.token, { origin: 'https://shop.example.test' }));
    // Operators are not bound by the widget's list.
    track(await connectOk(baseUrl, owner.orgId, owner.accessToken, { origin: 'https://evil.example.test' }));
  });
});
