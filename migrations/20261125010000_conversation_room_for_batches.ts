// A batch updates every conversation it carries in one statement, and the conversations active at the same moment
// are mostly the recent ones, which sit side by side on the last pages. Within the statement none of the old row
// versions can be pruned yet, so a page takes as many heap-only (HOT) updates as it has room for new versions: with a
// quarter free (fillfactor 75) about 12 of its ~36 rows; the rest move to another page and write an entry into every
// one of the conversation's indexes. With half of each page free, every row on it can take its batch's update beside
// the old version. Applies to pages written from now on (a VACUUM FULL or CLUSTER rewrites older ones).
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table conversations set (fillfactor = 50)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table conversations set (fillfactor = 75)');
}
