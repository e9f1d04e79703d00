// What the internal AI service does inside conversations. Every call names an organization, and every
// conversation is looked up inside it, so even a trusted caller cannot reach across tenants by mistake.
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { AgentRun } from '../../db/models/AgentRun.js';
import type { Conversation } from '../../db/models/Conversation.js';
import type { Message } from '../../db/models/Message.js';
import type { DomainEventBus } from '../events.js';
import { InvalidTransition, NotFound } from '../errors.js';
import type { ConversationService } from './conversations/index.js';
import type { MessageService, SendResult } from './messages/index.js';
import type { NewNotification, NotificationService } from './notifications.js';
import type { RoutingService } from './routing.js';

export type GateReason = 'ok' | 'human_joined' | 'assigned' | 'escalated' | 'resolved' | 'closed';

export interface AgentRunInput {
  status: 'succeeded' | 'failed' | 'running';
  modelId?: string;
  input?: string;
  output?: string;
  steps?: unknown[];
  latencyMs?: number;
  totalTokens?: number;
  error?: string;
}

export class AiService {
  constructor(
    private readonly deps: {
      models: Models;
      knex: Knex;
      events: DomainEventBus;
      conversations: ConversationService;
      messages: MessageService;
      routing: RoutingService;
      notifications: NotificationService;
    },
  ) {}

  private get models() {
    return this.deps.models;
  }

  async memory(orgId: string, conversationId: string, lastMessages: number): Promise<{ conversation: Conversation; messages: Message[]; facts: Record<string, unknown> }> {
    const conversation = await this.deps.conversations.withContact(await this.deps.conversations.get(orgId, conversationId));
    const [recent, memory] = await Promise.all([
      this.models.Message.forOrg(orgId).where('conversationId', conversationId).orderBy('seq', 'desc').limit(lastMessages),
      this.deps.knex('conversation_memories').where({ conversation_id: conversationId, organization_id: orgId }).first(),
    ]);
    return { conversation, messages: recent.reverse(), facts: (memory?.facts as Record<string, unknown>) ?? {} };
  }

  /** Merges facts key by key in one statement; a key set to null is forgotten. */
  async rememberFacts(orgId: string, conversationId: string, facts: Record<string, unknown>): Promise<Record<string, unknown>> {
    await this.deps.conversations.get(orgId, conversationId);
    const [row] = await this.deps
      .knex('conversation_memories')
      .insert({ conversation_id: conversationId, organization_id: orgId, facts: this.deps.knex.raw('jsonb_strip_nulls(?::jsonb)', [JSON.stringify(facts)]), updated_at: new Date() })
      .onConflict('conversation_id')
      .merge({ facts: this.deps.knex.raw('jsonb_strip_nulls(conversation_memories.facts || excluded.facts || ?::jsonb)', [JSON.stringify(facts)]), updated_at: new Date() })
      .returning('facts');
    return (row?.facts as Record<string, unknown>) ?? {};
  }

  /** Whether the AI should answer: not once a human is involved or the conversation is done. */
  async gate(orgId: string, conversationId: string): Promise<{ shouldRespond: boolean; reason: GateReason; conversationStatus: string }> {
    const c = await this.deps.conversations.get(orgId, conversationId);
    const reason: GateReason =
      c.status === 'closed' ? 'closed' : c.status === 'resolved' ? 'resolved' : c.humanJoinedAt ? 'human_joined' : c.assignedTo ? 'assigned' : c.escalatedAt ? 'escalated' : 'ok';
    return { shouldRespond: reason === 'ok', reason, conversationStatus: c.status };
  }

  /** An AI reply goes through the one send path, so the visitor receives it live like any other message. */
  reply(orgId: string, conversationId: string, input: { content: string; clientMessageId?: string; metadata?: Record<string, unknown> }): Promise<SendResult> {
    return this.deps.messages.send({ type: 'ai', orgId }, { conversationId, content: input.content, clientMessageId: input.clientMessageId, metadata: input.metadata });
  }

  async resolve(orgId: string, conversationId: string, summary?: string): Promise<Conversation> {
    if (summary) await this.deps.messages.send({ type: 'system', orgId }, { conversationId, content: summary, type: 'system', private: true, metadata: { kind: 'ai_resolution_summary' } });
    return this.deps.conversations.changeStatus(orgId, conversationId, 'resolved', { byAi: true });
  }

