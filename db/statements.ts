// Fixed SQL for the hottest paths (sends, the caller of every request, the conversation read), run on a pooled
// connection without knex's query builder. On PostgreSQL each is a named prepared statement: parsed and planned once
// per connection, not on every call. Everything else goes through knex and Objection as usual.
//
// Such statements return named columns or json values, never `table.*`: a migration that adds a column while
// instances run must not change a prepared statement's result type, which PostgreSQL refuses to re-plan.
import { createHash } from 'node:crypto';
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

/** One statement on a borrowed connection: named (prepared once per connection) where the driver allows. */
function query(connection: DriverConnection, prepared: boolean, name: string, text: string, values: unknown[]): Promise<{ rows: unknown[] }> {
  return prepared ? connection.query({ name, text, values }) : connection.query(text, values);
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
        return (await query(connection, prepared, name, text, values)).rows as Row[];
      } finally {
        await client.releaseConnection(connection);
      }
    },
  };
}

// The same snake_case -> camelCase mapping knex applies to every row (db/index.ts), memoized by Objection.
const { postProcessResponse: camelRow } = objection.knexSnakeCaseMappers() as unknown as { postProcessResponse: (row: Record<string, unknown>) => Record<string, unknown> };

/** Column name -> property name, as that mapping spells it; column names are few, the cap only guards the map. */
const propertyNames = new Map<string, string>();
const PROPERTY_NAMES_MAX = 10_000;

function propertyOf(column: string): string {
  let name = propertyNames.get(column);
  if (name === undefined) {
    name = Object.keys(camelRow({ [column]: null }))[0]!;
    if (propertyNames.size >= PROPERTY_NAMES_MAX) propertyNames.clear();
    propertyNames.set(column, name);
  }
  return name;
}

/**
 * A row that came back as json (`row_to_json(t)`, `to_jsonb(t)`), shaped like a knex row: camelCased keys and timestamp columns
 * (named `*_at` throughout the schema) as Dates. Keys starting with `skip` are left out. Built in one pass: every
 * sent message reads two such rows, and a second object per row was a good share of the send path's garbage.
 */
export function rowFromJson<T>(json: Record<string, unknown>, skip?: string): T {
  const row: Record<string, unknown> = {};
  for (const key in json) {
    if (skip && key.startsWith(skip)) continue;
    const value = json[key];
    row[propertyOf(key)] = key.endsWith('_at') && typeof value === 'string' ? new Date(value) : value;
  }
  return row as T;
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

/** Statements run one after another on one connection, inside one read-only transaction. */
export interface ReadSession {
  /**
   * Runs SQL written with knex's `?` placeholders (no `??` identifiers, no literal `?`). On PostgreSQL each text is a
   * named prepared statement (named after a hash of the text), so a repeated read skips parsing and, under a generic
   * plan, planning.
   */
  raw(sql: string, bindings?: readonly unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
}

/** A text with `$n` placeholders and its statement name, per knex-style text (the texts of a process are few). */
const numbered = new Map<string, { text: string; name: string }>();
const NUMBERED_MAX = 1_000;

function numberedText(sql: string): { text: string; name: string } {
  let hit = numbered.get(sql);
  if (!hit) {
    let n = 0;
    const text = sql.replace(/\?/g, () => `$${++n}`);
    hit = { text, name: `r_${createHash('sha1').update(text).digest('hex').slice(0, 24)}` };
    if (numbered.size >= NUMBERED_MAX) numbered.clear();
    numbered.set(sql, hit);
  }
  return hit;
}

/**
 * Runs `fn` on one pooled connection inside `begin read only` and the given `set local` settings, committed after
 * (rolled back when `fn` throws). With `prepared`, the opening is one round trip and every statement is prepared.
 * Statements are queued: the driver runs one at a time anyway, and queuing keeps it from warning.
 */
export async function readOnlySession<T>(knex: Knex, prepared: boolean, settings: readonly string[], fn: (session: ReadSession) => Promise<T>): Promise<T> {
  const client = knex.client as unknown as PooledClient;
  const connection = await client.acquireConnection();
  let tail: Promise<unknown> = Promise.resolve();
  const queued = <R>(run: () => Promise<R>): Promise<R> => {
    const next = tail.then(run, run);
    tail = next.catch(() => undefined);
    return next;
  };
  const session: ReadSession = {
    raw(sql, bindings = []) {
      const { text, name } = numberedText(sql);
      const values = [...bindings];
      return queued(() => query(connection, prepared, name, text, values)) as Promise<{ rows: Record<string, unknown>[] }>;
    },
  };
  try {
    const opening = ['begin transaction read only', ...settings.map((s) => `set local ${s}`)];
    if (prepared) await connection.query(opening.join('; '));
    else for (const statement of opening) await connection.query(statement);
    let result: T;
    try {
      result = await fn(session);
      await tail;
    } catch (err) {
      await tail;
      await connection.query('rollback').catch(() => undefined);
      throw err;
    }
    // node-pg runs a connection's queries in order: the commit goes ahead of whatever the next borrower sends, so the
    // answer need not wait for it (a round trip that, on a busy machine, cost as much as a statement). Ending a
    // read-only transaction cannot fail but with the connection, which then fails its next query anyway.
    if (prepared) connection.query('commit').catch(() => undefined);
    else await connection.query('commit');
    return result;
  } finally {
    await client.releaseConnection(connection);
  }
}
