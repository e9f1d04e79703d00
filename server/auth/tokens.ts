// Signs and verifies the three token kinds; each has its own secret, audience and `typ`, and HS256 is pinned.
import { createSecretKey, randomUUID, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import type { Config } from '../config.js';
import { Unauthorized } from '../errors.js';
import { isUuid } from '../validation.js';

export const ISSUER = 'support-platform';
const AUDIENCE = { access: 'support-platform:operator', refresh: 'support-platform:refresh', widget_session: 'support-platform:widget' } as const;

export interface AccessClaims {
  sub: string;
  email: string;
  orgId: string | null;
  sid: string;
  typ: 'access';
  exp: number;
}
export interface RefreshClaims {
  sub: string;
  sid: string;
  orgId: string | null;
  jti: string;
  typ: 'refresh';
  exp: number;
}
export interface WidgetClaims {
  orgId: string;
  widgetId: string;
  sessionId: string;
  typ: 'widget_session';
  exp: number;
}

type Kind = keyof typeof AUDIENCE;

/** Ids this server puts into tokens are UUIDs; anything else did not come from here (and must not reach SQL). */
const isUuidOrNull = (v: unknown): v is string | null => v === null || isUuid(v);

export class TokenService {
  constructor(private readonly config: Config) {
    this.keys = {
      access: createSecretKey(Buffer.from(config.secrets.access)),
      refresh: createSecretKey(Buffer.from(config.secrets.refresh)),
      widget_session: createSecretKey(Buffer.from(config.secrets.widget)),
    };
  }

  /**
   * Secrets as KeyObjects, made once: given a string, jsonwebtoken first tries (and fails) to parse it as a PEM key
   * on every sign and verify, which made token checks the costliest step of a socket handshake.
   */
  private readonly keys: Record<Kind, KeyObject>;

  private secretFor(kind: Kind): KeyObject {
    return this.keys[kind];
  }

  private sign(kind: Kind, payload: Record<string, unknown>, expiresAt: number): string {
    return jwt.sign({ ...payload, typ: kind, exp: expiresAt }, this.secretFor(kind), { algorithm: 'HS256', audience: AUDIENCE[kind], issuer: ISSUER });
  }

  private verify<T>(kind: Kind, token: string): T {
    let claims: jwt.JwtPayload;
    try {
      claims = jwt.verify(token, this.secretFor(kind), { algorithms: ['HS256'], audience: AUDIENCE[kind], issuer: ISSUER }) as jwt.JwtPayload;
    } catch {
      throw new Unauthorized('The token is invalid or has expired');
    }
    if (claims.typ !== kind) throw new Unauthorized('The token is of the wrong kind');
    return claims as T;
  }

  signAccess(claims: { userId: string; email: string; orgId: string | null; sessionId: string }): { token: string; expiresAt: number } {
    const expiresAt = Math.floor(Date.now() / 1000) + this.config.accessTokenTtlSeconds;
    const token = this.sign('access', { sub: claims.userId, email: claims.email, orgId: claims.orgId, sid: claims.sessionId }, expiresAt);
    return { token, expiresAt };
  }

  /** Refresh tokens expire with their session: the 30-day lifetime is absolute, rotation never extends it. */
  signRefresh(claims: { userId: string; orgId: string | null; sessionId: string; sessionExpiresAt: Date }): { token: string; jti: string } {
    const jti = randomUUID();
    const exp = Math.floor(claims.sessionExpiresAt.getTime() / 1000);
    return { token: this.sign('refresh', { sub: claims.userId, sid: claims.sessionId, orgId: claims.orgId, jti }, exp), jti };
  }

  signWidget(claims: { orgId: string; widgetId: string; sessionId: string }): { token: string; expiresAt: number } {
    const expiresAt = Math.floor(Date.now() / 1000) + this.config.widgetTokenTtlSeconds;
    return { token: this.sign('widget_session', claims, expiresAt), expiresAt };
  }

  verifyAccess(token: string): AccessClaims {
    const claims = this.verify<AccessClaims>('access', token);
    if (!isUuid(claims.sub) || !isUuid(claims.sid) || !isUuidOrNull(claims.orgId ?? null)) throw new Unauthorized('The token is invalid');
    return claims;
  }

  verifyRefresh(token: string): RefreshClaims {
    const claims = this.verify<RefreshClaims>('refresh', token);
    if (!isUuid(claims.sub) || !isUuid(claims.sid) || typeof claims.jti !== 'string' || !isUuidOrNull(claims.orgId ?? null)) throw new Unauthorized('The token is invalid');
    return claims;
  }

  verifyWidget(token: string): WidgetClaims {
    const claims = this.verify<WidgetClaims>('widget_session', token);
    if (typeof claims.orgId !== 'string' || typeof claims.sessionId !== 'string') throw new Unauthorized('The token is invalid');
    return claims;
  }
}
