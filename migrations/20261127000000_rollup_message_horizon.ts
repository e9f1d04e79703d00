// The message rollup recounts from where the previous run knew every earlier message to be committed (the start of
// the oldest transaction then running), rather than a fixed five minutes back: at thousands of messages a second the
// fixed window made every run recount hundreds of thousands of rows.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table message_rollup_state add column messages_counted_until timestamptz');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table message_rollup_state drop column messages_counted_until');
}
