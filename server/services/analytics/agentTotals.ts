// The agents' table of a long period from the agents' running totals (`analytics_agent_totals`): per member, the
// totals at the end of the period's last whole UTC day less those at the end of the day before its first, plus the
// conversations created in its partial first and last days, read themselves. Counts are exact; medians come from the
// summed histograms (the same bucket middles as the summary's, within 9.1%).
import type { ReadSession } from '../../../db/statements.js';
import { fromHistogram, histogramText } from './aggregates.js';
import { HR, RES } from './durations.js';
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

/** A member's row with what the sort needs that the answer does not show: where the name sorts in SQL's collation. */
type Ranked = AgentFigures & { nameRank: number };

const byNumber = (key: 'assigned' | 'resolved' | 'open') => (a: Ranked, b: Ranked) => b[key] - a[key];
/** Ascending, nulls last (as SQL's `asc nulls last`). */
const byMedian = (key: 'medianFirstResponse' | 'medianResolution') => (a: Ranked, b: Ranked) =>
  a[key] === b[key] ? 0 : a[key] === null ? 1 : b[key] === null ? -1 : a[key]! - b[key]!;
const ORDER: Record<AgentSort, (a: Ranked, b: Ranked) => number> = {
  assigned: byNumber('assigned'), resolved: byNumber('resolved'), open: byNumber('open'),
  medianFirstResponse: byMedian('medianFirstResponse'), medianResolution: byMedian('medianResolution'), name: (a, b) => a.nameRank - b.nameRank,
};

/** `end` less `start` (histograms as text, see histogramText), bucket by bucket, plus one count for each bucket number in `extra`. */
function histogram(end: unknown, start: unknown, extra: unknown): number[] {
  const before = histogramText(start);
  const hist = histogramText(end).map((n, i) => n - (before[i] ?? 0));
  for (const b of (extra as number[] | null) ?? []) {
    while (hist.length <= b) hist.push(0);
    hist[b]! += 1;
  }
  return hist;
}

/**
 * One statement reads each member's totals at both ends (two index probes) and their edge conversations' counts and
 * bucket numbers; the histograms are subtracted, summed and ranked here, which costs a fraction of doing it row by
 * row in SQL (array functions, window sums over 20,000 bucket rows). Null when the period's whole hours hold at
 * most `conversations.atMost` conversations (counted by `conversations.sql`): such periods are read exactly.
 */
export async function agentsFromTotals(
  db: ReadSession, orgId: string, range: AnalyticsRange, days: { from: Date; to: Date }, agentId: string | null, page: { sort: AgentSort; limit: number; offset: number },
  conversations: { sql: string; bindings: unknown[]; atMost: number },
): Promise<{ rows: AgentFigures[]; total: number } | null> {
  const member = agentId ? ' and m.user_id = ?' : '';
  // One agent's row (their own stats) reads only the edge conversations they are in.
  const mine = agentId ? ' and (assigned_to = ? or first_human_reply_by = ?)' : '';
  const me = agentId ? [agentId, agentId] : [];
  const totalsAt = 'select assigned, resolved, open, first_human, hr_hist, res_hist from analytics_agent_totals t where t.organization_id = ? and t.user_id = m.user_id and t.day < ? order by t.day desc limit 1';
  const sql = `
    with members as (
      select m.user_id, coalesce(u.name, m.name) as name from memberships m join users u on u.id = m.user_id
      where m.organization_id = ? and m.status = 'accepted'${member}
    ),
    edge as (
      select assigned_to, first_human_reply_by, first_resolved_at, done_at, ${HR} as hr, ${RES} as res from conversations
      where organization_id = ? and ((created_at >= ? and created_at < ?) or (created_at >= ? and created_at < ?))${mine}
    ),
    assigned as (
      select assigned_to as user_id, count(*)::int as n, count(first_resolved_at)::int as resolved, count(*) filter (where done_at is null)::int as open,
        array_agg(analytics_bucket(res)) filter (where res is not null) as buckets
      from edge where assigned_to is not null group by 1
    ),
    human as (
      select first_human_reply_by as user_id, count(*)::int as n, array_agg(analytics_bucket(hr)) filter (where hr is not null) as buckets
      from edge where first_human_reply_by is not null group by 1
    )
    select m.user_id, m.name, row_number() over (order by m.name, m.user_id)::int as name_rank,
      coalesce(e.assigned, 0) - coalesce(s.assigned, 0) + coalesce(a.n, 0) as assigned,
      coalesce(e.resolved, 0) - coalesce(s.resolved, 0) + coalesce(a.resolved, 0) as resolved,
      coalesce(e.open, 0) - coalesce(s.open, 0) + coalesce(a.open, 0) as open,
      coalesce(e.first_human, 0) - coalesce(s.first_human, 0) + coalesce(h.n, 0) as first_human,
      array_to_string(e.hr_hist, ',', '0') as end_hr, array_to_string(s.hr_hist, ',', '0') as start_hr,
      array_to_string(e.res_hist, ',', '0') as end_res, array_to_string(s.res_hist, ',', '0') as start_res,
      h.buckets as edge_hr, a.buckets as edge_res
    from members m
      left join lateral (${totalsAt}) e on true
      left join lateral (${totalsAt}) s on true
      left join assigned a on a.user_id = m.user_id
      left join human h on h.user_id = m.user_id
      cross join (${conversations.sql}) c
    where c.n > ?`;
  const bindings = [
    orgId, ...(agentId ? [agentId] : []),
    orgId, range.from, days.from, days.to, range.to, ...me,
    orgId, days.to, orgId, days.from,
    ...conversations.bindings, conversations.atMost,
  ];
  const result = (await db.raw(sql, bindings)).rows;
  if (!result.length) return null;
  const rows: Ranked[] = result.map((r) => {
    const hr = histogram(r.end_hr, r.start_hr, r.edge_hr);
    const res = histogram(r.end_res, r.start_res, r.edge_res);
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
      nameRank: int(r.name_rank),
    };
  });
  const order = ORDER[page.sort];
  rows.sort((a, b) => order(a, b) || (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0));
  return { total: rows.length, rows: rows.slice(page.offset, page.offset + page.limit).map(({ nameRank: _rank, ...row }) => row) };
}
