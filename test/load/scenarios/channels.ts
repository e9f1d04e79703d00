// channels: signed WhatsApp webhooks (one new message each, from 50 customers) posted at rising rates to
// POST /channels/whatsapp/inbound/{id}; accepted webhooks/s and p99 to the 200. Baseline: a bare node:http handler
// that checks the same X-Hub-Signature-256 over the raw body and inserts the same inbound_events row into the same
// database. The app also writes each event's processing job; that processing (contact, conversation, message) runs
// after the 200, and the run waits for it before measuring the baseline.
import { measureHttp, quiesce, requestJson, type HttpMeasure } from '../lib/http-load.js';
import { BENCH_APP_SECRET, hubSignature, SENDERS, whatsappWebhook } from '../lib/channel-webhooks.js';
import { invalidOf, row } from '../lib/report.js';
import type { SeedResult } from '../lib/seed.js';
import { startApp, startHttpDb, type RunContext, type Scenario } from '../lib/servers.js';
import { round } from '../lib/stats.js';
import type { Child } from '../lib/proc.js';

interface Step {
  rate: number;
  measure: HttpMeasure;
  /** The side answered (nearly) everything offered, fast enough. */
  kept: boolean;
}

/** A rate is kept when 95 % of it was answered 200 and p99 stayed under a second. */
const keeps = (rate: number, m: HttpMeasure) => m.rps >= rate * 0.95 && m.p99 < 1000 && m.non2xx === 0 && m.errors === 0;

/** Steps up the rates until a side stops keeping up (one step past the knee is measured, then it stops). */
async function ramp(ctx: RunContext, label: string, url: string, orgId: string, child: Child, offset: number): Promise<Step[]> {
  const o = ctx.options;
  const rates = o.quick ? [20, 40] : [100, 200, 400, 800, 1200, 1600, 2400, 3200];
  const steps: Step[] = [];
  let n = offset;
  const measureAt = (rate: number, duration: number) => measureHttp({
    url, method: 'POST', connections: Math.max(o.connections, 32), overallRate: rate, duration,
    requests: [{
      setupRequest: (req) => {
        const body = whatsappWebhook(ctx.runId, n++);
        return { ...req, body, headers: { 'content-type': 'application/json', 'x-org-id': orgId, 'x-hub-signature-256': hubSignature(body) } };
      },
    }],
  }, child, o.limits);
  // Warm-up at the first rate, unreported: pool connections, JIT and caches, then the backlog it made is worked off.
  await measureAt(rates[0]!, o.quick ? 1 : 3);
  await quiesce(child, 30_000);
  for (const rate of rates) {
    let measure = await measureAt(rate, o.duration);
    // One slow spell of a shared machine should not end the ramp: a failing rate is measured once more.
    if (!keeps(rate, measure) && !o.quick) {
      ctx.log(`    ${label} @ ${rate}/s: ${measure.rps} accepted/s, p99 ${measure.p99} ms: measuring once more`);
      await quiesce(child, 30_000);
      measure = await measureAt(rate, o.duration);
    }
    const kept = keeps(rate, measure);
    steps.push({ rate, measure, kept });
    ctx.log(`    ${label} @ ${rate}/s: ${measure.rps} accepted/s, p50 ${measure.p50} ms, p99 ${measure.p99} ms, server CPU ${Math.round(measure.serverCpu * 100)}%${measure.non2xx ? `, ${measure.non2xx} non-2xx ${JSON.stringify(measure.statusCodes)}` : ''}${kept ? '' : ' (not kept)'}`);
    if (!kept) break;
    await quiesce(child, 10_000);
  }
  return steps;
}

const best = (steps: Step[]) => steps.reduce((b, s) => (s.measure.rps > b.measure.rps ? s : b), steps[0]!);

