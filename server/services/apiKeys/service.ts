// Organization API keys: created by admins (the secret is shown once), resolved on every request by id + keyed hash,
// revoked at once (REST on the next request; sockets through the api_key.revoked event on every instance).
import { randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Models } from '../../../db/index.js';
import type { ApiKey } from '../../../db/models/ApiKey.js';
import type { Statement, StatementFactory } from '../../../db/statements.js';
import type { OperatorActor } from '../../auth/actor.js';
import { hashSecret, safeEqual } from '../../auth/secrets.js';
import { NotFound, RateLimited, Unauthorized, ValidationFailed } from '../../errors.js';
import type { DomainEventBus } from '../../events.js';
import type { Scope } from './scopes.js';

/**
 * `sp_live_<key id: 32 hex>_<secret: 43 base64url chars>`: the fixed prefix lets secret scanners find leaked keys;
 * the id part finds the row in one indexed lookup, the secret part is compared as a keyed hash in constant time.
 */
export const API_KEY_PREFIX = 'sp_live_';
const KEY_FORMAT = /^sp_live_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;
/** `lastUsedAt` is written at most this often per key, sparing the hot path a write per request. */
const TOUCH_EVERY_MS = 60_000;
const MAX_KEYS_PER_ORG = 100;

export interface CreateApiKeyInput {
  name: string;
  scopes: Scope[];
  expiresAt?: string | null;
}

interface KeyRow {
  organizationId: string;
  userId: string;
  name: string;
  /** jsonb: both drivers (node-postgres, PGlite) hand it over parsed. */
  scopes: string[];
  secretHash: string;
  expiresAt: Date | null;
  revokedAt: Date | null;
}

const KEY_SQL = `
select k.organization_id as "organizationId", k.user_id as "userId", k.name, k.scopes, k.secret_hash as "secretHash",
       k.expires_at as "expiresAt", k.revoked_at as "revokedAt"
from api_keys k where k.id = $1::uuid`;

