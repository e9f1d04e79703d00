// webhooks: deliveries/s from the app's queue to a local receiver, N subscriptions each getting every event
// (contact.created; --webhook-subscriptions, default 10 then 1), next to a bare loop posting bodies of the same size,
// signed the same way, with the same concurrency (16) to the same receiver (a body the app sent). The fan-out figure times the queue
// emptying a backlog (events made while the workers are paused), so it measures delivery rather than how fast the
// API creates contacts; with it, the app's statements and CPU per delivery meanwhile say what bounds it. A second
// figure times events created and delivered together (first subscription count only).
import { createHmac } from 'node:crypto';
import { Agent, request } from 'node:http';
import { requestJson } from '../lib/http-load.js';
import { startReceiver, type Receiver } from '../lib/receiver.js';
import { row } from '../lib/report.js';
import type { ServerStats } from '../lib/proc.js';
import type { SeedResult } from '../lib/seed.js';
import { startApp, type AppInstance, type RunContext, type Scenario } from '../lib/servers.js';
import { round } from '../lib/stats.js';

/** Deliveries each drain times (events: this over the subscriptions). */
const DELIVERIES = 3000;
/** The app's queue runs 16 deliveries at once per instance; the bare loop gets the same. */
const CONCURRENCY = 16;

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting for deliveries');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** `total` signed POSTs of `body`, `CONCURRENCY` at a time over keep-alive: what a bare sender manages. */
async function bareLoop(url: string, body: string, total: number): Promise<{ rate: number; cpu: number }> {
  const cpu0 = process.cpuUsage();
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let next = 0;
  const post = () =>
    new Promise<void>((resolve, reject) => {
      const ts = String(Math.floor(Date.now() / 1000));
      const signature = `v1=${createHmac('sha256', 'whsec_bench').update(`${ts}.${body}`).digest('hex')}`;
      const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-webhook-id': 'bench', 'x-webhook-timestamp': ts, 'x-webhook-signature': signature } }, (res) => {
        res.resume();
        res.on('end', () => resolve());
      });
      req.on('error', reject);
      req.end(body);
    });
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < total) {
      next++;
      await post();
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  agent.destroy();
  const cpu = process.cpuUsage(cpu0);
  return { rate: total / seconds, cpu: (cpu.user + cpu.system) / 1e6 / seconds };
}

interface Measure {
  subscriptions: number;
  events: number;
  drainRates: number[];
  baseRates: number[];
  /** Statements the app sent per delivery while the queue emptied (best round). */
  statementsPerDelivery: number[];
  /** Share of a core the app used while the queue emptied, the generator (receiver) meanwhile, and the generator
   * (bare loop and receiver together) during the bare loop. */
  appCpu: number[];
  receiverCpu: number[];
  bareCpu: number[];
  liveRate?: number;
  createRate?: number;
  bodyBytes: number;
}

const cpuShare = (a: ServerStats, b: ServerStats) => (b.cpuMicros - a.cpuMicros) / 1000 / (b.at - a.at);

