// analytics: every analytics route over one organization with --analytics-conversations conversations (5 messages
// each, 200 agents), for a 30-day and a 365-day period, requests one after another. Each request names a `to` no
// earlier request used, so none is answered from the 60-second cache. Baseline: a sequential scan of that
// organization's conversations (index scans off) in the same database, timed three times first, then before every
// route's requests and after the last (the median of all of them); target p95 < 0.2x.
// With --analytics-keep the seeded organization outlives the run and later runs measure it again without seeding.
import { existsSync, renameSync } from 'node:fs';
import path from 'node:path';
import type { AnalyticsSeedResult, KeptAnalytics } from '../lib/analytics-seed.js';
import { LOAD_DIR } from '../lib/proc.js';
import { percentile, requestJson } from '../lib/http-load.js';
import { row, type Row } from '../lib/report.js';
import type { SeedResult } from '../lib/seed.js';
import { startApp, type Scenario } from '../lib/servers.js';

const AGENTS = 200;
const DAY_MS = 86_400_000;

export const analytics: Scenario = {
  name: 'analytics',
  summary: 'analytics routes (30 and 365 days, cache bypassed) over one large organization; baseline: a sequential scan of its conversations',
  skip: () => null,
  async run(ctx) {
    const o = ctx.options;
    const keep = o.analyticsKeep;
    // A kept embedded database lives in a directory of its own; a kept PostgreSQL one in DATABASE_URL's database.
    const keptDir = keep && !o.databaseUrl ? path.join(LOAD_DIR, `.analytics-${o.analyticsConversations}`) : null;
    const app = await startApp(ctx, 'app', { postgres: true, redis: false, ...(keptDir && existsSync(keptDir) ? { dataDir: keptDir } : {}) });
    const runId = keep ? `analytics-keep-${o.analyticsConversations}` : ctx.runId;
    const rows: Row[] = [];
    const details: Record<string, unknown> = {};
    try {
      let kept = keep ? await app.child.call<KeptAnalytics | null>('findKeptAnalytics', { runId }, 600_000) : null;
      if (kept) {
        ctx.log(`  reusing the kept organization: ${kept.data.conversations} conversations, ${kept.data.messages} messages, seeded up to ${kept.data.anchor}`);
      } else {
        const seeded = await app.child.call<SeedResult>('seed', { runId, orgs: 1, agents: 1, visitors: 0, conversations: false }, 300_000);
        const org = seeded.orgs[0]!;
        const t0 = performance.now();
        const data = await app.child.call<AnalyticsSeedResult>('seedAnalytics', { orgId: org.id, runId, agents: AGENTS, conversations: o.analyticsConversations, keep }, 3_600_000);
        ctx.log(`  seeded ${data.conversations} conversations, ${data.messages} messages, ${data.agents} agents in ${Math.round((performance.now() - t0) / 1000)} s ${JSON.stringify(data.seconds)}`);
        kept = { orgId: org.id, token: org.agents[0]!.token, data };
      }
      details.seed = kept.data;
      if (o.analyticsSeedOnly) {
        ctx.log('  --analytics-seed-only: seeded and kept, nothing measured');
        return { rows, details };
      }
      const { data, token } = kept;
      const org = { id: kept.orgId };

      // The baseline is timed again before every route's requests and after the last ones, so a busy spell of the shared
      // machine weighs on both sides; the ratios use the median of every scan of the run.
      const scans: number[] = [];
      let scanPlan = '';
      const timeScans = async (times: number) => {
        const scan = await app.child.call<{ ms: number[]; plan: string }>('analyticsScan', { orgId: org.id, times }, 600_000);
        scans.push(...scan.ms);
        scanPlan = scan.plan;
      };
      await timeScans(o.quick ? 1 : 3);
      ctx.log(`  sequential scan of the organization's conversations: ${scans.join(', ')} ms`);

      // Periods end just after the seeding moment (a kept seed does not move with the clock).
      const end = new Date(data.anchor).getTime() + 60_000;
      let bump = 0;
      const routes = ['/analytics/summary', '/analytics/trends', '/analytics/agents', '/analytics/agent/stats'];
      const requests = o.quick ? 4 : 20;
      const measured: { route: string; days: number; ms: number[] }[] = [];
      for (const days of [30, 365]) {
        const from = new Date(end - days * DAY_MS).toISOString();
        details[`plan${days}`] = await app.child.call<string>('analyticsExplain', { orgId: org.id, from, to: new Date(end).toISOString() }, 600_000);
        ctx.log(`  plan, ${days} days:\n    ${String(details[`plan${days}`]).split('\n').join('\n    ')}`);
        for (const route of routes) {
          await timeScans(1);
          const ms: number[] = [];
          for (let k = 0; k < requests + 1; k++) {
            // A `to` no request used before: a miss in the cache, computed afresh.
            const to = new Date(end + ++bump).toISOString();
            const t = performance.now();
            const res = await requestJson(`${app.url}/api/v1${route}?from=${from}&to=${to}`, { headers: { authorization: `Bearer ${token}` } });
            const took = performance.now() - t;
            if (res.status !== 200) throw new Error(`${route} answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
            if (route === '/analytics/summary' && days === 365 && k === 0) {
              const started = res.body.data.conversations.started;
              if (started < data.conversations * 0.99) throw new Error(`the summary counts ${started} of ${data.conversations} conversations`);
            }
            // The first request warms the plan cache and the pages; it is not counted.
            if (k > 0) ms.push(Math.round(took * 10) / 10);
          }
          measured.push({ route, days, ms });
        }
      }
      await timeScans(1);
      const scanMs = percentile(scans, 0.5);
      const spread = `${Math.min(...scans)}-${Math.max(...scans)}`;
      ctx.log(`  sequential scans, interleaved with the routes: ${scans.join(', ')} ms (median ${scanMs}, ${scans.length} scans, ${spread} ms)`);
      details.scan = { ms: scans, median: scanMs, plan: scanPlan };
      for (const { route, days, ms } of measured) {
        const p50 = percentile(ms, 0.5);
        const p95 = percentile(ms, 0.95);
        ctx.log(`  ${route} ${days} d: p50 ${p50} ms, p95 ${p95} ms (scan ${scanMs} ms, p95 ${Math.round((p95 / scanMs) * 100) / 100}x)`);
        rows.push(row(`${route} ${days} d p50`, 'ms', p50, scanMs));
        rows.push(row(`${route} ${days} d p95`, 'ms', p95, scanMs, { note: `target < 0.2x the scan; ${requests} sequential requests, cache bypassed` }));
      }
      rows[0]!.note = `${data.conversations} conversations, ${data.messages} messages, ${data.agents} agents; baseline: median of ${scans.length} sequential scans of the organization's conversations interleaved with the routes (${spread} ms)`;
    } finally {
      if (!app.dataDir && !keep) await app.child.call('cleanup', undefined, 1_800_000).catch(() => undefined);
      await app.stop(!!keptDir);
      if (keptDir && app.dataDir && app.dataDir !== keptDir) renameSync(app.dataDir, keptDir);
    }
    return { rows, details };
  },
};
