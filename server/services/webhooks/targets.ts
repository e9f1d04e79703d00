// How many deliveries one instance sends to one receiver at a time (a KeyedLimit keyed by targetOf): the queue runs
// more deliveries than that, so their database work overlaps the sending, but a receiver never sees more than this
// many requests at once from an instance however many of its deliveries are waiting.

/** The receiver a URL names, as the limit counts it: scheme, host and port. */
export function targetOf(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return url;
  }
}
