// reconnect: every socket of an instance loses its server (a restart on the same address) and comes back with
// backoff and jitter, then syncs from the last seq it saw, while visitors keep sending (unacknowledged sends are
// re-sent with their clientMessageId). Measured: time until every socket is back, and until every socket holds
// every message; messages lost; peak handshake latency. Baseline: the bare relay restarted the same way.
import { EioClient, ramp } from '../lib/eio.js';
import { invalidOf, row } from '../lib/report.js';
import type { SeedOrg, SeedResult } from '../lib/seed.js';
import { freePort, startApp, startRelay, type AppInstance, type RunContext, type Scenario } from '../lib/servers.js';
import { GeneratorMonitor, round, sleep, waitUntil, type GeneratorHealth, type LatencySummary } from '../lib/stats.js';
import { CLIENT_BACKOFF, STORM_TIMEOUT_MS, Storm } from '../lib/storm.js';

/** A conversation visitors write to during the storm, and what was stored in it. */
interface Thread {
  id: string;
  orgIndex: number;
  sender: EioClient;
  /** Sends not acknowledged yet (re-sent after a reconnect), by clientMessageId. */
  outbox: Map<string, { payload: string; scheduledAt: number }>;
  /** seq of each acknowledged clientMessageId. */
  stored: Map<string, number>;
  /** When each seq's send was scheduled. */
  scheduledAtOf: Map<number, number>;
}

/** A socket and the seqs it holds (from new_message and from sync) of each conversation it follows. */
interface Follower {
  client: EioClient;
  threads: string[];
  held: Map<string, Set<number>>;
  /** Reconnects whose sync has not finished. */
  syncing: number;
  /** The highest seq held per conversation when the socket last joined: where its sync starts. */
  resumeFrom: Map<string, number>;
}

interface StormMeasure {
  sockets: number;
  /** Seconds from the stop of the old server. */
  restartSeconds: number;
  allBackSeconds: number | null;
  /** Every socket back, synced, and holding every message sent before the last one came back. */
  caughtUpSeconds: number | null;
  handshake: LatencySummary;
  attempts: number;
  failures: Record<string, number>;
  lostSockets: number;
  /** The waits asked for by refusals, summed (ms). */
  refusedWaitMs: number;
  generator: GeneratorHealth;
}

const frameJson = (frame: string): unknown => JSON.parse(frame.slice(frame.indexOf(',') + 1));

function maxOf(set: Set<number> | undefined): number {
  let m = 0;
  for (const v of set ?? []) if (v > m) m = v;
  return m;
}

