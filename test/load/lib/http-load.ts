// HTTP measures with autocannon (closed model: a fixed number of connections, each sending its next request
// when the previous one answered), with the server's CPU and the generator's health alongside.
import autocannon, { type Options as CannonOptions } from 'autocannon';
import type { Child } from './proc.js';
import { GeneratorMonitor, round, serverCpu, type GeneratorHealth, type GeneratorLimits } from './stats.js';

export interface HttpMeasure {
  /** 2xx answers per second. */
  rps: number;
  ok: number;
  non2xx: number;
  errors: number;
  statusCodes: Record<string, number>;
  p50: number;
  p99: number;
  max: number;
  serverCpu: number;
  generator: GeneratorHealth;
}

export async function measureHttp(opts: CannonOptions, server: Child, limits: GeneratorLimits): Promise<HttpMeasure> {
  const before = await server.stats();
  const monitor = new GeneratorMonitor(limits);
  const r = await autocannon({ timeout: 30, ...opts });
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
    p99: r.latency.p99,
    max: r.latency.max,
    serverCpu: serverCpu(before, after),
    generator,
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
