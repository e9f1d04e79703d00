// The agents' table of a long period from the agents' running totals (`analytics_agent_totals`): per member, the
// totals at the end of the period's last whole UTC day less those at the end of the day before its first, plus the
// conversations created in its partial first and last days, read themselves. Counts are exact; medians come from the
// summed histograms (the same bucket middles as the summary's, within 9.1%).
import type { ReadSession } from '../../../db/statements.js';
import { fromHistogram, histogramText } from './aggregates.js';
import { HR, RES } from './durations.js';
import { RECOUNT_WINDOW } from './rollup.js';
import type { AgentFigures, AgentSort } from './queries.js';
import type { AnalyticsRange } from './range.js';

const DAY_MS = 86_400_000;

/** The whole UTC days [from, to) inside the period, or null when it holds none. */
export function wholeDays(range: AnalyticsRange): { from: Date; to: Date } | null {
  const from = new Date(Math.ceil(range.from.getTime() / DAY_MS) * DAY_MS);
  const to = new Date(Math.floor(range.to.getTime() / DAY_MS) * DAY_MS);
  return from < to ? { from, to } : null;
}

const int = (v: unknown): number => Number(v ?? 0);

/**
 * Sorts by counts or name are ranked in SQL (names in its collation; ties by id): only the page's rows then carry
 * histograms, a tenth of the members for a default page, where reading, sending and parsing every member's four
 * histograms cost more than the rest of the answer. Sorts by a median need every member's, and sort here.
 */
const RANK: Record<AgentSort, string | null> = {
  assigned: 'assigned desc, user_id', resolved: 'resolved desc, user_id', open: 'open desc, user_id', name: 'name, user_id',
  medianFirstResponse: null, medianResolution: null,
};
/**
 * Ascending, nulls last (as SQL's `asc nulls last`). Ties keep the order the rows arrive in, by id (SQL ranks by id
 * when the sort is a median, and the sort is stable).
 */
const byMedian = (key: 'medianFirstResponse' | 'medianResolution') => (a: AgentFigures, b: AgentFigures) =>
  a[key] === b[key] ? 0 : a[key] === null ? 1 : b[key] === null ? -1 : a[key]! - b[key]!;

/**
 * `end` less `start` (histograms as text, see histogramText), bucket by bucket, plus one count for each bucket number
 * in `extra` and less one for each in `minus`.
 */
function histogram(end: unknown, start: unknown, extra: unknown, minus: unknown): number[] {
  const before = histogramText(start);
  const hist = histogramText(end).map((n, i) => n - (before[i] ?? 0));
  for (const [buckets, d] of [[extra, 1], [minus, -1]] as const) {
    for (const b of (buckets as number[] | null) ?? []) {
      while (hist.length <= b) hist.push(0);
      hist[b]! += d;
    }
  }
  return hist;
}

/**
 * A partial day at an end of the period is read from the side of its UTC day boundary that is shorter: the
 * conversations between the period's end and the boundary inside the period are added to the totals, or the totals
 * are taken at the boundary outside it and the conversations between it and the period's end are taken off.
 */
interface Edge { from: Date; to: Date; sign: 1 | -1 }

function edges(range: AnalyticsRange, days: { from: Date; to: Date }, smaller: boolean): { start: Date; end: Date; windows: [Edge, Edge] } {
  const dayBefore = new Date(days.from.getTime() - DAY_MS);
  const dayAfter = new Date(days.to.getTime() + DAY_MS);
  const first = !smaller || days.from.getTime() - range.from.getTime() <= range.from.getTime() - dayBefore.getTime()
    ? { at: days.from, w: { from: range.from, to: days.from, sign: 1 as const } }
    : { at: dayBefore, w: { from: dayBefore, to: range.from, sign: -1 as const } };
  const last = !smaller || range.to.getTime() - days.to.getTime() <= dayAfter.getTime() - range.to.getTime()
    ? { at: days.to, w: { from: days.to, to: range.to, sign: 1 as const } }
    : { at: dayAfter, w: { from: range.to, to: dayAfter, sign: -1 as const } };
  return { start: first.at, end: last.at, windows: [first.w, last.w] };
}

/**
 * One statement reads each member's totals at both ends (two index probes) and their edge conversations' counts and
 * bucket numbers; the histograms are subtracted, summed and ranked here, which costs a fraction of doing it row by
 * row in SQL (array functions, window sums over 20,000 bucket rows). Null when the period's whole hours hold at
 * most `conversations.atMost` conversations (counted by `conversations.sql`): such periods are read exactly.
 *
 * Edges are read from their shorter side (see `edges`) when the conversations taken off are in the totals as they
 * are now: none of them changed since the rollup job's last run (less its recount window), else the statement is run
 * again adding the edges from inside the period, which never mixes a conversation's old and new state.
 */
export async function agentsFromTotals(
  db: ReadSession, orgId: string, range: AnalyticsRange, days: { from: Date; to: Date }, agentId: string | null, page: { sort: AgentSort; limit: number; offset: number },
  conversations: { sql: string; bindings: unknown[]; atMost: number },
): Promise<{ rows: AgentFigures[]; total: number } | null> {
  const shorter = await fromTotals(db, orgId, range, edges(range, days, true), agentId, page, conversations);
  return shorter === 'changed' ? (await fromTotals(db, orgId, range, edges(range, days, false), agentId, page, conversations)) as { rows: AgentFigures[]; total: number } | null : shorter;
}