/** The app: ramp, send, restart on the same port, measure the recovery, then check that nothing was lost. */
async function stormApp(ctx: RunContext, app: AppInstance, port: number, orgs: SeedOrg[], senders: number, rate: number) {
  const o = ctx.options;
  const url = app.url;
  const runTag = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const threads: Thread[] = [];
  const followers: Follower[] = [];
  const threadsOfOrg: string[][] = orgs.map(() => []);
  const visitorClients: { client: EioClient; conversationId: string }[] = [];
  const maxVisitors = Math.max(0, ...orgs.map((x) => x.visitors.length));
  // Visitors interleaved across organizations; the first `senders` of them write during the storm.
  for (let v = 0; v < maxVisitors; v++) {
    orgs.forEach((org, i) => {
      const visitor = org.visitors[v];
      if (!visitor?.conversationId) return;
      const client = new EioClient(url, org.id, { token: visitor.token, role: 'visitor', sessionId: visitor.sessionId });
      visitorClients.push({ client, conversationId: visitor.conversationId });
      if (threads.length < senders) {
        threads.push({ id: visitor.conversationId, orgIndex: i, sender: client, outbox: new Map(), stored: new Map(), scheduledAtOf: new Map() });
        threadsOfOrg[i]!.push(visitor.conversationId);
      }
    });
  }
  for (const { client, conversationId } of visitorClients) followers.push({ client, threads: [conversationId], held: new Map([[conversationId, new Set()]]), syncing: 0, resumeFrom: new Map() });
  // Agents follow the conversations being written in their organization (the ones they would have open).
  orgs.forEach((org, i) => {
    for (const a of org.agents) {
      const client = new EioClient(url, org.id, { token: a.token, role: 'agent' });
      followers.push({ client, threads: threadsOfOrg[i]!, held: new Map(threadsOfOrg[i]!.map((id) => [id, new Set<number>()])), syncing: 0, resumeFrom: new Map() });
    }
  });
  const threadById = new Map(threads.map((t) => [t.id, t]));
  const followerOf = new Map(followers.map((f) => [f.client, f]));
  for (const f of followers) {
    // As a socket.io-client 'connect' handler does: the last seq seen is read before any event of the new connection.
    f.client.onJoin = () => {
      for (const id of f.threads) f.resumeFrom.set(id, maxOf(f.held.get(id)));
    };
    f.client.onEvent = (frame) => {
      if (!frame.includes('"new_message"')) return;
      const [, payload] = frameJson(frame) as [string, { conversationId: string; message: { seq: number } }];
      f.held.get(payload.conversationId)?.add(payload.message.seq);
    };
  }

  let ackErrors = 0;
  let firstAckError: string | null = null;
  let syncErrors = 0;
  let firstSyncError: string | null = null;
  const emitSend = (t: Thread, cmid: string, payload: string) => {
    if (!t.sender.connected) return;
    t.sender.emitWithAck('send_message', payload, (body) => {
      const ack = (JSON.parse(body) as [{ success: boolean; data?: { message: { seq: number } }; error?: unknown }])[0];
      if (ack.success && ack.data) {
        const entry = t.outbox.get(cmid);
        if (entry) t.scheduledAtOf.set(ack.data.message.seq, entry.scheduledAt);
        t.outbox.delete(cmid);
        t.stored.set(cmid, ack.data.message.seq);
      } else {
        ackErrors++;
        firstAckError ??= body.slice(0, 200);
        // Refused while the server shuts down (or a dependency blinks): the same send again, a moment later.
        setTimeout(() => t.outbox.has(cmid) && emitSend(t, cmid, payload), 500);
      }
    });
  };
  const sync = (f: Follower) => {
    f.syncing++;
    let open = f.threads.length;
    const done = () => {
      if (--open === 0) f.syncing--;
    };
    if (open === 0) return void f.syncing--;
    for (const conversationId of f.threads) {
      const held = f.held.get(conversationId)!;
      // Each page continues after the last one (live events may meanwhile hold higher seqs).
      const page = (afterSeq: number) => {
        f.client.emitWithAck('sync', JSON.stringify({ conversationId, afterSeq }), (body) => {
          const ack = (JSON.parse(body) as [{ success: boolean; data?: { messages: { seq: number }[]; hasMore: boolean } }])[0];
          if (!ack.success || !ack.data) {
            syncErrors++;
            firstSyncError ??= body.slice(0, 200);
            return setTimeout(() => (f.client.connected ? page(afterSeq) : done()), 500);
          }
          for (const m of ack.data.messages) held.add(m.seq);
          if (ack.data.hasMore) page(ack.data.messages[ack.data.messages.length - 1]!.seq);
          else done();
        });
      };
      page(f.resumeFrom.get(conversationId) ?? maxOf(held));
    }
  };
  const storm = new Storm(CLIENT_BACKOFF, (client) => {
    const f = followerOf.get(client)!;
    // Acks of the lost connection never come: its unfinished sync is started over.
    f.syncing = 0;
    sync(f);
    const t = threadById.get(f.threads[0]!);
    if (t?.sender === client) for (const [cmid, entry] of t.outbox) emitSend(t, cmid, entry.payload);
  });

  ctx.log(`  app: connecting ${followers.length} sockets (${visitorClients.length} visitors, ${followers.length - visitorClients.length} agents); ${threads.length} visitors send ${rate} msg/s`);
  const rampResult = await ramp(followers.map((f) => f.client), o.concurrency);
  if (rampResult.failed) ctx.log(`  app: ${rampResult.failed} sockets failed to connect: ${JSON.stringify(rampResult.errors)}`);
  for (const f of followers) if (f.client.connected) storm.watch(f.client);

  // Visitors send on a fixed schedule, whatever the state of their socket: a send made while away waits in the outbox.
  let n = 0;
  let sending = true;
  const t0 = performance.now();
  const interval = 1000 / rate;
  const ticker = (async () => {
    while (sending) {
      const due = Math.floor((performance.now() - t0) / interval);
      for (; n < due; n++) {
        const t = threads[n % threads.length]!;
        const cmid = `rc-${runTag}-${n}`;
        const payload = `{"conversationId":"${t.id}","content":"bench:rc:${n}","clientMessageId":"${cmid}"}`;
        t.outbox.set(cmid, { payload, scheduledAt: performance.now() });
        emitSend(t, cmid, payload);
      }
      await sleep(5);
    }
  })();

  await sleep(2000);
  const monitor = new GeneratorMonitor(o.limits);
  const stopAt = performance.now();
  await app.stop(true);
  const next = await startApp(ctx, 'app (restarted)', { postgres: true, redis: false, port, dataDir: app.dataDir ?? undefined });
  const upAt = performance.now();
  ctx.log(`  app: restarted in ${((upAt - stopAt) / 1000).toFixed(1)} s; ${storm.down} sockets away`);

  const holdsAll = (before: number) =>
    followers.every((f) =>
      f.threads.every((id) => {
        const t = threadById.get(id);
        if (!t) return true;
        const held = f.held.get(id)!;
        for (const [seq, at] of t.scheduledAtOf) if (at <= before && !held.has(seq)) return false;
        return true;
      }),
    );
  const unsentBefore = (before: number) => threads.some((t) => [...t.outbox.values()].some((e) => e.scheduledAt <= before));
  const limitMs = o.quick ? 60_000 : 180_000;
  let caughtUpAt: number | null = null;
  let checks = 0;
  await waitUntil(
    () => {
      // The whole check is costly with thousands of sockets: every 10th poll.
      if (storm.down > 0 || ++checks % 10 !== 0) return false;
      if (followers.some((f) => f.syncing > 0)) return false;
      const backAt = storm.lastBackAt;
      if (unsentBefore(backAt) || !holdsAll(backAt)) return false;
      caughtUpAt = performance.now();
      return true;
    },
    limitMs,
  );
  const allBackAt = storm.down === 0 ? storm.lastBackAt : null;
  const generator = monitor.stop(storm.handshake.summary().p99);

  // A little more traffic after the recovery, then everything must be stored once and held by every follower.
  await sleep(2000);
  sending = false;
  await ticker;
  const scheduled = n;
  await waitUntil(() => threads.every((t) => t.outbox.size === 0) && followers.every((f) => f.syncing === 0) && holdsAll(Infinity), o.quick ? 15_000 : 30_000, 100);
  storm.stop();
  let unstored = 0;
  let gaps = 0;
  let missing = 0;
  let stored = 0;
  for (const t of threads) {
    unstored += t.outbox.size;
    stored += t.stored.size;
    // The benchmark is the only writer of these conversations: their seqs must run 1..count without a hole or a repeat.
    const seqs = new Set(t.stored.values());
    if (seqs.size !== t.stored.size || maxOf(seqs) !== seqs.size) gaps++;
  }
  // Deliveries missing at sockets that are back are losses; those of sockets still away are counted apart.
  let missingAway = 0;
  for (const f of followers) {
    for (const id of f.threads) {
      for (const seq of threadById.get(id)?.stored.values() ?? []) {
        if (f.held.get(id)!.has(seq)) continue;
        if (f.client.connected) missing++;
        else missingAway++;
      }
    }
  }
  const awaySenders = threads.filter((t) => !t.sender.connected);
  const unstoredAway = awaySenders.reduce((sum, t) => sum + t.outbox.size, 0);
  const lostSockets = followers.filter((f) => !f.client.connected).length;
  for (const f of followers) f.client.close();

  const measure: StormMeasure = {
    sockets: followers.length,
    restartSeconds: round((upAt - stopAt) / 1000, 2),
    allBackSeconds: allBackAt === null ? null : round((allBackAt - stopAt) / 1000, 2),
    caughtUpSeconds: caughtUpAt === null ? null : round(((caughtUpAt as number) - stopAt) / 1000, 2),
    handshake: storm.handshake.summary(),
    attempts: storm.attempts,
    failures: storm.failures,
    lostSockets,
    refusedWaitMs: storm.refusedWaitMs,
    generator,
  };
  ctx.log(
    `  app: every socket back ${measure.allBackSeconds ?? 'never'} s after the stop, caught up ${measure.caughtUpSeconds ?? 'never'} s; handshake p99 ${measure.handshake.p99} max ${measure.handshake.max} ms over ${storm.attempts} attempts; ${scheduled} sends, ${stored} stored, ${unstored} never stored (${unstoredAway} of them by senders still away), ${missing} deliveries missing at sockets that are back (${missingAway} at sockets still away), ${gaps} conversations with a gap or repeat; ${ackErrors} refused sends re-sent${firstAckError ? ` (${firstAckError})` : ''}; ${syncErrors} refused syncs asked again${firstSyncError ? ` (${firstSyncError})` : ''}`,
  );
  return { app: next, measure, scheduled, stored, unstored, unstoredAway, missing, missingAway, gaps, ackErrors, firstAckError, syncErrors, firstSyncError, rampFailed: rampResult.failed };
}

