// The agents' table of a long period from the agents' running totals (`analytics_agent_totals`): per member, the
// totals at the end of the period's last whole UTC day less those at the end of the day before its first, plus the
// conversations created in its partial first and last days, read themselves. Counts are exact; medians come from the
// summed histograms (`analytics_quantile`, the same bucket middles as the summary's, within 9.1%).
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

const int = (v: unknown): number => Number(v ?? 0);
const round = (v: unknown): number | null => (v === null || v === undefined ? null : Math.round(Number(v)));

export async function agentsFromTotals(
  knex: Knex, orgId: string, range: AnalyticsRange, days: { from: Date; to: Date }, agentId: string | null, page: { sort: AgentSort; limit: number; offset: number },
): Promise<{ rows: AgentFigures[]; total: number }> {
  const member = agentId ? ' and m.user_id = ?' : '';
  const edgeColumns = 'assigned_to, first_human_reply_by, created_at, escalated_at, first_human_reply_at, first_resolved_at, done_at';
  const totalsAt = (alias: string) => `left join lateral (select * from analytics_agent_totals t where t.organization_id = ? and t.user_id = m.user_id and t.day < ? order by t.day desc limit 1) ${alias} on true`;
  const sql = `
    with members as (
      select m.user_id, coalesce(u.name, m.name) as name from memberships m join users u on u.id = m.user_id
      where m.organization_id = ? and m.status = 'accepted'${member}
    ),
    edge as (
      select ${edgeColumns} from conversations where organization_id = ? and created_at >= ? and created_at < ?
      union all
      select ${edgeColumns} from conversations where organization_id = ? and created_at >= ? and created_at < ?
    ),
    live as (
      select x.user_id, sum(x.assigned)::int as assigned, sum(x.resolved)::int as resolved, sum(x.open)::int as open, sum(x.human)::int as first_human,
        analytics_hist(array_agg(analytics_bucket(x.res))) as res_hist, analytics_hist(array_agg(analytics_bucket(x.hr))) as hr_hist
      from (
        select assigned_to as user_id, 1 as assigned, (first_resolved_at is not null)::int as resolved, (done_at is null)::int as open, 0 as human, ${RES} as res, null::float8 as hr
        from edge where assigned_to is not null
        union all
        select first_human_reply_by, 0, 0, 0, 1, null, ${HR} from edge where first_human_reply_by is not null
      ) x group by 1
    ),
    figures as (
      select m.user_id, m.name,
        coalesce(e.assigned, 0) - coalesce(s.assigned, 0) + coalesce(l.assigned, 0) as assigned,
        coalesce(e.resolved, 0) - coalesce(s.resolved, 0) + coalesce(l.resolved, 0) as resolved,
        coalesce(e.open, 0) - coalesce(s.open, 0) + coalesce(l.open, 0) as open,
        coalesce(e.first_human, 0) - coalesce(s.first_human, 0) + coalesce(l.first_human, 0) as first_human_responses,
        analytics_quantile(analytics_hist_add(analytics_hist_sub(e.hr_hist, s.hr_hist), l.hr_hist), 0.5) as median_first_response,
        analytics_quantile(analytics_hist_add(analytics_hist_sub(e.res_hist, s.res_hist), l.res_hist), 0.5) as median_resolution
      from members m ${totalsAt('e')} ${totalsAt('s')} left join live l on l.user_id = m.user_id
    )
    select *, count(*) over () as total from figures
    order by ${ORDER[page.sort]}, user_id
    limit ? offset ?`;
  const bindings: Knex.RawBinding[] = [
    orgId, ...(agentId ? [agentId] : []),
    orgId, range.from, days.from, orgId, days.to, range.to,
    orgId, days.to, orgId, days.from,
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
