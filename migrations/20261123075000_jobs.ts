// One durable job table for everything that runs later or leaves the process (webhook deliveries, knowledge
// indexing, sweeps): a job is written in the same transaction as the change that causes it, claimed by one instance
// at a time with FOR UPDATE SKIP LOCKED under a lease, retried with backoff, and survives restarts.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('jobs', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').references('organizations.id').onDelete('CASCADE');
    t.text('queue').notNullable();
    t.jsonb('payload').notNullable().defaultTo('{}');
    t.text('status').notNullable().defaultTo('pending');
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('run_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('locked_until', { useTz: true });
    t.text('dedupe_key');
    t.text('last_error');
    t.timestamp('finished_at', { useTz: true });
    t.timestamps(true, true);
  });
  await knex.raw(`alter table jobs add constraint jobs_status_check check (status in ('pending', 'running', 'done', 'failed'))`);
  // What the claim reads: work that is due, or running past its lease (its instance died).
  await knex.raw(`create index jobs_due_index on jobs (queue, run_at) where status = 'pending'`);
  await knex.raw(`create index jobs_lease_index on jobs (queue, locked_until) where status = 'running'`);
  // A dedupe key holds while its job is unfinished: enqueueing the same work twice keeps one job.
  await knex.raw(`create unique index jobs_dedupe_unique on jobs (queue, dedupe_key) where dedupe_key is not null and status in ('pending', 'running')`);
  await knex.raw(`create index jobs_finished_index on jobs (finished_at) where finished_at is not null`);
  await knex.raw(`create index jobs_organization_index on jobs (organization_id) where organization_id is not null`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('jobs');
}
