// Lookups many callers make at the same moment (the handshakes of a reconnect storm, a burst of requests) are gathered
// for one event-loop turn and answered by one statement: one round trip and one plan for the lot instead of one each.

interface Waiting<In, Out> {
  input: In;
  resolve: (out: Out | undefined) => void;
  reject: (err: unknown) => void;
}

export interface BatchLimits {
  /** Inputs per statement. */
  maxBatch: number;
  /** Statements in flight; later callers gather meanwhile, so a busy database gets fewer, larger batches. */
  concurrency: number;
}

/**
 * `run` answers a batch with one result per input, in input order (undefined: not found). A failed batch fails
 * each of its callers with that error, as their own query would have.
 */
export class Batched<In, Out> {
  private queue: Waiting<In, Out>[] = [];
  private scheduled = false;
  private inFlight = 0;

  constructor(
    private readonly run: (inputs: In[]) => Promise<(Out | undefined)[]>,
    private readonly limits: BatchLimits,
  ) {}

  load(input: In): Promise<Out | undefined> {
    return new Promise((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.queue.length === 0 || this.inFlight >= this.limits.concurrency) return;
    this.scheduled = true;
    // After this turn's I/O callbacks: every handshake that arrived with this one joins its batch.
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.queue.length > 0 && this.inFlight < this.limits.concurrency) {
      const batch = this.queue.splice(0, this.limits.maxBatch);
      this.inFlight++;
      Promise.resolve()
        .then(() => this.run(batch.map((w) => w.input)))
        .then(
          (outs) => batch.forEach((w, i) => w.resolve(outs[i])),
          (err: unknown) => batch.forEach((w) => w.reject(err)),
        )
        .finally(() => {
          this.inFlight--;
          this.schedule();
        });
    }
  }
}
