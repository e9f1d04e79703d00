// The chat measure shared by the chat and cluster scenarios: visitors send on a fixed schedule (open model: a send
// never waits for an earlier answer), every agent of the organization must receive each message; rates are stepped
// up until p99 crosses the target or something is lost.
import type { Child, ServerStats } from './proc.js';
import { EioClient, ramp, type RampResult } from './eio.js';
import { ProbeCounter, refusalProbe, roundTripProbe, type RoundTrip } from './probes.js';
import type { SeedOrg } from './seed.js';
import { GeneratorMonitor, Histogram, round, serverCpu, sleep, waitUntil, type GeneratorHealth, type GeneratorLimits, type LatencySummary } from './stats.js';

export interface ChatTarget {
  label: string;
  visitorUrl: string;
  agentUrl: string;
  servers: Child[];
  /** Messages stored so far (the app); null for the relay. */
  countStored: (() => Promise<number>) | null;
  /** Whether the target authenticates (a forged token must be refused). */
  authenticates: boolean;
  /**
   * Instances to spread the clients over, instead of visitorUrl and agentUrl: an organization's agents alternate
   * over them, and so do its visitors, so each instance takes its share of the sends and of the deliveries.
   */
  spread?: string[];
}

export interface ChatSettings {
  rates: number[];
  duration: number;
  drain: number;
  concurrency: number;
  p99TargetMs: number;
  limits: GeneratorLimits;
  log: (line: string) => void;
}

export interface StepResult {
  rate: number;
  /** 1, or 2 for the one retry a failing rate gets. */
  attempt: number;
  sent: number;
  acked: number;
  ackErrors: number;
  firstAckError: string | null;
  expected: number;
  delivered: number;
  duplicates: number;
  latency: LatencySummary;
  ackLatency: LatencySummary;
  deliveriesPerSec: number;
  storedPerSec: number | null;
  serverCpu: number[];
  generator: GeneratorHealth;
  probe: { expected: number; received: number } | null;
  verdict: 'pass' | 'fail' | 'invalid';
  why: string;
}

export interface ChatRun {
  ramp: RampResult;
  probes: { roundTrip: RoundTrip | null; refusal: string | null };
  steps: StepResult[];
  /** Highest passing rate; null when even the first failed. */
  knee: number | null;
  /** Why the search ended. */
  ended: string;
  /** The search ended on an INVALID step: the knee is only a lower bound, set by the generator. */
  generatorBound: boolean;
  lostSockets: number;
  /** Server CPU (1 = one core) per process with every socket open and nothing sent. */
  idleCpu: number[];
  /** Frames from a finished step that arrived after its drain. */
  late: number;
}

/** The last attempt at each rate. */
export function finalSteps(steps: StepResult[]): StepResult[] {
  return steps.filter((x, i) => !steps.slice(i + 1).some((later) => later.rate === x.rate));
}

interface Sender {
  client: EioClient;
  orgIndex: number;
  conversationId: string;
}

