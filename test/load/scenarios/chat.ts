// chat: one app instance; visitors send on a fixed schedule, every agent of the organization must receive each
// message; rates step up to the knee. Baseline: the bare Socket.IO room relay (no database, no auth), same clients.
// The search runs once per fan-out (--fanouts, agents per organization: 2, 5, 10), all on one seeding: the orgs get
// the largest fan-out's agents and a smaller fan-out connects only the first few of each.
// With --chat-webhooks=N (default 1) the same app instance then subscribes N webhooks per organization to
// message.created (a local receiver) and the knee is found again at the largest fan-out: the message path's cost of
// the outbox and of the deliveries running beside it, measured in the same run.
import { finalSteps, runChat, type ChatRun, type ChatSettings, type StepResult } from '../lib/chat.js';
import { invalidOf, row, type Row } from '../lib/report.js';
import { requestJson } from '../lib/http-load.js';
import { startReceiver, type Receiver } from '../lib/receiver.js';
import type { SeedOrg, SeedResult } from '../lib/seed.js';
import { settleBefore } from '../lib/settle.js';
import { startApp, startRelay, type RunContext, type Scenario, type ScenarioOutput } from '../lib/servers.js';

export function chatSettings(ctx: RunContext): ChatSettings {
  const o = ctx.options;
  return { rates: o.rates, duration: o.duration, drain: o.drain, concurrency: o.concurrency, p99TargetMs: o.p99TargetMs, limits: o.limits, log: ctx.log };
}

export const kneeText = (run: ChatRun, rates: number[]): number | string => {
  if (run.knee === null) return run.generatorBound ? 'INVALID' : `< ${rates[0]}`;
  if (run.knee === rates[rates.length - 1] && finalSteps(run.steps).every((s) => s.verdict === 'pass')) return `>= ${run.knee}`;
  return run.knee;
};

export const cpuText = (s: StepResult) => s.serverCpu.map((c) => `${Math.round(c * 100)}%`).join('+');

/** The seeded organizations with only their first `fanout` agents: each message then reaches `fanout` agents. */
export const withFanout = (orgs: SeedOrg[], fanout: number): SeedOrg[] => orgs.map((org) => ({ ...org, agents: org.agents.slice(0, fanout) }));

/** Rows with `label` before each metric (several searches in one table). */
export const labelled = (label: string, rows: Row[]): Row[] => rows.map((r) => ({ ...r, metric: `${label}: ${r.metric}` }));

