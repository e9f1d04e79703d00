// Who holds a socket right now, per organization: in memory for one instance, in Redis across instances.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

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
    const n = (org?.get(userId) ?? 0) - 1;
    if (!org || n > 0) {
      org?.set(userId, Math.max(n, 0));
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

  async close(): Promise<void> {}
}

const HEARTBEAT_MS = 10_000;
const INSTANCE_TTL_SECONDS = 30;

/**
 * Each instance counts its own sockets in a hash per user (field = instance id) and keeps a heartbeat key alive.
 * A crashed instance's counts stop mattering once its heartbeat expires, so presence heals by itself.
 */
export class RedisPresence implements Presence {
  readonly instanceId = randomUUID();
  private readonly heartbeat: NodeJS.Timeout;

  constructor(private readonly redis: Redis) {
    void this.beat();
    this.heartbeat = setInterval(() => void this.beat(), HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  private beat() {
    return this.redis.set(`presence:instance:${this.instanceId}`, '1', 'EX', INSTANCE_TTL_SECONDS).catch(() => undefined);
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
    return instances.reduce((sum, id, i) => sum + (alive[i] ? Number(counts[id]) : 0), 0);
  }

  private async liveCount(orgId: string, userId: string): Promise<number> {
    return this.liveTotal(await this.redis.hgetall(this.userKey(orgId, userId)));
  }

  /**
   * Changes this instance's count and reads every instance's count in one MULTI, so concurrent connects and
   * disconnects of one user (on any instance) see a consistent order: exactly one sees the first and the last socket.
   */
  private async change(orgId: string, userId: string, by: 1 | -1): Promise<number> {
    const key = this.userKey(orgId, userId);
    const multi = this.redis.multi().hincrby(key, this.instanceId, by).hgetall(key);
    if (by === 1) multi.sadd(this.orgKey(orgId), userId);
    const results = (await multi.exec()) ?? [];
    const counts = (results[1]?.[1] ?? {}) as Record<string, string>;
    return this.liveTotal(counts);
  }

  async connected(orgId: string, userId: string): Promise<boolean> {
    return (await this.change(orgId, userId, 1)) === 1;
  }

  async disconnected(orgId: string, userId: string): Promise<boolean> {
    // Zero counts and set members are left in place: removing them could race a connect that just counted itself.
    return (await this.change(orgId, userId, -1)) === 0;
  }

  async isOnline(orgId: string, userId: string): Promise<boolean> {
    return (await this.liveCount(orgId, userId)) > 0;
  }

  async onlineUsers(orgId: string): Promise<string[]> {
    const users = await this.redis.smembers(this.orgKey(orgId));
    const online = await Promise.all(users.map(async (u) => ((await this.liveCount(orgId, u)) > 0 ? u : null)));
    return online.filter((u): u is string => u !== null);
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    await this.redis.del(`presence:instance:${this.instanceId}`).catch(() => undefined);
  }
}
