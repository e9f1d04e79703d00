// Between two measures on PostgreSQL: the database finishes what the last one wrote before the next one starts.
import type { AppServer } from '../../../server/server.js';
import type { Child } from './proc.js';

/** What settling the database before a measure took. */
export interface Settled {
  /** Milliseconds VACUUM (ANALYZE) of the written tables took, or null when it failed (e.g. not the tables' owner). */
  vacuumMs: number | null;
  /** Milliseconds CHECKPOINT took, or null when it failed (e.g. a role without pg_checkpoint). */
  checkpointMs: number | null;
  /** Milliseconds spent waiting for autovacuum workers (of any table) to finish. */
  waitedMs: number;
  /** Autovacuum workers still running when the wait gave up. */
  autovacuumLeft: number;
}

/** The tables a chat search writes to: vacuumed between searches so autovacuum has no reason to start in the next. */
export const CHAT_TABLES = ['messages', 'conversations'];

/** The tables seeding callers (and removing them) writes to: what a ramp of handshakes reads. */
export const CALLER_TABLES = ['organizations', 'users', 'memberships', 'auth_sessions', 'widgets', 'visitor_sessions'];

/** Only these names reach the VACUUM statement (identifiers cannot be bound). */
const KNOWN_TABLES = new Set([...CHAT_TABLES, ...CALLER_TABLES]);

/**
 * Lets PostgreSQL finish the work a measure left behind before the next one starts: vacuuming and analyzing what the
 * last search wrote (otherwise autovacuum starts on its own schedule, possibly in the middle of the next search),
 * writing out its dirty pages (CHECKPOINT), and any autovacuum already running. `tables` are the ones the last step
 * wrote (the chat search's by default). All of it runs on the cores the
 * servers and the generator use, so without this the search measured second could pay for the first one's writes.
 * The wait for autovacuum gives up after `maxMs`. The embedded database has no other process to wait for: null.
 */
export async function settleDatabase(server: AppServer, maxMs: number, tables: readonly string[] = CHAT_TABLES): Promise<Settled | null> {
  if (server.db.embedded) return null;
  const unknown = tables.filter((t) => !KNOWN_TABLES.has(t));
  if (unknown.length > 0 || tables.length === 0) throw new Error(`settleDatabase: no such table to vacuum: ${unknown.join(', ') || '(none given)'}`);
  const { knex } = server.db;
  const timed = async (sql: string): Promise<number | null> => {
    const t = performance.now();
    return knex.raw(sql).then(() => Math.round(performance.now() - t), () => null);
  };
  const vacuumMs = await timed(`vacuum (analyze) ${tables.join(', ')}`);
  const checkpointMs = await timed('checkpoint');
  const t1 = performance.now();
  let left = 0;
  for (;;) {
    const row = (await knex.raw(`select count(*)::int as n from pg_stat_activity where backend_type = 'autovacuum worker'`)) as { rows: { n: number }[] };
    left = row.rows[0]?.n ?? 0;
    if (left === 0 || performance.now() - t1 > maxMs) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return { vacuumMs, checkpointMs, waitedMs: Math.round(performance.now() - t1), autovacuumLeft: left };
}

/** Longest wait for PostgreSQL's autovacuum workers before a measure. */
const SETTLE_MAX_MS = 60_000;

/**
 * From the generator: has the app server `child` settle the database (above) before the next measure, and logs what
 * that took (nothing on the embedded database).
 */
export async function settleBefore(log: (line: string) => void, child: Child, tables: readonly string[] = CHAT_TABLES): Promise<void> {
  const s = await child.call<Settled | null>('settleDatabase', { maxMs: SETTLE_MAX_MS, tables }, SETTLE_MAX_MS + 120_000);
  if (!s) return;
  const ms = (v: number | null) => (v === null ? 'failed' : `${v} ms`);
  log(`  database settled: vacuum ${ms(s.vacuumMs)}, checkpoint ${ms(s.checkpointMs)}, autovacuum waited ${s.waitedMs} ms${s.autovacuumLeft ? ` (${s.autovacuumLeft} still running)` : ''}`);
}
