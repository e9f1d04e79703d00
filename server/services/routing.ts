// Who handles a conversation: automatic assignment to the least busy online agent, and assignment by hand.
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { Conversation } from '../../db/models/Conversation.js';
import type { DomainEventBus } from '../events.js';
import { NotFound, ValidationFailed } from '../errors.js';
import type { Presence } from '../presence.js';
import type { NotificationService } from './notifications.js';
import type { Outbox } from './webhooks/index.js';
import { presentConversation } from '../presenters/conversation.js';

export class RoutingService {
  /** Webhook events, written in the change's transaction. */
  outbox: Outbox | null = null;

  constructor(
    private readonly deps: { models: Models; knex: Knex; events: DomainEventBus; presence: Presence; notifications: NotificationService },
  ) {}

  private get models() {
    return this.deps.models;
  }

  /**
   * The online agent (holding a socket and available) with the fewest open conversations below their
   * maxOpenConversations; ties go to whoever was assigned least recently (round-robin).
   */
  async pickAgent(orgId: string, trx?: Knex.Transaction): Promise<string | null> {
    const online = await this.deps.presence.onlineUsers(orgId);
    if (online.length === 0) return null;
    const candidates = await this.models.Membership.forOrg(orgId, trx)
      .select('memberships.user_id', 'memberships.max_open_conversations', 'memberships.last_assigned_at')
      .select(
        this.deps.knex.raw(
          `(select count(*) from conversations c where c.organization_id = memberships.organization_id and c.assigned_to = memberships.user_id and c.status in ('open', 'pending'))::int as open_count`,
        ),
      )
      .whereIn('memberships.userId', online)
      .where({ 'memberships.status': 'accepted', 'memberships.availability': 'online' });
    const eligible = (candidates as unknown as { userId: string; maxOpenConversations: number; lastAssignedAt: Date | null; openCount: number }[])
      .filter((c) => c.openCount < c.maxOpenConversations)
      .sort((a, b) => a.openCount - b.openCount || (a.lastAssignedAt?.getTime() ?? 0) - (b.lastAssignedAt?.getTime() ?? 0));
    return eligible[0]?.userId ?? null;
  }

  /** Runs after a new conversation commits (and on escalation), when the organization turned auto-assignment on. */
  async autoAssign(conversation: Conversation, reason = 'auto'): Promise<Conversation> {
    const org = await this.models.Organization.query().findById(conversation.organizationId);
    if (!org || org.settings.autoAssignment !== true) return conversation;
    return this.assignLeastBusy(conversation.organizationId, conversation.id, reason);
  }

  /**
   * Gives a still unassigned, not closed conversation to the agent pickAgent chooses. Picks of one organization
   * run one at a time (a transaction-scoped advisory lock), so concurrent new conversations see each other's
   * assignments instead of all going to the same least busy agent.
   */
  async assignLeastBusy(orgId: string, conversationId: string, reason: string): Promise<Conversation> {
    const { conversation, changed } = await this.deps.knex.transaction(async (trx) => {
      await trx.raw('select pg_advisory_xact_lock(hashtext(?), hashtext(?))', ['auto-assign', orgId]);
      const current = await this.models.Conversation.forOrg(orgId, trx).findById(conversationId).forNoKeyUpdate();
      if (!current) throw new NotFound('Conversation');
      if (current.assignedTo || current.status === 'closed') return { conversation: current, changed: false };
      const agentId = await this.pickAgent(orgId, trx);
      if (!agentId) return { conversation: current, changed: false };
      return { conversation: await this.applyAssignment(trx, orgId, current, agentId), changed: true };
    });
    if (changed) await this.announce(orgId, conversation, { reason });
    return conversation;
  }

  /** Assigns (or with null unassigns) a conversation; the assignee must be an accepted member. */
  async assign(orgId: string, conversationId: string, agentId: string | null, opts: { reason?: string | null; byUserId?: string }): Promise<Conversation> {
    const { conversation, changed } = await this.deps.knex.transaction(async (trx) => {
      // The conversation first: another organization's id is 404 whatever the assignee.
      const current = await this.models.Conversation.forOrg(orgId, trx).findById(conversationId).forNoKeyUpdate();
      if (!current) throw new NotFound('Conversation');
      if (agentId) {
        const member = await this.models.Membership.forOrg(orgId, trx).findOne({ userId: agentId, status: 'accepted' });
        if (!member) throw new ValidationFailed('The assignee is not an active member of this organization', [{ field: 'agentId', message: 'is not an active member' }]);
      }
      if (current.assignedTo === agentId) return { conversation: current, changed: false };
      return { conversation: await this.applyAssignment(trx, orgId, current, agentId), changed: true };
    });
    if (changed) await this.announce(orgId, conversation, opts);
    return conversation;
  }

  /** Writes the assignee of a conversation locked by the caller's transaction and stamps the round-robin clock. */
  private async applyAssignment(trx: Knex.Transaction, orgId: string, current: Conversation, agentId: string | null): Promise<Conversation> {
    const conversation = await this.models.Conversation.forOrg(orgId, trx).patchAndFetchById(current.id, { assignedTo: agentId });
    if (agentId) await this.models.Membership.forOrg(orgId, trx).where({ userId: agentId }).patch({ lastAssignedAt: new Date() });
    await this.outbox?.record(trx, orgId, 'conversation.assigned', () => ({ conversation: presentConversation(conversation), assignedTo: agentId }));
    return conversation;
  }

  /** After commit: tells the agents and notifies the new assignee (unless they assigned it themselves). */
  private async announce(orgId: string, conversation: Conversation, opts: { reason?: string | null; byUserId?: string }): Promise<void> {
    const agentId = conversation.assignedTo;
    this.deps.events.publish('conversation.assigned', { conversation });
    this.deps.events.publish('conversation.updated', { conversation });
    if (agentId && agentId !== opts.byUserId) {
      await this.deps.notifications.notify(orgId, [agentId], {
        type: 'conversation_assigned',
        title: 'A conversation was assigned to you',
        body: conversation.subject ?? conversation.visitorName ?? null,
        data: { conversationId: conversation.id, reason: opts.reason ?? null },
      });
    }
  }
}
