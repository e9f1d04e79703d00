// Analytics aggregates: per organization and UTC hour, the conversation figures (counts, duration sums and
// log-scale duration histograms) and message counts, so long periods read a few thousand rows instead of every
// conversation. Hours, not days: any organization's time zone sums whole hours into its local days.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // Bucket of a duration in seconds: 0 below one second, then four buckets per doubling (each 19% wide), capped
  // at 100 (2^24.75 s, about 320 days). Shared by the rollup and the live edges of a period.
  await knex.raw(`
    create function analytics_bucket(seconds double precision) returns int immutable parallel safe language sql as $$
      select case when seconds is null then null when seconds < 1 then 0 else least(100, 1 + floor(4 * ln(seconds) / ln(2)))::int end
    $$`);
  // The histogram (101 counts) of a set of bucket numbers.
  await knex.raw(`
    create function analytics_hist(buckets int[]) returns int[] immutable parallel safe language sql as $$
      select array_agg(coalesce(c.n, 0)::int order by g.b) from generate_series(0, 100) g(b)
        left join (select x, count(*) as n from unnest(buckets) x where x is not null group by x) c on c.x = g.b
    $$`);
  await knex.schema.createTable('analytics_hourly', (t) => {
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.timestamp('hour', { useTz: true }).notNullable();
    // Conversations created in the hour.
    t.integer('started').notNullable().defaultTo(0);
    t.integer('escalated').notNullable().defaultTo(0);
    t.integer('fr_n').notNullable().defaultTo(0);
    t.double('fr_sum').notNullable().defaultTo(0);
    t.specificType('fr_hist', 'int[]');
    t.integer('hr_n').notNullable().defaultTo(0);
    t.double('hr_sum').notNullable().defaultTo(0);
    t.specificType('hr_hist', 'int[]');
    // Conversations first resolved in the hour.
    t.integer('resolved').notNullable().defaultTo(0);
    t.integer('ai_resolved').notNullable().defaultTo(0);
    t.integer('res_n').notNullable().defaultTo(0);
    t.double('res_sum').notNullable().defaultTo(0);
    t.specificType('res_hist', 'int[]');
    // Conversations that stopped counting as open in the hour.
    t.integer('done').notNullable().defaultTo(0);
    // Messages by sender kind (from the per-minute rollup).
    t.integer('msg_visitor').notNullable().defaultTo(0);
    t.integer('msg_agent').notNullable().defaultTo(0);
    t.integer('msg_ai').notNullable().defaultTo(0);
    t.integer('msg_system').notNullable().defaultTo(0);
    t.primary(['organization_id', 'hour']);
  });
  await knex.raw('create index message_rollups_bucket on message_rollups (bucket)');
  // The history so far (the rollup job then keeps hours current from its watermark on).
  const secs = (later: string, earlier: string) => `extract(epoch from (${later} - ${earlier}))`;
  const fr = secs('first_response_at', 'created_at');
  const hr = secs('first_human_reply_at', 'coalesce(escalated_at, created_at)');
  const res = secs('first_resolved_at', 'created_at');
  await knex.raw(`
    insert into analytics_hourly (organization_id, hour, started, escalated, fr_n, fr_sum, fr_hist, hr_n, hr_sum, hr_hist, resolved, ai_resolved, res_n, res_sum, res_hist, done)
    select k.organization_id, k.hour, s.*, r.*, d.done
    from (select distinct organization_id, date_trunc('hour', t) as hour
          from conversations c cross join lateral (values (c.created_at), (c.first_resolved_at), (c.done_at)) v(t) where t is not null) k
    cross join lateral (
      select count(*)::int, count(*) filter (where escalated_at is not null)::int,
        count(${fr})::int, coalesce(sum(${fr}), 0), analytics_hist(array_agg(analytics_bucket(${fr}))),
        count(${hr})::int, coalesce(sum(${hr}), 0), analytics_hist(array_agg(analytics_bucket(${hr})))
      from conversations where organization_id = k.organization_id and created_at >= k.hour and created_at < k.hour + interval '1 hour') s
    cross join lateral (
      select count(*)::int, count(*) filter (where first_resolved_by_ai)::int,
        count(${res})::int, coalesce(sum(${res}), 0), analytics_hist(array_agg(analytics_bucket(${res})))
      from conversations where organization_id = k.organization_id and first_resolved_at >= k.hour and first_resolved_at < k.hour + interval '1 hour') r
    cross join lateral (
      select count(*)::int as done from conversations
      where organization_id = k.organization_id and done_at >= k.hour and done_at < k.hour + interval '1 hour') d`);
  await knex.raw(`
    insert into analytics_hourly (organization_id, hour, msg_visitor, msg_agent, msg_ai, msg_system)
    select organization_id, date_trunc('hour', bucket),
      coalesce(sum(count) filter (where sender_type = 'visitor'), 0), coalesce(sum(count) filter (where sender_type = 'agent'), 0),
      coalesce(sum(count) filter (where sender_type = 'ai'), 0), coalesce(sum(count) filter (where sender_type = 'system'), 0)
    from message_rollups group by 1, 2
    on conflict (organization_id, hour) do update set msg_visitor = excluded.msg_visitor, msg_agent = excluded.msg_agent,
      msg_ai = excluded.msg_ai, msg_system = excluded.msg_system`);
  // Which conversations changed since the last run. BRIN: a few pages, and it does not add an entry per update
  // the way a B-tree would (the send path updates the conversation row).
  await knex.raw('create index conversations_updated_at_brin on conversations using brin (updated_at) with (autosummarize = on)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists conversations_updated_at_brin');
  await knex.raw('drop index if exists message_rollups_bucket');
  await knex.schema.dropTable('analytics_hourly');
  await knex.raw('drop function if exists analytics_hist(int[])');
  await knex.raw('drop function if exists analytics_bucket(double precision)');
}
