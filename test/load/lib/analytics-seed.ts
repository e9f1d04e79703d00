// Analytics data for the `analytics` scenario: one organization's agents, conversations (spread over the last 365
// days, with first response, escalation, first human reply and resolution moments) and 5 messages each, written
// in set-based SQL (generate_series) inside the app server process; then the message rollup and VACUUM ANALYZE.
// Also the baseline: one sequential scan of the organization's conversations, timed in the same process.
import { SessionService } from '../../../server/auth/sessions.js';
import { TokenService } from '../../../server/auth/tokens.js';
import type { AppServer } from '../../../server/server.js';

export interface AnalyticsSeedRequest {
  orgId: string;
  runId: string;
  /** Agents to add (accepted memberships, no passwords: they are only credited and assigned). */
  agents: number;
  conversations: number;
  /** Keep the organization for later runs: marked as complete once everything is written. */
  keep?: boolean;
}

export interface AnalyticsSeedResult {
  conversations: number;
  messages: number;
  agents: number;
  /** The moment the conversations were spread back from: periods end here. */
  anchor: string;
  seconds: { conversations: number; messages: number; rollup: number; vacuum: number };
}

/** The name a kept organization gets once its seed is complete (a run killed while seeding leaves it unnamed). */
const KEPT_NAME = 'Bench analytics (seeded)';

const CHUNK = 50_000;
const DAY_S = 86_400;

const elapsed = (t0: number) => Math.round((performance.now() - t0) / 100) / 10;

export async function seedAnalytics(server: AppServer, req: AnalyticsSeedRequest): Promise<AnalyticsSeedResult> {
  const knex = server.db.knex;
  let t0 = performance.now();
  const users = (await knex.raw(
    `insert into users (email, name, password_hash, email_verified_at)
     select 'bench-' || ? || '-analytics-' || i || '@bench.example', 'Bench Agent ' || i, 'x', now() from generate_series(1, ?) i returning id`,
    [req.runId, req.agents],
  )).rows as { id: string }[];
  await knex.raw(
    `insert into memberships (organization_id, user_id, email, role, status, invited_at, activated_at)
     select ?, u.id, u.email, 'agent', 'accepted', now(), now() from users u where u.id = any(?::uuid[])`,
    [req.orgId, `{${users.map((u) => u.id).join(',')}}`],
  );
  const agents = `{${users.map((u) => u.id).join(',')}}`;
  // Conversation i: created i/total of the way back over 365 days; a fifth AI-only, a third escalated, most resolved.
  const span = 365 * DAY_S;
  // One clock for every statement: chunk windows computed from each statement's own now() would overlap.
  const anchor = new Date().toISOString();
  for (let start = 0; start < req.conversations; start += CHUNK) {
    const end = Math.min(req.conversations, start + CHUNK) - 1;
    await knex.raw(
      `with a as (select ?::uuid[] as ids), g as (
         select i, ?::timestamptz - make_interval(secs => (i::float8 / ?) * ?) as created,
           (select ids[1 + ((i::bigint * 7919) % array_length(ids, 1))::int] from a) as agent
         from generate_series(?::int, ?::int) i
       )
       insert into conversations (organization_id, status, channel, assigned_to, visitor_name, created_at, updated_at, last_seq, last_message_at,
         first_response_at, first_reply_at, escalated_at, human_joined_at, first_human_reply_at, first_human_reply_by, first_resolved_at, resolved_at, first_resolved_by_ai, closed_at)
       select ?, case when i % 10 < 7 then 'resolved' when i % 10 = 7 then 'closed' else 'open' end,
         case when i % 4 = 0 then 'email' else 'widget' end,
         case when i % 5 = 0 then null else agent end, 'Visitor ' || i, created, created, 5, created + interval '4 minutes',
         created + make_interval(secs => 5 + i % 600),
         case when i % 5 = 0 then null else created + make_interval(secs => 30 + i % 900) end,
         case when i % 3 = 0 then created + interval '2 minutes' else null end,
         case when i % 5 = 0 then null else created + make_interval(secs => 30 + i % 900) end,
         case when i % 5 = 0 then null else created + make_interval(secs => 150 + i % 900) end,
         case when i % 5 = 0 then null else agent end,
         case when i % 10 < 7 then created + make_interval(secs => 600 + (i * 31) % 86400) end,
         case when i % 10 < 7 then created + make_interval(secs => 600 + (i * 31) % 86400) end,
         i % 10 < 7 and i % 5 = 0,
         case when i % 10 = 7 then created + interval '2 days' end
       from g`,
      [agents, anchor, req.conversations, span, start, end, req.orgId],
    );
  }
  const convSeconds = elapsed(t0);
  t0 = performance.now();
  // Five messages each: visitor, AI, visitor, agent, visitor, 30 s apart; chunks follow created_at.
  const days = 366;
  const step = 10;
  for (let d = 0; d < days; d += step) {
    await knex.raw(
      `insert into messages (organization_id, conversation_id, seq, sender_type, sender_id, content, created_at)
       select c.organization_id, c.id, s, (array['visitor', 'ai', 'visitor', 'agent', 'visitor'])[s],
         case when s = 4 then c.assigned_to end, 'Bench message ' || s, c.created_at + make_interval(secs => 30 * (s - 1))
       from conversations c cross join generate_series(1, 5) s
       where c.organization_id = ? and c.created_at >= ?::timestamptz - make_interval(days => ?) and c.created_at < ?::timestamptz - make_interval(days => ?)`,
      [req.orgId, anchor, d + step, anchor, d],
    );
  }
  const msgSeconds = elapsed(t0);
  t0 = performance.now();
  // The seeded messages are back-dated, behind the job's watermark: recount the organization's buckets.
  await server.services.analytics.rollup.recount(req.orgId);
  const rollupSeconds = elapsed(t0);
  t0 = performance.now();
  // The visibility map lets the count-only scans of (organization_id, created_at | done_at) skip the heap.
  for (const table of ['conversations', 'messages', 'message_rollups']) await knex.raw(`vacuum analyze ${table}`);
  const vacuumSeconds = elapsed(t0);
  const [{ n }] = (await knex.raw('select count(*)::int as n from messages where organization_id = ?', [req.orgId])).rows as { n: number }[];
  if (req.keep) await knex.raw('update organizations set name = ? where id = ?', [KEPT_NAME, req.orgId]);
  return { conversations: req.conversations, messages: n, agents: users.length, anchor, seconds: { conversations: convSeconds, messages: msgSeconds, rollup: rollupSeconds, vacuum: vacuumSeconds } };
}

