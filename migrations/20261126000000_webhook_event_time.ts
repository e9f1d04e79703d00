// A redelivery is a new row of the same event: the event's own time travels with it, so the body sent again is the
// body sent first (`createdAt` included), while the log keeps the redelivery's row in its place by its own time.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table webhook_deliveries add column event_created_at timestamptz');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table webhook_deliveries drop column event_created_at');
}