  /**
   * The bot-to-human handoff: marks the conversation escalated and open, gives it to the least busy online agent
   * when the organization turned auto-assignment on (else, or when nobody is available, leaves it for anyone),
   * announces it and notifies agents.
   */
  async escalate(orgId: string, conversationId: string, reason: string | null): Promise<Conversation> {
    const { escalated, statusChanged } = await this.deps.knex.transaction(async (trx) => {
      const current = await this.models.Conversation.forOrg(orgId, trx).findById(conversationId).forNoKeyUpdate();
      if (!current) throw new NotFound('Conversation');
      if (current.status === 'closed') throw new InvalidTransition('A closed conversation cannot be escalated');
      const escalated = await this.models.Conversation.forOrg(orgId, trx).patchAndFetchById(current.id, { escalatedAt: new Date(), status: 'open', resolvedAt: null });
      return { escalated, statusChanged: current.status !== 'open' };
    });
    const conversation = escalated.assignedTo ? escalated : await this.deps.routing.autoAssign(escalated, 'escalation');
    this.deps.events.publish('conversation.escalated', { conversation, reason });
    this.deps.events.publish('conversation.updated', { conversation, statusChanged });
    const note: NewNotification = { type: 'conversation_escalated', title: 'A conversation needs a human', body: reason, data: { conversationId, reason } };
    if (conversation.assignedTo) {
      // The assignee was told by the assignment itself unless it was theirs already.
      if (conversation.assignedTo === escalated.assignedTo) await this.deps.notifications.notify(orgId, [conversation.assignedTo], note);
    } else {
      const agents = await this.models.Membership.forOrg(orgId).where('status', 'accepted').whereNotNull('userId').select('userId');
      await this.deps.notifications.notify(orgId, agents.map((a) => a.userId!), note);
    }
    return conversation;
  }

  async recordRun(orgId: string, conversationId: string, run: AgentRunInput): Promise<AgentRun> {
    await this.deps.conversations.get(orgId, conversationId);
    return this.models.AgentRun.forOrg(orgId).insertAndFetch({
      organizationId: orgId,
      conversationId,
      status: run.status,
      modelId: run.modelId ?? null,
      input: run.input ?? null,
      output: run.output ?? null,
      steps: run.steps ?? [],
      latencyMs: run.latencyMs ?? null,
      totalTokens: run.totalTokens ?? null,
      error: run.error ?? null,
    });
  }

  async runs(orgId: string, conversationId: string): Promise<AgentRun[]> {
    await this.deps.conversations.get(orgId, conversationId);
    return this.models.AgentRun.forOrg(orgId).where('conversationId', conversationId).orderBy('createdAt', 'desc').limit(100);
  }

  /** Closes bot-only conversations (no human joined or assigned) with no message for `inactiveMinutes`. */
  async closeInactive(orgId: string, inactiveMinutes: number): Promise<string[]> {
    const cutoff = new Date(Date.now() - inactiveMinutes * 60_000);
    const closed = (await this.models.Conversation.forOrg(orgId)
      .whereIn('status', ['open', 'pending'])
      .whereNull('assignedTo')
      .whereNull('humanJoinedAt')
      .whereRaw('coalesce(last_message_at, created_at) < ?', [cutoff])
      .patch({ status: 'closed', closedAt: new Date() })
      .returning('*')) as unknown as Conversation[];
    for (const conversation of closed) this.deps.events.publish('conversation.updated', { conversation, statusChanged: true });
    return closed.map((c) => c.id);
  }

  /** Notifies the given members of the organization (or every agent when none are named); others are skipped. */
  async notify(orgId: string, userIds: string[] | undefined, n: NewNotification): Promise<number> {
    const members = this.models.Membership.forOrg(orgId).where('status', 'accepted').whereNotNull('userId');
    if (userIds?.length) members.whereIn('userId', userIds);
    const recipients = (await members.select('userId')).map((m) => m.userId!);
    return (await this.deps.notifications.notify(orgId, recipients, n)).length;
  }
}
