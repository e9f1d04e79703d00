// Resolves who is calling from an access token: the session must be live and the role comes from the membership now.
import type { Statement, StatementFactory } from '../../db/statements.js';
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
  /** Set when an organization API key is calling: the bot acts with the agent role, narrowed to these scopes. */
  apiKey?: { id: string; scopes: string[] };
}

interface ActorRow {
  revokedAt: Date | null;
  expiresAt: Date;
  email: string;
  name: string;
  membershipId: string | null;
  role: Role;
  status: MembershipStatus;
  availability: Availability;
}

// Every authenticated request and handshake runs this, so it is a prepared statement.
const ACTOR_SQL = `
select s.revoked_at as "revokedAt", s.expires_at as "expiresAt", u.email, u.name,
       m.id as "membershipId", m.role, m.status, m.availability
from auth_sessions s
join users u on u.id = s.user_id
left join memberships m on m.user_id = u.id and m.organization_id = $3::uuid
where s.id = $1::uuid and s.user_id = $2::uuid`;

export class ActorResolver {
  private readonly actorStatement: Statement<ActorRow>;

  constructor(
    statement: StatementFactory,
    private readonly tokens: TokenService,
    /** Resolves `sp_live_` organization API keys; without it only access tokens are accepted. */
    private readonly apiKeys: { authenticate(token: string): Promise<OperatorActor> } | null = null,
  ) {
    this.actorStatement = statement<ActorRow>('resolve_actor', ACTOR_SQL);
  }

  /** One query: session liveness, the user and the membership of the token's organization. */
  async fromAccessToken(token: string): Promise<OperatorActor> {
    if (this.apiKeys && token.startsWith('sp_live_')) return this.apiKeys.authenticate(token);
    const claims: AccessClaims = this.tokens.verifyAccess(token);
    const [row] = await this.actorStatement.rows([claims.sid, claims.sub, claims.orgId ?? null]);
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
