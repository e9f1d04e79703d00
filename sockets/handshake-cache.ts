// Agents' handshakes answered from memory for a moment: a reconnecting agent (a network blip, a proxy restart, a
// second tab) presents the same access token again, and the session, user and membership read seconds ago still
// hold unless an event said otherwise. Every event that could make a cached answer wrong drops it at once: on this
// instance through the domain events, on the others over Redis. While Redis is configured but unreachable, no
// instance can hear the others' revocations, so the cache is emptied and not used until the link is back.
import type { OperatorActor } from '../server/auth/actor.js';
import type { DomainEventBus } from '../server/events.js';
import type { Logger } from '../server/logger.js';
import type { RedisLink } from '../server/redis.js';

/** How long a handshake's lookup answers later handshakes with the same token. */
export const HANDSHAKE_CACHE_TTL_MS = 10_000;
const MAX_ENTRIES = 50_000;
const CHANNEL = 'handshake-cache:drop';

/** What a revocation drops, as it travels between instances. */
type Drop =
  | { sessions: string[] }
  | { org: string; user: string }
  | { org: string }
  | { org: string; user: string; availability: string };

interface Entry {
  actor: OperatorActor;
  at: number;
}

export class HandshakeCache {
  private readonly entries = new Map<string, Entry>();
  private readonly off: (() => void)[] = [];
  private readonly publisher;
  private readonly subscriber;

  constructor(
    events: DomainEventBus,
    private readonly redis: RedisLink | null,
    private readonly logger: Logger,
  ) {
    this.publisher = redis?.main ?? null;
    this.subscriber = redis?.client('handshake-cache-sub', 'subscriber') ?? null;
    this.off.push(
      events.on('session.revoked', ({ sessionIds }) => this.drop({ sessions: sessionIds }, true)),
      events.on('membership.changed', ({ organizationId, userId }) => userId && this.drop({ org: organizationId, user: userId }, true)),
      events.on('organization.deleted', ({ organizationId }) => this.drop({ org: organizationId }, true)),
      // A chosen availability (busy, away) is announced when the agent comes online: a cached one must follow it.
      events.on('presence.changed', ({ organizationId, userId, status }) => {
        if (status !== 'offline') this.drop({ org: organizationId, user: userId, availability: status }, true);
      }),
    );
    if (redis && this.subscriber) {
      this.subscriber.on('message', (channel: string, raw: string) => {
        if (channel !== CHANNEL) return;
        try {
          this.drop(JSON.parse(raw) as Drop, false);
        } catch (err) {
          this.logger.warn({ err }, 'unreadable handshake cache message');
        }
      });
      void this.subscriber.subscribe(CHANNEL).catch(() => undefined);
      // Revocations published while the link was down are lost: nothing cached before or during an outage is kept.
      const clear = () => this.entries.clear();
      redis.on('down', clear);
      redis.on('up', clear);
      this.off.push(() => redis.off('down', clear), () => redis.off('up', clear));
    }
  }

  /** Usable only while every instance's revocations can reach this one. */
  private get usable(): boolean {
    return !this.redis || this.redis.isUp;
  }

  get(token: string): OperatorActor | undefined {
    const entry = this.entries.get(token);
    if (!entry) return undefined;
    const now = Date.now();
    if (!this.usable || now - entry.at > HANDSHAKE_CACHE_TTL_MS || entry.actor.tokenExpiresAt * 1000 <= now) {
      this.entries.delete(token);
      return undefined;
    }
    return entry.actor;
  }

  /** Keeps a person's actor (keys have their own revocation path and are not cached). */
  set(token: string, actor: OperatorActor): void {
    if (actor.apiKey || !this.usable) return;
    const now = Date.now();
    if (this.entries.size >= MAX_ENTRIES) {
      for (const [key, entry] of this.entries) if (now - entry.at > HANDSHAKE_CACHE_TTL_MS) this.entries.delete(key);
      // Still full of live entries: the oldest go (a Map iterates in insertion order).
      for (const key of this.entries.keys()) {
        if (this.entries.size < MAX_ENTRIES) break;
        this.entries.delete(key);
      }
    }
    this.entries.set(token, { actor, at: now });
  }

  private drop(what: Drop, local: boolean): void {
    if (local && this.publisher && this.redis?.isUp) void this.publisher.publish(CHANNEL, JSON.stringify(what)).catch(() => undefined);
    if (this.entries.size === 0) return;
    const sessions = 'sessions' in what ? new Set(what.sessions) : null;
    for (const [token, { actor, at }] of this.entries) {
      if (sessions) {
        if (sessions.has(actor.sessionId)) this.entries.delete(token);
        continue;
      }
      if (!('org' in what) || actor.orgId !== what.org) continue;
      if ('user' in what && actor.userId !== what.user) continue;
      if ('availability' in what) {
        // The same answer with the new availability; sockets holding the old actor object keep theirs.
        if (actor.membership && actor.membership.availability !== what.availability) {
          this.entries.set(token, { at, actor: { ...actor, membership: { ...actor.membership, availability: what.availability as typeof actor.membership.availability } } });
        }
        continue;
      }
      this.entries.delete(token);
    }
  }

  close(): void {
    for (const off of this.off) off();
    this.entries.clear();
  }
}
