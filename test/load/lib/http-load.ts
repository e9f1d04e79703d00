// HTTP measures with autocannon (closed model: a fixed number of connections, each sending its next request
// when the previous one answered), with the server's CPU and the generator's health alongside.
import autocannon, { type Options as CannonOptions } from 'autocannon';
import type { Child } from './proc.js';
import { GeneratorMonitor, round, serverCpu, sleep, type GeneratorHealth, type GeneratorLimits } from './stats.js';

export interface HttpMeasure {
  /** 2xx answers per second. */
  rps: number;
  ok: number;
  non2xx: number;
  errors: number;
  statusCodes: Record<string, number>;
  p50: number;
  /** From every response's latency (autocannon's histogram has no p95). */
  p95: number;
  p99: number;
  max: number;
  serverCpu: number;
  generator: GeneratorHealth;
}

export async function measureHttp(opts: CannonOptions, server: Child, limits: GeneratorLimits): Promise<HttpMeasure> {
  const before = await server.stats();
  const monitor = new GeneratorMonitor(limits);
  const instance = autocannon({ timeout: 30, ...opts });
  const latencies: number[] = [];
  instance.on('response', (_client, _status, _bytes, ms) => void latencies.push(ms));
  const r = await instance;
  const generator = monitor.stop(r.latency.p99);
  const after = await server.stats();
  const statusCodes = Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([code, v]) => [code, Number(v.count)]));
  return {
    rps: round(r['2xx'] / r.duration, 1),
    ok: r['2xx'],
    non2xx: r.non2xx,
    errors: r.errors,
    statusCodes,
    p50: r.latency.p50,
    p95: percentile(latencies, 0.95),
    p99: r.latency.p99,
    max: r.latency.max,
    serverCpu: serverCpu(before, after),
    generator,
  };
}

/** The q-quantile (nearest rank) of `values` in ms, rounded to 0.01 ms; 0 when empty. */
export function percentile(values: number[], q: number): number {
  if (values.length === 0) return 0;
  const sorted = Float64Array.from(values).sort();
  return round(sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!, 2);
}

/**
 * Waits (at most `timeoutMs`) until the server's CPU falls under 10 %: work queued during a measure (logins waiting
 * for bcrypt, say) must not run into the next measure of the other side.
 */
export async function quiesce(server: Child, timeoutMs = 10_000): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (performance.now() < until) {
    const a = await server.stats();
    await sleep(250);
    if (serverCpu(a, await server.stats()) < 0.1) return;
  }
}

/**
 * Rounds of one measure taken in turns with another side, as one: throughput over the rounds' total time, the mean
 * p50, p95 and CPU, the worst p99 and max, and the generator's worst health.
 */
export function combine(rounds: HttpMeasure[]): HttpMeasure {
  const seconds = rounds.map((r) => (r.rps > 0 ? r.ok / r.rps : 0));
  const total = seconds.reduce((a, b) => a + b, 0);
  const sum = (f: (r: HttpMeasure) => number) => rounds.reduce((a, r) => a + f(r), 0);
  const statusCodes: Record<string, number> = {};
  for (const r of rounds) for (const [code, count] of Object.entries(r.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  const worst = rounds.reduce((w, r) => (r.generator.loopDelayP99Ms > w.generator.loopDelayP99Ms ? r : w), rounds[0]!);
  const invalid = rounds.map((r) => r.generator.invalid).filter(Boolean);
  return {
    rps: total > 0 ? round(sum((r) => r.ok) / total, 1) : 0,
    ok: sum((r) => r.ok),
    non2xx: sum((r) => r.non2xx),
    errors: sum((r) => r.errors),
    statusCodes,
    p50: round(sum((r) => r.p50) / rounds.length, 1),
    p95: round(sum((r) => r.p95) / rounds.length, 2),
    p99: Math.max(...rounds.map((r) => r.p99)),
    max: Math.max(...rounds.map((r) => r.max)),
    serverCpu: round(sum((r) => r.serverCpu) / rounds.length, 3),
    generator: { ...worst.generator, cpu: Math.max(...rounds.map((r) => r.generator.cpu)), invalid: invalid.length ? invalid.join('; ') : null },
  };
}

/** Distinct X-Forwarded-For addresses (TRUST_PROXY=true), so per-IP rate limits never trip in a measure. */
export function forwardedFor(n: number): string {
  return `10.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

/** A one-off JSON request (setup checks). */
export async function requestJson(url: string, init: { method?: string; headers?: Record<string, string>; body?: unknown } = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { 'content-type': 'application/json', ...init.headers },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, body };
}
