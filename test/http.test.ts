// The HTTP core: request ids, error envelopes, security headers, CORS, body handling and health checks.
import { gzipSync } from 'node:zlib';
import http from 'node:http';
import net from 'node:net';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp } from './helpers/factories.js';
import { Api, type ApiResponse } from './helpers/http.js';
import { captureLogs } from './helpers/logs.js';
import { startTestServer, type TestServer } from './helpers/server.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Things that must never reach a client outside development: stack frames, SQL, driver and pool internals. */
const LEAKS = [/\bat .+:\d+:\d+/, /node_modules/, /\.ts\b/, /\bstack\b/i, /\bselect\b.+\bfrom\b/i, /\binsert into\b/i, /\bupdate \w+ set\b/i, /knex/i, /pglite/i, /\bpool\b/i, /acquire a connection/i, /SyntaxError/, /Unexpected token/i];

function expectNoLeaks(res: ApiResponse) {
  const text = typeof res.body === 'string' ? res.body : JSON.stringify(res.body);
  for (const leak of LEAKS) expect(text, `error body must not match ${leak}`).not.to.match(leak);
}

/** The contract's error body, with the request id of the X-Request-Id header and nothing internal. */
function expectError(res: ApiResponse, status: number, code: string) {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(res.headers.get('content-type')).to.match(/^application\/json/);
  expect(res.body).to.be.an('object');
  expect(Object.keys(res.body).sort()).to.deep.equal(['error', 'message', 'requestId', 'success']);
  expect(res.body.success).to.equal(false);
  expect(res.body.message).to.be.a('string').and.not.equal('');
  expect(Object.keys(res.body.error).sort()).to.deep.equal(['code', 'details']);
  expect(res.body.error.code).to.equal(code);
  expect(res.body.error.details).to.be.an('array');
  expect(res.body.requestId).to.be.a('string').and.equal(res.headers.get('x-request-id'));
  expectNoLeaks(res);
}

