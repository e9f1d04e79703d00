// Fixed SQL for the hottest paths (sends, the caller of every request, the conversation read), run on a pooled
// connection without knex's query builder. On PostgreSQL each is a named prepared statement: parsed and planned once
// per connection, not on every call. Everything else goes through knex and Objection as usual.
//
// Such statements return named columns or json values, never `table.*`: a migration that adds a column while
// instances run must not change a prepared statement's result type, which PostgreSQL refuses to re-plan.
import type { Knex } from 'knex';
import objection from 'objection';

/** The two drivers behind knex: node-postgres takes a query config, PGlite text and values. */
interface DriverConnection {
  query(config: { name: string; text: string; values: unknown[] } | string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}
interface PooledClient {
  acquireConnection(): Promise<DriverConnection>;
  releaseConnection(connection: DriverConnection): Promise<void>;
}

export interface Statement<Row> {
  rows(values: unknown[]): Promise<Row[]>;
}

/** Makes statements on one database (prepared or not, as its driver allows). */
export type StatementFactory = <Row>(name: string, text: string) => Statement<Row>;

/**
 * A statement with `$n` placeholders. `prepared` is for node-postgres (PGlite's driver has no named statements);
 * names must be unique per process, since a connection keeps each name for one text.
 */
export function statement<Row>(knex: Knex, name: string, text: string, prepared: boolean): Statement<Row> {
  // knex has no public API for a named prepared statement (knex.raw always sends an unnamed one), so the statement
  // borrows a connection from knex's own pool through its client, the same calls knex makes around every query.
  const client = knex.client as unknown as PooledClient;
  return {
    async rows(values) {
      const connection = await client.acquireConnection();
      try {
        const result = prepared ? await connection.query({ name, text, values }) : await connection.query(text, values);
        return result.rows as Row[];
      } finally {
        await client.releaseConnection(connection);
      }
    },
  };
}

// The same snake_case -> camelCase mapping knex applies to every row (db/index.ts), memoized by Objection.
const { postProcessResponse: camelRow } = objection.knexSnakeCaseMappers() as unknown as { postProcessResponse: (row: Record<string, unknown>) => Record<string, unknown> };

/**
 * A row that came back as json (`row_to_json(t)`, `to_jsonb(t)`), shaped like a knex row: camelCased keys and timestamp columns
 * (named `*_at` throughout the schema) as Dates. Keys starting with `skip` are left out.
 */
export function rowFromJson<T>(json: Record<string, unknown>, skip?: string): T {
  const row: Record<string, unknown> = {};
  for (const key in json) {
    if (skip && key.startsWith(skip)) continue;
    const value = json[key];
    row[key] = key.endsWith('_at') && typeof value === 'string' ? new Date(value) : value;
  }
  return camelRow(row) as T;
}

/**
 * Runs a statement's text (with its `$n` placeholders) inside a knex transaction, for a path that must share that
 * transaction's locks and commit. Not prepared: knex has no named statements, and such paths are the rare ones.
 */
export async function rowsIn<Row>(trx: Knex.Transaction, text: string, values: unknown[]): Promise<Row[]> {
  const bindings: unknown[] = [];
  // knex binds `?` in order: each `$n` becomes one `?` with its value (a value used twice is bound twice).
  const sql = text.replace(/\$(\d+)/g, (_, n: string) => {
    bindings.push(values[Number(n) - 1]);
    return '?';
  });
  const result = (await trx.raw(sql, bindings as Knex.RawBinding[])) as { rows: Row[] };
  return result.rows;
}
