// A fault injected in the database: a trigger refuses some writes to one table until it is lifted, so a test can
// watch a failure (and a retry after it) happen where production would meet it, inside the real statement.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';

export interface Refusal {
  /** Whether a write was refused since (one that rolled back counts too). */
  refusedAny(): Promise<boolean>;
  /** Writes are taken again; lifting twice is harmless. */
  lift(): Promise<void>;
}

/**
 * Refuses `on` writes to `table` for the rows `when` matches (SQL over `new`, or `old` for updates; every row without
 * it) with `message`, until `lift()`.
 */
export async function refuseWrites(knex: Knex, opts: { table: string; on: 'insert' | 'update'; when?: string; message?: string }): Promise<Refusal> {
  const name = `refused_${randomUUID().replace(/-/g, '')}`;
  const message = (opts.message ?? 'injected failure').replace(/'/g, "''");
  // A sequence counts the refusals: it moves even when the refused statement rolls back.
  await knex.raw(`create sequence ${name}`);
  await knex.raw(`create function ${name}() returns trigger language plpgsql as $$ begin perform nextval('${name}'); raise exception '${message}'; end $$`);
  await knex.raw(`create trigger ${name} before ${opts.on} on ${opts.table} for each row ${opts.when ? `when (${opts.when}) ` : ''}execute function ${name}()`);
  let lifted = false;
  return {
    async refusedAny() {
      const result = await knex.raw(`select is_called as called from ${name}`);
      return (result.rows ?? result)[0].called === true;
    },
    async lift() {
      if (lifted) return;
      lifted = true;
      await knex.raw(`drop trigger ${name} on ${opts.table}`);
      await knex.raw(`drop function ${name}()`);
      await knex.raw(`drop sequence ${name}`);
    },
  };
}