/** Table rows shared by chat and cluster: the knees and, at each rate the app measured, app vs baseline. */
export function chatRows(app: ChatRun, base: ChatRun, ctx: RunContext): Row[] {
  const rates = ctx.options.rates;
  const appKnee = kneeText(app, rates);
  const baseKnee = kneeText(base, rates);
  const rows: Row[] = [];
  const kneeRow = row(`knee (p99 < ${ctx.options.p99TargetMs} ms, nothing lost)`, 'msg/s', appKnee, baseKnee, {
    note: `app: ${app.ended}; baseline: ${base.ended}`,
    invalid: invalidOf(app.generatorBound ? 'the search ended on a generator-bound step' : null, base.generatorBound ? 'the search ended on a generator-bound step (knee is a lower bound)' : null),
  });
  if (typeof appKnee === 'number' && typeof baseKnee === 'number') kneeRow.ratio = Math.round((appKnee / baseKnee) * 1000) / 1000;
  else if (typeof appKnee === 'number' && typeof baseKnee === 'string' && baseKnee.startsWith('>= ')) {
    const b = Number(baseKnee.slice(3));
    kneeRow.ratio = Math.round((appKnee / b) * 1000) / 1000;
    kneeRow.note = `${kneeRow.note}; ratio is an upper bound (baseline passed every rate)`;
  }
  rows.push(kneeRow);
  const appSteps = finalSteps(app.steps);
  const baseSteps = finalSteps(base.steps);
  for (const a of appSteps) {
    const b = baseSteps.find((s) => s.rate === a.rate) ?? null;
    const invalid = invalidOf(a.verdict === 'invalid' ? a.generator.invalid : null, b?.verdict === 'invalid' ? b.generator.invalid : null);
    const retried = [a, b].some((x) => x?.attempt === 2) ? ' (second attempt)' : '';
    const note = `${a.verdict}${retried}; p50 ${a.latency.p50}${b ? ` vs ${b.latency.p50}` : ''} ms; delivered ${a.delivered}/${a.expected}${b ? ` vs ${b.delivered}/${b.expected}` : ''}; server CPU ${cpuText(a)}${b ? ` vs ${cpuText(b)}` : ''}`;
    rows.push(row(`p99 @ ${a.rate} msg/s`, 'ms', a.latency.p99, b?.latency.p99 ?? null, { note, invalid }));
  }
  // The full set of figures at the app's knee (or its first rate when none passed).
  const at = appSteps.find((s) => s.rate === app.knee) ?? appSteps[0];
  if (at) {
    const b = baseSteps.find((s) => s.rate === at.rate) ?? null;
    const ratioOf = (s: StepResult) => (s.expected ? Math.round((s.delivered / s.expected) * 10000) / 10000 : null);
    rows.push(row(`p50 @ ${at.rate} msg/s`, 'ms', at.latency.p50, b?.latency.p50 ?? null));
    rows.push(row(`max @ ${at.rate} msg/s`, 'ms', at.latency.max, b?.latency.max ?? null));
    rows.push(row(`deliveries @ ${at.rate} msg/s`, '/s', at.deliveriesPerSec, b?.deliveriesPerSec ?? null, { note: 'agent receipts per second' }));
    rows.push(row(`stored @ ${at.rate} msg/s`, '/s', at.storedPerSec, null, { note: 'messages rows written; the relay stores nothing' }));
    rows.push(row(`delivered/expected @ ${at.rate} msg/s`, '', ratioOf(at), b ? ratioOf(b) : null));
  }
  const idle = (r: ChatRun) => Math.round(r.idleCpu.reduce((a, b) => a + b, 0) * 1000) / 10;
  rows.push(row('server CPU, sockets open, idle', '%', idle(app), idle(base), { note: `${app.ramp.connected} sockets held, nothing sent (100% = one core; summed over instances)` }));
  const probe = app.probes;
  const probeProblems = [
    probe.roundTrip && !probe.roundTrip.ok ? `socket.io-client round trip failed: ${probe.roundTrip.detail}` : '',
    probe.refusal !== null && probe.refusal !== 'unauthorized' ? `forged token answered "${probe.refusal}"` : '',
    ...appSteps.filter((s) => s.probe && s.probe.received !== s.probe.expected).map((s) => `@${s.rate}/s socket.io-client agent got ${s.probe!.received}/${s.probe!.expected}`),
  ].filter(Boolean);
  rows.push(row('probes (socket.io-client)', '', probeProblems.length ? 'FAILED' : 'ok', base.probes.roundTrip?.ok === false ? 'FAILED' : 'ok', { note: probeProblems.join('; ') || 'round trip, refusal of a forged token and per-step counts agree' }));
  if (app.ramp.failed || app.lostSockets) rows.push(row('sockets', '', `${app.ramp.connected}/${app.ramp.attempted}`, `${base.ramp.connected}/${base.ramp.attempted}`, { note: `${app.lostSockets} app sockets dropped; errors ${JSON.stringify(app.ramp.errors)}` }));
  return rows;
}

