// ingest: observability batches (POST /observability/ai-calls with x-ai-tool-secret), events/s. Baseline: a bare
// node:http handler doing one raw multi-row INSERT of the same rows (aiCallRow) on the same database.
import { measureHttp, requestJson, type HttpMeasure } from '../lib/http-load.js';
import { invalidOf, row } from '../lib/report.js';
import type { SeedResult } from '../lib/seed.js';
import { AI_SECRET, startApp, startHttpDb, type Scenario } from '../lib/servers.js';
import { round } from '../lib/stats.js';

function batchOf(size: number, orgId: string): string {
  const models = [['openai', 'gpt-4o-mini'], ['anthropic', 'claude-haiku'], ['openai', 'text-embedding-3-small']] as const;
  const events = Array.from({ length: size }, (_, i) => {
    const [provider, modelId] = models[i % models.length]!;
    const input = 200 + (i % 800);
    return {
      timestamp: new Date(Date.now() - i * 1000).toISOString(),
      provider,
      modelId,
      latencyMs: 150 + (i % 1500),
      success: i % 50 !== 0,
      inputTokens: input,
      outputTokens: 40 + (i % 300),
      estimatedCostUsd: input * 0.000001,
      error: i % 50 === 0 ? 'upstream timeout' : null,
      organizationId: orgId,
      conversationId: null,
      callType: modelId.startsWith('text-embedding') ? 'embedding' : 'llm',
    };
  });
  return JSON.stringify({ events });
}

export const ingest: Scenario = {
  name: 'ingest',
  summary: 'observability batches of 500 events; baseline: one raw multi-row INSERT of the same rows',
  skip: () => null,
  async run(ctx) {
    const o = ctx.options;
    const connections = Math.min(o.connections, 8);
    const app = await startApp(ctx, 'app', { postgres: true, redis: true });
    let appM: HttpMeasure;
    let base: HttpMeasure;
    let database = '';
    try {
      const seeded = await app.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: 1, agents: 1, visitors: 0, conversations: false });
      const body = batchOf(o.batch, seeded.orgs[0]!.id);
      const headers = { 'content-type': 'application/json', 'x-ai-tool-secret': AI_SECRET };
      const check = await requestJson(`${app.url}/api/v1/observability/ai-calls`, { method: 'POST', headers, body: JSON.parse(body) });
      if (check.status !== 201 || check.body?.data?.inserted !== o.batch) throw new Error(`the ingest route answered ${check.status} ${JSON.stringify(check.body).slice(0, 300)}`);
      ctx.log(`  app: batches of ${o.batch} (${Math.round(body.length / 1024)} KB), ${connections} connections`);
      appM = await measureHttp({ url: `${app.url}/api/v1/observability/ai-calls`, method: 'POST', headers, body, connections, duration: o.duration }, app.child, o.limits);
      ctx.log(`    ${Math.round(appM.rps * o.batch)} events/s, p99 ${appM.p99} ms`);
      if (app.dataDir) await app.stop(true);
      const httpDb = await startHttpDb(ctx, app.dataDir);
      database = httpDb.database;
      try {
        const baseCheck = await requestJson(`${httpDb.url}/observability/ai-calls`, { method: 'POST', headers, body: JSON.parse(body) });
        if (baseCheck.status !== 201) throw new Error(`the baseline answered ${baseCheck.status} ${JSON.stringify(baseCheck.body).slice(0, 300)}`);
        base = await measureHttp({ url: `${httpDb.url}/observability/ai-calls`, method: 'POST', headers, body, connections, duration: o.duration }, httpDb.child, o.limits);
        ctx.log(`  baseline: ${Math.round(base.rps * o.batch)} events/s, p99 ${base.p99} ms`);
      } finally {
        await httpDb.child.stop();
      }
    } finally {
      // On a shared PostgreSQL the run removes its rows, even after a failure.
      if (!app.dataDir) await app.child.call('cleanup').catch(() => undefined);
      await app.stop();
    }
    const invalid = invalidOf(appM.generator.invalid, base.generator.invalid);
    const errors = [appM, base].map((m, i) => (m.non2xx || m.errors ? `${i ? 'baseline' : 'app'}: ${m.non2xx} non-2xx ${JSON.stringify(m.statusCodes)}, ${m.errors} errors` : '')).filter(Boolean);
    return {
      rows: [
        row('events stored', '/s', round(appM.rps * o.batch, 0), round(base.rps * o.batch, 0), { invalid, note: [`batches of ${o.batch}, ${connections} connections, baseline: bare node:http + ${database}`, `server CPU ${Math.round(appM.serverCpu * 100)}% / ${Math.round(base.serverCpu * 100)}%`, ...errors].join('; ') }),
        row('batch p50', 'ms', appM.p50, base.p50, { invalid }),
        row('batch p99', 'ms', appM.p99, base.p99, { invalid }),
      ],
      details: { database, batch: o.batch, connections, app: appM, baseline: base, serverLog: app.child.log },
    };
  },
};