/** The bare relay: the same sockets, restarted the same way; it stores nothing, so only the reconnects are timed. */
async function stormRelay(ctx: RunContext, orgs: SeedOrg[]): Promise<StormMeasure> {
  const o = ctx.options;
  const port = await freePort();
  let relay = await startRelay(ctx, 'relay baseline', false, { port });
  const clients: EioClient[] = [];
  for (const org of orgs) for (const v of org.visitors) clients.push(new EioClient(relay.url, org.id, { token: v.token, role: 'visitor', sessionId: v.sessionId }));
  for (const org of orgs) for (const a of org.agents) clients.push(new EioClient(relay.url, org.id, { token: a.token, role: 'agent' }));
  const storm = new Storm(CLIENT_BACKOFF, () => undefined);
  try {
    await ramp(clients, o.concurrency);
    for (const c of clients) if (c.connected) storm.watch(c);
    await sleep(2000);
    const monitor = new GeneratorMonitor(o.limits);
    const stopAt = performance.now();
    await relay.child.stop();
    relay = await startRelay(ctx, 'relay baseline (restarted)', false, { port });
    const upAt = performance.now();
    await waitUntil(() => storm.down === 0, o.quick ? 60_000 : 180_000, 50);
    const generator = monitor.stop(storm.handshake.summary().p99);
    const measure: StormMeasure = {
      sockets: clients.length,
      restartSeconds: round((upAt - stopAt) / 1000, 2),
      allBackSeconds: storm.down === 0 ? round((storm.lastBackAt - stopAt) / 1000, 2) : null,
      caughtUpSeconds: null,
      handshake: storm.handshake.summary(),
      attempts: storm.attempts,
      failures: storm.failures,
      lostSockets: clients.filter((c) => !c.connected).length,
      refusedWaitMs: storm.refusedWaitMs,
      generator,
    };
    ctx.log(`  relay: restarted in ${measure.restartSeconds} s; every socket back ${measure.allBackSeconds ?? 'never'} s after the stop; handshake p99 ${measure.handshake.p99} max ${measure.handshake.max} ms over ${storm.attempts} attempts`);
    return measure;
  } finally {
    storm.stop();
    for (const c of clients) c.close();
    await relay.child.stop();
  }
}

