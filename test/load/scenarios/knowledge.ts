// knowledge: indexes --knowledge-docs text documents (about 2 KB each: 10,000 make about 20 MB) through the job queue
// and reports MB/s, then GET /knowledge/search for queries of several selectivities taken from the corpus (a word in
// thousands of chunks, in hundreds, in tens, two words, a quoted phrase, a word in none). Baseline: a bare node:http
// handler running the app's own search statement (imported) on the same database, with the same parameters and the
// same answer (checked query by query). Both are driven by the same autocannon client, one request at a time
// (latency) and at --connections (throughput), taking turns. The statement alone (a pg client, sequential) is shown
// too: the floor no HTTP server reaches.
import autocannon from 'autocannon';
import pg from 'pg';
import { rankedSearchSql, rankedSearchValues } from '../../../server/services/knowledge/search.js';
import { percentile, quiesce, requestJson } from '../lib/http-load.js';
import type { KnowledgeSeedResult, QueryClass } from '../lib/knowledge-seed.js';
import type { Child } from '../lib/proc.js';
import { row, type Row } from '../lib/report.js';
import type { SeedResult } from '../lib/seed.js';
import { startApp, startHttpDb, type Scenario } from '../lib/servers.js';
import { round, serverCpu } from '../lib/stats.js';

const ROUNDS = 2;
const LIMIT = 10;

interface Measure {
  rps: number;
  p50: number;
  p95: number;
  serverCpu: number;
  failed: number;
}

/** autocannon over the class's queries in turn; p50/p95 from every response (sub-millisecond resolution). */
async function measure(base: string, headers: Record<string, string>, queries: string[], connections: number, seconds: number, server: Child): Promise<{ ok: number; seconds: number; latencies: number[]; cpu: number; failed: number }> {
  const paths = queries.map((q) => `${new URL(base).pathname.replace(/\/$/, '')}/knowledge/search?q=${encodeURIComponent(q)}&limit=${LIMIT}`);
  let next = 0;
  const latencies: number[] = [];
  const before = await server.stats();
  const instance = autocannon({
    url: base,
    connections,
    duration: seconds,
    timeout: 30,
    headers,
    requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: paths[next++ % paths.length]! }) }],
  });
  instance.on('response', (_client, _status, _bytes, ms) => void latencies.push(ms));
  const r = await instance;
  const after = await server.stats();
  return { ok: r['2xx'], seconds: r.duration, latencies, cpu: serverCpu(before, after), failed: r.non2xx + r.errors };
}

