// cluster: app instances on one PostgreSQL and Redis. First one instance alone with every client (the reference),
// then two with visitors and agents spread over both: each instance takes half the sends, delivers each message to
// its own half of the agents and hands the other half to Redis. The pair's knee against the single instance's, in
// the same run, is the scale-out (BENCH_SERVER_CORES gives each instance its own core). Then the same pair while
// many organizations hold sockets on both instances (--tenants; idle visitors kept by two holder processes), for
// each Redis adapter (--adapters): what a message costs when every instance serves thousands of namespaces.
// Baseline: the bare relay with the Redis adapter, one process, then two with the clients spread the same way.
import { finalSteps, runChat, type ChatRun, type ChatTarget } from '../lib/chat.js';
import type { RedisAdapterKind } from '../lib/options.js';
import { spawnChild, type Child } from '../lib/proc.js';
import type { SeedResult, SeedTenant } from '../lib/seed.js';
import { row, type Row } from '../lib/report.js';
import type { RampResult } from '../lib/eio.js';
import { startApp, startRelay, stopAll, type RunContext, type Scenario } from '../lib/servers.js';
import { chatRows, chatSettings, cpuText, kneeText, labelled } from './chat.js';

interface PairRun {
  adapter: RedisAdapterKind;
  tenants: number;
  run: ChatRun;
}

const kneeOf = (r: ChatRun) => (r.generatorBound ? null : r.knee);
const share = (part: number | null, whole: number | null) => (part !== null && whole ? Math.round((part / whole) * 1000) / 1000 : null);

/** Server CPU (summed over the instances) per message at `rate`, in microseconds; null when the run has no such step. */
function cpuPerMessage(run: ChatRun, rate: number): number | null {
  const step = finalSteps(run.steps).find((s) => s.rate === rate);
  return step ? Math.round((step.serverCpu.reduce((a, b) => a + b, 0) * 1e6) / rate) : null;
}

function scaleOutRows(single: ChatRun, pair: ChatRun, baseSingle: ChatRun, basePair: ChatRun, ctx: RunContext): Row[] {
  const cores = ctx.serverCores ? `instances pinned to core(s) ${[...new Set([ctx.serverCores[0], ctx.serverCores[1 % ctx.serverCores.length]])].join(' and ')}` : 'servers not pinned';
  return [
    row('knee, one instance (every client on it)', 'msg/s', kneeText(single, ctx.options.rates), kneeText(baseSingle, ctx.options.rates), { note: `app: ${single.ended}; relay: ${baseSingle.ended}` }),
    row('knee, two instances / one instance (same run)', 'x', share(kneeOf(pair), kneeOf(single)), share(kneeOf(basePair), kneeOf(baseSingle)), {
      note: `app ${pair.knee ?? '-'} / ${single.knee ?? '-'} msg/s; relay ${basePair.knee ?? '-'} / ${baseSingle.knee ?? '-'} msg/s; ${cores}`,
    }),
  ];
}

