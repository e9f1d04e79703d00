// At most N tasks at once per key (a webhook receiver, a lane of slow work); the others wait and start in arrival
// order. A key with nothing running or waiting is forgotten.

export class KeyedLimit {
  private readonly keys = new Map<string, { active: number; waiting: (() => void)[] }>();

  constructor(readonly perKey: number) {}

  /** Runs `task` once fewer than `perKey` tasks of `key` are running; waiting ones start in arrival order. */
  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    let slot = this.keys.get(key);
    if (!slot) {
      slot = { active: 0, waiting: [] };
      this.keys.set(key, slot);
    }
    if (slot.active < this.perKey) slot.active++;
    else await new Promise<void>((resolve) => slot!.waiting.push(resolve));
    try {
      return await task();
    } finally {
      // A finished task hands its place to the next waiting one; the last one out forgets the key.
      const next = slot.waiting.shift();
      if (next) next();
      else if (--slot.active === 0) this.keys.delete(key);
    }
  }

  /** Tasks running or waiting for `key` (for tests and metrics). */
  load(key: string): number {
    const slot = this.keys.get(key);
    return slot ? slot.active + slot.waiting.length : 0;
  }
}
