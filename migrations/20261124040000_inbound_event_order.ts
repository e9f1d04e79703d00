// The order inbound events were stored in, also within one webhook (its rows share one created_at): one sender's
// events are processed in this order.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table inbound_events add column seq bigint generated always as identity');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('inbound_events', (t) => {
    t.dropColumn('seq');
  });
}