/** Each adapter's knee with many organizations against its knee with the fewest, and the adapters against each other. */
function tenantRows(runs: PairRun[], ctx: RunContext): Row[] {
  const rows: Row[] = [];
  const rates = ctx.options.rates;
  // Per-message CPU compared at the highest rate every search passed, so each figure is taken under the same load.
  const passedBy = runs.map((r) => new Set(finalSteps(r.run.steps).filter((s) => s.verdict === 'pass').map((s) => s.rate)));
  const common = rates.filter((rate) => passedBy.every((p) => p.has(rate))).pop() ?? null;
  const fewest = Math.min(...runs.map((r) => r.tenants));
  for (const r of runs) {
    if (r.tenants === fewest) continue;
    const ref = runs.find((x) => x.adapter === r.adapter && x.tenants === fewest)!;
    const at = finalSteps(r.run.steps).find((s) => s.rate === r.run.knee);
    const kneeRow = row(`knee, ${r.adapter} adapter, ${r.tenants} orgs on both instances`, 'msg/s', kneeText(r.run, rates), kneeText(ref.run, rates), {
      note: `baseline: the same adapter with ${fewest} orgs, same run; ${r.run.ended}${at ? `; server CPU ${cpuText(at)} at ${at.rate}/s` : ''}`,
    });
    kneeRow.ratio = share(kneeOf(r.run), kneeOf(ref.run));
    rows.push(kneeRow);
    if (common !== null) {
      rows.push(row(`server CPU per message @ ${common} msg/s, ${r.adapter}, ${r.tenants} orgs`, 'us', cpuPerMessage(r.run, common), cpuPerMessage(ref.run, common), { note: `both instances summed; baseline: ${fewest} orgs` }));
    }
  }
  const adapters = [...new Set(runs.map((r) => r.adapter))];
  if (adapters.length > 1) {
    for (const tenants of [...new Set(runs.map((r) => r.tenants))]) {
      const [first, second] = adapters.map((a) => runs.find((r) => r.adapter === a && r.tenants === tenants)!);
      const r = row(`knee, ${first!.adapter} vs ${second!.adapter} adapter, ${tenants} orgs`, 'msg/s', kneeText(first!.run, rates), kneeText(second!.run, rates), { note: `baseline: the ${second!.adapter} adapter, same run` });
      r.ratio = share(kneeOf(first!.run), kneeOf(second!.run));
      rows.push(r);
      if (common !== null) rows.push(row(`server CPU per message @ ${common} msg/s, ${first!.adapter} vs ${second!.adapter}, ${tenants} orgs`, 'us', cpuPerMessage(first!.run, common), cpuPerMessage(second!.run, common)));
    }
  }
  return rows;
}

