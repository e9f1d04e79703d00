// Handshake admission. When an instance's sockets all come back at once (a restart, a network blip), handshakes
// queue for the caller lookup behind one another and behind the syncs of those already back; a handshake that waits
// longer than the client's timeout is work thrown away, and the client's retry adds to the queue. So a handshake
// that would wait longer than the instance answers in a moment is refused at once, with a time to come back spread
// at random over how long the instance needs for everyone refused meanwhile. Under normal load nothing is refused:
// a refusal needs more handshakes waiting at once than `backlog` (the lookup's batches in flight).

export interface AdmissionLimits {
  /** Handshakes that may always wait at once, whatever the recent rate. */
  backlog: number;
  /** How long a handshake should wait at most (ms): more waiting than the recent rate answers in this is refused. */
  maxWaitMs: number;
}

/** Counts over the last WINDOW_MS, in buckets of BUCKET_MS. */
const WINDOW_MS = 2_000;
const BUCKET_MS = 250;
const BUCKETS = WINDOW_MS / BUCKET_MS;

/** A refused client waits at least this, and at most twice the cap (the wait to drain plus the spread). */
const MIN_RETRY_MS = 1_000;
const RETRY_PART_CAP_MS = 15_000;

class RecentCount {
  private readonly counts = new Array<number>(BUCKETS).fill(0);
  private bucket = 0;

  constructor(private readonly now: () => number) {}

  add(): void {
    this.advance();
    this.counts[this.bucket % BUCKETS]!++;
  }

  total(): number {
    this.advance();
    let sum = 0;
    for (const c of this.counts) sum += c;
    return sum;
  }

  private advance(): void {
    const current = Math.floor(this.now() / BUCKET_MS);
    // Buckets the clock moved past are emptied (all of them after a quiet spell longer than the window).
    for (let b = Math.max(this.bucket + 1, current - BUCKETS + 1); b <= current; b++) this.counts[b % BUCKETS] = 0;
    if (current > this.bucket) this.bucket = current;
  }
}

const clamp = (value: number, min: number, max: number) => Math.min(max, Math.max(min, value));

export class HandshakeAdmission {
  private waiting = 0;
  private readonly answered: RecentCount;
  private readonly refused: RecentCount;

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly now: () => number = () => performance.now(),
    private readonly random: () => number = Math.random,
  ) {
    this.answered = new RecentCount(now);
    this.refused = new RecentCount(now);
  }

  /** Handshakes waiting for their caller now. */
  get inProgress(): number {
    return this.waiting;
  }

  /**
   * Lets a handshake in (`leave` must follow once its caller is known) and answers null, or refuses it and answers
   * the milliseconds to wait before trying again.
   */
  enter(): number | null {
    // Handshakes answered per ms lately; before any (a fresh start), as if `backlog` were answered in `maxWaitMs`.
    const answered = this.answered.total();
    const rate = answered > 0 ? answered / WINDOW_MS : this.limits.backlog / this.limits.maxWaitMs;
    // Little's law: with this rate, that many waiting are answered within maxWaitMs.
    if (this.waiting < Math.max(this.limits.backlog, rate * this.limits.maxWaitMs)) {
      this.waiting++;
      return null;
    }
    this.refused.add();
    // Come back once the queue ahead has drained, spread over the time everyone refused lately takes to serve.
    const drain = clamp(this.waiting / rate, MIN_RETRY_MS, RETRY_PART_CAP_MS);
    const spread = clamp(this.refused.total() / rate, MIN_RETRY_MS, RETRY_PART_CAP_MS);
    return Math.round(drain + this.random() * spread);
  }

  /** A handshake let in has its answer (let in or refused for a reason of its own). */
  leave(): void {
    this.waiting--;
    this.answered.add();
  }
}
