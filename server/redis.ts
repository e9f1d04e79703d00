// Redis connections (ioredis), only when REDIS_URL is set, and one view of whether Redis is reachable.
//
// Redis carries shared rate limits, presence and Socket.IO fan-out, none of which may take an instance down: every
// client retries forever in the background, commands fail fast while the link is down (callers fall back to what
// this instance knows), and the outage is logged once, naming REDIS_URL, with a second line when it is over.
import { EventEmitter } from 'node:events';
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from './logger.js';

/** Reconnect backoff: quick at first, then every two seconds for as long as it takes. */
const retryStrategy = (times: number) => Math.min(100 * times, 2_000);

/** How a client behaves while Redis is away. */
export type RedisRole =
  /** Commands fail at once (callers fall back); the rate limiter and presence use this one. */
  | 'command'
  /** Publishes fail at once and are dropped: local emits still reach local sockets. */
  | 'publisher'
  /** Subscriptions wait for the link and are renewed after every reconnect. */
  | 'subscriber';

const ROLE_OPTIONS: Record<RedisRole, RedisOptions> = {
  command: { enableOfflineQueue: false, maxRetriesPerRequest: 1 },
  // The sharded Socket.IO adapter delivers to local sockets once its publish is answered: a Redis that hangs
  // without closing the connection must not hold local emits for longer than this.
  publisher: { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 1_000 },
  subscriber: { enableOfflineQueue: true, maxRetriesPerRequest: null, autoResubscribe: true },
};

/** REDIS_URL without its password, for log lines. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'redis://(unparsable)';
  }
}

/**
 * All Redis clients of one process. `up` is true while every client is connected; `down` and `up` events fire on
 * each change, so fallbacks and resyncs can follow the link rather than guess from errors.
 */
export class RedisLink extends EventEmitter<{ up: []; down: [] }> {
  readonly main: Redis;
  private readonly clients = new Set<Redis>();
  private state: 'connecting' | 'up' | 'down' = 'connecting';
  private closing = false;

  constructor(
    private readonly url: string,
    private readonly logger: Logger,
  ) {
    super();
    this.main = this.client('main', 'command');
    // Said once at start when Redis is not there yet, rather than after the first failed command.
    this.main.once('error', () => this.markDown());
  }

  get isUp(): boolean {
    return this.state === 'up';
  }

  /** A new client sharing this link's URL and outage tracking. */
  client(name: string, role: RedisRole): Redis {
    const client = new Redis(this.url, { ...ROLE_OPTIONS[role], retryStrategy, connectionName: name, lazyConnect: false });
    this.clients.add(client);
    client.on('error', (err: Error) => {
      this.logger.debug({ err: err.message, redis: name }, 'redis client error');
      this.markDown();
    });
    client.on('close', () => this.markDown());
    client.on('ready', () => this.markUpIfAll());
    if (role !== 'command') {
      // The Socket.IO adapter publishes and (un)subscribes without handling a rejection; a dropped cross-instance
      // emit is what an outage means (clients catch up with `sync`), never a reason for the process to die.
      for (const method of ['publish', 'subscribe', 'psubscribe', 'unsubscribe', 'punsubscribe', 'spublish', 'ssubscribe', 'sunsubscribe'] as const) {
        const original = (client[method] as (...args: unknown[]) => Promise<unknown>).bind(client);
        (client as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
          const sent = original(...args);
          sent.catch((err: Error) => this.logger.debug({ err: err.message, redis: name, command: method }, 'redis command dropped while the link is down'));
          return sent;
        };
      }
    }
    return client;
  }

  private markDown(): void {
    if (this.closing || this.state === 'down') return;
    const wasUp = this.state === 'up';
    this.state = 'down';
    this.logger.warn(
      { variable: 'REDIS_URL', url: redactedUrl(this.url) },
      wasUp
        ? 'Redis (REDIS_URL) is unreachable: serving on with per-instance rate limits, presence and fan-out until it is back'
        : 'Redis (REDIS_URL) is not reachable yet: serving with per-instance rate limits, presence and fan-out; connecting in the background',
    );
    this.emit('down');
  }

  private markUpIfAll(): void {
    if (this.closing || this.state === 'up') return;
    for (const client of this.clients) if (client.status !== 'ready') return;
    const wasDown = this.state === 'down';
    this.state = 'up';
    if (wasDown) this.logger.info({ variable: 'REDIS_URL', url: redactedUrl(this.url) }, 'Redis (REDIS_URL) is reachable again: shared rate limits, presence and fan-out resumed');
    this.emit('up');
  }

  /** Answers within `timeoutMs`: a PING round trip on the main client. */
  async ping(timeoutMs: number): Promise<void> {
    if (this.main.status !== 'ready') throw Object.assign(new Error('redis is not connected'), { code: 'NOT_CONNECTED' });
    await withTimeout(this.main.ping(), timeoutMs, 'redis ping');
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all([...this.clients].map((c) => (c.status === 'ready' ? c.quit().catch(() => c.disconnect()) : Promise.resolve(c.disconnect()))));
  }
}

export class DeadlineExceeded extends Error {}

/** Rejects when `promise` has not settled within `ms`; the promise itself is left to finish (or fail) unobserved. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceeded(`${what} did not answer within ${ms} ms`)), ms);
  });
  promise.catch(() => undefined);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
