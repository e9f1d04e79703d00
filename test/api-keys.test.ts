// Organization API keys: created by admins (token once), scopes allowed and refused on REST and sockets, the
// OpenAPI document stating each route's scope, revocation cutting REST and sockets at once (also across instances).
import { expect } from 'chai';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { connectOk, disconnected, nextEvent, refusal, request } from './helpers/sockets.js';
import { expectError } from './helpers/tenancy.js';

async function createKey(owner: SignedUp, scopes: string[], extra: Record<string, unknown> = {}): Promise<{ id: string; token: string; body: any }> {
  const res = await owner.api.post('/api-keys', { name: 'Zapier bot', scopes, ...extra }, { token: owner.accessToken });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return { id: res.body.data.apiKey.id, token: res.body.data.token, body: res.body.data };
}

describe('API keys', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('shows the token once, in a scannable format, and lists keys without it', async () => {
    const key = await createKey(owner, ['contacts:read', 'tickets:write']);
    expect(key.token).to.match(/^sp_live_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
    expect(key.body.apiKey).to.include({ name: 'Zapier bot', hint: `sp_live_…${key.token.slice(-4)}` });
    expect(key.body.apiKey.scopes).to.deep.equal(['contacts:read', 'tickets:write']);
    const got = await owner.api.get(`/api-keys/${key.id}`, { token: owner.accessToken });
    expect(got.status).to.equal(200);
    expect(JSON.stringify(got.body)).not.to.include(key.token.slice(8 + 33));
    const list = await owner.api.get('/api-keys', { token: owner.accessToken });
    expect(list.body.data.map((k: any) => k.id)).to.include(key.id);
    // Agents cannot manage keys; a key cannot manage keys either.
    const agent = await addMember(sharedServer().server, owner, 'agent');
    expectError(await agent.api.get('/api-keys', { token: agent.accessToken }), 403, 'forbidden');
    expectError(await owner.api.post('/api-keys', { name: 'x', scopes: ['contacts:read'] }, { token: key.token }), 403, 'forbidden');
    expectError(await owner.api.post('/api-keys', { name: 'x', scopes: ['everything:read'] }, { token: owner.accessToken }), 400, 'validation_failed');
  });

  it('allows what its scopes name (write implies read) and refuses the rest with 403', async () => {
    const key = await createKey(owner, ['contacts:write', 'templates:read']);
    const t = { token: key.token };
    expect((await owner.api.get('/contacts', t)).status).to.equal(200);
    const created = await owner.api.post('/contacts', { name: 'Bot Made', email: `bot-${Date.now()}@example.com` }, t);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect((await owner.api.get('/templates', t)).status).to.equal(200);
    expectError(await owner.api.post('/templates', { title: 'T', content: 'C' }, t), 403, 'forbidden');
    expectError(await owner.api.get('/conversations', t), 403, 'forbidden');
    expectError(await owner.api.get('/tickets', t), 403, 'forbidden');
    // Not an operator: personal and owner routes refuse keys.
    expectError(await owner.api.get('/auth/profile', t), 403, 'forbidden');
    expectError(await owner.api.delete(`/organizations/${owner.orgId}`, t), 403, 'forbidden');
    // Another organization's path: 403 like any non-member.
    const other = await signUp(sharedServer().server, sharedServer().baseUrl);
    expectError(await owner.api.get(`/memberships/organizations/${other.orgId}/members`, t), 403, 'forbidden');
  });

  it('documents the scope of every org route in the OpenAPI document', async () => {
    const doc = (await owner.api.get('/openapi.json')).body;
    const op = doc.paths['/api/v1/contacts'].get;
    expect(op['x-required-scope']).to.equal('contacts:read');
    expect(op.description).to.include('contacts:read');
    expect(doc.paths['/api/v1/contacts'].post['x-required-scope']).to.equal('contacts:write');
    expect(doc.paths['/api/v1/api-keys'].post['x-required-scope']).to.equal(null);
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, o] of Object.entries<any>(ops)) {
        if (o['x-required-role']) expect(o, `${method} ${path}`).to.have.property('x-required-scope');
      }
    }
  });

  it('refuses unknown, malformed and expired keys with 401', async () => {
    const key = await createKey(owner, ['contacts:read']);
    const forged = key.token.slice(0, -4) + (key.token.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    expectError(await owner.api.get('/contacts', { token: forged }), 401, 'unauthorized');
    expectError(await owner.api.get('/contacts', { token: 'sp_live_nope' }), 401, 'unauthorized');
    const soon = await createKey(owner, ['contacts:read'], { expiresAt: new Date(Date.now() + 60_000).toISOString() });
    await sharedServer().server.db.knex('api_keys').update({ expires_at: new Date(Date.now() - 1000) }).where({ id: soon.id });
    expectError(await owner.api.get('/contacts', { token: soon.token }), 401, 'unauthorized');
  });

  it('opens a bot socket with conversations scope; refuses one without it', async () => {
    const { baseUrl } = sharedServer();
    const reader = await createKey(owner, ['conversations:read']);
    const writer = await createKey(owner, ['conversations:write']);
    expect(await refusal(baseUrl, owner.orgId, (await createKey(owner, ['contacts:read'])).token)).to.equal('forbidden');
    const other = await signUp(sharedServer().server, baseUrl);
    expect(await refusal(baseUrl, other.orgId, reader.token)).to.equal('forbidden');

    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const readSocket = await connectOk(baseUrl, owner.orgId, reader.token);
    const writeSocket = await connectOk(baseUrl, owner.orgId, writer.token);
    try {
      const denied = await request(readSocket, 'send_message', { conversationId, content: 'from a reader' });
      expect(denied.success).to.equal(false);
      expect(denied.error!.code).to.equal('forbidden');
      const heard = nextEvent(readSocket, 'new_message', (p) => p.message.content === 'from the bot');
      const ack = await request(writeSocket, 'send_message', { conversationId, content: 'from the bot' });
      expect(ack.success, JSON.stringify(ack)).to.equal(true);
      expect((await heard).message.senderType).to.equal('agent');
      const synced = await request(readSocket, 'sync', { conversationId, afterSeq: 0 });
      expect(synced.success).to.equal(true);
    } finally {
      readSocket.close();
      writeSocket.close();
    }
  });

  it('is cut at once when revoked: REST 401 and its socket disconnected', async () => {
    const { baseUrl } = sharedServer();
    const key = await createKey(owner, ['conversations:read', 'contacts:read']);
    expect((await owner.api.get('/contacts', { token: key.token })).status).to.equal(200);
    const socket = await connectOk(baseUrl, owner.orgId, key.token);
    const gone = disconnected(socket);
    const res = await owner.api.delete(`/api-keys/${key.id}`, { token: owner.accessToken });
    expect(res.status).to.equal(200);
    expect(res.body.data.revokedAt).to.be.a('string');
    expect(await gone).to.equal('io server disconnect');
    expectError(await owner.api.get('/contacts', { token: key.token }), 401, 'unauthorized');
    expect(await refusal(baseUrl, owner.orgId, key.token)).to.equal('unauthorized');
    // POST …/revoke is the same (and idempotent).
    expect((await owner.api.post(`/api-keys/${key.id}/revoke`, undefined, { token: owner.accessToken })).status).to.equal(200);
  });

  it('records lastUsedAt', async () => {
    const key = await createKey(owner, ['contacts:read']);
    await owner.api.get('/contacts', { token: key.token });
    for (let i = 0; i < 50; i++) {
      const row = await sharedServer().server.db.knex('api_keys').where({ id: key.id }).first();
      if (row.lastUsedAt) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('lastUsedAt was not recorded');
  });
});

