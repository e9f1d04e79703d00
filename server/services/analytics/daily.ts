// The daily analytics aggregates: `analytics_daily` (per organization and UTC day, the sums of that day's hours in
// `analytics_hourly`) and `analytics_agent_totals` (per organization, agent and UTC day, the running totals of the
// agents' table since the organization began). A long period then reads a few hundred days instead of thousands
// of hours, and the agents' table two rows per agent instead of every conversation.
import type { Knex } from 'knex';
import { HR, RES } from './durations.js';

const DAY_COLUMNS = 'started, escalated, fr_n, fr_sum, fr_hist, hr_n, hr_sum, hr_hist, resolved, ai_resolved, res_n, res_sum, res_hist, done, msg_visitor, msg_agent, msg_ai, msg_system';
const HISTOGRAMS = new Set(['fr_hist', 'hr_hist', 'res_hist']);
const daySums = DAY_COLUMNS.split(', ').map((c) => (HISTOGRAMS.has(c) ? `analytics_hist_sum(${c})` : `sum(${c})`)).join(', ');

/** Recomputes the days from their hours. `days` selects organization_id, day (a UTC midnight). */
async function sumDays(trx: Knex.Transaction | Knex, days: string, bindings: Knex.RawBinding[]): Promise<void> {
  await trx.raw(
    `insert into analytics_daily (organization_id, day, ${DAY_COLUMNS})
     select h.organization_id, k.day, ${daySums}
     from (${days}) k join analytics_hourly h on h.organization_id = k.organization_id and h.hour >= k.day and h.hour < k.day + interval '1 day'
     group by h.organization_id, k.day
     on conflict (organization_id, day) do update set ${DAY_COLUMNS.split(', ').map((c) => `${c} = excluded.${c}`).join(', ')}`,
    bindings,
  );
}

/** The UTC days holding these (organization, hour) pairs, recomputed. */
export async function refreshDays(trx: Knex.Transaction, hours: { organizationId: string; hour: Date }[]): Promise<void> {
  const keys = new Map<string, { organizationId: string; day: Date }>();
  for (const h of hours) {
    const day = new Date(Math.floor(h.hour.getTime() / 86_400_000) * 86_400_000);
    keys.set(`${h.organizationId} ${day.toISOString()}`, { organizationId: h.organizationId, day });
  }
  if (!keys.size) return;
  const list = [...keys.values()];
  await sumDays(trx, 'select * from unnest(?::uuid[], ?::timestamptz[]) k(organization_id, day)', [pgArray(list.map((k) => k.organizationId)), pgArray(list.map((k) => k.day.toISOString()))]);
}

/** Every day of one organization (or of all, `null`), from its hours. */
export async function rebuildDays(trx: Knex.Transaction | Knex, organizationId: string | null): Promise<void> {
  const org = organizationId ? 'where organization_id = ?' : '';
  await trx.raw(`delete from analytics_daily ${org}`, organizationId ? [organizationId] : []);
  await sumDays(trx, `select distinct organization_id, date_trunc('day', hour, 'UTC') as day from analytics_hourly ${org}`, organizationId ? [organizationId] : []);
}

const pgArray = (values: string[]) => `{${values.map((v) => `"${v}"`).join(',')}}`;

const AGENT_COLUMNS = 'assigned, resolved, open, first_human, res_hist, hr_hist';

/**
 * Per agent, the figures of the conversations created in one UTC day of `keys` (organization_id, day): assigned to
 * them now (resolved ever, still open, resolution times), and first humanly answered by them (response times).
 */
function agentDays(keys: string): string {
  return `select k.organization_id, k.day, x.user_id, sum(x.assigned)::int as assigned, sum(x.resolved)::int as resolved, sum(x.open)::int as open,
      sum(x.human)::int as first_human, analytics_hist(array_agg(analytics_bucket(x.res))) as res_hist, analytics_hist(array_agg(analytics_bucket(x.hr))) as hr_hist
    from (${keys}) k cross join lateral (
      select assigned_to as user_id, 1 as assigned, (first_resolved_at is not null)::int as resolved, (done_at is null)::int as open, 0 as human, ${RES} as res, null::float8 as hr
      from conversations where organization_id = k.organization_id and created_at >= k.day and created_at < k.day + interval '1 day' and assigned_to is not null
      union all
      select first_human_reply_by, 0, 0, 0, 1, null, ${HR}
      from conversations where organization_id = k.organization_id and created_at >= k.day and created_at < k.day + interval '1 day' and first_human_reply_by is not null
    ) x group by 1, 2, 3`;
}