export const cluster: Scenario = {
  name: 'cluster',
  summary: 'one app instance, then two with clients spread over both (also with --tenants orgs held on both, per --adapters); baseline: the relay with the Redis adapter',
  skip: (ctx) => {
    const missing = [ctx.options.databaseUrl ? '' : 'DATABASE_URL', ctx.options.redisUrl ? '' : 'REDIS_URL'].filter(Boolean);
    if (missing.length) return `needs a shared PostgreSQL and Redis: set ${missing.join(' and ')}`;
    return ctx.options.visitors === 0 ? '--visitors=0: nobody sends' : null;
  },
  async run(ctx) {
    const o = ctx.options;
    const settings = chatSettings(ctx);
    const tenantCounts = [...new Set(o.tenants.map((t) => Math.max(t, o.orgs)))];
    const idleWanted = tenantCounts[tenantCounts.length - 1]! - o.orgs;
    const lastAdapter = o.adapters[o.adapters.length - 1]!;
    let seeded!: SeedResult;
    let idle: SeedTenant[] = [];
    let single!: ChatRun;
    let baseSingle!: ChatRun;
    let basePair!: ChatRun;
    const pairs: PairRun[] = [];
    // Two holders, one per instance: each stays under the open-file limit a process gets.
    const holders: Child[] = [await spawnChild('idle sockets for A', 'holder.ts', {}, null), await spawnChild('idle sockets for B', 'holder.ts', {}, null)];
    // The relays wait beside the app instances (each idle while the other is measured), so each app measure and
    // its baseline run one right after the other: a busy spell of a shared machine then hits a pair, not one side.
    const relayAdapter = o.adapters[0]!;
    const relays = [await startRelay(ctx, 'relay A', true, { instance: 0, adapter: relayAdapter }), await startRelay(ctx, 'relay B', true, { instance: 1, adapter: relayAdapter })];
    const [ra, rb] = relays as [(typeof relays)[0], (typeof relays)[0]];
    try {
      for (const [k, adapter] of o.adapters.entries()) {
        const a = await startApp(ctx, `app A (${adapter})`, { postgres: true, redis: true, instance: 0, adapter });
        let failed = false;
        try {
          const orgIds = () => seeded.orgs.map((x) => x.id);
          const countStored = () => a.child.call<number>('countMessages', { orgIds: orgIds() });
          if (k === 0) {
            seeded = await a.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: o.orgs, agents: o.agents, visitors: o.visitors, conversations: true, conversationHistory: 5 });
            ctx.log(`  seeded ${o.orgs} orgs, ${o.agents} agents, ${o.visitors} visitors in ${seeded.seconds.toFixed(1)} s`);
            if (idleWanted > 0) {
              const made = await a.child.call<{ tenants: SeedTenant[]; seconds: number }>('seedTenants', { runId: ctx.runId, count: idleWanted }, 600_000);
              idle = made.tenants;
              ctx.log(`  seeded ${idleWanted} more orgs with a widget and a visitor each in ${made.seconds.toFixed(1)} s`);
            }
            single = await runChat({ label: `app, one instance (${adapter})`, visitorUrl: a.url, agentUrl: a.url, servers: [a.child], countStored, authenticates: true }, seeded.orgs, settings);
            baseSingle = await runChat({ label: `baseline, one relay (${relayAdapter})`, visitorUrl: ra.url, agentUrl: ra.url, servers: [ra.child], countStored: null, authenticates: false }, seeded.orgs, settings);
          } else await a.child.call('adopt', { runId: ctx.runId });
          const b = await startApp(ctx, `app B (${adapter})`, { postgres: true, redis: true, instance: 1, adapter });
          try {
            const target: ChatTarget = { label: '', spread: [a.url, b.url], visitorUrl: a.url, agentUrl: b.url, servers: [a.child, b.child], countStored, authenticates: true };
            let holding = 0;
            for (const tenants of tenantCounts) {
              const want = tenants - o.orgs;
              if (want > holding) {
                const more = idle.slice(holding, want).map((t) => ({ orgId: t.id, ...t.visitor }));
                const [onA, onB] = await Promise.all([a.url, b.url].map((url, i) => holders[i]!.call<RampResult>('connect', { url, visitors: more, concurrency: o.concurrency }, 900_000)));
                ctx.log(`  ${tenants} orgs: ${holding + onA!.connected} and ${holding + onB!.connected} idle visitors of ${want} held on A and B (${onA!.seconds.toFixed(0)} s${onA!.failed + onB!.failed ? `; failures ${JSON.stringify(onA!.errors)} ${JSON.stringify(onB!.errors)}` : ''})`);
                holding = want;
              }
              pairs.push({ adapter, tenants, run: await runChat({ ...target, label: `app A+B (${adapter}, ${tenants} orgs)` }, seeded.orgs, settings) });
              if (k === 0 && tenants === tenantCounts[0]) {
                basePair = await runChat({ label: `baseline A+B (${relayAdapter})`, spread: [ra.url, rb.url], visitorUrl: ra.url, agentUrl: rb.url, servers: [ra.child, rb.child], countStored: null, authenticates: false }, seeded.orgs, settings);
              }
            }
          } finally {
            await Promise.all(holders.map((h) => h.call('release').catch(() => undefined)));
            await b.stop();
          }
        } catch (err) {
          failed = true;
          throw err;
        } finally {
          if (failed || adapter === lastAdapter) await a.child.call('cleanup', undefined, 600_000).catch((err) => ctx.log(`  cleanup failed: ${(err as Error).message}`));
          await a.stop();
        }
      }
    } finally {
      await stopAll(...holders.map((h) => () => h.stop()), ...relays.map((r) => () => r.child.stop()));
    }
    const pair = pairs.find((p) => p.adapter === relayAdapter && p.tenants === tenantCounts[0])!;
    const rows = [...labelled(`two instances (${relayAdapter}, ${pair.tenants} orgs)`, chatRows(pair.run, basePair, ctx)), ...scaleOutRows(single, pair.run, baseSingle, basePair, ctx), ...tenantRows(pairs, ctx)];
    return { rows, details: { oneInstance: single, pairs, baselineOneRelay: baseSingle, baselinePair: basePair } };
  },
};