export async function runChat(target: ChatTarget, orgs: SeedOrg[], s: ChatSettings): Promise<ChatRun> {
  const agentsPerOrg = orgs.map((o) => o.agents.length);
  const agents: EioClient[] = [];
  const senders: Sender[] = [];
  const spreadOver = target.spread?.length ? target.spread : null;
  const agentUrl = (k: number) => (spreadOver ? spreadOver[k % spreadOver.length]! : target.agentUrl);
  const visitorUrl = (k: number) => (spreadOver ? spreadOver[k % spreadOver.length]! : target.visitorUrl);
  orgs.forEach((org) => {
    org.agents.forEach((a, k) => agents.push(new EioClient(agentUrl(k), org.id, { token: a.token, role: 'agent' })));
  });
  // Visitors interleaved across organizations, so any window of sends spreads over all of them.
  const maxVisitors = Math.max(0, ...orgs.map((o) => o.visitors.length));
  for (let v = 0; v < maxVisitors; v++) {
    orgs.forEach((org, o) => {
      const visitor = org.visitors[v];
      if (!visitor?.conversationId) return;
      senders.push({ client: new EioClient(visitorUrl(v), org.id, { token: visitor.token, role: 'visitor', sessionId: visitor.sessionId }), orgIndex: o, conversationId: visitor.conversationId });
    });
  }

  // Step state read by every receiver.
  let stepId = 0;
  // clientMessageIds are unique per conversation: a second run over the same conversations must not repeat them.
  const runTag = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  let t0 = 0;
  let interval = 1;
  let delivered = 0;
  let duplicates = 0;
  let late = 0;
  let lastDeliveryAt = 0;
  let counts = new Uint16Array(0);
  let expectedPer = new Uint16Array(0);
  let latency = new Histogram();
  const marker = '"content":"bench:';
  const onAgentFrame = (frame: string) => {
    const k = frame.indexOf(marker);
    if (k < 0) return;
    let p = k + marker.length;
    let step = 0;
    for (let c = frame.charCodeAt(p); c >= 48 && c <= 57; c = frame.charCodeAt(++p)) step = step * 10 + (c - 48);
    let i = 0;
    for (let c = frame.charCodeAt(++p); c >= 48 && c <= 57; c = frame.charCodeAt(++p)) i = i * 10 + (c - 48);
    if (step !== stepId) {
      late++;
      return;
    }
    const now = performance.now();
    if (++counts[i]! > expectedPer[i]!) duplicates++;
    else {
      delivered++;
      lastDeliveryAt = now;
      latency.record(now - (t0 + i * interval));
    }
  };
  for (const a of agents) a.onEvent = onAgentFrame;

  s.log(`  ${target.label}: connecting ${agents.length} agents and ${senders.length} visitors`);
  const rampResult = await ramp([...agents, ...senders.map((x) => x.client)], s.concurrency);
  s.log(`  ${target.label}: ${rampResult.connected}/${rampResult.attempted} connected in ${rampResult.seconds.toFixed(1)} s${rampResult.failed ? ` (failures: ${JSON.stringify(rampResult.errors)})` : ''}`);

  const probes: ChatRun['probes'] = { roundTrip: null, refusal: null };
  const firstVisitor = orgs[0]?.visitors.find((v) => v.conversationId);
  if (firstVisitor && orgs[0]!.agents[0]) {
    probes.roundTrip = await roundTripProbe(target.visitorUrl, target.agentUrl, orgs[0]!.id, { ...firstVisitor, conversationId: firstVisitor.conversationId! }, orgs[0]!.agents[0]);
  }
  if (target.authenticates && orgs[0]) probes.refusal = await refusalProbe(target.visitorUrl, orgs[0].id);
  const counter = orgs[0]?.agents[0] ? await ProbeCounter.open(target.agentUrl, orgs[0].id, orgs[0].agents[0].token).catch(() => null) : null;

  // What holding the sockets costs before anything is sent (pings, timers, GC of a large heap).
  const idle0 = await Promise.all(target.servers.map((c) => c.stats()));
  await sleep(Math.min(2, s.duration) * 1000);
  const idle1 = await Promise.all(target.servers.map((c) => c.stats()));
  const idleCpu = idle0.map((b, k) => serverCpu(b, idle1[k]!));

  const steps: StepResult[] = [];
  let ended = 'every rate passed';
  let generatorBound = false;
  const live = senders.filter((x) => x.client.connected);
  /** One step: `rate` sends per second for `seconds`, then up to --drain for the last deliveries. */
  const runStep = async (rate: number, seconds: number): Promise<StepResult> => {
    stepId++;
    const total = Math.max(1, Math.round(rate * seconds));
    interval = 1000 / rate;
    counts = new Uint16Array(total);
    expectedPer = new Uint16Array(total);
    latency = new Histogram();
    delivered = 0;
    duplicates = 0;
    lastDeliveryAt = 0;
    const ackLatency = new Histogram();
    let acked = 0;
    let ackErrors = 0;
    let firstAckError: string | null = null;
    let expected = 0;
    let probeExpected = 0;
    counter?.reset(stepId);
    const stored0 = target.countStored ? await target.countStored() : 0;
    const before: ServerStats[] = await Promise.all(target.servers.map((c) => c.stats()));
    const monitor = new GeneratorMonitor(s.limits);
    t0 = performance.now() + 20;
    let i = 0;
    let cursor = 0;
    const send = (n: number) => {
      const sender = live[cursor++ % live.length]!;
      const agentsHere = sender.client.connected ? agentsPerOrg[sender.orgIndex]! : 0;
      expectedPer[n] = agentsHere;
      expected += agentsHere;
      if (sender.orgIndex === 0) probeExpected++;
      if (!sender.client.connected) {
        ackErrors++;
        firstAckError ??= 'sender disconnected';
        return;
      }
      const scheduled = t0 + n * interval;
      const payload = `{"conversationId":"${sender.conversationId}","content":"bench:${stepId}:${n}","clientMessageId":"bench-${runTag}-${stepId}-${n}"}`;
      sender.client.emitWithAck('send_message', payload, (body) => {
        ackLatency.record(performance.now() - scheduled);
        if (body.includes('"success":true')) acked++;
        else {
          ackErrors++;
          firstAckError ??= body.slice(0, 200);
        }
      });
    };
    await new Promise<void>((resolve) => {
      const tick = () => {
        const due = Math.min(total, Math.floor((performance.now() - t0) / interval) + 1);
        while (i < due) send(i++);
        if (i >= total) return resolve();
        setTimeout(tick, Math.max(0, Math.min(4, t0 + i * interval - performance.now())));
      };
      setTimeout(tick, 20);
    });
    await waitUntil(() => delivered >= expected && acked + ackErrors >= total, s.drain * 1000);
    const lat = latency.summary();
    // The generator's own loop delay can inflate the latency it measures by about that much, no more: a step is
    // charged to the generator only when its delay is large next to the latency measured (see GeneratorMonitor.stop).
    const generator = monitor.stop(lat.p99);
    const after: ServerStats[] = await Promise.all(target.servers.map((c) => c.stats()));
    const stored = target.countStored ? (await target.countStored()) - stored0 : null;
    const span = Math.max(seconds, ((lastDeliveryAt || performance.now()) - t0) / 1000);
    const lost = expected - delivered;
    const problems: string[] = [];
    if (lost > 0) problems.push(`${lost} of ${expected} deliveries missing after ${s.drain} s`);
    if (ackErrors > 0) problems.push(`${ackErrors} sends refused or failed (${firstAckError})`);
    if (duplicates > 0) problems.push(`${duplicates} duplicate deliveries`);
    if (lat.p99 >= s.p99TargetMs) problems.push(`p99 ${lat.p99} ms >= ${s.p99TargetMs} ms`);
    const verdict: StepResult['verdict'] = problems.length === 0 ? 'pass' : generator.invalid ? 'invalid' : 'fail';
    return {
      rate,
      attempt: 1,
      sent: total,
      acked,
      ackErrors,
      firstAckError,
      expected,
      delivered,
      duplicates,
      latency: lat,
      ackLatency: ackLatency.summary(),
      deliveriesPerSec: round(delivered / span, 0),
      storedPerSec: stored === null ? null : round(stored / span, 0),
      serverCpu: before.map((b, k) => serverCpu(b, after[k]!)),
      generator,
      probe: counter ? { expected: probeExpected, received: counter.count } : null,
      verdict,
      why: verdict === 'invalid' ? `${problems.join('; ')}; ${generator.invalid}` : problems.join('; ') || 'ok',
    };
  };

  let lostSockets = 0;
  try {
    // Warm-up at the first rate (JIT, pools, caches), not reported: the first measured step is not a cold start.
    if (live.length && s.rates.length) {
      const warm = await runStep(s.rates[0]!, Math.min(2, s.duration));
      s.log(`  ${target.label} warm-up ${warm.rate}/s: p99 ${warm.latency.p99} ms, ${warm.delivered}/${warm.expected} delivered`);
      await sleep(300);
    }
    for (const rate of s.rates) {
      if (live.length === 0 || agents.every((a) => !a.connected)) {
        ended = 'no connected clients';
        break;
      }
      let step = await runStep(rate, s.duration);
      if (step.verdict === 'fail') {
        // One stall (GC, autovacuum, a noisy neighbour) should not end the search: a failing rate is run once more.
        steps.push(step);
        s.log(`  ${target.label} ${rate}/s: ${step.why}; running it once more`);
        await sleep(1000);
        step = { ...(await runStep(rate, s.duration)), attempt: 2 };
      }
      steps.push(step);
      const { latency: l, generator: g, verdict } = step;
      s.log(
        `  ${target.label} ${rate}/s: p50 ${l.p50} p99 ${l.p99} max ${l.max} ms, ${step.delivered}/${step.expected} delivered, server CPU ${step.serverCpu.map((c) => `${Math.round(c * 100)}%`).join('+')}, generator CPU ${Math.round(g.cpu * 100)}% loop p99 ${g.loopDelayP99Ms} ms${g.steal ? `, steal ${Math.round(g.steal * 100)}%` : ''} -> ${verdict}${verdict === 'pass' ? '' : ` (${step.why})`}`,
      );
      if (verdict !== 'pass') {
        ended = `${verdict} at ${rate}/s: ${step.why}`;
        generatorBound = verdict === 'invalid';
        break;
      }
      await sleep(300);
    }
  } finally {
    counter?.close();
    lostSockets = [...agents, ...senders.map((x) => x.client)].filter((c) => c.lost).length;
    for (const c of agents) c.close();
    for (const x of senders) x.client.close();
    if (lostSockets) s.log(`  ${target.label}: ${lostSockets} sockets were dropped by the server during the run`);
  }
  const passed = finalSteps(steps).filter((x) => x.verdict === 'pass');
  return { ramp: rampResult, probes, steps, knee: passed.length ? passed[passed.length - 1]!.rate : null, ended, generatorBound, lostSockets, idleCpu, late };
}
