// /auth tokens and sessions: refresh rotation and reuse, logout, profile, and forged or misplaced access tokens.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { PASSWORD, signUp } from './helpers/factories.js';
import { TEST_SECRETS } from './helpers/server.js';
import { expectApiError, expectApiSuccess, forgeAccessToken, jwtPayload, login } from './helpers/auth.js';

describe('auth: tokens and sessions', () => {
  describe('POST /auth/refresh-token', () => {
    it('rotates: new tokens work, the old refresh token is retired', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const api = new Api(baseUrl);
      const first = expectApiSuccess(await api.post('/auth/refresh-token', { refreshToken: owner.refreshToken }), 200);
      expect(first).to.have.all.keys('accessToken', 'refreshToken', 'accessTokenExpiresAt');
      expect(first.refreshToken).to.not.equal(owner.refreshToken);
      expect(first.accessTokenExpiresAt).to.be.a('number').above(Date.now() / 1000);
      const claims = jwtPayload(first.accessToken);
      expect(claims).to.include({ sub: owner.userId, orgId: owner.orgId, typ: 'access', sid: jwtPayload(owner.accessToken).sid });
      expectApiSuccess(await api.get('/auth/profile', { token: first.accessToken }), 200);
      const second = expectApiSuccess(await api.post('/auth/refresh-token', { refreshToken: first.refreshToken }), 200);
      expect(second.refreshToken).to.not.equal(first.refreshToken);
      expectApiSuccess(await api.get('/auth/profile', { token: second.accessToken }), 200);
    });

    it('revokes the whole session when a retired refresh token is presented again', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const other = await login(new Api(baseUrl), owner.email, PASSWORD);
      const api = new Api(baseUrl);
      const rotated = expectApiSuccess(await api.post('/auth/refresh-token', { refreshToken: owner.refreshToken }), 200);
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: owner.refreshToken }), 401, 'unauthorized');
      // The thief and the owner are both out: the newest refresh token and every access token of the session.
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: rotated.refreshToken }), 401, 'unauthorized');
      expectApiError(await api.get('/auth/profile', { token: rotated.accessToken }), 401, 'unauthorized');
      expectApiError(await api.get('/auth/profile', { token: owner.accessToken }), 401, 'unauthorized');
      // Another session of the same user is not affected.
      expectApiSuccess(await api.get('/auth/profile', { token: other.accessToken }), 200);
      expectApiSuccess(await api.post('/auth/refresh-token', { refreshToken: other.refreshToken }), 200);
    });

    it('lets only one of two concurrent uses of a refresh token win', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const api = new Api(baseUrl);
      const answers = await Promise.all([1, 2].map(() => api.post('/auth/refresh-token', { refreshToken: owner.refreshToken })));
      expect(answers.filter((r) => r.status === 200), JSON.stringify(answers.map((r) => r.body))).to.have.length(1);
      const loser = answers.find((r) => r.status !== 200)!;
      expectApiError(loser, 401, 'unauthorized');
      // The loser presented a retired token, so the session is gone for the winner too.
      const winner = answers.find((r) => r.status === 200)!.body.data;
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: winner.refreshToken }), 401, 'unauthorized');
    });

    it('refuses an access token, a forged and a malformed refresh token with 401, and a missing one with 400', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const api = new Api(baseUrl);
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: owner.accessToken }), 401, 'unauthorized');
      const claims = jwtPayload(owner.refreshToken);
      const forged = jwt.sign({ ...claims }, 'some-other-secret-0123456789abcdef0123456789', { algorithm: 'HS256' });
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: forged }), 401, 'unauthorized');
      // Signed with the access secret but claiming to be a refresh token: still not one.
      const crossSigned = jwt.sign({ ...claims }, TEST_SECRETS.JWT_ACCESS_SECRET, { algorithm: 'HS256' });
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: crossSigned }), 401, 'unauthorized');
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: 'not-a-jwt' }), 401, 'unauthorized');
      const { iat: _iat, ...rest } = claims;
      const strangeSid = jwt.sign({ ...rest, sid: 'not-a-uuid' }, TEST_SECRETS.JWT_REFRESH_SECRET, { algorithm: 'HS256' });
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: strangeSid }), 401, 'unauthorized');
      expectApiError(await api.post('/auth/refresh-token', {}), 400, 'validation_failed');
      // None of these touched the real session.
      expectApiSuccess(await api.post('/auth/refresh-token', { refreshToken: owner.refreshToken }), 200);
    });
  });

  describe('POST /auth/logout', () => {
    it('ends the session: its access and refresh tokens answer 401, other sessions keep working', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const other = await login(owner.api, owner.email, PASSWORD);
      expectApiSuccess(await owner.api.post('/auth/logout', {}, { token: owner.accessToken }), 200);
      expectApiError(await owner.api.get('/auth/profile', { token: owner.accessToken }), 401, 'unauthorized');
      expectApiError(await owner.api.post('/auth/refresh-token', { refreshToken: owner.refreshToken }), 401, 'unauthorized');
      expectApiError(await owner.api.post('/auth/logout', {}, { token: owner.accessToken }), 401, 'unauthorized');
      expectApiSuccess(await owner.api.get('/auth/profile', { token: other.accessToken }), 200);
    });

    it('also ends the caller\'s session named by refreshToken, and ignores another user\'s', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const stranger = await signUp(server, baseUrl);
      const second = await login(owner.api, owner.email, PASSWORD);
      const res = await owner.api.post('/auth/logout', { refreshToken: second.refreshToken }, { token: owner.accessToken });
      expectApiSuccess(res, 200);
      expectApiError(await owner.api.get('/auth/profile', { token: second.accessToken }), 401, 'unauthorized');
      const third = await login(owner.api, owner.email, PASSWORD);
      expectApiSuccess(await owner.api.post('/auth/logout', { refreshToken: stranger.refreshToken }, { token: third.accessToken }), 200);
      expectApiSuccess(await stranger.api.get('/auth/profile', { token: stranger.accessToken }), 200);
      expectApiSuccess(await stranger.api.post('/auth/refresh-token', { refreshToken: stranger.refreshToken }), 200);
    });

    it('needs a bearer token', async () => {
      const { baseUrl } = sharedServer();
      expectApiError(await new Api(baseUrl).post('/auth/logout', {}), 401, 'unauthorized');
    });
  });

  describe('GET and PATCH /auth/profile', () => {
    it('returns the user, the active organization and role, and the organization list', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl, { name: 'Pat Profile', organizationName: 'Profile Org' });
      const data = expectApiSuccess(await owner.api.get('/auth/profile', { token: owner.accessToken }), 200);
      expect(data).to.have.all.keys('user', 'organization', 'role', 'organizations');
      expect(data.user).to.include({ id: owner.userId, email: owner.email, name: 'Pat Profile', emailVerified: true });
      expect(data.user).to.not.have.any.keys('passwordHash', 'password', 'password_hash');
      expect(data.organization).to.include({ id: owner.orgId, name: 'Profile Org' });
      expect(data.role).to.equal('owner');
      expect(data.organizations).to.have.length(1);
      expect(data.organizations[0]).to.include({ id: owner.orgId, role: 'owner' });
    });

    it('changes the name and avatar, and clears the avatar with null', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const updated = expectApiSuccess(await owner.api.patch('/auth/profile', { name: '  Renamed Person ', avatarUrl: 'https://cdn.example.test/a.png' }, { token: owner.accessToken }), 200);
      expect(updated).to.have.all.keys('user');
      expect(updated.user).to.include({ id: owner.userId, name: 'Renamed Person', avatarUrl: 'https://cdn.example.test/a.png', email: owner.email });
      const read = expectApiSuccess(await owner.api.get('/auth/profile', { token: owner.accessToken }), 200);
      expect(read.user).to.include({ name: 'Renamed Person', avatarUrl: 'https://cdn.example.test/a.png' });
      const cleared = expectApiSuccess(await owner.api.patch('/auth/profile', { avatarUrl: null }, { token: owner.accessToken }), 200);
      expect(cleared.user).to.include({ name: 'Renamed Person', avatarUrl: null });
    });

    it('rejects unknown fields (email, id), an empty body, a blank name and a bad URL with 400; needs a token', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const auth = { token: owner.accessToken };
      const email = await owner.api.patch('/auth/profile', { email: 'taken-over@example.test' }, auth);
      expectApiError(email, 400, 'validation_failed');
      expect(email.body.error.details.map((d: any) => d.field)).to.include('email');
      expectApiError(await owner.api.patch('/auth/profile', { name: 'Ok', id: randomUUID() }, auth), 400, 'validation_failed');
      expectApiError(await owner.api.patch('/auth/profile', {}, auth), 400, 'validation_failed');
      expectApiError(await owner.api.patch('/auth/profile', { name: '   ' }, auth), 400, 'validation_failed');
      expectApiError(await owner.api.patch('/auth/profile', { avatarUrl: 'not a url' }, auth), 400, 'validation_failed');
      expectApiError(await owner.api.patch('/auth/profile', { name: 'Anonymous' }), 401, 'unauthorized');
      const read = expectApiSuccess(await owner.api.get('/auth/profile', auth), 200);
      expect(read.user.email).to.equal(owner.email);
      expect(read.user.name).to.equal('Olivia Owner');
    });
  });

  describe('forged and misplaced access tokens on GET /auth/profile', () => {
    let owner: Awaited<ReturnType<typeof signUp>>;
    let claims: Record<string, any>;

    before(async () => {
      const { server, baseUrl } = sharedServer();
      owner = await signUp(server, baseUrl);
      const { sub, email, orgId, sid } = jwtPayload(owner.accessToken);
      claims = { sub, email, orgId, sid };
    });

    const rejects = async (token: string) => expectApiError(await owner.api.get('/auth/profile', { token }), 401, 'unauthorized');

    it('accepts a token forged with the right secret and claims (so the rejections below are about one thing each)', async () => {
      expectApiSuccess(await owner.api.get('/auth/profile', { token: forgeAccessToken(claims) }), 200);
    });

    it('rejects a token signed with another secret', async () => {
      await rejects(forgeAccessToken(claims, { secret: 'wrong-secret-0123456789abcdef0123456789abcdef' }));
      await rejects(forgeAccessToken(claims, { secret: TEST_SECRETS.JWT_REFRESH_SECRET }));
    });

    it('rejects a token of another kind: a refresh token, typ refresh or widget_session, another audience or issuer', async () => {
      await rejects(owner.refreshToken);
      await rejects(forgeAccessToken({ ...claims, typ: 'refresh' }));
      await rejects(forgeAccessToken({ ...claims, typ: 'widget_session' }));
      await rejects(forgeAccessToken(claims, { audience: 'support-platform:refresh' }));
      await rejects(forgeAccessToken(claims, { audience: 'support-platform:widget' }));
      await rejects(forgeAccessToken(claims, { issuer: 'someone-else' }));
    });

    it('rejects alg none and a token signed with another HMAC algorithm', async () => {
      const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
      const payload = jwtPayload(forgeAccessToken(claims));
      await rejects(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(payload)}.`);
      await rejects(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(payload)}`);
      await rejects(jwt.sign(payload, TEST_SECRETS.JWT_ACCESS_SECRET, { algorithm: 'HS512' }));
    });

    it('rejects an expired token', async () => {
      await rejects(forgeAccessToken(claims, { expiresInSeconds: -60 }));
    });

    it('rejects a correctly signed token for a session that does not exist or belongs to someone else', async () => {
      await rejects(forgeAccessToken({ ...claims, sid: randomUUID() }));
      await rejects(forgeAccessToken({ ...claims, sub: randomUUID() }));
      // Ids that could never have come from this server are turned away before they reach the database.
      await rejects(forgeAccessToken({ ...claims, sid: 'not-a-uuid' }));
      await rejects(forgeAccessToken({ ...claims, sub: 'not-a-uuid' }));
      await rejects(forgeAccessToken({ ...claims, orgId: 'not-a-uuid' }));
      await rejects(forgeAccessToken({ ...claims, sid: 42 }));
    });

    it('does not accept a token in the URL query, or in a non-Bearer Authorization header', async () => {
      const query = await owner.api.get(`/auth/profile?token=${encodeURIComponent(owner.accessToken)}`);
      expectApiError(query, 401, 'unauthorized');
      const basic = await owner.api.get('/auth/profile', { headers: { authorization: `Basic ${owner.accessToken}` } });
      expectApiError(basic, 401, 'unauthorized');
      const bare = await owner.api.get('/auth/profile', { headers: { authorization: owner.accessToken } });
      expectApiError(bare, 401, 'unauthorized');
      expectApiError(await owner.api.get('/auth/profile'), 401, 'unauthorized');
    });
  });
});
