// A list page and the total of everything the list matches, read in one statement as plain rows.
import type { Knex } from 'knex';
import type { Model, QueryBuilder } from 'objection';

/**
 * `matching` selects every row the list shows (its filters and tenant, no order); `page` orders and cuts it. The
 * total rides along with the page as a scalar subquery, which PostgreSQL runs once: one round trip where a count
 * and a page were two. Rows are knex rows (camelCased by the mappers), not model instances: lists are only
 * presented, and building models was most of a list's CPU. Past the last page no row carries the total, so it is
 * counted on its own then.
 */
export async function pageWithTotal<M extends Model, Row>(
  knex: Knex,
  matching: QueryBuilder<M, M[]>,
  page: (query: QueryBuilder<M, M[]>) => QueryBuilder<M, M[]>,
  offset: number,
  columns: Knex.Raw[] = [],
): Promise<{ rows: Row[]; total: number }> {
  const count = matching.clone().toKnexQuery().clearSelect().count('*');
  const rows = (await page(matching.clone()).toKnexQuery().select(...columns, knex.raw('(?) as page_total', [count]))) as (Row & { pageTotal?: string | number })[];
  const total = rows.length ? Number(rows[0]!.pageTotal) : offset === 0 ? 0 : await matching.clone().resultSize();
  for (const row of rows) delete row.pageTotal;
  return { rows, total };
}