describe('API keys: rate limit', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ API_KEY_RATE_LIMIT: '3' });
  });
  after(() => server?.stop());

  it('answers 429 with Retry-After past the per-key limit', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const key = await createKey(owner, ['contacts:read']);
    for (let i = 0; i < 3; i++) expect((await owner.api.get('/contacts', { token: key.token })).status).to.equal(200);
    const res = await owner.api.get('/contacts', { token: key.token });
    expectError(res, 429, 'rate_limited');
    expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
  });
});

describe('API keys across two instances', function () {
  let a: TestServer;
  let b: TestServer;
  before(async function () {
    if (!process.env.REDIS_URL || !process.env.DATABASE_URL) this.skip();
    a = await startTestServer();
    b = await startTestServer();
  });
  after(async () => {
    await a?.stop();
    await b?.stop();
  });

  it('revoking through one instance disconnects the key\'s socket on the other', async () => {
    const owner = await signUp(a.server, a.baseUrl);
    const key = await createKey(owner, ['conversations:read']);
    const socket = await connectOk(b.baseUrl, owner.orgId, key.token);
    const gone = disconnected(socket);
    expect((await owner.api.delete(`/api-keys/${key.id}`, { token: owner.accessToken })).status).to.equal(200);
    expect(await gone).to.equal('io server disconnect');
  });
});