/** One organization with `subscriptions` hooks on the receiver: two drains in turns with the bare loop, then (`live`) events created and delivered together. */
async function measure(ctx: RunContext, app: AppInstance, receiver: Receiver, token: string, subscriptions: number, live: boolean): Promise<Measure> {
  const o = ctx.options;
  const events = o.quick ? 5 : Math.ceil(DELIVERIES / subscriptions);
  const total = events * subscriptions;
  const headers = { authorization: `Bearer ${token}` };
  const m: Measure = { subscriptions, events, drainRates: [], baseRates: [], statementsPerDelivery: [], appCpu: [], receiverCpu: [], bareCpu: [], bodyBytes: 0 };
  for (let i = 0; i < subscriptions; i++) {
    const res = await requestJson(`${app.url}/api/v1/webhooks`, { method: 'POST', headers, body: { url: `${receiver.url}?n=${i}`, events: ['contact.created'] } });
    if (res.status !== 201) throw new Error(`creating a webhook answered ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
  }
  let serial = 0;
  const createEvents = async (): Promise<number> => {
    const t0 = performance.now();
    let made = 0;
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (made < events) {
        made++;
        const i = serial++;
        const res = await requestJson(`${app.url}/api/v1/contacts`, { method: 'POST', headers, body: { name: `Bench ${ctx.runId} ${subscriptions} ${i}`, email: `bench-${ctx.runId}-${subscriptions}-${i}@example.com`, company: 'Webhook Bench Inc.' } });
        if (res.status !== 201) throw new Error(`creating a contact answered ${res.status}`);
      }
    }));
    return events / ((performance.now() - t0) / 1000);
  };
  // Warm-up: one event through every subscription.
  const before = receiver.count();
  const bytesBefore = receiver.bytes();
  const warm = await requestJson(`${app.url}/api/v1/contacts`, { method: 'POST', headers, body: { name: `Bench ${ctx.runId} ${subscriptions} warm`, email: `bench-${ctx.runId}-${subscriptions}-warm@example.com` } });
  if (warm.status !== 201) throw new Error(`creating a contact answered ${warm.status}`);
  await until(() => receiver.count() - before >= subscriptions, 30_000);
  m.bodyBytes = (receiver.bytes() - bytesBefore) / (receiver.count() - before);
  // The bare loop posts a body the app sent.
  const body = receiver.last();

  // Fan-out: the events wait in the durable queue (workers paused), then the queue empties; the two sides take
  // turns twice, so a slow spell of the shared machine hits both.
  for (let turn = 0; turn < 2; turn++) {
    const bare = await bareLoop(receiver.url, body, total);
    m.baseRates.push(bare.rate);
    m.bareCpu.push(bare.cpu);
    await app.child.call('pauseJobs');
    await createEvents();
    const start = receiver.count();
    const statements0 = await app.child.call<number>('statements');
    const stats0 = await app.child.stats();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await app.child.call('resumeJobs');
    await until(() => receiver.count() - start >= total, 300_000);
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const stats1 = await app.child.stats();
    // The last deliveries' records go out just after their answers arrive.
    await new Promise((r) => setTimeout(r, 300));
    m.statementsPerDelivery.push(((await app.child.call<number>('statements')) - statements0) / total);
    m.drainRates.push(total / seconds);
    m.appCpu.push(cpuShare(stats0, stats1));
    m.receiverCpu.push((cpu.user + cpu.system) / 1e6 / seconds);
    ctx.log(`  ${subscriptions} subscription(s), round ${turn + 1}: queue emptied at ${round(m.drainRates[turn]!, 0)} deliveries/s (app ${round(100 * m.appCpu[turn]!, 0)}% of its core, ${round(m.statementsPerDelivery[turn]!, 2)} statements per delivery; receiver ${round(100 * m.receiverCpu[turn]!, 0)}%); bare loop ${round(bare.rate, 0)} posts/s (generator ${round(100 * bare.cpu, 0)}%)`);
  }
  if (live) {
    // Live: events created while the queue runs; from the first event created to the last delivery received.
    const start = receiver.count();
    const t0 = performance.now();
    m.createRate = await createEvents();
    await until(() => receiver.count() - start >= total, 300_000);
    m.liveRate = total / ((performance.now() - t0) / 1000);
    ctx.log(`  live: ${round(m.liveRate, 0)} deliveries/s (events created at ${round(m.createRate, 0)}/s, bodies ${Math.round(m.bodyBytes)} B)`);
  }
  return m;
}

export const webhooks: Scenario = {
  name: 'webhooks',
  summary: 'webhook deliveries/s to a local receiver, 10 (then 1) subscriptions per event; baseline: a bare loop posting the same bodies',
  skip: () => null,
  async run(ctx) {
    const counts = ctx.options.webhookSubscriptions;
    const receiver = await startReceiver();
    const app = await startApp(ctx, 'app', { postgres: true, redis: false });
    const measures: Measure[] = [];
    try {
      const seeded = await app.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: counts.length, agents: counts.length, visitors: 0, conversations: false });
      for (const [i, subscriptions] of counts.entries()) {
        const org = seeded.orgs[i]!;
        measures.push(await measure(ctx, app, receiver, org.agents[0]!.token, subscriptions, i === 0));
      }
    } finally {
      if (!app.dataDir) await app.child.call('cleanup').catch(() => undefined);
      await app.stop();
      await receiver.close();
    }
    const pct = (xs: number[]) => xs.map((x) => `${round(100 * x, 0)}%`).join(', ');
    const rows = [];
    for (const m of measures) {
      const best = m.drainRates.indexOf(Math.max(...m.drainRates));
      rows.push(row(`deliveries, queue emptying, ${m.subscriptions} subscription(s)`, '/s', round(m.drainRates[best]!, 0), round(Math.max(...m.baseRates), 0), {
        note: `${m.events} events x ${m.subscriptions} waiting in the queue, at most ${CONCURRENCY} sends at a time; best of 2 rounds taken in turns (app ${m.drainRates.map((r) => round(r, 0)).join(', ')}; bare ${m.baseRates.map((r) => round(r, 0)).join(', ')}); app core ${pct(m.appCpu)}, statements/delivery ${m.statementsPerDelivery.map((x) => round(x, 2)).join(', ')}, receiver ${pct(m.receiverCpu)}; bare loop's generator ${pct(m.bareCpu)}; baseline: bare node:http loop, same bodies, signing and receiver`,
      }));
      if (m.liveRate !== undefined) {
        rows.push(row(`deliveries, events arriving, ${m.subscriptions} subscription(s)`, '/s', round(m.liveRate, 0), null, { note: `from the first of ${m.events} events created (8 at a time, at ${round(m.createRate!, 0)}/s) to the last delivery received: bounded by how fast events are made` }));
      }
    }
    return { rows, details: { concurrency: CONCURRENCY, measures, serverLog: app.child.log } };
  },
};
