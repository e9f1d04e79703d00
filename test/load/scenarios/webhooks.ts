// webhooks: deliveries/s from the app's queue to a local receiver, 10 subscriptions each getting every event
// (contact.created), next to a bare loop posting bodies of the same size, signed the same way, with the same
// concurrency (16) to the same receiver.
import { createHmac } from 'node:crypto';
import { Agent, createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { requestJson } from '../lib/http-load.js';
import { row } from '../lib/report.js';
import type { SeedResult } from '../lib/seed.js';
import { startApp, type Scenario } from '../lib/servers.js';
import { round } from '../lib/stats.js';

const SUBSCRIPTIONS = 10;
/** The app's queue runs 16 deliveries at once per instance; the bare loop gets the same. */
const CONCURRENCY = 16;

interface Receiver {
  url: string;
  count(): number;
  bytes(): number;
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  let count = 0;
  let bytes = 0;
  const server: Server = createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => {
      count++;
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    count: () => count,
    bytes: () => bytes,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

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
    let appRate = 0;
    let createRate = 0;
    let baseRate = 0;
    let bodyBytes = 0;
    try {
      const seeded = await app.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: 1, agents: 1, visitors: 0, conversations: false });
      const headers = { authorization: `Bearer ${seeded.orgs[0]!.agents[0]!.token}` };
      for (let i = 0; i < SUBSCRIPTIONS; i++) {
        const res = await requestJson(`${app.url}/api/v1/webhooks`, { method: 'POST', headers, body: { url: `${receiver.url}?n=${i}`, events: ['contact.created'] } });
        if (res.status !== 201) throw new Error(`creating a webhook answered ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
      }
      const create = (i: number) => requestJson(`${app.url}/api/v1/contacts`, { method: 'POST', headers, body: { name: `Bench ${ctx.runId} ${i}`, email: `bench-${ctx.runId}-${i}@example.com`, company: 'Webhook Bench Inc.' } });
      // Warm-up: one event through every subscription.
      const warm = await create(-1);
      if (warm.status !== 201) throw new Error(`creating a contact answered ${warm.status}`);
      await until(() => receiver.count() >= SUBSCRIPTIONS, 30_000);
      bodyBytes = receiver.bytes() / receiver.count();
      const start = receiver.count();
      const t0 = performance.now();
      let made = 0;
      await Promise.all(Array.from({ length: 8 }, async () => {
        while (made < events) {
          const i = made++;
          const res = await create(i);
          if (res.status !== 201) throw new Error(`creating a contact answered ${res.status}`);
        }
      }));
      createRate = events / ((performance.now() - t0) / 1000);
      await until(() => receiver.count() - start >= total, 300_000);
      appRate = total / ((performance.now() - t0) / 1000);
      ctx.log(`  app: ${round(appRate, 0)} deliveries/s (${events} events x ${SUBSCRIPTIONS} subscriptions, bodies ${Math.round(bodyBytes)} B; events created at ${round(createRate, 0)}/s)`);
      const body = JSON.stringify({ id: '00000000-0000-0000-0000-000000000000', type: 'contact.created', organizationId: seeded.orgs[0]!.id, createdAt: new Date().toISOString(), data: { pad: 'x'.repeat(Math.max(0, Math.round(bodyBytes) - 160)) } });
      baseRate = await bareLoop(receiver.url, body, total);
      ctx.log(`  baseline: ${round(baseRate, 0)} posts/s`);
    } finally {
      if (!app.dataDir) await app.child.call('cleanup').catch(() => undefined);
      await app.stop();
      await receiver.close();
    }
    return {
      rows: [
        row('deliveries', '/s', round(appRate, 0), round(baseRate, 0), { note: `${events} events x ${SUBSCRIPTIONS} subscriptions, ${CONCURRENCY} at a time; app: from the first event created to the last delivery received (events created at ${round(createRate, 0)}/s); baseline: bare node:http loop, same bodies and receiver` }),
      ],
      details: { events, subscriptions: SUBSCRIPTIONS, concurrency: CONCURRENCY, bodyBytes, createRate, serverLog: app.child.log },
    };
  },
};
