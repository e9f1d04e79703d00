// API key rules the other key tests leave open: a well-formed key naming no key is refused like a wrong secret (not a
// server error), a missing key's 404 names what is missing, and lastUsedAt is written at most once a minute by each
// instance, whatever the row says, and written again at the next use when a write failed.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { expectError } from './helpers/tenancy.js';
import { waitFor } from './helpers/wait.js';
import { refuseWrites } from './helpers/refusals.js';

async function createKey(owner: SignedUp, scopes: string[]): Promise<{ id: string; token: string }> {
  const res = await owner.api.post('/api-keys', { name: 'Mutants bot', scopes }, { token: owner.accessToken });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return { id: res.body.data.apiKey.id, token: res.body.data.token };
}

const knex = () => sharedServer().server.db.knex;

async function lastUsedAt(id: string): Promise<Date | null> {
  const row = await knex()('api_keys').where({ id }).first('last_used_at');
  return row.lastUsedAt ? new Date(row.lastUsedAt) : null;
}

/** Waits for the key's lastUsedAt to be written after `after` (the write follows the answer). */
function writtenAfter(id: string, after: number, what: string): Promise<Date> {
  return waitFor(async () => {
    const at = await lastUsedAt(id);
    return at !== null && at.getTime() > after ? at : null;
  }, { timeoutMs: 5_000, what });
}

describe('API key rules (mutation tests)', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('refuses a well-formed key whose id names no key with 401, as it refuses a wrong secret', async () => {
    const token = `sp_live_${randomBytes(16).toString('hex')}_${randomBytes(32).toString('base64url')}`;
    expect(token).to.match(/^sp_live_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
    const res = await owner.api.get('/contacts', { token });
    expectError(res, 401, 'unauthorized');
    expect(res.body.message).to.equal('The API key is not valid');
  });

  it("answers 404 'API key not found' for a key of another organization or none", async () => {
    const key = await createKey(owner, ['contacts:read']);
    const other = await signUp(sharedServer().server, sharedServer().baseUrl);
    for (const res of [
      await other.api.get(`/api-keys/${key.id}`, { token: other.accessToken }),
      await other.api.delete(`/api-keys/${key.id}`, { token: other.accessToken }),
      await owner.api.get('/api-keys/00000000-0000-4000-8000-000000000000', { token: owner.accessToken }),
    ]) {
      expectError(res, 404, 'not_found');
      expect(res.body.message).to.equal('API key not found');
    }
  });

  it('writes lastUsedAt once a minute per instance, even when the row says it was used long ago', async () => {
    const key = await createKey(owner, ['contacts:read']);
    const control = await createKey(owner, ['contacts:read']);
    const start = Date.now() - 1_000;
    expect((await owner.api.get('/contacts', { token: key.token })).status).to.equal(200);
    await writtenAfter(key.id, start, 'the first use recorded');
    // Another instance's write long ago, or an operator's edit: this instance wrote moments ago, so it does not write.
    const longAgo = new Date(Date.now() - 120_000);
    await knex()('api_keys').update({ last_used_at: longAgo }).where({ id: key.id });
    expect((await owner.api.get('/contacts', { token: key.token })).status).to.equal(200);
    // A key this instance has not written yet is written: by then the first key's write would have been made too.
    expect((await owner.api.get('/contacts', { token: control.token })).status).to.equal(200);
    await writtenAfter(control.id, start, 'the control key\'s use recorded');
    expect((await lastUsedAt(key.id))!.getTime()).to.equal(longAgo.getTime());
  });

  it('writes lastUsedAt at the next use when the write failed', async () => {
    const key = await createKey(owner, ['contacts:read']);
    // A trigger refuses this key's writes and counts the attempts (a sequence survives the rollback).
    const refusal = await refuseWrites(knex(), { table: 'api_keys', on: 'update', when: `old.id = '${key.id}'`, message: 'refused' });
    try {
      const start = Date.now() - 1_000;
      expect((await owner.api.get('/contacts', { token: key.token })).status).to.equal(200);
      await waitFor(() => refusal.refusedAny(), { timeoutMs: 5_000, what: 'the refused write' });
      expect(await lastUsedAt(key.id)).to.equal(null);
      await refusal.lift();
      expect((await owner.api.get('/contacts', { token: key.token })).status).to.equal(200);
      await writtenAfter(key.id, start, 'the use after the failed write recorded');
    } finally {
      await refusal.lift();
    }
  });
});
