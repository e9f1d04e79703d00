// Calls made in the same event-loop turn, run as one batch: many concurrent jobs, one statement. Each caller gets
// its own result (or the batch's error).

interface Waiting<I, O> {
  input: I;
  resolve: (output: O) => void;
  reject: (err: unknown) => void;
}

export interface BatchOptions {
  /** Inputs per `run` at most (default 500). */
  max?: number;
  /**
   * Batches running at once (default: no bound). With a bound, calls made while that many run wait for one to end
   * and then go together: under load each statement carries more rows instead of more statements queueing.
   */
  inFlight?: number;
}

/**
 * Wraps `run` (outputs in the order of its inputs) so that the calls of one turn share a single `run` of at most
 * `max` inputs. The batch starts on the next turn (setImmediate), after the current turn's I/O callbacks.
 */
export function tickBatch<I, O>(run: (inputs: I[]) => Promise<O[]>, options: BatchOptions = {}): (input: I) => Promise<O> {
  const max = options.max ?? 500;
  const inFlight = options.inFlight ?? Infinity;
  let waiting: Waiting<I, O>[] = [];
  let scheduled = false;
  let running = 0;
  const flush = () => {
    scheduled = false;
    while (waiting.length > 0 && running < inFlight) {
      const batch = waiting.slice(0, max);
      waiting = waiting.slice(max);
      running++;
      Promise.resolve()
        .then(() => run(batch.map((w) => w.input)))
        .then(
          (outputs) => batch.forEach((w, n) => w.resolve(outputs[n]!)),
          (err: unknown) => batch.forEach((w) => w.reject(err)),
        )
        .finally(() => {
          running--;
          // What gathered meanwhile goes now, as one batch.
          if (waiting.length > 0) schedule();
        });
    }
  };
  const schedule = () => {
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  return (input) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ input, resolve, reject });
      schedule();
    });
}
