// The hourly analytics aggregates (`analytics_hourly`): refreshed by the rollup job for the hours whose
// conversations or messages changed since its last run, and rebuilt whole for one organization on request. A row is
// recomputed from its sources and overwritten, never added to, so reruns and late commits are safe.
import type { Knex } from 'knex';
import { rebuildAgentTotals, rebuildDays, refreshAgentTotals, refreshDays } from './daily.js';
import { FR, HR, RES } from './durations.js';

type Hour = { organizationId: string; hour: Date };
const touched = (result: { rows: { organization_id: string; hour: Date }[] }): Hour[] => result.rows.map((r) => ({ organizationId: r.organization_id, hour: new Date(r.hour) }));

/**
 * A histogram column: summed by `analytics_hist` for the stored rows, or the bucket numbers themselves for a reader
 * that counts them (a call of that SQL function costs milliseconds of planning, more than a partial hour's rows).
 */
const hist = (expr: string, alias: string, buckets: boolean) =>
  buckets ? `array_agg(analytics_bucket(${expr})) filter (where ${expr} is not null) as ${alias}` : `analytics_hist(array_agg(analytics_bucket(${expr}))) as ${alias}`;

/** The conversation columns of `analytics_hourly` for the conversations of `where` (bindings follow). */
export function startedFigures(where: string, buckets = false): string {
  return `select count(*)::int as started, count(*) filter (where escalated_at is not null)::int as escalated,
      count(${FR})::int as fr_n, coalesce(sum(${FR}), 0) as fr_sum, ${hist(FR, 'fr_hist', buckets)},
      count(${HR})::int as hr_n, coalesce(sum(${HR}), 0) as hr_sum, ${hist(HR, 'hr_hist', buckets)}
    from conversations where ${where}`;
}

export function resolvedFigures(where: string, buckets = false): string {
  return `select count(*)::int as resolved, count(*) filter (where first_resolved_by_ai)::int as ai_resolved,
      count(${RES})::int as res_n, coalesce(sum(${RES}), 0) as res_sum, ${hist(RES, 'res_hist', buckets)}
    from conversations where ${where}`;
}

const COLUMNS = 'started, escalated, fr_n, fr_sum, fr_hist, hr_n, hr_sum, hr_hist, resolved, ai_resolved, res_n, res_sum, res_hist, done';

/** Recomputes the conversation columns of the given (organization, hour) rows. `keys` selects organization_id, hour. */
async function refreshConversationHours(trx: Knex.Transaction, keys: string, bindings: Knex.RawBinding[]): Promise<Hour[]> {
  const result = await trx.raw(
    `insert into analytics_hourly (organization_id, hour, ${COLUMNS})
     select k.organization_id, k.hour, s.*, r.*, d.done
     from (${keys}) k
     cross join lateral (${startedFigures('organization_id = k.organization_id and created_at >= k.hour and created_at < k.hour + interval \'1 hour\'')}) s
     cross join lateral (${resolvedFigures('organization_id = k.organization_id and first_resolved_at >= k.hour and first_resolved_at < k.hour + interval \'1 hour\'')}) r
     cross join lateral (select count(*)::int as done from conversations
       where organization_id = k.organization_id and done_at >= k.hour and done_at < k.hour + interval '1 hour') d
     on conflict (organization_id, hour) do update set ${COLUMNS.split(', ').map((c) => `${c} = excluded.${c}`).join(', ')}
     returning organization_id, hour`,
    bindings,
  );
  return touched(result);
}

/** Recomputes the message columns of every hour from `since` (per-minute rollup rows), for every organization. */
async function refreshMessageHours(trx: Knex.Transaction, where: string, bindings: Knex.RawBinding[]): Promise<Hour[]> {
  const result = await trx.raw(
    `insert into analytics_hourly (organization_id, hour, msg_visitor, msg_agent, msg_ai, msg_system)
     select organization_id, date_trunc('hour', bucket),
       coalesce(sum(count) filter (where sender_type = 'visitor'), 0), coalesce(sum(count) filter (where sender_type = 'agent'), 0),
       coalesce(sum(count) filter (where sender_type = 'ai'), 0), coalesce(sum(count) filter (where sender_type = 'system'), 0)
     from message_rollups where ${where} group by 1, 2
     on conflict (organization_id, hour) do update set msg_visitor = excluded.msg_visitor, msg_agent = excluded.msg_agent,
       msg_ai = excluded.msg_ai, msg_system = excluded.msg_system
     returning organization_id, hour`,
    bindings,
  );
  return touched(result);
}

/**
 * The hours touched since `since`: those of conversations updated since then (their creation, first resolution and
 * done hours) and those whose minute message counts were recounted. `since` null (the first run): every hour.
 */
export async function refreshSince(trx: Knex.Transaction, since: Date | null): Promise<void> {
  const keys = `
    select distinct organization_id, date_trunc('hour', t) as hour
    from conversations c cross join lateral (values (c.created_at), (c.first_resolved_at), (c.done_at)) v(t)
    where c.updated_at >= ? and t is not null`;
  const conversations = await refreshConversationHours(trx, keys, [since ?? '-infinity']);
  const messages = await refreshMessageHours(trx, `bucket >= date_trunc('hour', ?::timestamptz)`, [since ?? '-infinity']);
  if (since === null) {
    await rebuildDays(trx, null);
    await rebuildAgentTotals(trx, null);
  } else {
    await refreshDays(trx, [...conversations, ...messages]);
    // An agent's figures belong to the day its conversations were created in.
    const created = (await trx.raw(
      `select distinct organization_id, date_trunc('day', created_at, 'UTC') as day from conversations where updated_at >= ?`,
      [since],
    )).rows as { organization_id: string; day: Date }[];
    await refreshAgentTotals(trx, created.map((r) => ({ organizationId: r.organization_id, day: new Date(r.day) })));
  }
}

/** Every hour of one organization, from scratch. */
export async function rebuild(trx: Knex.Transaction, organizationId: string): Promise<void> {
  await trx.raw('delete from analytics_hourly where organization_id = ?', [organizationId]);
  const keys = `
    select distinct organization_id, date_trunc('hour', t) as hour
    from conversations c cross join lateral (values (c.created_at), (c.first_resolved_at), (c.done_at)) v(t)
    where c.organization_id = ? and t is not null`;
  await refreshConversationHours(trx, keys, [organizationId]);
  await refreshMessageHours(trx, 'organization_id = ?', [organizationId]);
  await rebuildDays(trx, organizationId);
  await rebuildAgentTotals(trx, organizationId);
}
