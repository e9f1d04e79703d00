// Calls made in the same event-loop turn, run as one batch: many concurrent jobs, one statement. Each caller gets
// its own result (or the batch's error).

interface Waiting<I, O> {
  input: I;
  resolve: (output: O) => void;
  reject: (err: unknown) => void;
}

/**
 * Wraps `run` (outputs in the order of its inputs) so that the calls of one turn share a single `run` of at most
 * `max` inputs. The batch starts on the next turn (setImmediate), after the current turn's I/O callbacks.
 */
export function tickBatch<I, O>(run: (inputs: I[]) => Promise<O[]>, max = 500): (input: I) => Promise<O> {
  let waiting: Waiting<I, O>[] = [];
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    const all = waiting;
    waiting = [];
    for (let i = 0; i < all.length; i += max) {
      const batch = all.slice(i, i + max);
      Promise.resolve().then(() => run(batch.map((w) => w.input))).then(
        (outputs) => batch.forEach((w, n) => w.resolve(outputs[n]!)),
        (err: unknown) => batch.forEach((w) => w.reject(err)),
      );
    }
  };
  return (input) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ input, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });
}
