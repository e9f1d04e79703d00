// Benchmark data, made inside the app server process with the app's own database, services and token signer
// (bulk inserts: 10,000 visitors through the HTTP API would only measure the setup). Measured traffic never
// comes through here: it goes through the real HTTP and Socket.IO paths.
import { randomUUID } from 'node:crypto';
import bcrypt from 'bcrypt';
import { SessionService } from '../../../server/auth/sessions.js';
import { TokenService } from '../../../server/auth/tokens.js';
import type { AppServer } from '../../../server/server.js';

export interface SeedRequest {
  /** Distinguishes this run's rows (emails, slugs) from earlier runs on a shared PostgreSQL. */
  runId: string;
  orgs: number;
  agents: number;
  visitors: number;
  /** One open conversation per visitor (chat), or none (connections). */
  conversations: boolean;
  /**
   * Messages already in each of those conversations, as on a site that has been running: an empty messages table is
   * a state a live database is only in on its first day (and plans made then assume it stays empty).
   */
  conversationHistory?: number;
  /** A conversation of the first organization with this many messages (rest); 0 for none. */
  historyMessages?: number;
  /** Conversations of the first organization for REST replies. */
  replyConversations?: number;
  /** Users of the first organization for the login measure, all with one hash of this cost. */
  loginUsers?: number;
  loginCost?: number;
}

export interface SeedVisitor {
  sessionId: string;
  token: string;
  conversationId: string | null;
}

export interface SeedOrg {
  id: string;
  agents: { userId: string; token: string }[];
  visitors: SeedVisitor[];
}

export interface SeedResult {
  orgs: SeedOrg[];
  historyConversationId: string | null;
  replyConversationIds: string[];
  login: { emails: string[]; password: string; cost: number } | null;
  seconds: number;
}

export const LOGIN_PASSWORD = 'bench password 0123';
const CHUNK = 1000;

async function insertChunked<T extends Record<string, unknown>>(server: AppServer, table: string, rows: T[], returning: string[]): Promise<Record<string, string>[]> {
  const out: Record<string, string>[] = [];
  for (let i = 0; i < rows.length; i += CHUNK) {
    out.push(...((await server.db.knex(table).insert(rows.slice(i, i + CHUNK)).returning(returning)) as Record<string, string>[]));
  }
  return out;
}

/** Spreads `total` over `parts` as evenly as possible. */
export function spread(total: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));
}

