// The agents' table of a long period from the agents' running totals (`analytics_agent_totals`): per member, the
// totals at the end of the period's last whole UTC day less those at the end of the day before its first, plus the
// conversations created in its partial first and last days, read themselves. Counts are exact; medians come from the
// summed histograms (the same bucket middles as the summary's, within 9.1%).
import type { Knex } from 'knex';
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

const ORDER: Record<AgentSort, string> = {
  assigned: 'assigned desc', resolved: 'resolved desc', open: 'open desc',
  medianFirstResponse: 'median_first_response asc nulls last', medianResolution: 'median_resolution asc nulls last', name: 'name asc',
};

/** A bucket's value as `fromHistogram` answers it (ordinal i is bucket i - 1; see aggregates.ts bucketValue). */
const middle = (ordinal: string) => `case when ${ordinal} is null then null when ${ordinal} = 1 then 0 else round(2 ^ ((${ordinal} - 1.5) / 4)) end`;

const int = (v: unknown): number => Number(v ?? 0);
const round = (v: unknown): number | null => (v === null || v === undefined ? null : Math.round(Number(v)));

export async function agentsFromTotals(
  knex: Knex, orgId: string, range: AnalyticsRange, days: { from: Date; to: Date }, agentId: string | null, page: { sort: AgentSort; limit: number; offset: number },
): Promise<{ rows: AgentFigures[]; total: number }> {
  const member = agentId ? ' and m.user_id = ?' : '';
  // One agent's row (their own stats) reads only the edge conversations they are in.
  const mine = agentId ? ' and (assigned_to = ? or first_human_reply_by = ?)' : '';
  const me = agentId ? [agentId, agentId] : [];
  const edgeColumns = 'assigned_to, first_human_reply_by, created_at, escalated_at, first_human_reply_at, first_resolved_at, done_at';
  const totalsAt = 'select * from analytics_agent_totals t where t.organization_id = ? and t.user_id = m.user_id and t.day < ? order by t.day desc limit 1';
  // Histograms are summed and ranked as rows (agent, kind, bucket, count): per-row array functions would cost a
  // millisecond each, two hundred agents times six of them.
  const sql = `
    with members as (
      select m.user_id, coalesce(u.name, m.name) as name from memberships m join users u on u.id = m.user_id
      where m.organization_id = ? and m.status = 'accepted'${member}
    ),
    e as (select t.* from members m cross join lateral (${totalsAt}) t),
    s as (select t.* from members m cross join lateral (${totalsAt}) t),
    edge as (
      select ${edgeColumns} from conversations where organization_id = ? and created_at >= ? and created_at < ?${mine}
      union all
      select ${edgeColumns} from conversations where organization_id = ? and created_at >= ? and created_at < ?${mine}
    ),
    counts as (
      select user_id, sum(assigned) as assigned, sum(resolved) as resolved, sum(open) as open, sum(first_human) as first_human from (
        select user_id, assigned, resolved, open, first_human from e
        union all select user_id, -assigned, -resolved, -open, -first_human from s
        union all select assigned_to, 1, (first_resolved_at is not null)::int, (done_at is null)::int, 0 from edge where assigned_to is not null
        union all select first_human_reply_by, 0, 0, 0, 1 from edge where first_human_reply_by is not null
      ) c group by 1
    ),
    buckets as (
      select user_id, i, sum(hr) as hr, sum(res) as res from (
        select e.user_id, u.i, coalesce(u.eh, 0) - coalesce(u.sh, 0) as hr, coalesce(u.er, 0) - coalesce(u.sr, 0) as res
        from e left join s on s.user_id = e.user_id cross join lateral unnest(e.hr_hist, s.hr_hist, e.res_hist, s.res_hist) with ordinality u(eh, sh, er, sr, i)
        where coalesce(u.eh, 0) <> coalesce(u.sh, 0) or coalesce(u.er, 0) <> coalesce(u.sr, 0)
        union all select first_human_reply_by, analytics_bucket(${HR}) + 1, 1, 0 from edge where first_human_reply_by is not null and first_human_reply_at is not null
        union all select assigned_to, analytics_bucket(${RES}) + 1, 0, 1 from edge where assigned_to is not null and first_resolved_at is not null
      ) b group by 1, 2
    ),
    ranked as (
      select user_id, i, hr, res, sum(hr) over w as hr_seen, sum(hr) over (partition by user_id) as hr_total,
        sum(res) over w as res_seen, sum(res) over (partition by user_id) as res_total
      from buckets window w as (partition by user_id order by i)
    ),
    medians as (
      select user_id, min(i) filter (where hr > 0 and hr_seen > 0.5 * (hr_total - 1)) as hr_bucket, min(i) filter (where res > 0 and res_seen > 0.5 * (res_total - 1)) as res_bucket
      from ranked group by 1
    ),
    figures as (
      select m.user_id, m.name, coalesce(c.assigned, 0) as assigned, coalesce(c.resolved, 0) as resolved, coalesce(c.open, 0) as open,
        coalesce(c.first_human, 0) as first_human_responses,
        ${middle('md.hr_bucket')} as median_first_response, ${middle('md.res_bucket')} as median_resolution
      from members m left join counts c on c.user_id = m.user_id left join medians md on md.user_id = m.user_id
    )
    select *, count(*) over () as total from figures
    order by ${ORDER[page.sort]}, user_id
    limit ? offset ?`;
  const bindings: Knex.RawBinding[] = [
    orgId, ...(agentId ? [agentId] : []),
    orgId, days.to, orgId, days.from,
    orgId, range.from, days.from, ...me, orgId, days.to, range.to, ...me,
    page.limit, page.offset,
  ];
  const rows = (await knex.raw(sql, bindings)).rows as Record<string, unknown>[];
  let total = rows.length ? int(rows[0]!.total) : 0;
  if (!rows.length && page.offset > 0) {
    // Past the last page: the window count is not there to read.
    const counted = (await knex.raw(`select count(*)::int as n from memberships m where m.organization_id = ? and m.status = 'accepted' and m.user_id is not null${member}`, [orgId, ...(agentId ? [agentId] : [])])).rows[0] as { n: number };
    total = counted.n;
  }
  return {
    total,
    rows: rows.map((r) => ({
      userId: String(r.user_id),
      name: (r.name as string | null) ?? null,
      assigned: int(r.assigned),
      resolved: int(r.resolved),
      open: int(r.open),
      firstHumanResponses: int(r.first_human_responses),
      medianFirstResponse: round(r.median_first_response),
      medianResolution: round(r.median_resolution),
    })),
  };
}
