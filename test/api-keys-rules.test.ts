// The rules of API keys that the broader tests do not pin: what creation accepts (future expiry, at most 100 active
// keys, scopes stored sorted, the name trimmed), listing and revoking (revoked keys hidden unless asked, newest
// first, another organization's key 404, revoking twice keeps the first time), the token's exact format, a key's
// socket cut at the key's expiry, Retry-After in seconds, lastUsedAt written at most once a minute. The scopes
// themselves: api-keys-scopes.test.ts.
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { connectOk, disconnected, nextEvent } from './helpers/sockets.js';
import { expectError } from './helpers/tenancy.js';

async function createKey(owner: SignedUp, scopes: string[], extra: Record<string, unknown> = {}): Promise<{ id: string; token: string; apiKey: any }> {
  const res = await owner.api.post('/api-keys', { name: 'Rules bot', scopes, ...extra }, { token: owner.accessToken });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return { id: res.body.data.apiKey.id, token: res.body.data.token, apiKey: res.body.data.apiKey };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function lastUsedAt(id: string): Promise<Date | null> {
  const row = await sharedServer().server.db.knex('api_keys').where({ id }).first('last_used_at');
  return row.lastUsedAt ? new Date(row.lastUsedAt) : null;
}

describe('API key rules', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('refuses an expiry in the past; stores scopes sorted and the name trimmed', async () => {
    const past = await owner.api.post('/api-keys', { name: 'Late', scopes: ['contacts:read'], expiresAt: new Date(Date.now() - 60_000).toISOString() }, { token: owner.accessToken });
    expectError(past, 400, 'validation_failed');
    // Named like the schema's own errors name a body field: `expiresAt`, not a path.
    expect(past.body.error.details).to.deep.equal([{ field: 'expiresAt', message: 'must be in the future' }]);
    const key = await createKey(owner, ['tickets:write', 'contacts:read', 'analytics:read'], { name: '  Zap bot  ' });
    expect(key.apiKey.name).to.equal('Zap bot');
    expect(key.apiKey.scopes).to.deep.equal(['analytics:read', 'contacts:read', 'tickets:write']);
    const got = await owner.api.get(`/api-keys/${key.id}`, { token: owner.accessToken });
    expect(got.body.data.scopes).to.deep.equal(['analytics:read', 'contacts:read', 'tickets:write']);
  });

  it('allows at most 100 active keys per organization; a revoked key frees its place', async function () {
    this.timeout(120_000);
    const org = await signUp(sharedServer().server, sharedServer().baseUrl);
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) ids.push((await createKey(org, ['contacts:read'])).id);
    const over = await org.api.post('/api-keys', { name: 'One too many', scopes: ['contacts:read'] }, { token: org.accessToken });
    expectError(over, 400, 'validation_failed');
    expect(over.body.message).to.include('100');
    expect((await org.api.delete(`/api-keys/${ids[0]}`, { token: org.accessToken })).status).to.equal(200);
    await createKey(org, ['contacts:read']);
    // Other organizations are not counted against it.
    expectError(await org.api.post('/api-keys', { name: 'Again', scopes: ['contacts:read'] }, { token: org.accessToken }), 400, 'validation_failed');
    await createKey(owner, ['contacts:read']);
  });

  it('lists newest first with a total, revoked keys only when asked; another organization\'s key is 404; revoking twice keeps the first time', async () => {
    const org = await signUp(sharedServer().server, sharedServer().baseUrl);
    const first = await createKey(org, ['contacts:read']);
    await sleep(5);
    const second = await createKey(org, ['contacts:read']);
    await sleep(5);
    const third = await createKey(org, ['contacts:read']);
    const t = { token: org.accessToken };
    const revoked = await org.api.delete(`/api-keys/${second.id}`, t);
    expect(revoked.body.data.revokedAt).to.be.a('string');

    const active = await org.api.get('/api-keys', t);
    expect(active.body.data.map((k: any) => k.id)).to.deep.equal([third.id, first.id]);
    expect(active.body.pagination.total).to.equal(2);
    const all = await org.api.get('/api-keys?includeRevoked=true', t);
    expect(all.body.data.map((k: any) => k.id)).to.deep.equal([third.id, second.id, first.id]);
    expect(all.body.pagination.total).to.equal(3);
    const page = await org.api.get('/api-keys?includeRevoked=true&limit=1&offset=1', t);
    expect(page.body.data.map((k: any) => k.id)).to.deep.equal([second.id]);
    expect(page.body.pagination.total).to.equal(3);

    await sleep(10);
    const again = await org.api.post(`/api-keys/${second.id}/revoke`, undefined, t);
    expect(again.status).to.equal(200);
    expect(again.body.data.revokedAt).to.equal(revoked.body.data.revokedAt);
    const refused = await org.api.get('/contacts', { token: second.token });
    expectError(refused, 401, 'unauthorized');
    expect(refused.body.message).to.equal('The API key was revoked');

    // Another organization's key: 404 to read and to revoke, and it stays usable.
    expectError(await owner.api.get(`/api-keys/${first.id}`, { token: owner.accessToken }), 404, 'not_found');
    expectError(await owner.api.delete(`/api-keys/${first.id}`, { token: owner.accessToken }), 404, 'not_found');
    expect((await org.api.get('/contacts', { token: first.token })).status).to.equal(200);
  });

  it('accepts exactly its own token: no second prefix, nothing after the secret, no shorter secret', async () => {
    const key = await createKey(owner, ['contacts:read']);
    expect((await owner.api.get('/contacts', { token: key.token })).status).to.equal(200);
    for (const token of [`sp_live_${key.token}`, `${key.token}A`, key.token.slice(0, -1), key.token.replace(/_([0-9a-f]{32})_/, (_, hex: string) => `_${hex.slice(1)}_`)]) {
      const res = await owner.api.get('/contacts', { token });
      expectError(res, 401, 'unauthorized');
      expect(res.body.message).to.equal('The API key is not valid');
    }
  });

  it('a key with an expiry works until then, and its socket is told and cut at that time', async function () {
    this.timeout(30_000);
    const { baseUrl } = sharedServer();
    const lasting = await createKey(owner, ['conversations:read']);
    const expiresAt = Date.now() + 2_500;
    const key = await createKey(owner, ['conversations:read', 'contacts:read'], { expiresAt: new Date(expiresAt).toISOString() });
    expect((await owner.api.get('/contacts', { token: key.token })).status).to.equal(200);
    const socket = await connectOk(baseUrl, owner.orgId, key.token);
    const stays = await connectOk(baseUrl, owner.orgId, lasting.token);
    try {
      const told = nextEvent(socket, 'session_expired', () => true, 10_000);
      const gone = disconnected(socket);
      await told;
      expect(await gone).to.equal('io server disconnect');
      // The socket goes at the whole second before (a token's time is in seconds); REST refuses from the time itself.
      await sleep(Math.max(0, expiresAt + 20 - Date.now()));
      const expired = await owner.api.get('/contacts', { token: key.token });
      expectError(expired, 401, 'unauthorized');
      expect(expired.body.message).to.equal('The API key has expired');
      // A key without an expiry lives on.
      expect(stays.connected).to.equal(true);
    } finally {
      socket.close();
      stays.close();
    }
  });

  it('records lastUsedAt at most once a minute, and not over a recent time written elsewhere', async () => {
    const key = await createKey(owner, ['contacts:read']);
    await owner.api.get('/contacts', { token: key.token });
    let first: Date | null = null;
    for (let i = 0; i < 100 && !first; i++) {
      first = await lastUsedAt(key.id);
      if (!first) await sleep(20);
    }
    expect(first, 'lastUsedAt written').to.be.an.instanceOf(Date);
    await sleep(20);
    await owner.api.get('/contacts', { token: key.token });
    await sleep(300);
    expect((await lastUsedAt(key.id))!.getTime()).to.equal(first!.getTime());

    // Another instance wrote it 30 s ago: this one leaves it; 2 minutes ago: this one writes it.
    const recent = await createKey(owner, ['contacts:read']);
    const thirtySecondsAgo = new Date(Date.now() - 30_000);
    await sharedServer().server.db.knex('api_keys').update({ last_used_at: thirtySecondsAgo }).where({ id: recent.id });
    const stale = await createKey(owner, ['contacts:read']);
    const twoMinutesAgo = new Date(Date.now() - 120_000);
    await sharedServer().server.db.knex('api_keys').update({ last_used_at: twoMinutesAgo }).where({ id: stale.id });
    await owner.api.get('/contacts', { token: recent.token });
    await owner.api.get('/contacts', { token: stale.token });
    let written: Date | null = null;
    for (let i = 0; i < 100; i++) {
      written = await lastUsedAt(stale.id);
      if (written && written.getTime() > twoMinutesAgo.getTime()) break;
      await sleep(20);
    }
    expect(written!.getTime()).to.be.greaterThan(Date.now() - 10_000);
    expect((await lastUsedAt(recent.id))!.getTime()).to.equal(thirtySecondsAgo.getTime());
  });
});

describe('API key rules: rate limit', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ API_KEY_RATE_LIMIT: '2' });
  });
  after(() => server?.stop());

  it('tells in seconds, within the minute, when the key may call again', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const key = await createKey(owner, ['contacts:read']);
    for (let i = 0; i < 2; i++) expect((await owner.api.get('/contacts', { token: key.token })).status).to.equal(200);
    const res = await owner.api.get('/contacts', { token: key.token });
    expectError(res, 429, 'rate_limited');
    const retryAfter = Number(res.headers.get('retry-after'));
    expect(retryAfter).to.be.within(1, 60);
  });
});
