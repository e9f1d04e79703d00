// Resolves every caller once into one actor type: an operator (a person, or an organization API key acting as a bot),
// a widget visitor, or the internal AI service. REST and the socket handshake both ask here.
import jwt from 'jsonwebtoken';
import { Batched } from '../../db/batched.js';
import type { Models } from '../../db/index.js';
import type { Statement, StatementFactory } from '../../db/statements.js';
import type { Availability, Role, MembershipStatus } from '../../db/models/Membership.js';
import { ServiceUnavailable, Unauthorized } from '../errors.js';
import { isUuid } from '../validation.js';
import { safeEqual } from './secrets.js';
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
  /** When the session behind an access token ends (ms since the epoch). */
  sessionExpiresAt?: number;
  /** Set when an organization API key is calling: the bot acts with the agent role, narrowed to these scopes. */
  apiKey?: { id: string; scopes: string[] };
}

/** A widget visitor, by their widget_session token; the session row must still exist. */
export interface VisitorActor {
  kind: 'visitor';
  orgId: string;
  widgetId: string;
  sessionId: string;
  name: string | null;
  email: string | null;
  tokenExpiresAt: number;
  /** The widget's allowed origins, read with the session (the socket handshake checks the page's Origin). */
  allowedOrigins: string[];
}

/** The internal AI service, by its shared secret; it names the organization of each call in the call itself. */
export interface AiServiceActor {
  kind: 'ai';
}

export type Actor = OperatorActor | VisitorActor | AiServiceActor;

/** What a bearer credential says it is, read without verifying it: it only picks the verifier (and a log label). */
export type CredentialKind = 'api_key' | 'access' | 'widget_session' | 'unknown';

const API_KEY_PREFIX = 'sp_live_';

export function credentialKind(token: string): CredentialKind {
  if (token.startsWith(API_KEY_PREFIX)) return 'api_key';
  const typ = jwt.decode(token, { json: true })?.typ;
  return typ === 'access' || typ === 'widget_session' ? typ : 'unknown';
}

interface ActorRow {
  i: number;
  revokedAt: Date | null;
  expiresAt: Date;
  email: string;
  name: string;
  membershipId: string | null;
  role: Role;
  status: MembershipStatus;
  availability: Availability;
}

interface VisitorRow {
  i: number;
  id: string;
  widgetId: string;
  name: string | null;
  email: string | null;
  allowedOrigins: string[] | null;
}

// Every authenticated request and handshake runs these, so they are prepared statements, and the callers of one
// event-loop turn share one run (db/batched.ts): a reconnect storm costs a statement per batch, not per socket.
// `= any(array(...))` lets the planner find the rows by primary key (it cannot size the recordset).
const ACTOR_SQL = `
with input as (select * from jsonb_to_recordset($1::jsonb) as i(i int, sid uuid, uid uuid, org uuid))
select i.i, s.revoked_at as "revokedAt", s.expires_at as "expiresAt", u.email, u.name,
       m.id as "membershipId", m.role, m.status, m.availability
from input i
join auth_sessions s on s.id = i.sid and s.user_id = i.uid
join users u on u.id = s.user_id
left join memberships m on m.user_id = u.id and m.organization_id = i.org
where s.id = any(array(select sid from input))`;

// The visitor session and its widget's allowed origins together: the one query of a visitor's handshake.
const VISITOR_SQL = `
with input as (select * from jsonb_to_recordset($1::jsonb) as i(i int, sid uuid, org uuid))
select i.i, v.id, v.widget_id as "widgetId", v.name, v.email, w.allowed_origins as "allowedOrigins"
from input i
join visitor_sessions v on v.id = i.sid and v.organization_id = i.org
join widgets w on w.id = v.widget_id
where v.id = any(array(select sid from input))`;

const BATCH_LIMITS = { maxBatch: 200, concurrency: 2 };

/** Runs a batched statement over `inputs` (numbered in order) and hands each input its row. */
async function rowsByInput<Row extends { i: number }>(statement: Statement<Row>, inputs: Record<string, unknown>[]): Promise<(Row | undefined)[]> {
  const rows = await statement.rows([JSON.stringify(inputs.map((input, i) => ({ i, ...input })))]);
  const out: (Row | undefined)[] = new Array(inputs.length);
  for (const row of rows) out[row.i] = row;
  return out;
}

