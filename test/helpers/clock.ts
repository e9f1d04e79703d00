// A controllable "now" for lifetimes and caches: the server runs in the test's process, so moving Date.now moves
// what it (and jsonwebtoken) takes for the time. Timers and the database's clock are untouched.

/** Runs `body` with Date.now answering `now(realNow)`; the real clock is back before this returns, even on failure. */
async function withClock<T>(now: (realNow: () => number) => number, body: () => Promise<T>): Promise<T> {
  const realNow = Date.now;
  Date.now = () => now(realNow);
  try {
    return await body();
  } finally {
    Date.now = realNow;
  }
}

/** Runs `body` with Date.now moved `seconds` ahead. */
export function withClockAhead<T>(seconds: number, body: () => Promise<T>): Promise<T> {
  return withClock((realNow) => realNow() + seconds * 1000, body);
}

/** Runs `body` with Date.now standing still at `at` (milliseconds since the epoch). */
export function withClockAt<T>(at: number, body: () => Promise<T>): Promise<T> {
  return withClock(() => at, body);
}