export const reconnect: Scenario = {
  name: 'reconnect',
  summary: 'every socket loses its server (restart) and comes back with backoff and jitter, syncing from its last seq, while visitors keep sending; baseline: the bare relay restarted the same way',
  skip: () => null,
  async run(ctx) {
    const o = ctx.options;
    const visitors = o.reconnectVisitors;
    const senders = Math.min(visitors, o.quick ? 20 : 200);
    const port = await freePort();
    let app = await startApp(ctx, 'app', { postgres: true, redis: false, port });
    let seeded: SeedResult;
    let result: Awaited<ReturnType<typeof stormApp>>;
    try {
      seeded = await app.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: o.orgs, agents: o.agents, visitors, conversations: true });
      ctx.log(`  seeded ${o.orgs} orgs, ${o.agents} agents, ${visitors} visitors with a conversation each in ${seeded.seconds.toFixed(1)} s`);
      result = await stormApp(ctx, app, port, seeded.orgs, senders, o.reconnectRate);
      app = result.app;
    } finally {
      if (!app.dataDir) await app.child.call('cleanup', { runId: ctx.runId }).catch(() => undefined);
      await app.stop();
    }
    const base = await stormRelay(ctx, seeded.orgs);
    const m = result.measure;
    const invalid = invalidOf(m.generator.invalid, base.generator.invalid);
    // Lost: sends a connected visitor never got stored, and messages a connected socket never got.
    const lost = result.unstored - result.unstoredAway + result.missing;
    const sinceUp = (x: StormMeasure, s: number | null) => (s === null ? null : round(s - x.restartSeconds, 2));
    return {
      rows: [
        row('sockets back', '', m.sockets - m.lostSockets, base.sockets - base.lostSockets, { note: `of ${m.sockets} / ${base.sockets}` }),
        row('every socket back', 's', m.allBackSeconds, base.allBackSeconds, { invalid, note: `from the old server's stop; the restart itself took ${m.restartSeconds} / ${base.restartSeconds} s; backoff ${CLIENT_BACKOFF.firstMs}-${CLIENT_BACKOFF.maxMs} ms, jitter ${CLIENT_BACKOFF.jitter}` }),
        row('every socket back, after the restart', 's', sinceUp(m, m.allBackSeconds), sinceUp(base, base.allBackSeconds), { invalid }),
        row('every socket caught up (synced)', 's', m.caughtUpSeconds, null, { note: `holds every message sent before the last socket came back; ${senders} visitors sending ${o.reconnectRate} msg/s throughout` }),
        row('messages lost', '', lost, null, { note: `at sockets that are back; ${result.scheduled} sent, ${result.stored} stored, ${result.unstored} never stored (${result.unstoredAway} waiting at senders still away), ${result.missingAway} deliveries pending at sockets still away, ${result.gaps} conversations with a seq gap or repeat; ${result.ackErrors} refused sends re-sent` }),
        row('peak handshake', 'ms', m.handshake.max, base.handshake.max, { invalid, note: `p99 ${m.handshake.p99} / ${base.handshake.p99} ms; ${m.attempts} / ${base.attempts} attempts` }),
        row('timed-out attempts', '', m.failures.timeout ?? 0, base.failures.timeout ?? 0, {
          note: `attempts the client gave up on after ${STORM_TIMEOUT_MS / 1000} s; refused at once with a time to come back: ${m.failures.service_unavailable ?? 0} / ${base.failures.service_unavailable ?? 0} (asked to wait ${round(m.refusedWaitMs / Math.max(1, m.failures.service_unavailable ?? 0) / 1000, 1)} s on average)`,
        }),
      ],
      details: { app: m, baseline: base, result: { ...result, app: undefined } },
    };
  },
};
