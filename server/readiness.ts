// Readiness: each dependency checked with a deadline, so the answer comes within about a second whatever hangs.
import type { Database } from '../db/index.js';
import { DeadlineExceeded, withTimeout, type RedisLink } from './redis.js';

/** Long enough for a loaded but healthy database, short enough for a load balancer's probe. */
export const READINESS_TIMEOUT_MS = 900;

export type DependencyStatus = 'up' | 'down' | 'not_configured';

export interface DependencyCheck {
  status: DependencyStatus;
  /** Round trip of the check, when it answered. */
  latencyMs?: number;
  /** Why it is down (never a connection string or a secret). */
  reason?: string;
}

export interface ReadinessReport {
  ready: boolean;
  /** True once a graceful stop has begun: the instance finishes what it holds and takes nothing new. */
  stopping: boolean;
  checks: { database: DependencyCheck; redis: DependencyCheck };
}

export class Readiness {
  private stopping = false;

  constructor(
    private readonly db: Pick<Database, 'ping'>,
    private readonly redis: RedisLink | null,
    private readonly timeoutMs = READINESS_TIMEOUT_MS,
  ) {}

  get isStopping(): boolean {
    return this.stopping;
  }

  /** From now on readiness answers 503 (also to requests on connections that were already open). */
  beginShutdown(): void {
    this.stopping = true;
  }

  async check(): Promise<ReadinessReport> {
    const [database, redis] = await Promise.all([
      this.probe(() => this.db.ping(), 'database'),
      this.redis ? this.probe(() => this.redis!.ping(this.timeoutMs), 'redis') : Promise.resolve<DependencyCheck>({ status: 'not_configured' }),
    ]);
    const ready = !this.stopping && database.status === 'up' && redis.status !== 'down';
    return { ready, stopping: this.stopping, checks: { database, redis } };
  }

  private async probe(ping: () => Promise<void>, what: string): Promise<DependencyCheck> {
    const started = performance.now();
    try {
      await withTimeout(ping(), this.timeoutMs, what);
      return { status: 'up', latencyMs: Math.round(performance.now() - started) };
    } catch (err) {
      return { status: 'down', reason: reasonOf(err) };
    }
  }
}

/** A short reason that names no host, URL, SQL or driver text: a timeout, an error code, or just "not answering". */
function reasonOf(err: unknown): string {
  if (err instanceof DeadlineExceeded) return err.message;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{2,40}$/.test(code) ? `not answering (${code})` : 'not answering';
}
