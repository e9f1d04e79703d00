// `npx tsx test/load/message-cost.ts`: PostgreSQL's time per stored message. Starts the app in this process on
// DATABASE_URL, seeds organizations with one open conversation per visitor, then sends messages through the one send
// path (MessageService.send, the path every socket and REST send takes) at a steady rate, and reads
// pg_stat_statements for this database only: total statement time over the messages stored, per statement.
// Baseline, same run: plain multi-row INSERTs of as many messages into the same table, in batches of the size the
// send path formed. The sockets are left out on purpose: they cost the server's CPU, not PostgreSQL's.
//
//   MESSAGES=16000 RATE=800 VISITORS=10000 AGENT_SHARE=0.1 DATABASE_URL=postgres://... npx tsx test/load/message-cost.ts
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { v7 as timeOrderedUuid } from 'uuid';
import { loadConfig } from '../../server/config.js';
import { createServer } from '../../server/server.js';
import type { Sender } from '../../server/services/messages/index.js';
import { cleanup, seed } from './lib/seed.js';

const env = process.env;
if (!env.DATABASE_URL) {
  process.stderr.write('message-cost: set DATABASE_URL (pg_stat_statements lives in PostgreSQL)\n');
  process.exit(2);
}
const MESSAGES = Number(env.MESSAGES ?? 16000);
const RATE = Number(env.RATE ?? 800);
const VISITORS = Number(env.VISITORS ?? 10000);
/** Share of sends that are an agent's reply (first reply, human joined) rather than the visitor's message. */
const AGENT_SHARE = Number(env.AGENT_SHARE ?? 0.1);
const TICK_MS = 5;