export class ActorResolver {
  private readonly sessions: Batched<{ sid: string; uid: string; org: string | null }, ActorRow>;
  private readonly visitorSessions: Batched<{ sid: string; org: string }, VisitorRow>;

  constructor(
    statement: StatementFactory,
    private readonly tokens: TokenService,
    /** Resolves `sp_live_` organization API keys; without it only access tokens are accepted. */
    private readonly apiKeys: { authenticate(token: string): Promise<OperatorActor> } | null = null,
    /** Visitor sessions live in the database; the AI service's secret is configured (null: its routes answer 503). */
    private readonly others: { models?: Models; aiToolSecret?: string | null } = {},
  ) {
    const actorStatement = statement<ActorRow>('resolve_actors', ACTOR_SQL);
    const visitorStatement = statement<VisitorRow>('resolve_visitors', VISITOR_SQL);
    this.sessions = new Batched((inputs) => rowsByInput(actorStatement, inputs), BATCH_LIMITS);
    this.visitorSessions = new Batched((inputs) => rowsByInput(visitorStatement, inputs), BATCH_LIMITS);
  }

  /** Any bearer credential: an access token or API key (operator) or a widget_session token (visitor); `kind` when the caller already read it. */
  async fromToken(token: string, kind: CredentialKind = credentialKind(token)): Promise<OperatorActor | VisitorActor> {
    if (kind === 'widget_session') return this.visitor(token);
    if (kind === 'unknown') throw new Unauthorized('The token is invalid or has expired');
    if (this.apiKeys && kind === 'api_key') return this.apiKeys.authenticate(token);
    return this.fromAccessToken(token);
  }

  /** An operator: an organization API key, or an access token whose session is live (401 for any other kind). */
  async operator(token: string): Promise<OperatorActor> {
    if (this.apiKeys && credentialKind(token) === 'api_key') return this.apiKeys.authenticate(token);
    return this.fromAccessToken(token);
  }

  /** A visitor: a widget_session token whose visitor session still exists (401 for any other kind). */
  async visitor(token: string): Promise<VisitorActor> {
    if (!this.others.models) throw new ServiceUnavailable('Visitors are not served here');
    const claims = this.tokens.verifyWidget(token);
    // One malformed id would fail the whole batch's cast: such a token names no session.
    if (!isUuid(claims.sessionId) || !isUuid(claims.orgId)) throw new Unauthorized('The widget session has ended');
    const session = await this.visitorSessions.load({ sid: claims.sessionId, org: claims.orgId });
    if (!session || session.widgetId !== claims.widgetId) throw new Unauthorized('The widget session has ended');
    return {
      kind: 'visitor',
      orgId: claims.orgId,
      widgetId: claims.widgetId,
      sessionId: session.id,
      name: session.name,
      email: session.email,
      tokenExpiresAt: claims.exp,
      allowedOrigins: session.allowedOrigins ?? [],
    };
  }

  /** The AI service, by x-ai-tool-secret compared in constant time; 503 when no secret is configured (fail closed). */
  aiService(given: string): AiServiceActor {
    const secret = this.others.aiToolSecret;
    if (!secret) throw new ServiceUnavailable('The internal AI service is not configured on this server');
    if (!given || !safeEqual(given, secret)) throw new Unauthorized('A valid x-ai-tool-secret header is required');
    return { kind: 'ai' };
  }

  /** One query: session liveness, the user and the membership of the token's organization. */
  private async fromAccessToken(token: string): Promise<OperatorActor> {
    const claims: AccessClaims = this.tokens.verifyAccess(token);
    const row = await this.sessions.load({ sid: claims.sid, uid: claims.sub, org: claims.orgId ?? null });
    const sessionExpiresAt = row ? new Date(row.expiresAt).getTime() : 0;
    if (!row || row.revokedAt || sessionExpiresAt <= Date.now()) {
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
      sessionExpiresAt,
    };
  }
}
