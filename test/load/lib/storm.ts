// Clients that come back by themselves: a lost connection is retried with exponential backoff and jitter, the way
// socket.io-client does it (reconnectionDelay, reconnectionDelayMax, randomizationFactor), then `onBack` runs (the
// scenario syncs from the last seq and re-sends what was never acknowledged).
import type { EioClient } from './eio.js';
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

export function backoffDelay(b: Backoff, attempt: number): number {
  const base = Math.min(b.maxMs, b.firstMs * 2 ** Math.min(attempt, 20));
  return Math.min(b.maxMs, Math.max(0, base + base * b.jitter * (Math.random() * 2 - 1)));
}

export class Storm {
  readonly handshake = new Histogram();
  /** Attempts that failed, by reason (ECONNREFUSED while the server is away, timeouts, refusals). */
  readonly failures: Record<string, number> = {};
  attempts = 0;
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
    private readonly timeoutMs = 20_000,
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

  private retry(client: EioClient, attempt: number): void {
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
        (err: Error) => {
          this.failures[err.message] = (this.failures[err.message] ?? 0) + 1;
          this.retry(client, attempt + 1);
        },
      );
    }, backoffDelay(this.backoff, attempt));
  }
}