const server = createServer(loadConfig({ ...env, NODE_ENV: 'development', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', BCRYPT_COST: '4' }));
await server.start();
const { knex } = server.db;
const runId = `cost${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
const seeded = await seed(server, { runId, orgs: 4, agents: 8, visitors: VISITORS, conversations: true });
const targets = seeded.orgs.flatMap((org) => org.visitors.map((v) => ({ orgId: org.id, sessionId: v.sessionId, conversationId: v.conversationId!, agent: org.agents[0]!.userId })));

async function finish(code: number): Promise<never> {
  await cleanup(server, runId);
  await server.stop();
  process.exit(code);
}

if (!(await knex.raw(`select 1 from pg_extension where extname = 'pg_stat_statements'`)).rows.length) await knex.raw('create extension pg_stat_statements');

/** What runs beside the sends on its own clock (the analytics rollup, the job queue's poll): not part of their cost. */
const BACKGROUND = /analytics_|message_rollup|with counted|from jobs|as day from conversations/i;

interface StatRow {
  key: string;
  toplevel: boolean;
  calls: number;
  rows: number;
  ms: number;
  wal: number;
  query: string;
}

/**
 * CPU time (ms) the server processes of this database have used so far, by process id, when PostgreSQL runs on this
 * machine (empty otherwise). Unlike statement time it does not grow while a process waits for a core, which on a
 * shared machine is most of the wall time.
 */
async function backendCpu(): Promise<Map<number, number>> {
  const pids = ((await knex.raw('select pid from pg_stat_activity where datname = current_database()')).rows as { pid: number }[]).map((r) => r.pid);
  const cpu = new Map<number, number>();
  for (const pid of pids) {
    try {
      // Fields 14 and 15 (after the parenthesized name): user and system time in clock ticks (100 per second).
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      cpu.set(pid, (Number(fields[11]) + Number(fields[12])) * 10);
    } catch {
      // Not on this machine, or gone.
    }
  }
  return cpu;
}
let cpuMs = 0;

/**
 * Statement statistics of this database gathered while `work` runs: read before and after and subtracted, so the
 * statistics are left alone for everyone else. A full reset by someone else meanwhile makes the measure void.
 */
async function measure(work: () => Promise<void>): Promise<StatRow[]> {
  const read = async () => ({
    reset: String((await knex.raw('select stats_reset from pg_stat_statements_info')).rows[0].stats_reset),
    rows: (
      await knex.raw(`
        select queryid::text || toplevel::text as key, toplevel, calls::float8 as calls, rows::float8 as rows, total_exec_time as ms,
          wal_records::float8 as wal, regexp_replace(query, '\\s+', ' ', 'g') as query
        from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())`)
    ).rows as StatRow[],
  });
  const before = await read();
  const cpuBefore = await backendCpu();
  await work();
  const cpuAfter = await backendCpu();
  const after = await read();
  cpuMs = [...cpuAfter].reduce((sum, [pid, ms]) => sum + ms - (cpuBefore.get(pid) ?? ms), 0);
  if (after.reset !== before.reset) {
    process.stderr.write('message-cost: pg_stat_statements was reset during the measure; run it again\n');
    return finish(1);
  }
  const earlier = new Map(before.rows.map((r) => [r.key, r]));
  return after.rows
    .map((r) => {
      const b = earlier.get(r.key);
      return { ...r, calls: r.calls - (b?.calls ?? 0), rows: r.rows - (b?.rows ?? 0), wal: r.wal - (b?.wal ?? 0), ms: r.ms - (b?.ms ?? 0) };
    })
    .filter((r) => r.calls > 0 && !/pg_stat_statements/i.test(r.query) && !BACKGROUND.test(r.query))
    .sort((a, b) => b.ms - a.ms);
}

// Statements run inside another (foreign-key checks) are already part of its time.
const totalOf = (rows: StatRow[]) => rows.filter((r) => r.toplevel && !BACKGROUND.test(r.query)).reduce((s, r) => s + r.ms, 0);
const orgIds = seeded.orgs.map((o) => o.id);
const countStored = async () => Number((await knex('messages').whereIn('organizationId', orgIds).count({ n: '*' }).first())?.n ?? 0);

/** Adds one measure's statement figures into a running sum. */
function add(sum: Map<string, StatRow>, rows: StatRow[]): void {
  for (const r of rows) {
    const s = sum.get(r.key);
    sum.set(r.key, s ? { ...s, calls: s.calls + r.calls, rows: s.rows + r.rows, wal: s.wal + r.wal, ms: s.ms + r.ms } : r);
  }
}
const sorted = (sum: Map<string, StatRow>) => [...sum.values()].sort((a, b) => b.ms - a.ms);

// Rounds of a few seconds of sends, each followed by its baseline, so both see the same machine: on a shared
// machine the load of the neighbours changes from minute to minute.
const ROUND_MESSAGES = Math.max(1, Math.round(RATE * 2.5));
/** Conversation row updates so far, and how many were heap-only (no index entries). */
const updates = async () => {
  const row = (await knex.raw(`select n_tup_upd::float8 as upd, n_tup_hot_upd::float8 as hot from pg_stat_user_tables where relname = 'conversations'`)).rows[0] as { upd: number; hot: number };
  return row;
};
// Backends report table counters when idle, at most every few seconds: wait for what seeding wrote to arrive.
const settleCounters = () => new Promise((r) => setTimeout(r, 11_000));
await settleCounters();
const updatesBefore = await updates();
const sends = new Map<string, StatRow>();
const plain = new Map<string, StatRow>();
let failed = 0;
let sent = 0;
let plainRows = 0;
let sendCpuMs = 0;
let plainCpuMs = 0;
let seconds = 0;
const batch = server.services.messages.batchStats;
while (sent < MESSAGES) {
  const round = Math.min(ROUND_MESSAGES, MESSAGES - sent);
  const before = { ...batch };
  const started = performance.now();
  add(sends, await measure(async () => {
    const inFlight = new Set<Promise<unknown>>();
    for (let i = 0; i < round; ) {
      const due = Math.min(round, Math.floor(((performance.now() - started) / 1000) * RATE) + 1);
      for (; i < due; i++, sent++) {
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
  }));
  sendCpuMs += cpuMs;
  seconds += (performance.now() - started) / 1000;
  // The baseline: as many rows, in batches of the size this round formed, as plain INSERTs (seq far above the
  // conversations' own), with time-ordered ids as the send path gives its messages.
  const size = Math.max(1, Math.round((batch.appended - before.appended) / Math.max(1, batch.batches - before.batches)));
  // As many statements in flight as the send path keeps (two), so both compete for the cores alike.
  add(plain, await measure(async () => {
    let n = 0;
    const lane = async () => {
      while (n < round) {
        const count = Math.min(size, round - n);
        n += count;
        const rows = Array.from({ length: count }, () => {
          const k = plainRows++;
          const t = targets[k % targets.length]!;
          return {
            id: timeOrderedUuid(),
            organizationId: t.orgId, conversationId: t.conversationId, seq: 1_000_000 + k, senderType: 'visitor', senderId: t.sessionId,
            content: `message ${k} of the baseline`, type: 'text', private: false, metadata: {}, clientMessageId: `${runId}-plain-${k}`,
          };
        });
        await knex('messages').insert(rows);
      }
    };
    await Promise.all([lane(), lane()]);
  }));
  plainCpuMs += cpuMs;
}
const stored = (await countStored()) - plainRows;
await settleCounters();
const updatesAfter = await updates();
const batchSize = Math.round(batch.appended / Math.max(1, batch.batches));

const fmt = (n: number, d = 4) => n.toFixed(d);
const out = (line: string) => process.stdout.write(`${line}\n`);
const table = (rows: StatRow[], per: number) => {
  out('    calls      rows   total ms  ms/message  WAL/message  statement (nested: run inside a statement above)');
  for (const r of rows.slice(0, 8)) {
    out(`${String(r.calls).padStart(9)} ${String(r.rows).padStart(9)} ${fmt(r.ms, 1).padStart(10)} ${fmt(r.ms / per).padStart(11)} ${fmt(r.wal / per, 1).padStart(12)}  ${r.toplevel ? '' : 'nested: '}${r.query.slice(0, 100)}`);
  }
};
out(`sent ${MESSAGES} at ${RATE}/s to ${VISITORS} conversations (${Math.round(AGENT_SHARE * 100)}% agent replies) in ${seconds.toFixed(1)} s; stored ${stored}, failed ${failed}`);
out(`batches ${batch.batches} (about ${batchSize} messages each), batched ${batch.appended}, declined ${batch.declined}, failed batches ${batch.failed}`);
const sendMs = totalOf(sorted(sends)) / stored;
const plainMs = totalOf(sorted(plain)) / plainRows;
out(`send path: ${fmt(sendMs)} ms per stored message; conversation updates ${updatesAfter.upd - updatesBefore.upd}, heap-only ${updatesAfter.hot - updatesBefore.hot}`);
table(sorted(sends), stored);
out(`plain INSERT of ${plainRows} rows in batches of the same sizes: ${fmt(plainMs)} ms per row`);
table(sorted(plain), plainRows);
out(`send path / plain INSERT: ${(sendMs / plainMs).toFixed(2)}x`);
if (sendCpuMs > 0) {
  out(`PostgreSQL CPU (its processes for this database, whole transactions): send path ${fmt(sendCpuMs / stored)} ms per stored message, plain INSERT ${fmt(plainCpuMs / plainRows)} ms per row (${(sendCpuMs / stored / (plainCpuMs / plainRows)).toFixed(2)}x)`);
}
await finish(0);
