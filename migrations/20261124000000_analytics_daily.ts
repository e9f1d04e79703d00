// Daily analytics aggregates beside the hourly ones: per organization and UTC day the sums of its hours, and per
// organization, agent and UTC day the running totals of the agents' table. A 365-day summary then sums 365 rows
// (plus the hours at its edges), and the agents' table subtracts two rows per agent, instead of reading every hour or
// every conversation. Backfilled from the hours and conversations already stored.
import type { Knex } from 'knex';
import { rebuildAgentTotals, rebuildDays } from '../server/services/analytics/daily.js';

export async function up(knex: Knex): Promise<void> {
  // Element-wise sum and difference of two histograms; a missing one counts as zeros.
  await knex.raw(`
    create function analytics_hist_add(a int[], b int[]) returns int[] immutable parallel safe language sql as $$
      select array_agg(coalesce(x, 0) + coalesce(y, 0) order by i) from unnest(a, b) with ordinality u(x, y, i)
    $$`);
  await knex.raw(`
    create function analytics_hist_sub(a int[], b int[]) returns int[] immutable parallel safe language sql as $$
      select array_agg(coalesce(x, 0) - coalesce(y, 0) order by i) from unnest(a, b) with ordinality u(x, y, i)
    $$`);
  await knex.raw('create aggregate analytics_hist_sum(int[]) (sfunc = analytics_hist_add, stype = int[], parallel = safe)');
  await knex.schema.createTable('analytics_daily', (t) => {
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.timestamp('day', { useTz: true }).notNullable();
    for (const c of ['started', 'escalated', 'fr_n', 'hr_n', 'resolved', 'ai_resolved', 'res_n', 'done', 'msg_visitor', 'msg_agent', 'msg_ai', 'msg_system']) t.integer(c).notNullable().defaultTo(0);
    for (const c of ['fr_sum', 'hr_sum', 'res_sum']) t.double(c).notNullable().defaultTo(0);
    for (const c of ['fr_hist', 'hr_hist', 'res_hist']) t.specificType(c, 'int[]');
    t.primary(['organization_id', 'day']);
  });
  await knex.schema.createTable('analytics_agent_totals', (t) => {
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('user_id').notNullable();
    t.timestamp('day', { useTz: true }).notNullable();
    // Of the conversations created up to the end of `day`: assigned to the agent now, of those first resolved ever and
    // still open, and first humanly answered by the agent; resolution and first human response histograms.
    for (const c of ['assigned', 'resolved', 'open', 'first_human']) t.integer(c).notNullable().defaultTo(0);
    for (const c of ['res_hist', 'hr_hist']) t.specificType(c, 'int[]');
    t.primary(['organization_id', 'user_id', 'day']);
  });
  await rebuildDays(knex, null);
  await rebuildAgentTotals(knex, null);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('analytics_agent_totals');
  await knex.schema.dropTable('analytics_daily');
  await knex.raw('drop aggregate if exists analytics_hist_sum(int[])');
  await knex.raw('drop function if exists analytics_hist_sub(int[], int[])');
  await knex.raw('drop function if exists analytics_hist_add(int[], int[])');
}
