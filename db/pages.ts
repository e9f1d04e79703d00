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

/** A condition of a list's WHERE: SQL with `?` placeholders and their values. */
export interface Condition {
  sql: string;
  bindings: unknown[];
}

/**
 * The same page-and-total statement written out for the hottest lists, without a query builder: building and
 * compiling the query was a third of such a request's CPU. `columns` name what the presenter reads (aliased to
 * camelCase); `where` must start with the tenant's condition; `order` is fixed SQL, never input.
 */
export async function listPage<Row>(knex: Knex, list: { table: string; columns: string; where: Condition[]; order: string; limit: number; offset: number }): Promise<{ rows: Row[]; total: number }> {
  const filter = list.where.map((c) => c.sql).join(' and ');
  const bindings = list.where.flatMap((c) => c.bindings);
  const result = (await knex.raw(
    `select ${list.columns}, (select count(*) from ${list.table} where ${filter}) as "pageTotal" from ${list.table} where ${filter} order by ${list.order} limit ? offset ?`,
    [...bindings, ...bindings, list.limit, list.offset] as Knex.RawBinding[],
  )) as { rows: (Row & { pageTotal?: string | number })[] };
  const rows = result.rows;
  let total: number;
  if (rows.length) total = Number(rows[0]!.pageTotal);
  else if (list.offset === 0) total = 0;
  else total = Number(((await knex.raw(`select count(*) as n from ${list.table} where ${filter}`, bindings as Knex.RawBinding[])) as { rows: { n: string }[] }).rows[0]!.n);
  for (const row of rows) delete row.pageTotal;
  return { rows, total };
}