export interface KeptAnalytics {
  orgId: string;
  /** An access token of the organization's owner (the runs' signing secrets differ). */
  token: string;
  data: AnalyticsSeedResult;
}

/**
 * The organization an earlier run seeded and kept (slug bench-<runId>-0), or null. One left half-seeded by a killed
 * run is removed (with `cleanup`), so the caller seeds afresh.
 */
export async function findKeptAnalytics(server: AppServer, { runId, cleanup }: { runId: string; cleanup: (runId: string) => Promise<void> }): Promise<KeptAnalytics | null> {
  const knex = server.db.knex;
  const org = (await knex.raw('select id, name from organizations where slug = ?', [`bench-${runId}-0`])).rows[0] as { id: string; name: string } | undefined;
  if (!org) return null;
  if (org.name !== KEPT_NAME) {
    await cleanup(runId);
    return null;
  }
  const owner = (await knex.raw(
    `select u.id, u.email from memberships m join users u on u.id = m.user_id where m.organization_id = ? and m.role = 'owner' and m.status = 'accepted' limit 1`,
    [org.id],
  )).rows[0] as { id: string; email: string };
  const sessions = new SessionService(server.db.models, new TokenService(server.config), server.events, server.config.refreshTokenTtlSeconds);
  const pair = await sessions.create({ id: owner.id, email: owner.email }, org.id, { ip: '127.0.0.1', userAgent: 'bench' });
  const counts = (await knex.raw(
    `select (select count(*) from conversations where organization_id = ?)::int as conversations,
       (select max(created_at) from conversations where organization_id = ?) as anchor,
       (select count(*) from messages where organization_id = ?)::int as messages,
       (select count(*) from memberships where organization_id = ? and role = 'agent')::int as agents`,
    [org.id, org.id, org.id, org.id],
  )).rows[0] as { conversations: number; anchor: Date; messages: number; agents: number };
  return {
    orgId: org.id,
    token: pair.accessToken,
    data: { conversations: counts.conversations, messages: counts.messages, agents: counts.agents, anchor: new Date(counts.anchor).toISOString(), seconds: { conversations: 0, messages: 0, rollup: 0, vacuum: 0 } },
  };
}

/** One sequential scan of the organization's conversations (index scans off), timed `times` times: the baseline. */
export async function timeConversationScan(server: AppServer, { orgId, times }: { orgId: string; times: number }): Promise<{ ms: number[]; plan: string }> {
  const ms: number[] = [];
  let plan = '';
  const sql = 'select count(*), sum(extract(epoch from (first_response_at - created_at))) from conversations where organization_id = ?';
  await server.db.knex.transaction(async (trx) => {
    await trx.raw('set local enable_indexscan = off');
    await trx.raw('set local enable_bitmapscan = off');
    await trx.raw('set local enable_indexonlyscan = off');
    plan = ((await trx.raw(`explain ${sql}`, [orgId])).rows as { 'QUERY PLAN': string }[]).map((r) => r['QUERY PLAN']).join('\n');
    for (let i = 0; i < times; i++) {
      const t0 = performance.now();
      await trx.raw(sql, [orgId]);
      ms.push(Math.round((performance.now() - t0) * 10) / 10);
    }
  });
  return { ms, plan };
}

/** The plan of the summary's main statement for the period, for the log (EXPLAIN ANALYZE). */
export async function explainSummary(server: AppServer, { orgId, from, to }: { orgId: string; from: string; to: string }): Promise<string> {
  const rows = (await server.db.knex.raw(
    `explain (analyze, costs off) select count(*), percentile_cont(0.5) within group (order by extract(epoch from (first_response_at - created_at)))
     from conversations where organization_id = any(?::uuid[]) and created_at >= ? and created_at < ?`,
    [`{${orgId}}`, from, to],
  )).rows as { 'QUERY PLAN': string }[];
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}