const toUuid = (hex: string) => `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;

export class ApiKeyService {
  private readonly keyStatement: Statement<KeyRow>;
  private readonly touched = new Map<string, number>();
  private readonly limiter: RateLimiterAbstract;

  constructor(
    private readonly deps: {
      models: Models;
      knex: Knex;
      statement: StatementFactory;
      events: DomainEventBus;
      /** Key of the keyed hash (derived from a server secret, like the other one-time secrets). */
      hashKey: string;
      redis: Redis | null;
      requestsPerMinute: number;
    },
  ) {
    this.keyStatement = deps.statement<KeyRow>('resolve_api_key', KEY_SQL);
    const memory = new RateLimiterMemory({ keyPrefix: 'rl:api-key', points: deps.requestsPerMinute, duration: 60 });
    this.limiter = deps.redis
      ? new RateLimiterRedis({ storeClient: deps.redis, keyPrefix: 'rl:api-key', points: deps.requestsPerMinute, duration: 60, insuranceLimiter: memory, rejectIfRedisNotReady: true })
      : memory;
  }

  private hash(secret: string): string {
    return hashSecret(this.deps.hashKey, secret);
  }

  /** Creates the key and its bot user in one transaction; the returned token is never retrievable again. */
  async create(orgId: string, createdBy: string, input: CreateApiKeyInput): Promise<{ key: ApiKey; token: string }> {
    const expiresAt = input.expiresAt ? new Date(input.expiresAt) : null;
    if (expiresAt && expiresAt.getTime() <= Date.now()) throw new ValidationFailed('expiresAt must be in the future', [{ field: 'expiresAt', message: 'must be in the future' }]);
    const count = await this.deps.models.ApiKey.forOrg(orgId).whereNull('revokedAt').resultSize();
    if (count >= MAX_KEYS_PER_ORG) throw new ValidationFailed(`An organization has at most ${MAX_KEYS_PER_ORG} active API keys`);
    const id = randomUUID();
    const secret = randomBytes(32).toString('base64url');
    const token = `${API_KEY_PREFIX}${id.replace(/-/g, '')}_${secret}`;
    const scopes = [...new Set(input.scopes)].sort();
    const key = await this.deps.knex.transaction(async (trx) => {
      // The bot user has no usable password ('!' is no bcrypt hash) and an address that cannot receive mail.
      const bot = await this.deps.models.User.query(trx).insertAndFetch({ email: `api-key-${id}@bots.invalid`, name: `${input.name.trim()} (API key)`, passwordHash: '!' });
      return this.deps.models.ApiKey.forOrg(orgId, trx).insertAndFetch({
        id, organizationId: orgId, userId: bot.id, name: input.name.trim(), scopes, secretHash: this.hash(secret), lastFour: secret.slice(-4), createdBy, expiresAt,
      });
    });
    return { key, token };
  }

  async list(orgId: string, opts: { limit: number; offset: number; includeRevoked?: boolean }): Promise<{ keys: ApiKey[]; total: number }> {
    const base = this.deps.models.ApiKey.forOrg(orgId);
    if (!opts.includeRevoked) base.whereNull('revokedAt');
    const [total, keys] = await Promise.all([base.clone().resultSize(), base.clone().orderBy('createdAt', 'desc').orderBy('id').limit(opts.limit).offset(opts.offset)]);
    return { keys, total };
  }

  async get(orgId: string, id: string): Promise<ApiKey> {
    const key = await this.deps.models.ApiKey.forOrg(orgId).findById(id);
    if (!key) throw new NotFound('API key');
    return key;
  }

  /** Revokes at once; revoking twice is a no-op answering the revoked key. */
  async revoke(orgId: string, id: string): Promise<ApiKey> {
    const key = await this.get(orgId, id);
    if (key.revokedAt) return key;
    const revoked = await this.deps.models.ApiKey.forOrg(orgId).patchAndFetchById(id, { revokedAt: new Date() });
    this.touched.delete(id);
    this.deps.events.publish('api_key.revoked', { organizationId: orgId, apiKeyId: id });
    return revoked;
  }

  /** The bot operator a key acts as, or 401 (unknown, wrong secret, revoked, expired); 429 over its rate limit. */
  async authenticate(token: string): Promise<OperatorActor> {
    const match = KEY_FORMAT.exec(token);
    if (!match) throw new Unauthorized('The API key is not valid');
    const id = toUuid(match[1]!);
    const [row] = await this.keyStatement.rows([id]);
    // Compared even when no row was found, so an unknown id costs the same as a wrong secret.
    const ok = safeEqual(this.hash(match[2]!), row?.secretHash ?? '');
    if (!row || !ok) throw new Unauthorized('The API key is not valid');
    if (row.revokedAt) throw new Unauthorized('The API key was revoked');
    const expiresAt = row.expiresAt ? new Date(row.expiresAt).getTime() : null;
    if (expiresAt !== null && expiresAt <= Date.now()) throw new Unauthorized('The API key has expired');
    try {
      await this.limiter.consume(id);
    } catch (err) {
      if (err instanceof RateLimiterRes) throw new RateLimited(err.msBeforeNext / 1000);
      throw err;
    }
    this.touch(id);
    return {
      kind: 'operator',
      userId: row.userId,
      email: `api-key-${id}@bots.invalid`,
      name: row.name,
      // The key stands in for a session: its sockets join the room of this id, which revocation empties.
      sessionId: id,
      orgId: row.organizationId,
      membership: { id, role: 'agent', status: 'accepted', availability: 'online' },
      // A key lives until revoked or expired; sockets are cut by revocation, and at the expiry when it has one.
      tokenExpiresAt: Math.floor((expiresAt ?? Date.now() + 10 * 365 * 86_400_000) / 1000),
      apiKey: { id, scopes: row.scopes },
    };
  }

  /** Records use at most once a minute per key and instance; the row's own time guards across instances. */
  private touch(id: string): void {
    const now = Date.now();
    if (now - (this.touched.get(id) ?? 0) < TOUCH_EVERY_MS) return;
    this.touched.set(id, now);
    if (this.touched.size > 10_000) this.touched.clear();
    void this.deps.knex('api_keys')
      .update({ last_used_at: new Date(now) })
      .where('id', id)
      .where((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', new Date(now - TOUCH_EVERY_MS)))
      .catch(() => this.touched.delete(id));
  }
}
