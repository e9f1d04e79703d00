// Latency histograms, the generator's own health (event-loop delay, CPU) and server CPU/memory deltas.
import { readFileSync } from 'node:fs';
import { createHistogram, monitorEventLoopDelay, type IntervalHistogram, type RecordableHistogram } from 'node:perf_hooks';
import type { ServerStats } from './proc.js';

export interface LatencySummary {
  count: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

/** Milliseconds in, recorded with microsecond resolution (node's HDR histogram). */
export class Histogram {
  private readonly h: RecordableHistogram = createHistogram();

  record(ms: number): void {
    this.h.record(Math.max(1, Math.round(ms * 1000)));
  }

  summary(): LatencySummary {
    const count = this.h.count;
    if (count === 0) return { count: 0, p50: 0, p99: 0, max: 0, mean: 0 };
    const ms = (us: number) => Math.round(us) / 1000;
    return { count, p50: ms(this.h.percentile(50)), p99: ms(this.h.percentile(99)), max: ms(this.h.max), mean: ms(this.h.mean) };
  }
}

export interface GeneratorHealth {
  /** Event-loop delay of the generator process while measuring (ms). */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  /** CPU time of the generator over wall time (1 = one core saturated). */
  cpu: number;
  /** Share of the machine's CPU time stolen by the hypervisor meanwhile (null where /proc/stat is missing). */
  steal: number | null;
  /** Why the measure says more about the generator than about the server; null when it is valid. */
  invalid: string | null;
}

/** Cumulative CPU jiffies of the whole machine: steal and total (Linux /proc/stat), or null. */
export function cpuTimes(): { steal: number; total: number } | null {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
    return { steal: fields[7] ?? 0, total: fields.reduce((a, b) => a + b, 0) };
  } catch {
    return null;
  }
}

/** Stolen share of CPU time between two cpuTimes() readings. */
export function stealBetween(a: ReturnType<typeof cpuTimes>, b: ReturnType<typeof cpuTimes>): number | null {
  if (!a || !b || b.total <= a.total) return null;
  return round((b.steal - a.steal) / (b.total - a.total), 3);
}

export interface GeneratorLimits {
  maxLoopDelayP99Ms: number;
  maxCpu: number;
}

export const DEFAULT_LIMITS: GeneratorLimits = { maxLoopDelayP99Ms: 20, maxCpu: 0.9 };

/** Watches the generator (this process) while a measure runs. */
export class GeneratorMonitor {
  private readonly loop: IntervalHistogram = monitorEventLoopDelay({ resolution: 5 });
  private cpu0 = process.cpuUsage();
  private t0 = performance.now();
  private times0 = cpuTimes();

  constructor(private readonly limits: GeneratorLimits = DEFAULT_LIMITS) {
    this.loop.enable();
  }

  /**
   * Ends the watch. A measure is INVALID when the generator's CPU saturates, or when its loop delay p99 exceeds the
   * limit or a quarter of `measuredP99Ms` (the latency being measured, which that delay inflates).
   */
  stop(measuredP99Ms = 0): GeneratorHealth {
    this.loop.disable();
    const cpu = process.cpuUsage(this.cpu0);
    const wallMicros = (performance.now() - this.t0) * 1000;
    const share = wallMicros > 0 ? (cpu.user + cpu.system) / wallMicros : 0;
    // Delays are measured beyond the 5 ms sampling interval.
    const p99 = this.loop.count > 0 ? Math.max(0, this.loop.percentile(99) / 1e6 - 5) : 0;
    const max = this.loop.count > 0 ? Math.max(0, this.loop.max / 1e6 - 5) : 0;
    const reasons: string[] = [];
    const maxLoop = Math.max(this.limits.maxLoopDelayP99Ms, measuredP99Ms / 4);
    if (p99 > maxLoop) reasons.push(`generator loop delay p99 ${p99.toFixed(1)} ms > ${maxLoop.toFixed(0)} ms`);
    if (share > this.limits.maxCpu) reasons.push(`generator CPU ${(share * 100).toFixed(0)}% > ${(this.limits.maxCpu * 100).toFixed(0)}%`);
    return { loopDelayP99Ms: round(p99, 2), loopDelayMaxMs: round(max, 2), cpu: round(share, 3), steal: stealBetween(this.times0, cpuTimes()), invalid: reasons.length ? reasons.join('; ') : null };
  }
}

/** CPU share of one server process between two stats snapshots (1 = one core busy). */
export function serverCpu(a: ServerStats, b: ServerStats): number {
  const wall = (b.at - a.at) * 1000;
  return wall > 0 ? round((b.cpuMicros - a.cpuMicros) / wall, 3) : 0;
}

export function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Bounded wait: resolves when `done()` holds or after `timeoutMs`, polling every `everyMs`. */
export async function waitUntil(done: () => boolean, timeoutMs: number, everyMs = 20): Promise<boolean> {
  const until = performance.now() + timeoutMs;
  while (!done()) {
    if (performance.now() >= until) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return true;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