function summarize(parts: Awaited<ReturnType<typeof measure>>[]): Measure {
  const ok = parts.reduce((n, p) => n + p.ok, 0);
  const seconds = parts.reduce((n, p) => n + p.seconds, 0);
  const latencies = parts.flatMap((p) => p.latencies);
  return { rps: round(ok / seconds, 1), p50: percentile(latencies, 0.5), p95: percentile(latencies, 0.95), serverCpu: round(parts.reduce((n, p) => n + p.cpu, 0) / parts.length, 2), failed: parts.reduce((n, p) => n + p.failed, 0) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

export const knowledge: Scenario = {
  name: 'knowledge',
  summary: 'index N text documents (~2 KB each) through the job queue (MB/s), then GET /knowledge/search for queries of several selectivities vs bare node:http + pg running the same statement',
  skip: (ctx) => (ctx.options.databaseUrl ? null : 'needs DATABASE_URL (the baseline and the app measured side by side on one PostgreSQL)'),
  async run(ctx) {
    const o = ctx.options;
    const app = await startApp(ctx, 'app', { postgres: true, redis: true });
    const bare = new pg.Client({ connectionString: o.databaseUrl! });
    const rows: Row[] = [];
    const details: Record<string, unknown> = {};
    try {
      const seeded = await app.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: 1, agents: 1, visitors: 0, conversations: false }, 300_000);
      const org = seeded.orgs[0]!;
      const agent = org.agents[0]!;
      const k = await app.child.call<KnowledgeSeedResult>('seedKnowledge', { orgId: org.id, userId: agent.userId, docs: o.knowledgeDocs }, 3_600_000);
      const mb = k.bytes / 1024 / 1024;
      ctx.log(`  indexed ${k.documents} documents, ${mb.toFixed(1)} MB, ${k.chunks} chunks in ${k.indexingSeconds.toFixed(1)} s: ${(mb / k.indexingSeconds).toFixed(2)} MB/s`);
      rows.push(row('indexing', 'MB/s', round(mb / k.indexingSeconds, 2), null, { note: `${k.documents} documents, ${mb.toFixed(1)} MB, ${k.chunks} chunks` }));
      for (const c of k.classes) ctx.log(`  ${c.label}: ${c.queries.length} queries, chunks matched: median ${median(c.matches)}, ${Math.min(...c.matches)}-${Math.max(...c.matches)}`);

      const httpDb = await startHttpDb(ctx, null);
      try {
        const appSide = { url: `${app.url}/api/v1`, headers: { authorization: `Bearer ${agent.token}` }, child: app.child };
        const baseSide = { url: httpDb.url, headers: { 'x-org-id': org.id }, child: httpDb.child };
        // The same answer on both sides, query by query: same chunks in the same order, same snippets and scores.
        for (const c of k.classes) {
          for (const q of c.queries) {
            const path = `/knowledge/search?q=${encodeURIComponent(q)}&limit=${LIMIT}`;
            const [a, b] = await Promise.all([requestJson(`${appSide.url}${path}`, { headers: appSide.headers }), requestJson(`${baseSide.url}${path}`, { headers: baseSide.headers })]);
            if (a.status !== 200 || b.status !== 200 || JSON.stringify(a.body.data) !== JSON.stringify(b.body.data)) throw new Error(`${c.label} ${q}: app ${a.status} and baseline ${b.status} answered differently: ${JSON.stringify(a.body).slice(0, 300)} / ${JSON.stringify(b.body).slice(0, 300)}`);
          }
        }
        await bare.connect();
        const statement = rankedSearchSql(false);
        for (const [i, c] of k.classes.entries()) {
          const hits = `chunks matched: median ${median(c.matches)} (${Math.min(...c.matches)}-${Math.max(...c.matches)})`;
          for (const connections of [1, o.connections]) {
            const a: Awaited<ReturnType<typeof measure>>[] = [];
            const b: Awaited<ReturnType<typeof measure>>[] = [];
            // Turns, so a change in the shared machine's load falls on both sides alike.
            for (let r = 0; r < ROUNDS; r++) {
              a.push(await measure(appSide.url, appSide.headers, c.queries, connections, o.duration / ROUNDS, appSide.child));
              await quiesce(appSide.child);
              b.push(await measure(baseSide.url, baseSide.headers, c.queries, connections, o.duration / ROUNDS, baseSide.child));
              await quiesce(baseSide.child);
            }
            const am = summarize(a);
            const bm = summarize(b);
            ctx.log(`  ${c.label}, ${connections} conn: app ${am.rps} req/s p50 ${am.p50} p95 ${am.p95} ms CPU ${am.serverCpu}; baseline ${bm.rps} req/s p50 ${bm.p50} p95 ${bm.p95} ms CPU ${bm.serverCpu}`);
            const failed = am.failed || bm.failed ? `; failed: app ${am.failed}, baseline ${bm.failed}` : '';
            const label = `${c.label}, ${connections} connection${connections > 1 ? 's' : ''}`;
            rows.push(row(`${label}: throughput`, 'req/s', am.rps, bm.rps, { note: `${connections === 1 ? hits : ''}; server CPU ${am.serverCpu} / ${bm.serverCpu}${failed}` }));
            rows.push(row(`${label}: p50`, 'ms', am.p50, bm.p50));
            rows.push(row(`${label}: p95`, 'ms', am.p95, bm.p95));
            details[`${label}`] = { app: am, baseline: bm };
          }
          // The statement alone, one after another from a pg client in this process (no HTTP at all).
          const times: number[] = [];
          const n = o.quick ? 20 : 300;
          for (let j = 0; j < n; j++) {
            const s = performance.now();
            await bare.query({ name: 'knowledge_search', text: statement, values: rankedSearchValues(org.id, c.queries[j % c.queries.length]!, LIMIT) });
            times.push(performance.now() - s);
          }
          rows.push(row(`${c.label}: statement alone p50`, 'ms', null, percentile(times, 0.5), { note: 'pg client, sequential, no HTTP' }));
          details[`${c.label}: classes`] = { queries: c.queries, matches: c.matches, statementP50: percentile(times, 0.5), index: i } satisfies Partial<QueryClass> & Record<string, unknown>;
        }
      } finally {
        await httpDb.child.stop();
      }
    } finally {
      await bare.end().catch(() => undefined);
      // On a shared PostgreSQL the run removes its organization (sources and chunks cascade).
      await app.child.call('cleanup', undefined, 600_000).catch(() => undefined);
      await app.stop();
    }
    return { rows, details };
  },
};
