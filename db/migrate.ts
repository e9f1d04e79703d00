// Applying migrations when several instances start at once: one at a time, and never wedged by a stale knex lock.
import type { Knex } from 'knex';

/** The advisory lock key instances agree on (advisory locks are per database, so one constant suffices). */
export const MIGRATION_LOCK_KEY = '7235434567002861923';

/** Fifteen minutes: longer than any migration of ours should take, short enough that a stuck start is visible. */
const DEFAULT_LOCK_WAIT_MS = 15 * 60_000;

export interface MigrationLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface MigrateOptions {
  /** Told when this instance waits for another one's migrations, and when a stale knex lock is repaired. */
  logger?: MigrationLogger;
  /** How long to wait for another instance that is migrating before giving up (default 15 minutes). */
  lockWaitMs?: number;
}

export class MigrationLockTimeout extends Error {
  constructor(waitedMs: number) {
    super(`another instance held the migration lock for more than ${Math.round(waitedMs / 1000)} s; gave up waiting (it may still be migrating, or stuck)`);
    this.name = 'MigrationLockTimeout';
  }
}

const silent: MigrationLogger = { info: () => undefined, warn: () => undefined };

/**
 * Applies pending migrations; returns their names. On PostgreSQL this runs under an advisory lock, so instances
 * starting together take turns and the later ones find nothing left to do. The embedded database needs no such
 * lock (the data-directory lock admits one process), and could not take one: its single connection would be
 * held by the lock while the migrations wait for it.
 */
export async function migrateLatest(knex: Knex, embedded: boolean, options: MigrateOptions = {}): Promise<string[]> {
  const logger = options.logger ?? silent;
  const run = async () => {
    await repairKnexLock(knex, logger);
    const [, applied] = (await knex.migrate.latest()) as [number, string[]];
    return applied;
  };
  if (embedded) return run();
  return withMigrationLock(knex, logger, options.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS, run);
}

/**
 * Holds the advisory lock for the length of a transaction on a connection of its own, while the migrations run on
 * others. A transaction-level lock keeps working behind a proxy that pools by transaction (a session-level lock
 * would stay on whichever server connection happened to take it), and ends with the transaction or, if this
 * process dies, with its connection.
 */
async function withMigrationLock<T>(knex: Knex, logger: MigrationLogger, waitMs: number, fn: () => Promise<T>): Promise<T> {
  return knex.transaction(async (trx) => {
    // An idle transaction is what this is for a while; a server-wide timeout must not end it (and the lock) midway.
    await trx.raw("select set_config('idle_in_transaction_session_timeout', '0', true)");
    const tried = await trx.raw<{ rows: { taken: boolean }[] }>('select pg_try_advisory_xact_lock(?::bigint) as taken', [MIGRATION_LOCK_KEY]);
    if (!tried.rows[0]?.taken) {
      logger.info({ waitMs }, 'another instance is applying migrations; waiting for it to finish');
      // Waiting inside the lock call rather than polling: it is granted the moment the other instance commits.
      await trx.raw("select set_config('lock_timeout', ?, true), set_config('statement_timeout', '0', true)", [`${Math.max(1, Math.round(waitMs))}ms`]);
      try {
        await trx.raw('select pg_advisory_xact_lock(?::bigint)', [MIGRATION_LOCK_KEY]);
      } catch (err) {
        // lock_not_available: lock_timeout ran out.
        if ((err as { code?: unknown }).code === '55P03') throw new MigrationLockTimeout(waitMs);
        throw err;
      }
      logger.info({}, 'the other instance finished migrating; checking for anything left to apply');
    }
    return fn();
  });
}

/**
 * knex keeps its own lock in one row of knex_migrations_lock. A process that died while migrating leaves it taken,
 * and two processes creating the table at once leave two rows; either makes every later run fail. Called only
 * while no one else can be migrating (advisory lock, or the data-directory lock), so resetting it is safe.
 */
async function repairKnexLock(knex: Knex, logger: MigrationLogger): Promise<void> {
  const exists = await knex.raw<{ rows: { found: string | null }[] }>("select to_regclass('knex_migrations_lock')::text as found");
  if (!exists.rows[0]?.found) return;
  const state = await knex.raw<{ rows: { total: number; taken: number }[] }>(
    'select count(*)::int as total, count(*) filter (where is_locked <> 0)::int as taken from knex_migrations_lock',
  );
  const { total, taken } = state.rows[0] ?? { total: 0, taken: 0 };
  if (total <= 1 && taken === 0) return; // none: knex inserts its row itself
  logger.warn({ rows: total, taken }, 'repairing a stale migration lock (left by a process that stopped while migrating, or by a concurrent first start)');
  await knex.migrate.forceFreeMigrationsLock();
}
