// `npx tsx test/load/message-cost.ts`: PostgreSQL's time per stored message. Starts the app in this process on
// DATABASE_URL, seeds organizations with one open conversation per visitor, then sends messages through the one send
// path (MessageService.send, the path every socket and REST send takes) at a steady rate, and reads
// pg_stat_statements for this database only: total statement time over the messages stored, per statement.
// The sockets are left out on purpose: they cost the server's CPU, not PostgreSQL's.
//
//   MESSAGES=20000 RATE=800 VISITORS=2000 AGENT_SHARE=0.1 DATABASE_URL=postgres://... npx tsx test/load/message-cost.ts
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../server/config.js';
import { createServer } from '../../server/server.js';
import type { Sender } from '../../server/services/messages/index.js';
import { cleanup, seed } from './lib/seed.js';

const env = process.env;
if (!env.DATABASE_URL) {
  process.stderr.write('message-cost: set DATABASE_URL (pg_stat_statements lives in PostgreSQL)\n');
  process.exit(2);
}
const MESSAGES = Number(env.MESSAGES ?? 20000);
const RATE = Number(env.RATE ?? 800);
const VISITORS = Number(env.VISITORS ?? 2000);
/** Share of sends that are an agent's reply (first reply, human joined) rather than the visitor's message. */
const AGENT_SHARE = Number(env.AGENT_SHARE ?? 0.1);
const TICK_MS = 5;

const server = createServer(loadConfig({ ...env, NODE_ENV: 'development', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', BCRYPT_COST: '4' }));
await server.start();
const { knex } = server.db;
const runId = `cost${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
const seeded = await seed(server, { runId, orgs: 4, agents: 8, visitors: VISITORS, conversations: true });
const targets = seeded.orgs.flatMap((org) => org.visitors.map((v) => ({ orgId: org.id, sessionId: v.sessionId, conversationId: v.conversationId!, agent: org.agents[0]!.userId })));

const pss = await knex.raw(`select 1 from pg_extension where extname = 'pg_stat_statements'`);
if (!pss.rows.length) await knex.raw('create extension pg_stat_statements');
// Counters are read before and after and subtracted, so statistics are left alone for everyone else; a full reset
// by someone else meanwhile (pg_stat_statements_info.stats_reset moves) makes the measure void.
type StatRow = { queryid: string; toplevel: boolean; calls: string; rows: string; ms: number; wal_records: string; query: string };
const readStats = async (): Promise<{ reset: string; rows: StatRow[] }> => ({
  reset: String((await knex.raw('select stats_reset from pg_stat_statements_info')).rows[0].stats_reset),
  rows: (
    await knex.raw(`
      select queryid::text, toplevel, calls, rows, total_exec_time as ms, wal_records, regexp_replace(query, '\\s+', ' ', 'g') as query
      from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())`)
  ).rows as StatRow[],
});
const before = await readStats();

let sent = 0;
let failed = 0;
const inFlight = new Set<Promise<unknown>>();
const started = performance.now();
while (sent < MESSAGES) {
  const due = Math.min(MESSAGES, Math.floor(((performance.now() - started) / 1000) * RATE) + 1);
  for (; sent < due; sent++) {
    const t = targets[sent % targets.length]!;
    const sender: Sender = Math.random() < AGENT_SHARE ? { type: 'agent', orgId: t.orgId, userId: t.agent } : { type: 'visitor', orgId: t.orgId, sessionId: t.sessionId };
    const p = server.services.messages
      .send(sender, { conversationId: t.conversationId, content: `message ${sent} of the cost measure`, clientMessageId: `${runId}-${sent}` })
      .catch(() => failed++)
      .finally(() => inFlight.delete(p));
    inFlight.add(p);
  }
  await new Promise((r) => setTimeout(r, TICK_MS));
}
await Promise.all(inFlight);
const seconds = (performance.now() - started) / 1000;

const orgIds = seeded.orgs.map((o) => o.id);
const stored = Number((await knex('messages').whereIn('organizationId', orgIds).count({ n: '*' }).first())?.n ?? 0);
const after = await readStats();
if (after.reset !== before.reset) {
  process.stderr.write('message-cost: pg_stat_statements was reset during the measure; run it again\n');
  await cleanup(server, runId);
  await server.stop();
  process.exit(1);
}
const earlier = new Map(before.rows.map((r) => [`${r.queryid}${r.toplevel}`, r]));
const stats = after.rows
  .map((r) => {
    const b = earlier.get(`${r.queryid}${r.toplevel}`);
    const minus = (k: 'calls' | 'rows' | 'wal_records') => String(Number(r[k]) - Number(b?.[k] ?? 0));
    return { ...r, calls: minus('calls'), rows: minus('rows'), wal_records: minus('wal_records'), ms: r.ms - (b?.ms ?? 0) };
  })
  .filter((r) => Number(r.calls) > 0 && !/pg_stat_statements|count\(\*\)/i.test(r.query))
  .sort((a, b) => b.ms - a.ms);
// Statements run inside another (foreign-key checks) are already part of its time.
const total = stats.filter((r) => r.toplevel).reduce((s, r) => s + r.ms, 0);
const fmt = (n: number, d = 4) => n.toFixed(d);
const batch = server.services.messages.batchStats;
process.stdout.write(`sent ${MESSAGES} at ${RATE}/s over ${VISITORS} conversations (${Math.round(AGENT_SHARE * 100)}% agent replies) in ${seconds.toFixed(1)} s; stored ${stored}, failed ${failed}\n`);
process.stdout.write(`batches ${batch.batches}, batched ${batch.appended}, declined ${batch.declined}, failed batches ${batch.failed}\n`);
process.stdout.write(`PostgreSQL statement time: ${fmt(total, 1)} ms total, ${fmt(total / stored)} ms per stored message\n\n`);
process.stdout.write('  calls     rows   total ms  ms/message  wal/msg  statement (nested: run inside the one above it)\n');
for (const r of stats.slice(0, 12)) {
  process.stdout.write(`${r.calls.padStart(7)} ${r.rows.padStart(8)} ${fmt(r.ms, 1).padStart(10)} ${fmt(r.ms / stored).padStart(11)} ${(Number(r.wal_records) / stored).toFixed(1).padStart(8)}  ${r.toplevel ? '' : 'nested: '}${r.query.slice(0, 110)}\n`);
}
await cleanup(server, runId);
await server.stop();
process.exit(0);