describe('HTTP core', () => {
  let api: Api;
  before(() => {
    api = new Api(sharedServer().baseUrl);
  });

  describe('request id', () => {
    it('echoes a well-formed inbound X-Request-Id', async () => {
      for (const id of ['req-123', 'a1B2.c3:d4_e5-f6', 'x'.repeat(128)]) {
        const res = await api.get('/health', { headers: { 'x-request-id': id } });
        expect(res.status).to.equal(200);
        expect(res.headers.get('x-request-id')).to.equal(id);
      }
    });

    it('generates a new id when none or a malformed one is sent', async () => {
      const none = await api.get('/health');
      expect(none.headers.get('x-request-id')).to.match(UUID);
      const other = await api.get('/health');
      expect(other.headers.get('x-request-id')).to.match(UUID).and.not.equal(none.headers.get('x-request-id'));

      for (const bad of ['has spaces in it', 'x'.repeat(129), '<script>', 'semi;colon', 'a/b', '"quoted"']) {
        const res = await api.get('/health', { headers: { 'x-request-id': bad } });
        expect(res.headers.get('x-request-id'), `for ${JSON.stringify(bad)}`).to.match(UUID);
      }
    });

    it('puts the same id in the header and the error body, echoed or generated', async () => {
      const echoed = await api.get('/no-such-route', { headers: { 'x-request-id': 'trace-abc-42' } });
      expectError(echoed, 404, 'not_found');
      expect(echoed.body.requestId).to.equal('trace-abc-42');

      const generated = await api.get('/no-such-route');
      expectError(generated, 404, 'not_found');
      expect(generated.body.requestId).to.match(UUID);
    });
  });

  describe('unknown routes', () => {
    it('answers 404 not_found in the error envelope, under the API prefix and outside it', async () => {
      expectError(await api.get('/nothing/here'), 404, 'not_found');
      expectError(await api.post('/nothing/here', { a: 1 }), 404, 'not_found');
      // A path the API has, with a method it lacks, is 405 (test/api-consistency.test.ts), not 404.
      expectError(await api.delete('/auth/login'), 405, 'method_not_allowed');
      const outside = await fetch(`${api.baseUrl}/definitely-not-the-api`);
      const body = await outside.json();
      expectError({ status: outside.status, body, headers: outside.headers }, 404, 'not_found');
    });
  });

  describe('security headers', () => {
    it('sets them on successes and on errors', async () => {
      for (const res of [await api.get('/health'), await api.get('/nothing/here'), await api.post('/auth/refresh-token', { refreshToken: 'x', nope: 1 })]) {
        const h = res.headers;
        expect(h.get('x-content-type-options')).to.equal('nosniff');
        expect(h.get('x-frame-options')).to.equal('SAMEORIGIN');
        expect(h.get('referrer-policy')).to.equal('no-referrer');
        expect(h.get('strict-transport-security')).to.match(/max-age=\d+/);
        expect(h.get('content-security-policy')).to.equal("default-src 'none';frame-ancestors 'none'");
        expect(h.get('cross-origin-resource-policy')).to.equal('same-site');
        expect(h.get('x-powered-by')).to.equal(null);
      }
    });
  });

  it('logs one access line per request: id, method, route template (or path when no route), status and milliseconds', async function () {
    this.timeout(60_000);
    const logs = captureLogs('info');
    const logged = await startTestServer({}, { logger: logs.logger });
    try {
      const ok = await fetch(`${logged.baseUrl}/api/v1/health`, { headers: { 'x-request-id': 'access-line-1' } });
      const missing = await fetch(`${logged.baseUrl}/api/v1/no-such-route`);
      const lines = logs.matching(30, 'request').filter((l) => l.msg === 'request');
      expect(lines).to.have.length(2);
      expect(lines[0]).to.include({ requestId: 'access-line-1', method: 'GET', route: '/api/v1/health', status: ok.status });
      expect(lines[0]!.ms).to.be.a('number');
      expect(lines[1]).to.include({ requestId: missing.headers.get('x-request-id'), method: 'GET', route: null, path: '/api/v1/no-such-route', status: 404 });
    } finally {
      await logged.stop();
    }
  });

  describe('CORS', () => {
    const allowedOrigin = 'https://app.example.test';
    const otherOrigin = 'https://evil.example.test';
    let corsServer: TestServer;
    let corsApi: Api;

    before(async function () {
      this.timeout(60_000);
      corsServer = await startTestServer({ CORS_ORIGINS: allowedOrigin });
      corsApi = new Api(corsServer.baseUrl);
    });
    after(async function () {
      this.timeout(30_000);
      await corsServer?.stop();
    });

    it('gives a listed origin Access-Control-Allow-Origin, and exposes the request id', async () => {
      const res = await corsApi.get('/health', { headers: { origin: allowedOrigin } });
      expect(res.status).to.equal(200);
      expect(res.headers.get('access-control-allow-origin')).to.equal(allowedOrigin);
      expect(res.headers.get('vary')).to.match(/origin/i);
      expect(res.headers.get('access-control-expose-headers')).to.match(/x-request-id/i);
    });

    it('keeps the CORS headers on error responses for a listed origin', async () => {
      const res = await corsApi.get('/nothing/here', { headers: { origin: allowedOrigin } });
      expectError(res, 404, 'not_found');
      expect(res.headers.get('access-control-allow-origin')).to.equal(allowedOrigin);
    });

    it('gives any other origin no CORS headers', async () => {
      for (const origin of [otherOrigin, 'https://app.example.test.evil.test', 'http://app.example.test', 'null']) {
        const res = await corsApi.get('/health', { headers: { origin } });
        expect(res.status).to.equal(200);
        expect(res.headers.get('access-control-allow-origin'), origin).to.equal(null);
        expect(res.headers.get('access-control-allow-credentials'), origin).to.equal(null);
      }
    });

    it('answers a preflight from a listed origin, and not one from another origin', async () => {
      const preflight = (origin: string) =>
        corsApi.request('OPTIONS', '/auth/login', {
          headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,authorization,x-request-id' },
        });
      const ok = await preflight(allowedOrigin);
      expect(ok.status).to.equal(204);
      expect(ok.headers.get('access-control-allow-origin')).to.equal(allowedOrigin);
      expect(ok.headers.get('access-control-allow-methods')).to.include('POST');
      const allowHeaders = (ok.headers.get('access-control-allow-headers') ?? '').toLowerCase();
      for (const h of ['content-type', 'authorization', 'x-request-id']) expect(allowHeaders).to.include(h);
      expect(ok.headers.get('access-control-max-age')).to.match(/^\d+$/);

      const denied = await preflight(otherOrigin);
      expect(denied.status).not.to.equal(204);
      expect(denied.headers.get('access-control-allow-origin')).to.equal(null);
      expect(denied.headers.get('access-control-allow-methods')).to.equal(null);
    });

    it('sends no CORS headers at all when CORS_ORIGINS is unset', async () => {
      const res = await api.get('/health', { headers: { origin: allowedOrigin } });
      expect(res.headers.get('access-control-allow-origin')).to.equal(null);
    });
  });

  describe('request bodies', () => {
    it('answers 415 unsupported_media_type for a non-JSON body on a JSON route', async () => {
      const text = await api.request('POST', '/auth/refresh-token', { rawBody: 'refreshToken=abc', headers: { 'content-type': 'text/plain' } });
      expectError(text, 415, 'unsupported_media_type');
      const form = await api.request('POST', '/auth/login', { rawBody: 'email=a%40b.test&password=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      expectError(form, 415, 'unsupported_media_type');
    });

    it('accepts application/json with a charset', async () => {
      const res = await api.request('POST', '/auth/refresh-token', { rawBody: JSON.stringify({ refreshToken: 'not-a-token' }), headers: { 'content-type': 'application/json; charset=utf-8' } });
      expectError(res, 401, 'unauthorized');
    });

    it('answers 400 invalid_json for malformed JSON', async () => {
      for (const raw of ['{"refreshToken":', '{refreshToken: "x"}', "{'a':1}", '{"a":1}}']) {
        const res = await api.request('POST', '/auth/refresh-token', { rawBody: raw, headers: { 'content-type': 'application/json' } });
        expectError(res, 400, 'invalid_json');
      }
    });

    it('answers 400 (not 500) for JSON that is not an object', async () => {
      for (const raw of ['[1,2]', '"text"', '42', 'null']) {
        const res = await api.request('POST', '/auth/refresh-token', { rawBody: raw, headers: { 'content-type': 'application/json' } });
        expect(res.status, `${raw}: ${JSON.stringify(res.body)}`).to.equal(400);
        expect(['invalid_json', 'validation_failed']).to.include(res.body.error.code);
        expectNoLeaks(res);
      }
    });

    it('answers 415 for a body without a content type', async () => {
      const res = await api.request('POST', '/auth/refresh-token', { rawBody: Buffer.from(JSON.stringify({ refreshToken: 'x' })) });
      expectError(res, 415, 'unsupported_media_type');
    });

    it('reads a gzip body, and answers 4xx (not 500) for a corrupt one or an unknown encoding', async () => {
      const json = { 'content-type': 'application/json' };
      const good = await api.request('POST', '/auth/refresh-token', { rawBody: gzipSync(JSON.stringify({ refreshToken: 'not-a-token' })), headers: { ...json, 'content-encoding': 'gzip' } });
      expectError(good, 401, 'unauthorized');
      const corrupt = await api.request('POST', '/auth/refresh-token', { rawBody: 'definitely not gzip', headers: { ...json, 'content-encoding': 'gzip' } });
      expectError(corrupt, 400, 'invalid_json');
      const truncated = await api.request('POST', '/auth/refresh-token', { rawBody: gzipSync(JSON.stringify({ refreshToken: 'x' })).subarray(0, 12), headers: { ...json, 'content-encoding': 'gzip' } });
      expectError(truncated, 400, 'invalid_json');
      const badBrotli = await api.request('POST', '/auth/refresh-token', { rawBody: 'not brotli at all', headers: { ...json, 'content-encoding': 'br' } });
      expectError(badBrotli, 400, 'invalid_json');
      const unknown = await api.request('POST', '/auth/refresh-token', { rawBody: '{}', headers: { ...json, 'content-encoding': 'x-unknown' } });
      expectError(unknown, 415, 'unsupported_media_type');
    });

    it('answers 413 when a small gzip body inflates past 1 MiB', async () => {
      const bomb = gzipSync(JSON.stringify({ refreshToken: 'a'.repeat(2 * 1024 * 1024) }));
      expect(bomb.length).to.be.below(64 * 1024);
      const res = await api.request('POST', '/auth/refresh-token', { rawBody: bomb, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } });
      expectError(res, 413, 'payload_too_large');
    });

    it('answers what the HTTP parser refuses (a URL past 16 KB, a malformed request) with the error body', async () => {
      const raw = async (request: string) => {
        const { port, hostname } = new URL(sharedServer().baseUrl);
        const socket = net.connect(Number(port), hostname);
        const chunks: Buffer[] = [];
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.write(request);
        await new Promise((r) => socket.on('close', r));
        const text = Buffer.concat(chunks).toString();
        const [head, body] = text.split('\r\n\r\n');
        return { status: Number(head!.split(' ')[1]), type: /content-type: ([^\r]+)/i.exec(head!)?.[1], body: JSON.parse(body!) };
      };
      const long = await raw(`GET /api/v1/health?q=${'x'.repeat(20_000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
      expect(long.status).to.equal(431);
      expect(long.type).to.contain('application/json');
      expect(long.body).to.include({ success: false }).and.have.nested.property('error.code', 'payload_too_large');
      const malformed = await raw('GARBAGE\r\n\r\n');
      expect(malformed.status).to.equal(400);
      expect(malformed.body).to.have.nested.property('error.code', 'validation_failed');
      expect(malformed.body.requestId).to.be.a('string');
    });

    it('answers 413 payload_too_large for a body over 1 MiB', async () => {
      const big = JSON.stringify({ refreshToken: 'x'.repeat(1024 * 1024 + 16) });
      const res = await api.request('POST', '/auth/refresh-token', { rawBody: big, headers: { 'content-type': 'application/json' } });
      expectError(res, 413, 'payload_too_large');
    });

    it('accepts a body just under 1 MiB as far as the size check goes (schema limits decide)', async () => {
      const justUnder = JSON.stringify({ refreshToken: 'x'.repeat(1024 * 1024 - 64) });
      const res = await api.request('POST', '/auth/refresh-token', { rawBody: justUnder, headers: { 'content-type': 'application/json' } });
      expectError(res, 400, 'validation_failed');
    });

    it('rejects unknown body fields with 400 validation_failed naming each field', async () => {
      const res = await api.post('/auth/refresh-token', { refreshToken: 'x', organizationId: '00000000-0000-4000-8000-000000000000', isAdmin: true });
      expectError(res, 400, 'validation_failed');
      const fields = res.body.error.details.map((d: { field?: string }) => d.field);
      expect(fields).to.include.members(['organizationId', 'isAdmin']);
      for (const d of res.body.error.details) expect(d.message).to.be.a('string');
    });

    it('rejects unknown fields on an authenticated route too (a client cannot set its role)', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const res = await owner.api.patch('/auth/profile', { name: 'New Name', role: 'owner' }, { token: owner.accessToken });
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details.map((d: { field?: string }) => d.field)).to.include('role');
      const profile = await owner.api.get('/auth/profile', { token: owner.accessToken });
      expect(profile.body.data.user.name).not.to.equal('New Name');
    });

    it('names missing required fields', async () => {
      const res = await api.post('/auth/refresh-token', {});
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details.map((d: { field?: string }) => d.field)).to.include('refreshToken');
    });
  });

  describe('health', () => {
    it('GET /health answers 200 while the process lives', async () => {
      const res = await api.get('/health');
      expect(res.status).to.equal(200);
      expect(res.body.success).to.equal(true);
      expect(res.body.data.status).to.equal('ok');
      expect(res.body.data.uptimeSeconds).to.be.a('number');
    });

    it('GET /health/ready answers 200 while the database answers', async () => {
      const res = await api.get('/health/ready');
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.include({ success: true });
      expect(res.body.data.status).to.equal('ready');
      expect(res.body.data.checks.database.status).to.equal('up');
      expect(res.body.data.checks.redis.status).to.equal(process.env.REDIS_URL ? 'up' : 'not_configured');
    });

    it('GET /health/ready turns 503 as soon as a stop begins, also on a keep-alive connection already open', async function () {
      this.timeout(60_000);
      const stopping = await startTestServer();
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      const get = () =>
        new Promise<{ status: number; reused: boolean; connection: string | undefined; body: any }>((resolve, reject) => {
          const req = http.get(`${stopping.baseUrl}/api/v1/health/ready`, { agent }, (res) => {
            let text = '';
            res.on('data', (c) => (text += c));
            res.on('end', () => resolve({ status: res.statusCode!, reused: req.reusedSocket, connection: res.headers.connection, body: JSON.parse(text) }));
          });
          req.on('error', reject);
        });
      try {
        expect((await get()).status).to.equal(200);
        stopping.server.readiness.beginShutdown();
        const during = await get();
        expect(during.reused, 'the same keep-alive connection').to.equal(true);
        expect(during.status).to.equal(503);
        expect(during.connection).to.equal('close');
        expect(during.body.error.code).to.equal('service_unavailable');
        expect(during.body.error.details[0]).to.include({ field: 'instance', message: 'stopping' });
      } finally {
        agent.destroy();
        await stopping.stop();
      }
    });

    it('GET /health/ready answers within its deadline when every database connection is busy', async function () {
      this.timeout(60_000);
      const busy = await startTestServer();
      const { knex } = busy.server.db;
      const holding = Array.from({ length: (knex.client as { pool: { max: number } }).pool.max }, () =>
        knex.transaction(async (trx) => {
          await trx.raw('select 1');
          await new Promise((r) => setTimeout(r, 4_000));
        }),
      );
      try {
        await new Promise((r) => setTimeout(r, 200));
        const res = await fetch(`${busy.baseUrl}/api/v1/health/ready`, { signal: AbortSignal.timeout(3_000) });
        expect(res.status).to.equal(503);
        const body = (await res.json()) as any;
        expect(body.error.details.find((d: { field: string }) => d.field === 'database')).to.include({ status: 'down' });
        expect(body.error.details.find((d: { field: string }) => d.field === 'database').reason).to.match(/did not answer within \d+ ms/);
      } finally {
        await Promise.all(holding);
        await busy.stop();
      }
    });

    describe('with the database gone', () => {
      let broken: TestServer;
      before(async function () {
        this.timeout(60_000);
        broken = await startTestServer();
      });
      after(async function () {
        this.timeout(30_000);
        // stop() closes the (already destroyed) database once more; it must still stop cleanly.
        await broken?.stop();
      });

      it('answers ready 503 service_unavailable, keeps liveness, and leaks nothing on 500s', async () => {
        const brokenApi = new Api(broken.baseUrl);
        expect((await brokenApi.get('/health/ready')).status).to.equal(200);
        await broken.server.db.knex.destroy();

        const ready = await brokenApi.get('/health/ready');
        expectError(ready, 503, 'service_unavailable');
        expect(ready.body.error.details.find((d: { field: string }) => d.field === 'database').status).to.equal('down');

        const live = await brokenApi.get('/health');
        expect(live.status).to.equal(200);

        // A route that needs the database fails opaquely: internal_error, no driver or SQL text.
        const login = await brokenApi.post('/auth/login', { email: 'someone@example.test', password: 'whatever-password' });
        expectError(login, 500, 'internal_error');
      });
    });
  });
});
