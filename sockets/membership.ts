// The "still an active member?" check of agent socket events, shared by every socket of a user on this instance.
import type { Models } from '../db/index.js';
import type { Membership } from '../db/models/Membership.js';
import { assertActiveMember } from '../server/policies/index.js';
import type { DomainEventBus } from '../server/events.js';

/**
 * A reload is shared for a moment by all events of that agent, instead of one query per event. Staleness is
 * bounded twice over: the entry expires after TTL_MS, and suspension or removal disconnects the agent's sockets
 * on every instance at once (and drops the entry here at once).
 */
const TTL_MS = 2_000;

export class MembershipCheck {
  private readonly entries = new Map<string, { at: number; membership: Promise<Membership | undefined> }>();

  constructor(
    private readonly models: Models,
    events: DomainEventBus,
  ) {
    events.on('membership.changed', ({ organizationId, userId }) => {
      if (userId) this.entries.delete(`${organizationId}:${userId}`);
    });
  }

  async active(orgId: string, userId: string): Promise<Membership> {
    const key = `${orgId}:${userId}`;
    const now = Date.now();
    const cached = this.entries.get(key);
    let pending = cached && now - cached.at <= TTL_MS ? cached.membership : null;
    if (!pending) {
      const loading: Promise<Membership | undefined> = Promise.resolve(this.models.Membership.forOrg(orgId).findOne({ userId }));
      this.entries.set(key, { at: now, membership: loading });
      loading.catch(() => this.entries.delete(key));
      if (this.entries.size > 10_000) this.sweep(now);
      pending = loading;
    }
    const membership = await pending;
    assertActiveMember(membership, 'Your membership is not active');
    return membership;
  }

  private sweep(now: number): void {
    for (const [key, entry] of this.entries) if (now - entry.at > TTL_MS) this.entries.delete(key);
  }
}
