// How many deliveries one instance sends to one receiver at a time. The queue runs more deliveries than that, so
// their database work overlaps the sending, but a receiver never sees more than this many requests at once from an
// instance however many of its deliveries are waiting.

export class TargetLimit {
  private readonly targets = new Map<string, { active: number; waiting: (() => void)[] }>();

  constructor(readonly perTarget: number) {}

  /** Runs `send` once fewer than `perTarget` sends to `target` are running; waiting sends start in arrival order. */
  async run<T>(target: string, send: () => Promise<T>): Promise<T> {
    let slot = this.targets.get(target);
    if (!slot) {
      slot = { active: 0, waiting: [] };
      this.targets.set(target, slot);
    }
    if (slot.active < this.perTarget) slot.active++;
    else await new Promise<void>((resolve) => slot!.waiting.push(resolve));
    try {
      return await send();
    } finally {
      // A finished send hands its place to the next waiting one; the last one out forgets the target.
      const next = slot.waiting.shift();
      if (next) next();
      else if (--slot.active === 0) this.targets.delete(target);
    }
  }

  /** Sends running or waiting for `target` (for tests and metrics). */
  load(target: string): number {
    const slot = this.targets.get(target);
    return slot ? slot.active + slot.waiting.length : 0;
  }
}

/** The receiver a URL names, as the limit counts it: scheme, host and port. */
export function targetOf(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return url;
  }
}
