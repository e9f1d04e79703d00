// Idempotency keys any area can use: a key is claimed inside the transaction that creates the resource, so a replay
// of a request still running waits on the unique index and then reads what the first one made.
import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import { Conflict } from '../../errors.js';

export type Claim = { replay: false; keyId: string; organizationId: string } | { replay: true; resourceId: string };

const SWEEP_EVERY_MS = 3_600_000;

/** The same request gives the same hash whatever the order of its keys. */
export function requestHash(request: unknown): string {
  const stable = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(stable) : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, stable((v as Record<string, unknown>)[k])])) : v;
  return createHash('sha256').update(JSON.stringify(stable(request))).digest('hex');
}

export class IdempotencyKeys {
  private lastSweep = 0;

  constructor(private readonly deps: { models: Models; knex: Knex; onSweepError?: (err: unknown) => void }) {}

  /**
   * Claims `key` for this request inside `trx`, in one statement: a new key is inserted, an expired one is taken over
   * as if it never existed, and a live one is left as it is but locked, so it stays there to be read until `trx` ends.
   * While another transaction holds the same key uncommitted, PostgreSQL makes the statement wait for it; once it
   * commits, this one finds its row and replays its resource, and once it rolls back, this one takes the key. The
   * same key with another request is 409.
   */
  async claim(trx: Knex.Transaction, orgId: string, scope: string, key: string, request: unknown): Promise<Claim> {
    this.sweepSometimes();
    const hash = requestHash(request);
    const taken = await trx('idempotency_keys')
      .insert({ organization_id: orgId, scope, key, request_hash: hash })
      .onConflict(['organization_id', 'scope', 'key'])
      .merge({ request_hash: hash, created_at: trx.raw('DEFAULT'), expires_at: trx.raw('DEFAULT') })
      .where('idempotency_keys.expires_at', '<=', trx.fn.now())
      .returning('id');
    if (taken.length > 0) return { replay: false, keyId: (taken[0] as { id: string }).id, organizationId: orgId };
    const existing = await this.deps.models.IdempotencyKey.forOrg(orgId, trx).where({ scope, key }).first();
    if (existing!.requestHash !== hash) throw new Conflict('This idempotency key was already used with a different request');
    // A key is completed in the transaction that claimed it, so a committed key always names its resource.
    if (!existing!.resourceId) throw new Conflict('The request with this idempotency key did not finish');
    return { replay: true, resourceId: existing!.resourceId };
  }

  /** Records what the claimed request made; committed together with it. */
  async complete(trx: Knex.Transaction, claim: { keyId: string; organizationId: string }, resourceId: string): Promise<void> {
    await this.deps.models.IdempotencyKey.forOrg(claim.organizationId, trx).patch({ resourceId }).where('id', claim.keyId);
  }

  /** Deletes keys past their 30 days; idempotent, so every instance may do it. */
  async sweep(): Promise<number> {
    // Expired keys of every organization: the sweep works for none in particular.
    return this.deps.models.IdempotencyKey.acrossOrgs().delete().where('expiresAt', '<=', this.deps.knex.fn.now());
  }

  private sweepSometimes(): void {
    const now = Date.now();
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    this.sweep().catch((err) => this.deps.onSweepError?.(err));
  }
}