/** Running totals of one organization's agents (or of all, `null`), from scratch. */
export async function rebuildAgentTotals(trx: Knex.Transaction | Knex, organizationId: string | null): Promise<void> {
  const org = organizationId ? 'where organization_id = ?' : '';
  const b = organizationId ? [organizationId] : [];
  await trx.raw(`delete from analytics_agent_totals ${org}`, b);
  const running = (c: string) => `${HISTOGRAMS.has(c) ? 'analytics_hist_sum' : 'sum'}(${c}) over w`;
  await trx.raw(
    `insert into analytics_agent_totals (organization_id, user_id, day, ${AGENT_COLUMNS})
     select organization_id, user_id, day, ${AGENT_COLUMNS.split(', ').map(running).join(', ')}
     from (${agentDays(`select distinct organization_id, date_trunc('day', created_at, 'UTC') as day from conversations ${org}`)}) d
     window w as (partition by organization_id, user_id order by day)`,
    b,
  );
}

/**
 * The running totals after the conversations created in these UTC days changed: each day's figures are recomputed,
 * compared with what the totals held for it, and the difference is added to that day and every later one of the
 * agent (rows missing for that day are first copied from the agent's previous day).
 */
export async function refreshAgentTotals(trx: Knex.Transaction, days: { organizationId: string; day: Date }[]): Promise<void> {
  if (!days.length) return;
  const prev = (t: string) => `left join lateral (select * from analytics_agent_totals p where p.organization_id = ${t}.organization_id and p.user_id = ${t}.user_id and p.day < ${t}.day order by p.day desc limit 1) p on true`;
  await trx.raw('drop table if exists analytics_agent_delta');
  await trx.raw(
    `create temporary table analytics_agent_delta on commit drop as
     with k as (select * from unnest(?::uuid[], ?::timestamptz[]) k(organization_id, day)),
     fresh as (${agentDays('select * from k')}),
     old as (
       select t.organization_id, t.day, t.user_id, t.assigned - coalesce(p.assigned, 0) as assigned, t.resolved - coalesce(p.resolved, 0) as resolved,
         t.open - coalesce(p.open, 0) as open, t.first_human - coalesce(p.first_human, 0) as first_human,
         analytics_hist_sub(t.res_hist, p.res_hist) as res_hist, analytics_hist_sub(t.hr_hist, p.hr_hist) as hr_hist
       from k join analytics_agent_totals t on t.organization_id = k.organization_id and t.day = k.day ${prev('t')}
     )
     select organization_id, day, user_id, coalesce(f.assigned, 0) - coalesce(o.assigned, 0) as assigned, coalesce(f.resolved, 0) - coalesce(o.resolved, 0) as resolved,
       coalesce(f.open, 0) - coalesce(o.open, 0) as open, coalesce(f.first_human, 0) - coalesce(o.first_human, 0) as first_human,
       analytics_hist_sub(f.res_hist, o.res_hist) as res_hist, analytics_hist_sub(f.hr_hist, o.hr_hist) as hr_hist
     from fresh f full join old o using (organization_id, day, user_id)`,
    [pgArray(days.map((d) => d.organizationId)), pgArray(days.map((d) => d.day.toISOString()))],
  );
  await trx.raw(
    `insert into analytics_agent_totals (organization_id, user_id, day, ${AGENT_COLUMNS})
     select d.organization_id, d.user_id, d.day, coalesce(p.assigned, 0), coalesce(p.resolved, 0), coalesce(p.open, 0), coalesce(p.first_human, 0), p.res_hist, p.hr_hist
     from analytics_agent_delta d ${prev('d')}
     on conflict (organization_id, user_id, day) do nothing`,
  );
  await trx.raw(
    `update analytics_agent_totals t set assigned = t.assigned + s.assigned, resolved = t.resolved + s.resolved, open = t.open + s.open,
       first_human = t.first_human + s.first_human, res_hist = analytics_hist_add(t.res_hist, s.res_hist), hr_hist = analytics_hist_add(t.hr_hist, s.hr_hist)
     from (
       select t2.organization_id, t2.user_id, t2.day, sum(d.assigned)::int as assigned, sum(d.resolved)::int as resolved, sum(d.open)::int as open,
         sum(d.first_human)::int as first_human, analytics_hist_sum(d.res_hist) as res_hist, analytics_hist_sum(d.hr_hist) as hr_hist
       from analytics_agent_delta d join analytics_agent_totals t2 on t2.organization_id = d.organization_id and t2.user_id = d.user_id and t2.day >= d.day
       group by 1, 2, 3
     ) s
     where t.organization_id = s.organization_id and t.user_id = s.user_id and t.day = s.day`,
  );
  await trx.raw('drop table analytics_agent_delta');
}
