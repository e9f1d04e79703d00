// The part of autocannon's API the benchmark uses (the package ships no types).
declare module 'autocannon' {
  export interface RawRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
  }
  export interface RequestSpec extends RawRequest {
    setupRequest?: (req: RawRequest, context: Record<string, unknown>) => RawRequest;
    onResponse?: (status: number, body: string, context: Record<string, unknown>) => void;
  }
  export interface Options {
    url: string;
    connections?: number;
    /** Requests per second over all connections (an open-ish model: each connection waits its turn). */
    overallRate?: number;
    duration?: number;
    amount?: number;
    timeout?: number;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    requests?: RequestSpec[];
  }
  export interface Stat {
    average: number;
    mean: number;
    max: number;
    min: number;
    p50: number;
    p90: number;
    p99: number;
    total?: number;
  }
  export interface Result {
    latency: Stat;
    requests: Stat;
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
  }
  /** The running instance: a promise of the result that also reports each response (latency in ms). */
  export interface Instance extends Promise<Result> {
    on(event: 'response', listener: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void): this;
  }
  function autocannon(opts: Options): Instance;
  export default autocannon;
}