export async function seed(server: AppServer, req: SeedRequest): Promise<SeedResult> {
  const started = performance.now();
  const { knex } = server.db;
  const tokens = new TokenService(server.config);
  const sessions = new SessionService(server.db.models, tokens, server.events, server.config.refreshTokenTtlSeconds);
  // Agents never log in during the chat measures; a cheap hash keeps the setup fast.
  const agentHash = await bcrypt.hash(randomUUID(), 4);
  const now = new Date();

  const orgRows = await insertChunked(
    server,
    'organizations',
    Array.from({ length: req.orgs }, (_, i) => ({ name: `Bench ${i}`, slug: `bench-${req.runId}-${i}`, plan: 'enterprise', settings: JSON.stringify({}) })),
    ['id'],
  );
  const orgIds = orgRows.map((r) => r.id!);
  const agentsPer = spread(req.agents, req.orgs);
  const visitorsPer = spread(req.visitors, req.orgs);

  const userRows: { email: string; name: string; password_hash: string; last_organization_id: string }[] = [];
  orgIds.forEach((orgId, o) => {
    for (let a = 0; a < Math.max(1, agentsPer[o]!); a++) {
      userRows.push({ email: `bench-${req.runId}-o${o}-a${a}@bench.test`, name: `Agent ${o}.${a}`, password_hash: agentHash, last_organization_id: orgId });
    }
  });
  const users = await insertChunked(server, 'users', userRows, ['id', 'email']);
  const orgOfUser = new Map(userRows.map((u) => [u.email, u.last_organization_id]));
  const seenOrgs = new Set<string>();
  await insertChunked(
    server,
    'memberships',
    users.map((u) => {
      const orgId = orgOfUser.get(u.email!)!;
      const role = seenOrgs.has(orgId) ? 'agent' : 'owner';
      seenOrgs.add(orgId);
      return { organization_id: orgId, user_id: u.id, email: u.email, role, status: 'accepted', invited_at: now, activated_at: now };
    }),
    ['id'],
  );

  const orgs: SeedOrg[] = orgIds.map((id) => ({ id, agents: [], visitors: [] }));
  const byId = new Map(orgs.map((o) => [o.id, o]));
  for (const u of users) {
    const orgId = orgOfUser.get(u.email!)!;
    const pair = await sessions.create({ id: u.id!, email: u.email! }, orgId, { ip: '127.0.0.1', userAgent: 'bench' });
    byId.get(orgId)!.agents.push({ userId: u.id!, token: pair.accessToken });
  }
  // An organization asked to have no agents still needs its owner for setup; it takes no part in receiving.
  orgs.forEach((o, i) => {
    if (agentsPer[i] === 0) o.agents = [];
  });

  for (const [o, org] of orgs.entries()) {
    const widget = await server.services.widget.forOrg(org.id);
    const count = visitorsPer[o]!;
    if (count === 0) continue;
    const visitorRows = await insertChunked(
      server,
      'visitor_sessions',
      Array.from({ length: count }, (_, v) => ({ organization_id: org.id, widget_id: widget.id, name: `Visitor ${o}.${v}`, origin: null, last_seen_at: now })),
      ['id'],
    );
    let conversationIds: (string | null)[] = visitorRows.map(() => null);
    if (req.conversations) {
      const rows = await insertChunked(
        server,
        'conversations',
        visitorRows.map((v, i) => ({ organization_id: org.id, status: 'open', priority: 'medium', channel: 'widget', source: 'widget', visitor_session_id: v.id, visitor_name: `Visitor ${o}.${i}`, tags: JSON.stringify([]) })),
        ['id', 'visitor_session_id'],
      );
      // knex's snake-case mappers hand rows back in camelCase.
      const bySession = new Map(rows.map((r) => [r.visitorSessionId, r.id!]));
      conversationIds = visitorRows.map((v) => bySession.get(v.id!) ?? null);
      const history = req.conversationHistory ?? 0;
      if (history > 0) {
        const ids = rows.map((r) => r.id!);
        await insertChunked(
          server,
          'messages',
          ids.flatMap((id) =>
            Array.from({ length: history }, (_, k) => ({
              organization_id: org.id, conversation_id: id, seq: k + 1, sender_type: 'visitor', content: `Earlier message ${k + 1}`,
              type: 'text', private: false, metadata: JSON.stringify({}), created_at: new Date(now.getTime() - (history - k) * 60_000),
            })),
          ),
          ['id'],
        );
        await knex('conversations').whereIn('id', ids).update({ last_seq: history, last_message_at: now });
      }
    }
    org.visitors = visitorRows.map((v, i) => ({
      sessionId: v.id!,
      conversationId: conversationIds[i]!,
      token: tokens.signWidget({ orgId: org.id, widgetId: widget.id, sessionId: v.id! }).token,
    }));
  }

  const first = orgs[0]!;
  const conversationOfFirst = async (status = 'open') =>
    (await knex('conversations').insert({ organization_id: first.id, status, priority: 'medium', channel: 'widget', source: 'widget', visitor_name: 'Bench visitor', tags: JSON.stringify([]) }).returning(['id']))[0].id as string;

  let historyConversationId: string | null = null;
  if (req.historyMessages) {
    historyConversationId = await conversationOfFirst();
    const agentId = first.agents[0]?.userId ?? users[0]!.id!;
    const rows = Array.from({ length: req.historyMessages }, (_, i) => ({
      organization_id: first.id,
      conversation_id: historyConversationId,
      seq: i + 1,
      sender_type: i % 2 === 0 ? 'visitor' : 'agent',
      sender_id: i % 2 === 0 ? null : agentId,
      content: `Message ${i + 1}: ${'lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(3)}`,
      type: 'text',
      private: false,
      metadata: JSON.stringify({}),
      created_at: new Date(now.getTime() - (req.historyMessages! - i) * 60_000),
    }));
    await insertChunked(server, 'messages', rows, ['id']);
    await knex('conversations').where('id', historyConversationId).update({ last_seq: req.historyMessages, last_message_at: now, human_joined_at: now, first_reply_at: now });
  }

  const replyConversationIds: string[] = [];
  for (let i = 0; i < (req.replyConversations ?? 0); i++) replyConversationIds.push(await conversationOfFirst());

  let login: SeedResult['login'] = null;
  if (req.loginUsers) {
    const cost = req.loginCost ?? server.config.bcryptCost;
    // One hash for every login user: bcrypt keeps salt and cost in the hash, so each compare pays the full cost.
    const hash = await bcrypt.hash(LOGIN_PASSWORD, cost);
    const rows = Array.from({ length: req.loginUsers }, (_, i) => ({ email: `bench-${req.runId}-login${i}@bench.test`, name: `Login ${i}`, password_hash: hash, last_organization_id: first.id }));
    const created = await insertChunked(server, 'users', rows, ['id', 'email']);
    await insertChunked(server, 'memberships', created.map((u) => ({ organization_id: first.id, user_id: u.id, email: u.email, role: 'agent', status: 'accepted', invited_at: now, activated_at: now })), ['id']);
    login = { emails: rows.map((r) => r.email), password: LOGIN_PASSWORD, cost };
  }

  // Statistics as autovacuum keeps them on a live database: bulk rows measured at once would otherwise be planned
  // for as the tables stood before the seeding.
  if (!server.db.embedded) await knex.raw('analyze organizations, users, memberships, visitor_sessions, conversations, messages');
  return { orgs, historyConversationId, replyConversationIds, login, seconds: (performance.now() - started) / 1000 };
}

