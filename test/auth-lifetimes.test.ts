// Token and session lifetimes under a moved clock, sign-in without an organization, public routes with a stale
// bearer, long User-Agents, and session revocations announced only after their transaction commits.
import { expect } from 'chai';
import { SessionService } from '../server/auth/sessions.js';
import { TokenService } from '../server/auth/tokens.js';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { addMember, PASSWORD, signUp } from './helpers/factories.js';
import { expectApiError, expectApiSuccess, forgeAccessToken, jwtPayload, login } from './helpers/auth.js';
import { widgetKey } from './helpers/live.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { connectOk, settle } from './helpers/sockets.js';
import { withClockAhead } from './helpers/clock.js';

describe('auth: lifetimes and edges of sessions', () => {
  const track = closeAfterEach();

  describe('token and session lifetimes', () => {
    it('an access token lives ACCESS_TOKEN_TTL, a refresh token and its session REFRESH_TOKEN_TTL, all in seconds', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const { accessTokenTtlSeconds, refreshTokenTtlSeconds } = server.config;
      const before = Math.floor(Date.now() / 1000);
      const signedIn = await login(owner.api, owner.email, PASSWORD);
      const after = Math.ceil(Date.now() / 1000);

      const access = jwtPayload(signedIn.accessToken);
      expect(access.exp - access.iat).to.equal(accessTokenTtlSeconds);
      expect(signedIn.accessTokenExpiresAt).to.equal(access.exp);
      const refresh = jwtPayload(signedIn.refreshToken);
      // The refresh token expires with its session: iat + TTL, in Unix seconds (never milliseconds).
      expect(refresh.exp).to.be.within(before + refreshTokenTtlSeconds, after + refreshTokenTtlSeconds);
      expect(refresh.exp - refresh.iat).to.be.within(refreshTokenTtlSeconds - 1, refreshTokenTtlSeconds);

      const session = await server.db.models.AuthSession.query().findById(access.sid);
      expect(session!.expiresAt.getTime()).to.be.within((before + refreshTokenTtlSeconds) * 1000, (after + refreshTokenTtlSeconds) * 1000);
      expect(Math.floor(session!.expiresAt.getTime() / 1000)).to.equal(refresh.exp);

      // Rotation never extends the session: the next refresh token keeps the first one's expiry.
      const rotated = expectApiSuccess(await owner.api.post('/auth/refresh-token', { refreshToken: signedIn.refreshToken }), 200);
      expect(jwtPayload(rotated.refreshToken).exp).to.equal(refresh.exp);
      expect(jwtPayload(rotated.accessToken).exp - jwtPayload(rotated.accessToken).iat).to.equal(accessTokenTtlSeconds);
    });

    it('with the clock moved: the access token ends after its TTL while the session goes on; the session ends after its own', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const { accessTokenTtlSeconds, refreshTokenTtlSeconds } = server.config;
      const signedIn = await login(owner.api, owner.email, PASSWORD);

      // A minute short of the access TTL: both still work.
      await withClockAhead(accessTokenTtlSeconds - 60, async () => {
        expectApiSuccess(await owner.api.get('/auth/profile', { token: signedIn.accessToken }), 200);
      });
      // Past the access TTL: the access token is refused, the refresh token still gives a new pair that works.
      const renewed = await withClockAhead(accessTokenTtlSeconds + 5, async () => {
        expectApiError(await owner.api.get('/auth/profile', { token: signedIn.accessToken }), 401, 'unauthorized');
        const pair = expectApiSuccess(await owner.api.post('/auth/refresh-token', { refreshToken: signedIn.refreshToken }), 200);
        expectApiSuccess(await owner.api.get('/auth/profile', { token: pair.accessToken }), 200);
        return pair;
      });
      // A day before the session ends it still refreshes; once it has ended, nothing does.
      const late = await withClockAhead(refreshTokenTtlSeconds - 86400, async () => {
        return expectApiSuccess(await owner.api.post('/auth/refresh-token', { refreshToken: renewed.refreshToken }), 200);
      });
      await withClockAhead(refreshTokenTtlSeconds + 5, async () => {
        expectApiError(await owner.api.post('/auth/refresh-token', { refreshToken: late.refreshToken }), 401, 'unauthorized');
        // An access token made to last past its session (the session's end is the server's, not the token's).
        const { sub, email, orgId, sid } = jwtPayload(late.accessToken);
        expectApiError(await owner.api.get('/auth/profile', { token: forgeAccessToken({ sub, email, orgId, sid }) }), 401, 'unauthorized');
      });
    });

    it("a session ended on the server refuses its refresh and access tokens even while the tokens' own exp is ahead", async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const signedIn = await login(owner.api, owner.email, PASSWORD);
      const { sid } = jwtPayload(signedIn.accessToken);
      // The session row ends a second ago (as if its 30 days had passed); the tokens themselves are still in date.
      await server.db.knex('auth_sessions').where({ id: sid }).update({ expires_at: new Date(Date.now() - 1000) });
      expectApiError(await owner.api.post('/auth/refresh-token', { refreshToken: signedIn.refreshToken }), 401, 'unauthorized');
      expectApiError(await owner.api.get('/auth/profile', { token: signedIn.accessToken }), 401, 'unauthorized');
    });
  });

  it('someone removed from their only organization signs in again and works without one (tokens with orgId null)', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    expectApiSuccess(await owner.api.delete(`/memberships/organizations/${owner.orgId}/members/${agent.membershipId}`, { token: owner.accessToken }), 200);

    const signedIn = await login(agent.api, agent.email, PASSWORD);
    expect(signedIn.organization ?? null).to.equal(null);
    expect(jwtPayload(signedIn.accessToken).orgId).to.equal(null);
    expect(jwtPayload(signedIn.refreshToken).orgId).to.equal(null);
    const profile = expectApiSuccess(await agent.api.get('/auth/profile', { token: signedIn.accessToken }), 200);
    expect(profile.user.email).to.equal(agent.email);
    const rotated = expectApiSuccess(await agent.api.post('/auth/refresh-token', { refreshToken: signedIn.refreshToken }), 200);
    expectApiSuccess(await agent.api.get('/auth/profile', { token: rotated.accessToken }), 200);
    // Creating an organization of their own works from there.
    expectApiSuccess(await agent.api.post('/organizations', { name: 'A fresh start' }, { token: rotated.accessToken }), 201);
  });

  it('public routes ignore a stale or garbage bearer: sign-in and the widget configuration still answer', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const publicKey = await widgetKey(owner);
    const { sub, email, orgId, sid } = jwtPayload(owner.accessToken);
    const expired = forgeAccessToken({ sub, email, orgId, sid }, { expiresInSeconds: -60 });
    for (const token of ['garbage', expired]) {
      const api = new Api(baseUrl);
      expectApiSuccess(await api.post('/auth/login', { email: owner.email, password: PASSWORD }, { token }), 200);
      expectApiSuccess(await api.get(`/widget/config?publicKey=${encodeURIComponent(publicKey)}`, { token }), 200);
      expectApiSuccess(await api.get('/health', { token }), 200);
    }
  });

  it('signs in with a 2,000-character User-Agent (stored cut to 512)', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const userAgent = `Mozilla/5.0 ${'x'.repeat(2000)}`;
    const res = await owner.api.post('/auth/login', { email: owner.email, password: PASSWORD }, { headers: { 'user-agent': userAgent } });
    const signedIn = expectApiSuccess(res, 200);
    const session = await server.db.models.AuthSession.query().findById(jwtPayload(signedIn.accessToken).sid);
    expect(session!.userAgent).to.equal(userAgent.slice(0, 512));
    expectApiSuccess(await owner.api.get('/auth/profile', { token: signedIn.accessToken }), 200);
  });

  it('signs in without a User-Agent (stored as null)', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const signedIn = expectApiSuccess(await owner.api.post('/auth/login', { email: owner.email, password: PASSWORD }, { headers: { 'user-agent': '' } }), 200);
    const session = await server.db.models.AuthSession.query().findById(jwtPayload(signedIn.accessToken).sid);
    expect(session!.userAgent).to.equal(null);
  });

  describe('revoking sessions inside a transaction', () => {
    const sessionsOf = () => {
      const { server } = sharedServer();
      return new SessionService(server.db.models, new TokenService(server.config), server.events, server.config.refreshTokenTtlSeconds);
    };

    it('announces nothing when its transaction fails: the session and its sockets stay', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const socket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
      const heard: unknown[] = [];
      const off = server.events.on('session.revoked', (p) => heard.push(p));
      try {
        const { sid } = jwtPayload(owner.accessToken);
        // A later step of the same transaction fails, so the revocation is rolled back with it.
        const failed = await server.db.knex
          .transaction(async (trx) => {
            await sessionsOf().revoke([sid], owner.userId, 'test', trx);
            await settle(50);
            expect(heard, 'nothing announced inside the transaction').to.deep.equal([]);
            throw new Error('a later step failed');
          })
          .then(() => null, (err: Error) => err);
        expect(failed?.message).to.equal('a later step failed');
        await settle(200);
        expect(heard).to.deep.equal([]);
        expect(socket.connected).to.equal(true);
        expectApiSuccess(await owner.api.get('/auth/profile', { token: owner.accessToken }), 200);
      } finally {
        off();
      }
    });

    it('without a transaction, announces at once', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const heard: Array<{ userId: string; sessionIds: string[] }> = [];
      const off = server.events.on('session.revoked', (p) => heard.push(p));
      try {
        const { sid } = jwtPayload(owner.accessToken);
        await sessionsOf().revoke([sid], owner.userId, 'test');
        expect(heard).to.deep.equal([{ userId: owner.userId, sessionIds: [sid] }]);
      } finally {
        off();
      }
    });

    it('announces after commit, not before: then the sockets of that session are disconnected', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const socket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
      const heard: Array<{ userId: string; sessionIds: string[] }> = [];
      const off = server.events.on('session.revoked', (p) => heard.push(p));
      try {
        const { sid } = jwtPayload(owner.accessToken);
        const trx = await server.db.knex.transaction();
        await sessionsOf().revoke([sid], owner.userId, 'test', trx);
        await settle(100);
        expect(heard, 'nothing announced before commit').to.deep.equal([]);
        expect(socket.connected).to.equal(true);
        await trx.commit();
        await settle(300);
        expect(heard).to.deep.equal([{ userId: owner.userId, sessionIds: [sid] }]);
        expect(socket.connected).to.equal(false);
        expectApiError(await owner.api.get('/auth/profile', { token: owner.accessToken }), 401, 'unauthorized');
      } finally {
        off();
      }
    });
  });
});