async function fromTotals(
  db: ReadSession, orgId: string, range: AnalyticsRange, e: ReturnType<typeof edges>, agentId: string | null, page: { sort: AgentSort; limit: number; offset: number },
  conversations: { sql: string; bindings: unknown[]; atMost: number },
): Promise<{ rows: AgentFigures[]; total: number } | null | 'changed'> {
  const member = agentId ? ' and m.user_id = ?' : '';
  // One agent's row (their own stats) reads only the edge conversations they are in.
  const mine = agentId ? ' where assigned_to = ? or first_human_reply_by = ?' : '';
  const me = agentId ? [agentId, agentId] : [];
  const totalsAt = 'select assigned, resolved, open, first_human, hr_hist, res_hist from analytics_agent_totals t where t.organization_id = ? and t.user_id = m.user_id and t.day < ? order by t.day desc limit 1';
  const signed = (what: string) => `sum(s) filter (where ${what})::int`;
  // A conversation taken off the totals changed since the rollup job last ran (less its recount window).
  const changed = `updated_at >= (select coalesce(rolled_until - interval '${RECOUNT_WINDOW}', '-infinity') from message_rollup_state where id = 1)`;
  const window = `(select ?::int as s, assigned_to, first_human_reply_by, first_resolved_at, done_at, ${HR} as hr, ${RES} as res, ?::int < 0 and ${changed} as changed
      from conversations where organization_id = ? and created_at >= ? and created_at < ?)`;
  const sql = `
    with members as (
      select m.user_id, coalesce(u.name, m.name) as name from memberships m join users u on u.id = m.user_id
      where m.organization_id = ? and m.status = 'accepted'${member}
    ),
    edge as (
      select * from (${window} union all ${window}) e${mine}
    ),
    assigned as (
      select assigned_to as user_id, sum(s)::int as n, ${signed('first_resolved_at is not null')} as resolved, ${signed('done_at is null')} as open,
        array_agg(analytics_bucket(res)) filter (where res is not null and s > 0) as buckets,
        array_agg(analytics_bucket(res)) filter (where res is not null and s < 0) as minus
      from edge where assigned_to is not null group by 1
    ),
    human as (
      select first_human_reply_by as user_id, sum(s)::int as n,
        array_agg(analytics_bucket(hr)) filter (where hr is not null and s > 0) as buckets,
        array_agg(analytics_bucket(hr)) filter (where hr is not null and s < 0) as minus
      from edge where first_human_reply_by is not null group by 1
    ),
    figures as (
      select m.user_id, m.name,
        coalesce(e.assigned, 0) - coalesce(s.assigned, 0) + coalesce(a.n, 0) as assigned,
        coalesce(e.resolved, 0) - coalesce(s.resolved, 0) + coalesce(a.resolved, 0) as resolved,
        coalesce(e.open, 0) - coalesce(s.open, 0) + coalesce(a.open, 0) as open,
        coalesce(e.first_human, 0) - coalesce(s.first_human, 0) + coalesce(h.n, 0) as first_human,
        e.hr_hist as end_hr, s.hr_hist as start_hr, e.res_hist as end_res, s.res_hist as start_res,
        h.buckets as edge_hr, a.buckets as edge_res, h.minus as minus_hr, a.minus as minus_res
      from members m
        left join lateral (${totalsAt}) e on true
        left join lateral (${totalsAt}) s on true
        left join assigned a on a.user_id = m.user_id
        left join human h on h.user_id = m.user_id
        cross join (${conversations.sql}) c
      where c.n > ?
    )
    select user_id, name, assigned, resolved, open, first_human, pos,
      ${['end_hr', 'start_hr', 'end_res', 'start_res'].map((c) => `case when shown then array_to_string(${c}, ',', '0') end as ${c}`).join(', ')},
      ${['edge_hr', 'edge_res', 'minus_hr', 'minus_res'].map((c) => `case when shown then ${c} end as ${c}`).join(', ')},
      (select count(*) from edge where changed)::int as changed
    from (select *, pos > ? and pos <= ? as shown from (select *, row_number() over (order by ${RANK[page.sort] ?? 'user_id'}) as pos from figures) f) f
    order by pos`;
  const [w1, w2] = e.windows;
  const bindings = [
    orgId, ...(agentId ? [agentId] : []),
    w1.sign, w1.sign, orgId, w1.from, w1.to, w2.sign, w2.sign, orgId, w2.from, w2.to, ...me,
    orgId, e.end, orgId, e.start,
    ...conversations.bindings, conversations.atMost,
    ...(RANK[page.sort] ? [page.offset, page.offset + page.limit] : [0, Number.MAX_SAFE_INTEGER]),
  ];
  const result = (await db.raw(sql, bindings)).rows;
  if (!result.length) return null;
  if (int(result[0]!.changed) > 0) return 'changed';
  const rows: AgentFigures[] = result.map((r) => {
    const hr = histogram(r.end_hr, r.start_hr, r.edge_hr, r.minus_hr);
    const res = histogram(r.end_res, r.start_res, r.edge_res, r.minus_res);
    const count = (hist: number[]) => hist.reduce((a, b) => a + b, 0);
    return {
      userId: String(r.user_id),
      name: (r.name as string | null) ?? null,
      assigned: int(r.assigned),
      resolved: int(r.resolved),
      open: int(r.open),
      firstHumanResponses: int(r.first_human),
      medianFirstResponse: fromHistogram(hr, count(hr), 0.5),
      medianResolution: fromHistogram(res, count(res), 0.5),
    };
  });
  // Sorts by counts or name come ranked (see RANK); a median sort is done here.
  if (page.sort === 'medianFirstResponse' || page.sort === 'medianResolution') rows.sort(byMedian(page.sort));
  return { total: rows.length, rows: rows.slice(page.offset, page.offset + page.limit) };
}
