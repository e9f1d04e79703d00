// Route registry rules that a mutation run showed no test held: each test here fails when its rule is changed.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, PASSWORD } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectApiError, expectApiSuccess } from './helpers/auth.js';
import { Api } from './helpers/http.js';

describe('route registry: rules held against mutation', () => {
  it('an anonymous caller learns 413 at once for a body over 1 MiB, and 401 before its malformed JSON', async () => {
    const api = new Api(sharedServer().baseUrl);
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 16) });
    expectApiError(await api.request('POST', '/contacts', { rawBody: big, headers: { 'content-type': 'application/json' } }), 413, 'payload_too_large');
    expectApiError(await api.request('POST', '/contacts', { rawBody: '{"name":', headers: { 'content-type': 'application/json' } }), 401, 'unauthorized');
    expectApiError(await api.request('POST', '/contacts', { rawBody: '[1, 2]', headers: { 'content-type': 'application/json' } }), 401, 'unauthorized');
  });

  it('keeps the User-Agent a session was opened with', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const userAgent = `RegistryTest/1.0 (${owner.email})`;
    const login = await owner.api.post('/auth/login', { email: owner.email, password: PASSWORD }, { headers: { 'user-agent': userAgent } });
    expectApiSuccess(login, 200);
    // The knex of the app maps column names to camelCase.
    const rows: { userAgent: string | null }[] = await server.db.knex('auth_sessions').where('user_id', owner.userId).select('user_agent');
    expect(rows.map((r) => r.userAgent)).to.include(userAgent);
  });

  it('refuses an unknown `token` query parameter by name, in the query, unless ALLOW_QUERY_TOKEN reads tokens from it', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const refused = await owner.api.get(`/conversations?token=${owner.accessToken}`, { token: owner.accessToken });
    expectApiError(refused, 400, 'validation_failed');
    expect(refused.body.error.details).to.deep.include({ field: 'token', in: 'query', message: 'is not an allowed field' });

    let withQueryTokens: TestServer | null = null;
    try {
      withQueryTokens = await startTestServer({ ALLOW_QUERY_TOKEN: 'true', JOB_QUEUES: '' });
      // Its own owner: on the embedded database each server has a database of its own.
      const other = await signUp(withQueryTokens.server, withQueryTokens.baseUrl);
      const api = new Api(withQueryTokens.baseUrl);
      // The token authenticates the request and is not taken for one of the route's query parameters.
      const listed = await api.get(`/conversations?token=${other.accessToken}&limit=5`);
      expectApiSuccess(listed, 200);
      expect(listed.body.data).to.be.an('array');
    } finally {
      await withQueryTokens?.stop();
    }
  });

  it('answers 405 to a method the path lacks even when the request carries Access-Control-Request-Method', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const res = await owner.api.request('PUT', '/contacts', { token: owner.accessToken, headers: { 'access-control-request-method': 'PUT' } });
    expectApiError(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow')).to.include('GET');
  });
});
