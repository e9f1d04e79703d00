// connections: ramp to N visitor and agent sockets through the real handshake (token check, database lookups,
// rooms, presence); connect rate, handshake time, server RSS and heap per socket. Baseline: a bare Socket.IO
// server (same namespaces, no auth) taking the same clients.
import { EioClient, ramp, type RampResult } from '../lib/eio.js';
import type { Child } from '../lib/proc.js';
import { refusalProbe } from '../lib/probes.js';
import { CALLER_TABLES, settleBefore } from '../lib/settle.js';
import { invalidOf, row } from '../lib/report.js';
import type { SeedOrg, SeedResult } from '../lib/seed.js';
import { startApp, startRelay, type RunContext, type Scenario } from '../lib/servers.js';
import { GeneratorMonitor, round, serverCpu, sleep, type GeneratorHealth } from '../lib/stats.js';

interface RampMeasure {
  ramp: RampResult;
  /** Sockets the server itself counts once the ramp is over. */
  serverSockets: number;
  rssPerSocketKb: number;
  heapPerSocketKb: number;
  rssMb: number;
  serverCpu: number;
  /** Server CPU time per connected socket over the ramp: the handshake's cost, whatever the machine's other load. */
  cpuPerHandshakeMs: number;
  generator: GeneratorHealth;
  lostDuringHold: number;
  refusal: string | null;
}

async function measureRamp(ctx: RunContext, server: Child, url: string, orgs: SeedOrg[], authenticates: boolean): Promise<RampMeasure> {
  const clients: EioClient[] = [];
  for (const org of orgs) for (const a of org.agents) clients.push(new EioClient(url, org.id, { token: a.token, role: 'agent' }));
  for (const org of orgs) for (const v of org.visitors) clients.push(new EioClient(url, org.id, { token: v.token, role: 'visitor', sessionId: v.sessionId }));
  const before = await server.stats(true);
  const monitor = new GeneratorMonitor(ctx.options.limits);
  const cpu0 = await server.stats();
  const result = await ramp(clients, ctx.options.concurrency);
  const cpu1 = await server.stats();
  const generator = monitor.stop(result.handshake.p99);
  // Let the handshakes' follow-up work (presence, timers) settle, then measure the heap after a full GC.
  await sleep(1000);
  const after = await server.stats(true);
  const refusal = authenticates && orgs[0] ? await refusalProbe(url, orgs[0].id) : null;
  const lostDuringHold = clients.filter((c) => c.lost).length;
  for (const c of clients) c.close();
  const n = Math.max(1, result.connected);
  ctx.log(
    `  ${result.connected}/${result.attempted} sockets in ${result.seconds.toFixed(1)} s (${Math.round(result.rate)}/s), handshake p99 ${result.handshake.p99} ms, server holds ${after.sockets}, RSS +${Math.round((after.rssBytes - before.rssBytes) / 2 ** 20)} MB; server CPU ${Math.round(serverCpu(cpu0, cpu1) * 100)}%, generator CPU ${Math.round(generator.cpu * 100)}% loop p99 ${generator.loopDelayP99Ms} ms${generator.steal ? `, steal ${Math.round(generator.steal * 100)}%` : ''}`,
  );
  return {
    ramp: result,
    serverSockets: after.sockets,
    rssPerSocketKb: round((after.rssBytes - before.rssBytes) / n / 1024, 2),
    heapPerSocketKb: round((after.heapUsedBytes - before.heapUsedBytes) / n / 1024, 2),
    rssMb: round(after.rssBytes / 2 ** 20, 0),
    serverCpu: serverCpu(cpu0, cpu1),
    cpuPerHandshakeMs: round((cpu1.cpuMicros - cpu0.cpuMicros) / 1000 / n, 3),
    generator,
    lostDuringHold,
    refusal,
  };
}

export const connections: Scenario = {
  name: 'connections',
  summary: 'ramp to N visitor + agent sockets through the real handshake; baseline: bare Socket.IO without auth',
  skip: () => null,
  async run(ctx) {
    const o = ctx.options;
    const app = await startApp(ctx, 'app', { postgres: true, redis: false });
    let seeded: SeedResult;
    let appM: RampMeasure;
    try {
      seeded = await app.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: o.orgs, agents: o.agents, visitors: o.visitors, conversations: false });
      ctx.log(`  seeded ${o.orgs} orgs, ${o.agents} agents, ${o.visitors} visitors in ${seeded.seconds.toFixed(1)} s`);
      await settleBefore(ctx.log, app.child, CALLER_TABLES);
      appM = await measureRamp(ctx, app.child, app.url, seeded.orgs, true);
    } finally {
      // On a shared PostgreSQL the run removes its rows, even after a failure.
      if (!app.dataDir) await app.child.call('cleanup').catch(() => undefined);
      // PostgreSQL shares the cores: the bare server's ramp starts once it has finished with the seeding's and the
      // cleanup's writes (an autovacuum of them during that ramp would lower the baseline, and so flatter the ratio).
      await settleBefore(ctx.log, app.child, CALLER_TABLES).catch((err: unknown) => ctx.log(`  could not settle the database: ${String(err)}`));
      await app.stop();
    }
    const relay = await startRelay(ctx, 'relay baseline', false);
    let base: RampMeasure;
    try {
      base = await measureRamp(ctx, relay.child, relay.url, seeded.orgs, false);
    } finally {
      await relay.child.stop();
    }
    const invalid = invalidOf(appM.generator.invalid, base.generator.invalid);
    const total = o.visitors + o.agents;
    const problems = [
      appM.ramp.failed ? `app refused/failed ${appM.ramp.failed}: ${JSON.stringify(appM.ramp.errors)}` : '',
      appM.refusal !== null && appM.refusal !== 'unauthorized' ? `forged token answered "${appM.refusal}" instead of unauthorized` : '',
      appM.lostDuringHold ? `${appM.lostDuringHold} app sockets dropped` : '',
    ].filter(Boolean);
    return {
      rows: [
        row('sockets connected', '', appM.ramp.connected, base.ramp.connected, { note: `of ${total}; server counts ${appM.serverSockets} / ${base.serverSockets}${problems.length ? `; ${problems.join('; ')}` : ''}` }),
        row('connect rate', '/s', round(appM.ramp.rate, 0), round(base.ramp.rate, 0), { invalid, note: `${o.concurrency} handshakes in flight; server CPU ${Math.round(appM.serverCpu * 100)}% / ${Math.round(base.serverCpu * 100)}%` }),
        row('server CPU per handshake', 'ms', appM.cpuPerHandshakeMs, base.cpuPerHandshakeMs, { note: 'server CPU time over the ramp / sockets connected: what bounds the rate once the server is the bottleneck' }),
        row('handshake p50', 'ms', appM.ramp.handshake.p50, base.ramp.handshake.p50, { invalid }),
        row('handshake p99', 'ms', appM.ramp.handshake.p99, base.ramp.handshake.p99, { invalid }),
        row('RSS per socket', 'KB', appM.rssPerSocketKb, base.rssPerSocketKb, { note: `server RSS ${appM.rssMb} MB / ${base.rssMb} MB with every socket open` }),
        row('heap per socket', 'KB', appM.heapPerSocketKb, base.heapPerSocketKb, { note: 'heapUsed after a full GC' }),
      ],
      details: { app: appM, baseline: base, refusalProbe: appM.refusal },
    };
  },
};
