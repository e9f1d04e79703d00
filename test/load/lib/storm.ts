// Clients that come back by themselves: a lost connection is retried with exponential backoff and jitter, the way
// socket.io-client does it (reconnectionDelay, reconnectionDelayMax, randomizationFactor), a refusal that names a
// time (service_unavailable, rate_limited: `retryAfter`) after that time and a jitter, then `onBack` runs (the
// scenario syncs from the last seq and re-sends what was never acknowledged).
import type { ConnectError, EioClient } from './eio.js';
import { Histogram } from './stats.js';

export interface Backoff {
  /** First delay (socket.io-client reconnectionDelay). */
  firstMs: number;
  /** Ceiling (reconnectionDelayMax). */
  maxMs: number;
  /** Each delay is moved by up to this share either way (randomizationFactor), so clients do not come back in step. */
  jitter: number;
}

/** socket.io-client's defaults, which the README tells widget and agent clients to keep. */
export const CLIENT_BACKOFF: Backoff = { firstMs: 1000, maxMs: 5000, jitter: 0.5 };

/** socket.io-client's `timeout` (20 s): how long a client waits for a handshake before giving up on it. */
export const STORM_TIMEOUT_MS = 20_000;

export function backoffDelay(b: Backoff, attempt: number): number {
  const base = Math.min(b.maxMs, b.firstMs * 2 ** Math.min(attempt, 20));
  return Math.min(b.maxMs, Math.max(0, base + base * b.jitter * (Math.random() * 2 - 1)));
}

/**
 * After a refusal that says when to come back: that long, plus up to the jitter's share of it more (never less: the
 * server already spread its answers), so that clients refused in the same instant do not return in the same one.
 */
export function refusalDelay(b: Backoff, retryAfterMs: number): number {
  return retryAfterMs + retryAfterMs * b.jitter * Math.random();
}

export class Storm {
  readonly handshake = new Histogram();
  /** Attempts that failed, by reason (ECONNREFUSED while the server is away, timeouts, refusals). */
  readonly failures: Record<string, number> = {};
  attempts = 0;
  /** The waits the server asked for in its refusals (ms, summed). */
  refusedWaitMs = 0;
  /** Clients lost and not back yet. */
  down = 0;
  /** Clients that were lost at least once. */
  lostEver = 0;
  lastBackAt = 0;
  private stopped = false;
  private readonly seen = new WeakSet<EioClient>();

  constructor(
    private readonly backoff: Backoff,
    private readonly onBack: (client: EioClient) => void,
    /** socket.io-client's `timeout`: a shorter one gives up on handshakes the server is still working on. */
    private readonly timeoutMs = STORM_TIMEOUT_MS,
  ) {}

  watch(client: EioClient): void {
    client.onLost = () => {
      if (this.stopped) return;
      this.down++;
      if (!this.seen.has(client)) {
        this.seen.add(client);
        this.lostEver++;
      }
      this.retry(client, 0);
    };
  }

  /** No more reconnects (end of the measure). */
  stop(): void {
    this.stopped = true;
  }

  /** A refusal with a time to come back is honoured (plus a jitter of the client's own); any other failure backs off. */
  private retry(client: EioClient, attempt: number, delayMs = backoffDelay(this.backoff, attempt)): void {
    setTimeout(() => {
      if (this.stopped) return;
      this.attempts++;
      const t0 = performance.now();
      client.connect(this.timeoutMs).then(
        () => {
          this.handshake.record(performance.now() - t0);
          this.down--;
          this.lastBackAt = performance.now();
          this.onBack(client);
        },
        (err: ConnectError) => {
          this.failures[err.message] = (this.failures[err.message] ?? 0) + 1;
          if (err.retryAfterMs === undefined) return this.retry(client, attempt + 1);
          this.refusedWaitMs += err.retryAfterMs;
          this.retry(client, attempt, refusalDelay(this.backoff, err.retryAfterMs));
        },
      );
    }, delayMs);
  }
}
