// Auth at its edges: tokens signed with the right secret but wrong in one claim, refresh tokens naming foreign sessions,
// widget token lifetime, and callers (widget, garbage bearer, AI service) refused when one part of a credential is off.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { PASSWORD, signUp } from './helpers/factories.js';
import { startTestServer, TEST_AI_SECRET, TEST_SECRETS } from './helpers/server.js';
import { expectApiError, expectApiSuccess, jwtPayload, login, resignToken } from './helpers/auth.js';
import { newVisitor } from './helpers/live.js';
import { withClockAhead } from './helpers/clock.js';

describe('auth: edges', () => {
  describe('refresh and widget tokens signed with their own secret but not quite right', () => {
    const resign = resignToken;

    it('a refresh token for another audience, or without its jti, is refused with 401 and leaves the session alone', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const api = new Api(baseUrl);
      const secret = TEST_SECRETS.JWT_REFRESH_SECRET;
      // The same claims re-signed as they are pass (so each refusal below is about one thing).
      expectApiSuccess(await api.post('/auth/refresh-token', { refreshToken: resign(owner.refreshToken, secret, {}) }), 200);
      const signedIn = await login(api, owner.email, PASSWORD);
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: resign(signedIn.refreshToken, secret, {}, { audience: 'support-platform:operator' }) }), 401, 'unauthorized');
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: resign(signedIn.refreshToken, secret, { jti: undefined }) }), 401, 'unauthorized');
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: resign(signedIn.refreshToken, secret, { jti: 7 }) }), 401, 'unauthorized');
      // An organization id that could never have come from here, as access tokens are refused for.
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: resign(signedIn.refreshToken, secret, { orgId: 'not-a-uuid' }) }), 401, 'unauthorized');
      expectApiSuccess(await api.post('/auth/refresh-token', { refreshToken: signedIn.refreshToken }), 200);
    });

    it('a widget token for another audience, or without its organization or session, is refused with 401', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const visitor = await newVisitor(owner);
      const secret = TEST_SECRETS.WIDGET_JWT_SECRET;
      const validate = (token: string) => visitor.api.post('/widget/auth/validate', undefined, { token });
      expectApiSuccess(await validate(resign(visitor.token, secret, {})), 200);
      expectApiError(await validate(resign(visitor.token, secret, {}, { audience: 'support-platform:operator' })), 401, 'unauthorized');
      expectApiError(await validate(resign(visitor.token, secret, { orgId: undefined })), 401, 'unauthorized');
      expectApiError(await validate(resign(visitor.token, secret, { orgId: 42 })), 401, 'unauthorized');
      expectApiError(await validate(resign(visitor.token, secret, { sessionId: undefined })), 401, 'unauthorized');
      expectApiError(await validate(resign(visitor.token, secret, { sessionId: 42 })), 401, 'unauthorized');
    });
    it('a widget token lives WIDGET_TOKEN_TTL seconds: the answer says when, and after that it is refused', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const before = Math.floor(Date.now() / 1000);
      const visitor = await newVisitor(owner);
      const after = Math.ceil(Date.now() / 1000);
      const ttl = server.config.widgetTokenTtlSeconds;
      const { exp, iat } = jwtPayload(visitor.token);
      expect(exp - iat).to.equal(ttl);
      expect(exp).to.be.within(before + ttl, after + ttl);
      const validate = () => visitor.api.post('/widget/auth/validate', undefined, { token: visitor.token });
      await withClockAhead(ttl - 60, async () => expectApiSuccess(await validate(), 200));
      await withClockAhead(ttl + 5, async () => expectApiError(await validate(), 401, 'unauthorized'));
    });
  });

  describe('sessions', () => {
    it('a refresh token naming a session that does not exist, or one of another user, is refused with 401', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const stranger = await signUp(server, baseUrl);
      const api = new Api(baseUrl);
      const { aud, iss: _iss, iat: _iat, ...claims } = jwtPayload(owner.refreshToken);
      const sign = (change: Record<string, unknown>) => jwt.sign({ ...claims, ...change }, TEST_SECRETS.JWT_REFRESH_SECRET, { algorithm: 'HS256', audience: aud, issuer: 'support-platform' });
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: sign({ sid: randomUUID() }) }), 401, 'unauthorized');
      // Another user's id on the owner's session: no tokens for either of them.
      expectApiError(await api.post('/auth/refresh-token', { refreshToken: sign({ sub: stranger.userId }) }), 401, 'unauthorized');
      expectApiSuccess(await api.post('/auth/refresh-token', { refreshToken: owner.refreshToken }), 200);
    });
  });

  describe('callers resolved from their credentials', () => {
    it('a widget token naming another widget than its visitor session is refused with 401', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const visitor = await newVisitor(owner);
      const { aud, iss: _iss, iat: _iat, ...claims } = jwtPayload(visitor.token);
      const sign = (change: Record<string, unknown>) => jwt.sign({ ...claims, ...change }, TEST_SECRETS.WIDGET_JWT_SECRET, { algorithm: 'HS256', audience: aud, issuer: 'support-platform' });
      expectApiSuccess(await visitor.api.post('/widget/auth/validate', undefined, { token: sign({}) }), 200);
      expectApiError(await visitor.api.post('/widget/auth/validate', undefined, { token: sign({ widgetId: randomUUID() }) }), 401, 'unauthorized');
      expectApiError(await visitor.api.post('/widget/auth/validate', undefined, { token: sign({ sessionId: randomUUID() }) }), 401, 'unauthorized');
    });

    it('a bearer that is no token at all is refused with 401 on operator and visitor routes', async () => {
      const { baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      for (const token of ['garbage', 'a.b.c', 'sp_live_not-a-key']) {
        expectApiError(await api.get('/auth/profile', { token }), 401, 'unauthorized');
        expectApiError(await api.post('/widget/auth/validate', undefined, { token }), 401, 'unauthorized');
      }
    });

    it('the AI service passes with its secret only; a server without one answers 503 whatever is sent', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const closeInactive = (url: string, headers: Record<string, string>) => new Api(url).post('/conversations/ai/close-inactive', { organizationId: owner.orgId, inactiveMinutes: 1 }, { headers });
      expectApiSuccess(await closeInactive(baseUrl, { 'x-ai-tool-secret': TEST_AI_SECRET }), 200);
      expectApiError(await closeInactive(baseUrl, { 'x-ai-tool-secret': 'wrong' }), 401, 'unauthorized');
      expectApiError(await closeInactive(baseUrl, {}), 401, 'unauthorized');
      const bare = await startTestServer({ AI_TOOL_SECRET: '' });
      try {
        expectApiError(await closeInactive(bare.baseUrl, { 'x-ai-tool-secret': TEST_AI_SECRET }), 503, 'service_unavailable');
        expectApiError(await closeInactive(bare.baseUrl, { 'x-ai-tool-secret': 'anything' }), 503, 'service_unavailable');
        expectApiError(await closeInactive(bare.baseUrl, {}), 503, 'service_unavailable');
      } finally {
        await bare.stop();
      }
    });
  });
});
