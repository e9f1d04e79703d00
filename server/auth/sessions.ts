// Server-side sessions: created at sign-in, rotated on refresh, revoked on logout, reuse or password change.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { DomainEventBus } from '../events.js';
import { Unauthorized } from '../errors.js';
import { noticeRevocation } from './revocations.js';
import type { TokenService } from './tokens.js';

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  /** Unix seconds at which the access token expires. */
  accessTokenExpiresAt: number;
}

export interface SessionMeta {
  ip?: string | null;
  userAgent?: string | null;
}

export class SessionService {
  constructor(
    private readonly models: Models,
    private readonly tokens: TokenService,
    private readonly events: DomainEventBus,
    private readonly refreshTtlSeconds: number,
  ) {}

  async create(user: { id: string; email: string }, orgId: string | null, meta: SessionMeta, trx?: Knex.Transaction): Promise<TokenPair> {
    const id = randomUUID();
    const expiresAt = new Date(Date.now() + this.refreshTtlSeconds * 1000);
    const refresh = this.tokens.signRefresh({ userId: user.id, orgId, sessionId: id, sessionExpiresAt: expiresAt });
    await this.models.AuthSession.query(trx).insert({
      id,
      userId: user.id,
      organizationId: orgId,
      refreshJti: refresh.jti,
      expiresAt,
      ip: meta.ip?.slice(0, 64) ?? null,
      userAgent: meta.userAgent?.slice(0, 512) ?? null,
    });
    const access = this.tokens.signAccess({ userId: user.id, email: user.email, orgId, sessionId: id });
    return { accessToken: access.token, refreshToken: refresh.token, accessTokenExpiresAt: access.expiresAt };
  }

  /**
   * Rotates a refresh token. Presenting one that was already rotated means it leaked (or raced): the whole
   * session is revoked, so the thief and the owner both have to sign in again.
   */
  async rotate(refreshToken: string): Promise<TokenPair> {
    const claims = this.tokens.verifyRefresh(refreshToken);
    const session = await this.models.AuthSession.query().findById(claims.sid);
    if (!session || session.userId !== claims.sub || session.revokedAt || session.expiresAt.getTime() <= Date.now()) {
      throw new Unauthorized('The session has ended; sign in again');
    }
    const user = await this.models.User.query().findById(session.userId);
    if (!user) throw new Unauthorized('The session has ended; sign in again');
    const next = this.tokens.signRefresh({ userId: user.id, orgId: session.organizationId, sessionId: session.id, sessionExpiresAt: session.expiresAt });
    // Compare-and-set on the current jti: of two concurrent uses of one token, exactly one wins.
    const updated = await this.models.AuthSession.query()
      .patch({ refreshJti: next.jti, lastRefreshedAt: new Date() })
      .where({ id: session.id, refreshJti: claims.jti })
      .whereNull('revokedAt');
    if (updated === 0) {
      await this.revoke([session.id], session.userId, 'refresh_reuse');
      throw new Unauthorized('This refresh token was already used; the session is revoked');
    }
    const access = this.tokens.signAccess({ userId: user.id, email: user.email, orgId: session.organizationId, sessionId: session.id });
    return { accessToken: access.token, refreshToken: next.token, accessTokenExpiresAt: access.expiresAt };
  }

  async revoke(sessionIds: string[], userId: string, reason: string, trx?: Knex.Transaction): Promise<void> {
    if (sessionIds.length === 0) return;
    await this.models.AuthSession.query(trx).patch({ revokedAt: new Date(), revokedReason: reason }).whereIn('id', sessionIds).whereNull('revokedAt');
    await noticeRevocation(trx ?? this.models.AuthSession.knex(), { sessionIds, userId });
    this.afterCommit(trx, () => this.events.publish('session.revoked', { userId, sessionIds }));
  }

  /** Revokes every live session of a user but `keepSessionId` (password change keeps the caller signed in). */
  async revokeAllOf(userId: string, reason: string, keepSessionId: string | null, trx?: Knex.Transaction): Promise<void> {
    const query = this.models.AuthSession.query(trx).select('id').where('userId', userId).whereNull('revokedAt');
    if (keepSessionId) query.whereNot('id', keepSessionId);
    const ids = (await query).map((s) => s.id);
    await this.revoke(ids, userId, reason, trx);
  }

  private afterCommit(trx: Knex.Transaction | undefined, fn: () => void): void {
    if (trx) trx.executionPromise.then(fn, () => undefined);
    else fn();
  }
}
