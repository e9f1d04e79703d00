// Every stored message updates its conversation's row (next seq, last message, unread count). With room left on
// each page, that update writes the new row version beside the old one as a heap-only (HOT) update: no entry in
// any of the conversation's indexes. Full pages force the new version onto another page and an entry into every
// index. Applies to pages written from now on; rows on full pages move to roomier pages on their next update.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table conversations set (fillfactor = 75)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table conversations reset (fillfactor)');
}
