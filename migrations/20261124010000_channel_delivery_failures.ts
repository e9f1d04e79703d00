// A channel's failed deliveries in a row: past a few (or at once on a refused credential) the channel is `failed`,
// and its next delivered message makes it active again.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('channels', (t) => {
    t.integer('consecutive_failures').notNullable().defaultTo(0);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('channels', (t) => {
    t.dropColumn('consecutive_failures');
  });
}
