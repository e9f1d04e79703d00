// knowledge: indexes --knowledge-docs text documents (about 2 KB each: 10,000 make about 20 MB) through the job queue
// and measures MB/s, then GET /knowledge/search (sequential requests, p50/p95) against the same ts_rank_cd +
// ts_headline SQL run bare (pg with DATABASE_URL, else the app's own PGlite handle). Runs in this process: the figure
// of interest is the query path's overhead over its SQL, not the server's capacity.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../../../server/config.js';
import { createServer } from '../../../server/server.js';
import { signUp } from '../../helpers/factories.js';
import { row } from '../lib/report.js';
import type { Scenario } from '../lib/servers.js';

/** A vocabulary with a long tail, so queries hit a few documents, not all. */
function vocabulary(size: number, seed: number): string[] {
  let x = seed;
  const rnd = () => ((x = (x * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  return Array.from({ length: size }, () => Array.from({ length: 4 + Math.floor(rnd() * 6) }, () => letters[Math.floor(rnd() * 26)]).join(''));
}

function percentile(sorted: number[], p: number): number {
  return sorted.length ? Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! * 100) / 100 : 0;
}

/** The search's SQL as one statement: rank the top 10, then headline them. */
const SEARCH_SQL = `
select r.id, r.source_id, s.title, ts_headline('english', c.content, q.query, 'MaxWords=40, MinWords=15, MaxFragments=2') as snippet, r.score
  from (select c.id, c.source_id, ts_rank_cd(c.tsv, q.query) as score
          from knowledge_chunks c, websearch_to_tsquery('english', $1) as q(query)
         where c.organization_id = $2 and c.tsv @@ q.query
         order by score desc, c.id limit 10) r
  join knowledge_chunks c on c.id = r.id join knowledge_sources s on s.id = r.source_id, websearch_to_tsquery('english', $1) as q(query)
 order by r.score desc`;

export const knowledge: Scenario = {
  name: 'knowledge',
  summary: 'index N text documents (~2 KB each) through the job queue (MB/s), then GET /knowledge/search p50/p95 vs the same ts_rank_cd SQL run bare',
  skip: () => null,
  async run(ctx) {
    const o = ctx.options;
    const docs = o.knowledgeDocs;
    const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-knowledge-'));
    const config = loadConfig({
      NODE_ENV: 'development', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, DATABASE_URL: o.databaseUrl ?? undefined, LOG_LEVEL: 'silent', BCRYPT_COST: '4',
      KNOWLEDGE_WORKERS: '4', JWT_ACCESS_SECRET: 'bench-access-secret-0123456789abcdef0123456789', JWT_REFRESH_SECRET: 'bench-refresh-secret-0123456789abcdef012345678', WIDGET_JWT_SECRET: 'bench-widget-secret-0123456789abcdef0123456789',
    });
    const server = createServer(config);
    const port = await server.start();
    const baseUrl = `http://127.0.0.1:${port}`;
    const bare = o.databaseUrl ? new pg.Client({ connectionString: o.databaseUrl }) : null;
    let orgId = '';
    try {
      const owner = await signUp(server, baseUrl);
      orgId = owner.orgId;
      // Indexing alone is timed: the queue stops claiming while the sources are written, then drains them.
      await server.jobs.stop();
      const words = vocabulary(20_000, 7);
      let bytes = 0;
      for (let i = 0; i < docs; i++) {
        const text = Array.from({ length: 300 }, (_, k) => words[(i * 7919 + k * k * 31 + k) % words.length]).join(' ');
        bytes += Buffer.byteLength(text);
        await server.services.knowledge.create(orgId, owner.userId, { title: `Document ${i}`, source: 'text', content: text });
      }
      const t0 = performance.now();
      const ran = await server.jobs.drain('knowledge-index');
      const seconds = (performance.now() - t0) / 1000;
      const mb = bytes / 1024 / 1024;
      const chunks = Number((await server.db.knex('knowledge_chunks').where({ organizationId: orgId }).count({ n: '*' }).first())?.n ?? 0);
      ctx.log(`  indexed ${ran} documents, ${mb.toFixed(1)} MB, ${chunks} chunks in ${seconds.toFixed(1)} s: ${(mb / seconds).toFixed(2)} MB/s`);

      const queries = Array.from({ length: 50 }, (_, i) => `${words[(i * 131) % 2000]} ${words[(i * 17 + 5) % 2000]}`);
      const iterations = o.quick ? 60 : 1000;
      // Fresh chunks sit in the GIN index's pending list until a vacuum merges them, and autovacuum would do it in
      // the middle of the measures (whichever side ran then paid for it): done first, for both sides.
      await server.db.knex.raw('vacuum analyze knowledge_chunks');
      // A pooled connection left idle through the indexing may have been closed by the server: warm up first.
      const warm = () => fetch(`${baseUrl}/api/v1/knowledge/search?q=${encodeURIComponent(queries[0]!)}`, { headers: { authorization: `Bearer ${owner.accessToken}` } }).then((r) => r.arrayBuffer());
      await warm().catch(warm);
      if (bare) await bare.connect();
      const appTimes: number[] = [];
      const floorTimes: number[] = [];
      const baseTimes: number[] = [];
      const timed = async (times: number[], run: () => Promise<void>) => {
        const s = performance.now();
        await run();
        times.push(performance.now() - s);
      };
      const get = async (q: string) => {
        const res = await fetch(`${baseUrl}/api/v1/knowledge/search?q=${encodeURIComponent(q)}&limit=10`, { headers: { authorization: `Bearer ${owner.accessToken}` } });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`search answered ${res.status}`);
      };
      // The three measures take turns in rounds, so a change in the machine's load falls on all of them alike.
      const rounds = 4;
      for (let round = 0; round < rounds; round++) {
        for (let i = round; i < iterations; i += rounds) await timed(appTimes, () => get(queries[i % queries.length]!));
        // The request path alone: the same route, authentication and answer, for a word no chunk holds (the GIN
        // lookup finds nothing, so no ranking or headline runs).
        for (let i = round; i < iterations; i += rounds) await timed(floorTimes, () => get(`zzqxjv${i % 50}`));
        for (let i = round; i < iterations; i += rounds) {
          const q = queries[i % queries.length]!;
          await timed(baseTimes, async () => {
            if (bare) await bare.query(SEARCH_SQL, [q, orgId]);
            else await server.db.knex.raw(SEARCH_SQL.replace(/\$1/g, '?').replace('$2', '?'), [q, orgId, q]);
          });
        }
      }
      floorTimes.sort((a, b) => a - b);
      appTimes.sort((a, b) => a - b);
      baseTimes.sort((a, b) => a - b);
      const rate = (times: number[]) => Math.round((times.length / (times.reduce((n, t) => n + t, 0) / 1000)) * 10) / 10;
      const database = bare ? 'bare pg' : 'the same PGlite handle';
      ctx.log(`  request floor (no match): p50 ${percentile(floorTimes, 50)} ms, p95 ${percentile(floorTimes, 95)} ms`);
      ctx.log(`  search: app p50 ${percentile(appTimes, 50)} ms, p95 ${percentile(appTimes, 95)} ms; ${database} p50 ${percentile(baseTimes, 50)} ms, p95 ${percentile(baseTimes, 95)} ms`);
      return {
        rows: [
          row('indexing', 'MB/s', Math.round((mb / seconds) * 100) / 100, null, { note: `${docs} documents, ${mb.toFixed(1)} MB, ${chunks} chunks, ${config.knowledge.workers} workers` }),
          row('search throughput (sequential)', 'req/s', rate(appTimes), rate(baseTimes), { note: `baseline: ${database} running the search SQL (rank + headline)` }),
          row('search p50', 'ms', percentile(appTimes, 50), percentile(baseTimes, 50)),
          row('search p95', 'ms', percentile(appTimes, 95), percentile(baseTimes, 95)),
          row('request floor p50 (no match)', 'ms', percentile(floorTimes, 50), null, { note: 'the same route for a word no chunk holds: HTTP, authentication and the answer without ranking' }),
          row('request floor p95 (no match)', 'ms', percentile(floorTimes, 95), null),
        ],
        details: { documents: docs, megabytes: mb, chunks, indexingSeconds: seconds, iterations },
      };
    } finally {
      await bare?.end().catch(() => undefined);
      // On a shared PostgreSQL the run removes its organization (sources and chunks cascade).
      if (o.databaseUrl && orgId) await server.db.knex('organizations').where({ id: orgId }).delete().catch(() => undefined);
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  },
};