export const channels: Scenario = {
  name: 'channels',
  summary: 'signed WhatsApp webhooks at rising rates, accepted/s and p99 to the 200; baseline: bare node:http verifying the same signature and inserting the same row',
  skip: () => null,
  async run(ctx) {
    const app = await startApp(ctx, 'app', { postgres: true, redis: false });
    let appSteps: Step[] = [];
    let baseSteps: Step[] = [];
    let database = '';
    let drainSeconds = 0;
    try {
      const seeded = await app.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: 1, agents: 1, visitors: 0, conversations: false });
      const org = seeded.orgs[0]!;
      const headers = { authorization: `Bearer ${org.agents[0]!.token}` };
      const created = await requestJson(`${app.url}/api/v1/channels/whatsapp`, { method: 'POST', headers, body: { name: 'Bench WhatsApp', phoneNumberId: '1000', wabaId: '2000', accessToken: 'bench-access-token', appSecret: BENCH_APP_SECRET } });
      if (created.status !== 201) throw new Error(`creating the channel answered ${created.status} ${JSON.stringify(created.body).slice(0, 300)}`);
      const channelId = created.body.data.channel.id as string;
      const path = `/channels/whatsapp/inbound/${channelId}`;
      const check = async (url: string) => {
        const body = whatsappWebhook(ctx.runId, -1);
        const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-org-id': org.id, 'x-hub-signature-256': hubSignature(body) }, body });
        const forged = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-org-id': org.id, 'x-hub-signature-256': hubSignature(`${body} `) }, body });
        if (res.status !== 200 || forged.status !== 401) throw new Error(`${url} answered ${res.status} signed and ${forged.status} forged`);
      };
      await check(`${app.url}/api/v1${path}`);
      ctx.log(`  app: ${SENDERS} customers, one message per webhook (CHANNEL_INBOUND_RATE_LIMIT raised for the run)`);
      appSteps = await ramp(ctx, 'app', `${app.url}/api/v1${path}`, org.id, app.child, 0);
      // The jobs the app wrote keep its core busy after the last 200: the baseline waits until they are done.
      const t0 = performance.now();
      await quiesce(app.child, 180_000);
      drainSeconds = round((performance.now() - t0) / 1000, 1);
      ctx.log(`  app: processing caught up ${drainSeconds} s after the last step`);
      if (app.dataDir) await app.stop(true);
      const httpDb = await startHttpDb(ctx, app.dataDir);
      database = httpDb.database;
      try {
        await check(`${httpDb.url}${path}`);
        baseSteps = await ramp(ctx, 'baseline', `${httpDb.url}${path}`, org.id, httpDb.child, 10_000_000);
      } finally {
        await httpDb.child.stop();
      }
    } finally {
      if (!app.dataDir) await app.child.call('cleanup').catch(() => undefined);
      await app.stop();
    }
    const appBest = best(appSteps);
    const baseBest = best(baseSteps);
    // p99 compared at the highest rate both sides kept (else the first rate).
    const common = [...appSteps].reverse().find((s) => s.kept && baseSteps.some((b) => b.rate === s.rate && b.kept)) ?? appSteps[0]!;
    const baseAtCommon = baseSteps.find((b) => b.rate === common.rate) ?? baseSteps[0]!;
    const knee = (steps: Step[]) => [...steps].reverse().find((s) => s.kept)?.rate ?? null;
    const invalid = invalidOf(appBest.measure.generator.invalid, baseBest.measure.generator.invalid);
    return {
      rows: [
        row('accepted webhooks', '/s', round(appBest.measure.rps, 0), round(baseBest.measure.rps, 0), { invalid, note: `best step; server CPU ${Math.round(appBest.measure.serverCpu * 100)}% / ${Math.round(baseBest.measure.serverCpu * 100)}%; baseline: bare node:http + ${database}` }),
        row('highest rate kept', '/s', knee(appSteps), knee(baseSteps), { note: '95% answered 200, p99 < 1 s' }),
        row(`p99 to 200 @ ${common.rate}/s`, 'ms', common.measure.p99, baseAtCommon.measure.p99, { invalid: invalidOf(common.measure.generator.invalid, baseAtCommon.measure.generator.invalid) }),
      ],
      details: {
        database, senders: SENDERS, drainSeconds,
        app: appSteps.map((s) => ({ rate: s.rate, kept: s.kept, ...s.measure })),
        baseline: baseSteps.map((s) => ({ rate: s.rate, kept: s.kept, ...s.measure })),
        serverLog: app.child.log,
      },
    };
  },
};
