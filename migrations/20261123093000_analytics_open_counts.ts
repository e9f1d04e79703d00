// Analytics: "open at a moment" counts read only open conversations and those done after that moment, not the whole
// history: a partial index of the open ones, and the done_at index carrying created_at (index-only scans).
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('create index conversations_org_open_created_at on conversations (organization_id, created_at) where done_at is null');
  await knex.raw('drop index if exists conversations_org_done_at');
  await knex.raw('create index conversations_org_done_at on conversations (organization_id, done_at) include (created_at) where done_at is not null');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists conversations_org_open_created_at');
  await knex.raw('drop index if exists conversations_org_done_at');
  await knex.raw('create index conversations_org_done_at on conversations (organization_id, done_at) where done_at is not null');
}
