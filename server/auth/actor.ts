// Resolves who is calling from an access token: the session must be live and the role comes from the membership now.
import type { Knex } from 'knex';
import type { Availability, Role, MembershipStatus } from '../../db/models/Membership.js';
import { Unauthorized } from '../errors.js';
import type { AccessClaims, TokenService } from './tokens.js';

export interface OperatorActor {
  kind: 'operator';
  userId: string;
  email: string;
  name: string;
  sessionId: string;
  /** The active organization named by the token (null before the user has one). */
  orgId: string | null;
  /** The caller's membership in the active organization, reloaded for this request; null when none. */
  membership: { id: string; role: Role; status: MembershipStatus; availability: Availability } | null;
  tokenExpiresAt: number;
}

export class ActorResolver {
  constructor(
    private readonly knex: Knex,
    private readonly tokens: TokenService,
  ) {}

  /** One query: session liveness, the user and the membership of the token's organization. */
  async fromAccessToken(token: string): Promise<OperatorActor> {
    const claims: AccessClaims = this.tokens.verifyAccess(token);
    const row = await this.knex('auth_sessions as s')
      .join('users as u', 'u.id', 's.user_id')
      .leftJoin('memberships as m', (join) => {
        join.on('m.user_id', '=', 'u.id').andOn('m.organization_id', '=', this.knex.raw('?', [claims.orgId ?? '00000000-0000-0000-0000-000000000000']));
      })
      .where('s.id', claims.sid)
      .andWhere('s.user_id', claims.sub)
      .first('s.revoked_at', 's.expires_at', 'u.email', 'u.name', 'm.id as membership_id', 'm.role', 'm.status', 'm.availability');
    if (!row || row.revokedAt || new Date(row.expiresAt).getTime() <= Date.now()) {
      throw new Unauthorized('The session has ended; sign in again');
    }
    return {
      kind: 'operator',
      userId: claims.sub,
      email: row.email,
      name: row.name,
      sessionId: claims.sid,
      orgId: claims.orgId ?? null,
      membership: row.membershipId ? { id: row.membershipId, role: row.role, status: row.status, availability: row.availability } : null,
      tokenExpiresAt: claims.exp,
    };
  }
}
