// cluster: two app instances on one PostgreSQL and Redis; visitors on instance A, agents on instance B, so every
// delivery crosses the Redis adapter. Baseline: the bare relay with the Redis adapter across two processes.
import { runChat, type ChatRun } from '../lib/chat.js';
import type { SeedResult } from '../lib/seed.js';
import { row, type Row } from '../lib/report.js';
import { startApp, startRelay, stopAll, type RunContext, type Scenario } from '../lib/servers.js';
import { chatRows, chatSettings } from './chat.js';

/**
 * The cluster's knee against one instance's (the chat scenario of this run), for the app and for the relay: how much
 * of a single instance's rate each instance of the pair sustains. Both instances share the server core, so on a
 * machine without a core per instance this is a floor; the relay's figure shows what the adapter costs by itself.
 */
function perInstanceRows(app: ChatRun, base: ChatRun, ctx: RunContext): Row[] {
  const single = ctx.singleInstanceKnees;
  if (!single) return [row('knee vs one instance', '', null, null, { note: 'run chat in the same run (--scenarios=chat,cluster) for this comparison' })];
  const share = (cluster: number | null, one: number | null) => (cluster !== null && one ? Math.round((cluster / one) * 1000) / 1000 : null);
  return [
    row('knee vs one instance (chat, same run)', 'x', share(app.generatorBound ? null : app.knee, single.app), share(base.generatorBound ? null : base.knee, single.baseline), {
      note: `app ${app.knee ?? '-'} / ${single.app ?? '-'} msg/s; relay ${base.knee ?? '-'} / ${single.baseline ?? '-'} msg/s; both instances share one core here`,
    }),
  ];
}

export const cluster: Scenario = {
  name: 'cluster',
  summary: 'two app instances + Redis, visitors on one, agents on the other; baseline: the relay with the Redis adapter',
  skip: (ctx) => {
    const missing = [ctx.options.databaseUrl ? '' : 'DATABASE_URL', ctx.options.redisUrl ? '' : 'REDIS_URL'].filter(Boolean);
    if (missing.length) return `needs a shared PostgreSQL and Redis: set ${missing.join(' and ')}`;
    return ctx.options.visitors === 0 ? '--visitors=0: nobody sends' : null;
  },
  async run(ctx) {
    const o = ctx.options;
    const a = await startApp(ctx, 'app A', { postgres: true, redis: true });
    let seeded: SeedResult;
    let appRun: ChatRun;
    try {
      const b = await startApp(ctx, 'app B', { postgres: true, redis: true });
      try {
        seeded = await a.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: o.orgs, agents: o.agents, visitors: o.visitors, conversations: true });
        ctx.log(`  seeded ${o.orgs} orgs, ${o.agents} agents, ${o.visitors} visitors in ${seeded.seconds.toFixed(1)} s`);
        const orgIds = seeded.orgs.map((x) => x.id);
        appRun = await runChat(
          { label: 'app A->B', visitorUrl: a.url, agentUrl: b.url, servers: [a.child, b.child], countStored: () => a.child.call<number>('countMessages', { orgIds }), authenticates: true },
          seeded.orgs,
          chatSettings(ctx),
        );
      } finally {
        await b.stop();
      }
    } finally {
      await a.child.call('cleanup').catch(() => undefined);
      await a.stop();
    }
    const ra = await startRelay(ctx, 'relay A', true);
    let baseRun: ChatRun;
    try {
      const rb = await startRelay(ctx, 'relay B', true);
      try {
        baseRun = await runChat({ label: 'baseline A->B', visitorUrl: ra.url, agentUrl: rb.url, servers: [ra.child, rb.child], countStored: null, authenticates: false }, seeded.orgs, chatSettings(ctx));
      } finally {
        await rb.child.stop();
      }
    } finally {
      await stopAll(() => ra.child.stop());
    }
    return { rows: [...chatRows(appRun, baseRun, ctx), ...perInstanceRows(appRun, baseRun, ctx)], details: { app: appRun, baseline: baseRun, serverLog: { a: a.child.log } } };
  },
};
