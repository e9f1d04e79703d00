// Who holds a socket right now, per organization: in memory for one instance, in Redis across instances.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { RedisLink } from './redis.js';

export interface Presence {
  /** Counts one more socket; true when the user just came online (their first socket anywhere). */
  connected(orgId: string, userId: string): Promise<boolean>;
  /** Counts one socket less; true when the user just went offline (their last socket anywhere). */
  disconnected(orgId: string, userId: string): Promise<boolean>;
  isOnline(orgId: string, userId: string): Promise<boolean>;
  /** Users of the organization holding at least one socket on a live instance. */
  onlineUsers(orgId: string): Promise<string[]>;
  close(): Promise<void>;
}

export class MemoryPresence implements Presence {
  private readonly counts = new Map<string, Map<string, number>>();

  async connected(orgId: string, userId: string): Promise<boolean> {
    const org = this.counts.get(orgId) ?? new Map<string, number>();
    this.counts.set(orgId, org);
    const n = (org.get(userId) ?? 0) + 1;
    org.set(userId, n);
    return n === 1;
  }

  async disconnected(orgId: string, userId: string): Promise<boolean> {
    const org = this.counts.get(orgId);
    if (!org) return false;
    const n = (org.get(userId) ?? 0) - 1;
    if (n > 0) {
      org.set(userId, n);
      return false;
    }
    org.delete(userId);
    if (org.size === 0) this.counts.delete(orgId);
    return true;
  }

  async isOnline(orgId: string, userId: string): Promise<boolean> {
    return (this.counts.get(orgId)?.get(userId) ?? 0) > 0;
  }

  async onlineUsers(orgId: string): Promise<string[]> {
    return [...(this.counts.get(orgId)?.keys() ?? [])];
  }

  /** This instance's sockets of one user. */
  count(orgId: string, userId: string): number {
    return this.counts.get(orgId)?.get(userId) ?? 0;
  }

  /** Every organization's users with their socket counts on this instance. */
  tallies(): Iterable<[string, Map<string, number>]> {
    return this.counts.entries();
  }

  async close(): Promise<void> {}
}

const HEARTBEAT_MS = 10_000;
const INSTANCE_TTL_SECONDS = 30;

/**
 * Each instance writes its own socket count per user into a hash (field = instance id) and keeps a heartbeat key
 * alive. A crashed instance's counts stop mattering once its heartbeat expires, so presence heals by itself.
 *
 * The count written is this instance's own tally, kept in memory, never an increment: while Redis is unreachable
 * presence answers from that tally (this instance's sockets), and when the link comes back every tally is written
 * again, so a connect or disconnect missed during the outage cannot leave a count wrong for good.
 */
export class RedisPresence implements Presence {
  readonly instanceId = randomUUID();
  private readonly heartbeat: NodeJS.Timeout;
  private readonly local = new MemoryPresence();
  private readonly written = new Map<string, [orgId: string, userId: string]>();
  private readonly redis: Redis;

  constructor(
    private readonly link: RedisLink,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    this.redis = link.main;
    void this.beat();
    this.heartbeat = setInterval(() => void this.beat(), HEARTBEAT_MS);
    this.heartbeat.unref();
    link.on('up', this.resync);
  }

  private beat() {
    return this.redis.set(`presence:instance:${this.instanceId}`, '1', 'EX', INSTANCE_TTL_SECONDS).catch(() => undefined);
  }

  /** Writes every tally of this instance again (after an outage, or a Redis that lost its data). */
  private readonly resync = () => {
    const keys = new Map(this.written);
    for (const [orgId, users] of this.local.tallies()) for (const userId of users.keys()) keys.set(this.userKey(orgId, userId), [orgId, userId]);
    const multi = this.redis.multi().set(`presence:instance:${this.instanceId}`, '1', 'EX', INSTANCE_TTL_SECONDS);
    // Users who left during the outage are written as 0, so they do not stay online in Redis.
    for (const [key, [orgId, userId]] of keys) multi.hset(key, this.instanceId, this.local.count(orgId, userId)).sadd(this.orgKey(orgId), userId);
    multi
      .exec()
      .then(() => {
        for (const [key, [orgId, userId]] of keys) this.noteWritten(key, orgId, userId);
      })
      .catch(this.onError);
  };

  /** Remembers which users this instance has a non-zero count written for (a resync must be able to zero them). */
  private noteWritten(key: string, orgId: string, userId: string): void {
    if (this.local.count(orgId, userId) > 0) this.written.set(key, [orgId, userId]);
    else this.written.delete(key);
  }

  private userKey(orgId: string, userId: string) {
    return `presence:${orgId}:user:${userId}`;
  }

  private orgKey(orgId: string) {
    return `presence:${orgId}:users`;
  }

  /** Sockets of a user on live instances, from one snapshot of the per-instance counts. */
  private async liveTotal(counts: Record<string, string>): Promise<number> {
    const instances = Object.keys(counts).filter((id) => Number(counts[id]) > 0);
    if (instances.length === 0) return 0;
    const alive = await this.redis.mget(instances.map((id) => `presence:instance:${id}`));
    return instances.reduce((sum, id, i) => sum + (alive[i] || id === this.instanceId ? Number(counts[id]) : 0), 0);
  }

  private async liveCount(orgId: string, userId: string): Promise<number> {
    return this.liveTotal(await this.redis.hgetall(this.userKey(orgId, userId)));
  }

  /**
   * Writes this instance's new tally and reads every instance's count in one MULTI, so concurrent connects and
   * disconnects of one user (on any instance) see a consistent order: exactly one sees the first and the last socket.
   * Answers the user's sockets on live instances; without Redis, this instance's own count.
   */
  private async change(orgId: string, userId: string, by: 1 | -1): Promise<number> {
    if (by === 1) await this.local.connected(orgId, userId);
    else await this.local.disconnected(orgId, userId);
    const mine = this.local.count(orgId, userId);
    if (!this.link.isUp) return mine;
    try {
      const key = this.userKey(orgId, userId);
      const multi = this.redis.multi().hset(key, this.instanceId, mine).hgetall(key);
      if (by === 1) multi.sadd(this.orgKey(orgId), userId);
      const results = (await multi.exec()) ?? [];
      this.noteWritten(key, orgId, userId);
      const counts = (results[1]?.[1] ?? {}) as Record<string, string>;
      return await this.liveTotal(counts);
    } catch (err) {
      this.onError(err);
      return mine;
    }
  }

  async connected(orgId: string, userId: string): Promise<boolean> {
    return (await this.change(orgId, userId, 1)) === 1;
  }

  async disconnected(orgId: string, userId: string): Promise<boolean> {
    // Zero counts and set members are left in place: removing them could race a connect that just counted itself.
    return (await this.change(orgId, userId, -1)) === 0;
  }

  async isOnline(orgId: string, userId: string): Promise<boolean> {
    if (this.link.isUp) {
      try {
        return (await this.liveCount(orgId, userId)) > 0;
      } catch (err) {
        this.onError(err);
      }
    }
    return this.local.isOnline(orgId, userId);
  }

  async onlineUsers(orgId: string): Promise<string[]> {
    if (this.link.isUp) {
      try {
        const users = await this.redis.smembers(this.orgKey(orgId));
        const online = await Promise.all(users.map(async (u) => ((await this.liveCount(orgId, u)) > 0 ? u : null)));
        return online.filter((u): u is string => u !== null);
      } catch (err) {
        this.onError(err);
      }
    }
    return this.local.onlineUsers(orgId);
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    this.link.off('up', this.resync);
    await this.redis.del(`presence:instance:${this.instanceId}`).catch(() => undefined);
  }
}