export const chat: Scenario = {
  name: 'chat',
  summary: 'visitors send on a fixed schedule, agents receive, at each fan-out; knee vs a bare Socket.IO room relay',
  skip: (ctx) => (ctx.options.visitors === 0 ? '--visitors=0: nobody sends' : null),
  async run(ctx): Promise<ScenarioOutput> {
    const o = ctx.options;
    const fanouts = o.fanouts;
    const widest = fanouts[fanouts.length - 1]!;
    const app = await startApp(ctx, 'app', { postgres: true, redis: false });
    let seeded: SeedResult;
    const appRuns = new Map<number, ChatRun>();
    const baseRuns = new Map<number, ChatRun>();
    let hooked: ChatRun | null = null;
    let receiver: Receiver | null = null;
    let received = 0;
    try {
      seeded = await app.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: o.orgs, agents: o.orgs * widest, visitors: o.visitors, conversations: true, conversationHistory: 5 });
      ctx.log(`  seeded ${o.orgs} orgs, ${widest} agents each, ${o.visitors} visitors with a conversation each in ${seeded.seconds.toFixed(1)} s`);
      const orgIds = seeded.orgs.map((x) => x.id);
      const target = { label: 'app', visitorUrl: app.url, agentUrl: app.url, servers: [app.child], countStored: () => app.child.call<number>('countMessages', { orgIds }), authenticates: true };
      // PostgreSQL shares the cores: each search starts once it has finished with the writes of the one before.
      const settle = () => settleBefore(ctx.log, app.child);
      // The relay waits beside the app (each idle while the other is measured), so every fan-out's app and baseline
      // are measured one right after the other: a busy spell of a shared machine then hits a pair, not one side.
      const relay = await startRelay(ctx, 'relay baseline', false);
      try {
        for (const fanout of fanouts) {
          ctx.log(`  fan-out ${fanout}: ${fanout} agents per organization`);
          const orgs = withFanout(seeded.orgs, fanout);
          await settle();
          appRuns.set(fanout, await runChat({ ...target, label: `app, fan-out ${fanout}` }, orgs, chatSettings(ctx)));
          await settle();
          baseRuns.set(fanout, await runChat({ label: `baseline, fan-out ${fanout}`, visitorUrl: relay.url, agentUrl: relay.url, servers: [relay.child], countStored: null, authenticates: false }, orgs, chatSettings(ctx)));
        }
      } finally {
        await relay.child.stop();
      }
      if (o.chatWebhooks > 0) {
        receiver = await startReceiver();
        for (const org of seeded.orgs) {
          // The first agent of each seeded organization is its owner.
          const headers = { authorization: `Bearer ${org.agents[0]!.token}` };
          for (let i = 0; i < o.chatWebhooks; i++) {
            const res = await requestJson(`${app.url}/api/v1/webhooks`, { method: 'POST', headers, body: { url: `${receiver.url}?n=${i}`, events: ['message.created'] } });
            if (res.status !== 201) throw new Error(`creating a webhook answered ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
          }
        }
        ctx.log(`  again at fan-out ${widest} with ${o.chatWebhooks} message.created webhook(s) per organization (receiver in the generator process)`);
        await settle();
        hooked = await runChat({ ...target, label: `app + webhooks, fan-out ${widest}` }, withFanout(seeded.orgs, widest), chatSettings(ctx));
        received = receiver.count();
      }
    } finally {
      // On a shared PostgreSQL the run removes its rows, even after a failure; with webhooks the deliveries still
      // waiting are stopped first, so deleting them does not race their workers (and the next scenario's seed).
      if (receiver) await app.child.call('pauseJobs').catch(() => undefined);
      if (!app.dataDir) await app.child.call('cleanup', undefined, 600_000).catch((err) => ctx.log(`  cleanup failed: ${(err as Error).message}`));
      await app.stop();
      await receiver?.close();
    }
    const rows: Row[] = [];
    const details: Record<string, unknown> = { database: app.dataDir ? 'embedded (PGlite)' : 'PostgreSQL', serverLog: app.child.log };
    for (const fanout of fanouts) {
      const chatOut = chatRows(appRuns.get(fanout)!, baseRuns.get(fanout)!, ctx);
      rows.push(...(fanouts.length > 1 ? labelled(`fan-out ${fanout}`, chatOut) : chatOut));
      details[`fanout${fanout}`] = { app: appRuns.get(fanout), baseline: baseRuns.get(fanout) };
    }
    if (hooked) rows.push(webhookKneeRow(hooked, appRuns.get(widest)!, ctx, received));
    return { rows, details: { ...details, appWithWebhooks: hooked, webhookDeliveriesReceived: received } };
  },
};

/** The knee with webhooks subscribed against the knee without, same instance, same run (target: unchanged, 1.0x). */
function webhookKneeRow(hooked: ChatRun, plain: ChatRun, ctx: RunContext, received: number): Row {
  const rates = ctx.options.rates;
  const withText = kneeText(hooked, rates);
  const withoutText = kneeText(plain, rates);
  const at = finalSteps(hooked.steps).find((s) => s.rate === hooked.knee);
  const r = row(`knee with ${ctx.options.chatWebhooks} message.created webhook(s) per org, fan-out ${ctx.options.fanouts[ctx.options.fanouts.length - 1]}`, 'msg/s', withText, withoutText, {
    note: `baseline: the app's knee without webhooks (same instance, measured just before); ${received} deliveries received during the run${at ? `; p99 ${at.latency.p99} ms, server CPU ${cpuText(at)} at ${at.rate}/s` : ''}; app+webhooks: ${hooked.ended}`,
    invalid: invalidOf(hooked.generatorBound ? 'the search ended on a generator-bound step' : null, null),
  });
  if (typeof withText === 'number' && typeof withoutText === 'number') r.ratio = Math.round((withText / withoutText) * 1000) / 1000;
  return r;
}
