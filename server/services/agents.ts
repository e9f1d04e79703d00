// An agent's own profile, chosen availability and workload figures inside the active organization.
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { Availability, Membership } from '../../db/models/Membership.js';
import type { User } from '../../db/models/User.js';
import type { DomainEventBus } from '../events.js';
import { NotFound } from '../errors.js';
import type { Presence } from '../presence.js';

export interface AgentProfile {
  user: User;
  membership: Membership;
  online: boolean;
}

export class AgentService {
  constructor(private readonly deps: { models: Models; knex: Knex; events: DomainEventBus; presence: Presence }) {}

  private get models() {
    return this.deps.models;
  }

  /** What others see: offline without a socket anywhere, else the availability the agent chose. */
  static effectiveStatus(online: boolean, availability: Availability): Availability {
    return online ? availability : 'offline';
  }

  async profile(orgId: string, userId: string): Promise<AgentProfile> {
    const [user, membership, online] = await Promise.all([
      this.models.User.query().findById(userId),
      this.models.Membership.forOrg(orgId).findOne({ userId }),
      this.deps.presence.isOnline(orgId, userId),
    ]);
    if (!user || !membership) throw new NotFound('Agent');
    return { user, membership, online };
  }

  async updateProfile(orgId: string, userId: string, input: { name?: string; avatarUrl?: string | null; signature?: string | null; maxOpenConversations?: number }): Promise<AgentProfile> {
    await this.deps.knex.transaction(async (trx) => {
      const userPatch: Partial<User> = {};
      if (input.name !== undefined) userPatch.name = input.name.trim();
      if (input.avatarUrl !== undefined) userPatch.avatarUrl = input.avatarUrl;
      if (Object.keys(userPatch).length) await this.models.User.query(trx).patch(userPatch).where('id', userId);
      const memberPatch: Partial<Membership> = {};
      if (input.signature !== undefined) memberPatch.signature = input.signature;
      if (input.maxOpenConversations !== undefined) memberPatch.maxOpenConversations = input.maxOpenConversations;
      if (Object.keys(memberPatch).length) await this.models.Membership.forOrg(orgId, trx).where({ userId }).patch(memberPatch);
    });
    return this.profile(orgId, userId);
  }

  /** Stores the chosen availability and tells the organization's agents the resulting status. */
  async setStatus(orgId: string, userId: string, availability: Availability): Promise<Availability> {
    await this.models.Membership.forOrg(orgId).where({ userId }).patch({ availability });
    const status = AgentService.effectiveStatus(await this.deps.presence.isOnline(orgId, userId), availability);
    this.deps.events.publish('presence.changed', { organizationId: orgId, userId, status, availability });
    return status;
  }

  async stats(orgId: string, userId: string) {
    const row = (await this.models.Conversation.forOrg(orgId)
      .where('assignedTo', userId)
      .select(
        this.deps.knex.raw(`count(*) filter (where status in ('open', 'pending'))::int as open_conversations`),
        this.deps.knex.raw(`count(*) filter (where status = 'resolved')::int as resolved_conversations`),
        this.deps.knex.raw(`count(*) filter (where status = 'closed')::int as closed_conversations`),
        this.deps.knex.raw(`avg(extract(epoch from (first_reply_at - created_at))) filter (where first_reply_at is not null) as avg_first_response`),
        this.deps.knex.raw(`avg(extract(epoch from (resolved_at - created_at))) filter (where resolved_at is not null) as avg_resolution`),
      )
      .first()) as unknown as Record<string, number | string | null>;
    // One aggregate row, every column present: counts are never null, an average is null without a sample.
    const seconds = (v: unknown) => (v === null ? null : Math.round(Number(v)));
    return {
      openConversations: Number(row.openConversations),
      resolvedConversations: Number(row.resolvedConversations),
      closedConversations: Number(row.closedConversations),
      avgFirstResponseSeconds: seconds(row.avgFirstResponse),
      avgResolutionSeconds: seconds(row.avgResolution),
    };
  }
}