export interface TenantsRequest {
  runId: string;
  /** Organizations to make, each with its widget and one visitor. */
  count: number;
}

export interface SeedTenant {
  id: string;
  visitor: { sessionId: string; token: string };
}

/**
 * Many small organizations in a few statements (the cluster's tenants): each has a widget and one visitor, whose
 * socket is all it takes for an instance to serve the organization's namespace.
 */
export async function seedTenants(server: AppServer, req: TenantsRequest): Promise<{ tenants: SeedTenant[]; seconds: number }> {
  const started = performance.now();
  const tokens = new TokenService(server.config);
  const orgRows = await insertChunked(
    server,
    'organizations',
    Array.from({ length: req.count }, (_, i) => ({ name: `Tenant ${i}`, slug: `bench-${req.runId}-t${i}`, plan: 'enterprise', settings: JSON.stringify({}) })),
    ['id'],
  );
  const widgets = await insertChunked(
    server,
    'widgets',
    orgRows.map((o, i) => ({ organization_id: o.id, public_key: `pk_bench_${req.runId}_${i}`, display_name: `Tenant ${i}`, allowed_origins: JSON.stringify([]) })),
    ['id', 'organization_id'],
  );
  const sessions = await insertChunked(
    server,
    'visitor_sessions',
    widgets.map((w, i) => ({ organization_id: w.organizationId, widget_id: w.id, name: `Visitor of tenant ${i}` })),
    ['id', 'organization_id', 'widget_id'],
  );
  const tenants = sessions.map((v) => ({
    id: v.organizationId!,
    visitor: { sessionId: v.id!, token: tokens.signWidget({ orgId: v.organizationId!, widgetId: v.widgetId!, sessionId: v.id! }).token },
  }));
  return { tenants, seconds: (performance.now() - started) / 1000 };
}

/** Messages stored so far in the given organizations. */
export async function countMessages(server: AppServer, orgIds: string[]): Promise<number> {
  const row = await server.db.knex('messages').whereIn('organization_id', orgIds).count<{ count: string }[]>({ count: '*' }).first();
  return Number(row?.count ?? 0);
}

/** Removes this run's rows (organizations cascade; users and their sessions by email). Used on a shared PostgreSQL. */
export async function cleanup(server: AppServer, runId: string): Promise<void> {
  const { knex } = server.db;
  const orgIds = (await knex('organizations').where('slug', 'like', `bench-${runId}-%`).pluck('id')) as string[];
  if (orgIds.length) {
    await knex('ai_call_events').whereIn('organization_id', orgIds).delete();
    await knex('organizations').whereIn('id', orgIds).delete();
  }
  await knex('users').where('email', 'like', `bench-${runId}-%`).delete();
}
