// Polling with a bounded timeout, for effects that happen after a response (mail delivery, background work).

/** Calls `probe` until it returns something other than undefined/null/false, or fails after `timeoutMs`. */
export async function waitFor<T>(probe: () => T | Promise<T>, opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<NonNullable<Exclude<T, false>>> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const intervalMs = opts.intervalMs ?? 25;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== null && value !== false) return value as NonNullable<Exclude<T, false>>;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${opts.what ?? 'a condition'}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
