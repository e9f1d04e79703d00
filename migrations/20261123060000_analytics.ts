// Analytics: the moments a conversation's figures are measured from, stored when they happen (and backfilled here
// from the messages already written), the indexes the range queries read, and the per-minute message rollup.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('conversations', (t) => {
    // First public agent or AI reply (first_reply_at keeps counting agents only, as before).
    t.timestamp('first_response_at', { useTz: true });
    // First public agent reply after the escalation (or after creation when never escalated), and its author.
    t.timestamp('first_human_reply_at', { useTz: true });
    t.uuid('first_human_reply_by').references('users.id').onDelete('SET NULL');
    // resolved_at is cleared on reopen; the first resolution is what resolution time measures.
    t.timestamp('first_resolved_at', { useTz: true });
    t.boolean('first_resolved_by_ai').notNullable().defaultTo(false);
  });
  // When the conversation stopped counting as open: its first resolution or its close, whichever came first.
  await knex.raw('alter table conversations add column done_at timestamptz generated always as (least(first_resolved_at, closed_at)) stored');

  await knex.raw(`
    update conversations c set
      first_response_at = (select min(m.created_at) from messages m
        where m.conversation_id = c.id and m.sender_type in ('agent', 'ai') and not m.private),
      first_resolved_at = c.resolved_at,
      first_resolved_by_ai = c.resolved_at is not null and c.human_joined_at is null and exists (
        select 1 from messages m where m.conversation_id = c.id and m.sender_type = 'system' and m.metadata->>'kind' = 'ai_resolution_summary')`);
  await knex.raw(`
    update conversations c set first_human_reply_at = f.created_at, first_human_reply_by = f.sender_id
    from (
      select distinct on (m.conversation_id) m.conversation_id, m.created_at, m.sender_id
      from messages m join conversations c2 on c2.id = m.conversation_id
      where m.sender_type = 'agent' and not m.private and m.created_at >= coalesce(c2.escalated_at, c2.created_at)
        and exists (select 1 from users u where u.id = m.sender_id)
      order by m.conversation_id, m.created_at, m.seq
    ) f
    where f.conversation_id = c.id`);

  await knex.raw('create index conversations_org_created_at on conversations (organization_id, created_at)');
  await knex.raw('create index conversations_org_first_resolved_at on conversations (organization_id, first_resolved_at) where first_resolved_at is not null');
  await knex.raw('create index conversations_org_done_at on conversations (organization_id, done_at) where done_at is not null');
  await knex.raw('create index if not exists tickets_org_created_at on tickets (organization_id, created_at)');
  await knex.raw('create index if not exists tickets_org_resolved_at on tickets (organization_id, resolved_at) where resolved_at is not null');
  // The rollup job reads messages by time. BRIN: a few pages of summary, nearly free to keep up on append.
  await knex.raw('create index messages_created_at_brin on messages using brin (created_at)');

  await knex.schema.createTable('message_rollups', (t) => {
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.timestamp('bucket', { useTz: true }).notNullable();
    t.string('sender_type', 20).notNullable();
    t.string('channel', 30).notNullable();
    t.integer('count').notNullable();
    t.primary(['organization_id', 'bucket', 'sender_type', 'channel']);
  });
  // One row for the whole installation (not tenant data): how far the rollup has read. Its row lock is what keeps
  // two instances from rolling up at once.
  await knex.schema.createTable('message_rollup_state', (t) => {
    t.smallint('id').primary().defaultTo(1);
    t.timestamp('rolled_until', { useTz: true });
  });
  await knex.raw('alter table message_rollup_state add constraint message_rollup_state_single check (id = 1)');
  await knex('message_rollup_state').insert({ id: 1, rolled_until: null });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('message_rollup_state');
  await knex.schema.dropTable('message_rollups');
  await knex.raw('drop index if exists messages_created_at_brin');
  await knex.raw('drop index if exists tickets_org_resolved_at');
  await knex.raw('drop index if exists tickets_org_created_at');
  await knex.raw('drop index if exists conversations_org_done_at');
  await knex.raw('drop index if exists conversations_org_first_resolved_at');
  await knex.raw('drop index if exists conversations_org_created_at');
  await knex.schema.alterTable('conversations', (t) => {
    t.dropColumn('done_at');
    t.dropColumn('first_resolved_by_ai');
    t.dropColumn('first_resolved_at');
    t.dropColumn('first_human_reply_by');
    t.dropColumn('first_human_reply_at');
    t.dropColumn('first_response_at');
  });
}
