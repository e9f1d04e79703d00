// webhooks: deliveries/s from the app's queue to a local receiver, 10 subscriptions each getting every event
// (contact.created), next to a bare loop posting bodies of the same size, signed the same way, with the same
// concurrency (16) to the same receiver. The fan-out figure times the queue emptying a backlog (events made while
// the workers are paused), so it measures delivery rather than how fast the API creates contacts; a second figure
// times events created and delivered together.
import { createHmac } from 'node:crypto';
import { Agent, request } from 'node:http';
import { requestJson } from '../lib/http-load.js';
import { startReceiver } from '../lib/receiver.js';
import { row } from '../lib/report.js';
import type { SeedResult } from '../lib/seed.js';
import { startApp, type Scenario } from '../lib/servers.js';
import { round } from '../lib/stats.js';

const SUBSCRIPTIONS = 10;
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
async function bareLoop(url: string, body: string, total: number): Promise<number> {
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
  return total / seconds;
}

export const webhooks: Scenario = {
  name: 'webhooks',
  summary: `webhook deliveries/s to a local receiver, ${SUBSCRIPTIONS} subscriptions per event; baseline: a bare loop posting the same bodies`,
  skip: () => null,
  async run(ctx) {
    const o = ctx.options;
    const events = o.quick ? 5 : 300;
    const total = events * SUBSCRIPTIONS;
    const receiver = await startReceiver();
    const app = await startApp(ctx, 'app', { postgres: true, redis: false });
    const drainRates: number[] = [];
    const baseRates: number[] = [];
    let liveRate = 0;
    let createRate = 0;
    let bodyBytes = 0;
    try {
      const seeded = await app.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: 1, agents: 1, visitors: 0, conversations: false });
      const headers = { authorization: `Bearer ${seeded.orgs[0]!.agents[0]!.token}` };
      for (let i = 0; i < SUBSCRIPTIONS; i++) {
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
            const res = await requestJson(`${app.url}/api/v1/contacts`, { method: 'POST', headers, body: { name: `Bench ${ctx.runId} ${i}`, email: `bench-${ctx.runId}-${i}@example.com`, company: 'Webhook Bench Inc.' } });
            if (res.status !== 201) throw new Error(`creating a contact answered ${res.status}`);
          }
        }));
        return events / ((performance.now() - t0) / 1000);
      };
      // Warm-up: one event through every subscription.
      const warm = await requestJson(`${app.url}/api/v1/contacts`, { method: 'POST', headers, body: { name: `Bench ${ctx.runId} warm`, email: `bench-${ctx.runId}-warm@example.com` } });
      if (warm.status !== 201) throw new Error(`creating a contact answered ${warm.status}`);
      await until(() => receiver.count() >= SUBSCRIPTIONS, 30_000);
      bodyBytes = receiver.bytes() / receiver.count();
      const body = JSON.stringify({ id: '00000000-0000-0000-0000-000000000000', type: 'contact.created', organizationId: seeded.orgs[0]!.id, createdAt: new Date().toISOString(), data: { pad: 'x'.repeat(Math.max(0, Math.round(bodyBytes) - 160)) } });

      // Fan-out: the events wait in the durable queue (workers paused), then the queue empties; the two sides take
      // turns twice, so a slow spell of the shared machine hits both.
      for (let turn = 0; turn < 2; turn++) {
        baseRates.push(await bareLoop(receiver.url, body, total));
        await app.child.call('pauseJobs');
        await createEvents();
        const start = receiver.count();
        const t0 = performance.now();
        await app.child.call('resumeJobs');
        await until(() => receiver.count() - start >= total, 300_000);
        drainRates.push(total / ((performance.now() - t0) / 1000));
        ctx.log(`  round ${turn + 1}: queue emptied at ${round(drainRates[turn]!, 0)} deliveries/s; bare loop ${round(baseRates[turn]!, 0)} posts/s`);
      }

      // Live: events created while the queue runs; from the first event created to the last delivery received.
      const start = receiver.count();
      const t0 = performance.now();
      createRate = await createEvents();
      await until(() => receiver.count() - start >= total, 300_000);
      liveRate = total / ((performance.now() - t0) / 1000);
      ctx.log(`  live: ${round(liveRate, 0)} deliveries/s (events created at ${round(createRate, 0)}/s, bodies ${Math.round(bodyBytes)} B)`);
    } finally {
      if (!app.dataDir) await app.child.call('cleanup').catch(() => undefined);
      await app.stop();
      await receiver.close();
    }
    const drainRate = Math.max(...drainRates);
    const baseRate = Math.max(...baseRates);
    return {
      rows: [
        row('deliveries, queue emptying', '/s', round(drainRate, 0), round(baseRate, 0), { note: `${events} events x ${SUBSCRIPTIONS} subscriptions waiting in the queue, ${CONCURRENCY} at a time; best of 2 rounds taken in turns (app ${drainRates.map((r) => round(r, 0)).join(', ')}; bare ${baseRates.map((r) => round(r, 0)).join(', ')}); baseline: bare node:http loop, same bodies and receiver` }),
        row('deliveries, events arriving', '/s', round(liveRate, 0), null, { note: `from the first of ${events} events created (8 at a time, at ${round(createRate, 0)}/s) to the last delivery received: bounded by how fast events are made` }),
      ],
      details: { events, subscriptions: SUBSCRIPTIONS, concurrency: CONCURRENCY, bodyBytes, drainRates, baseRates, liveRate, createRate, serverLog: app.child.log },
    };
  },
};
