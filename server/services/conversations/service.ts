// The agents' inbox: listing, reading, status transitions, read marks, recently viewed and contact links.
import type { Knex } from 'knex';
import { containsPattern } from '../../../db/search.js';
import type { Models } from '../../../db/index.js';
import { rowFromJson, type Statement, type StatementFactory } from '../../../db/statements.js';
import type { Contact } from '../../../db/models/Contact.js';
import type { ContactService } from '../contacts/index.js';
import type { Conversation, ConversationStatus, Priority } from '../../../db/models/Conversation.js';
import type { Message } from '../../../db/models/Message.js';
import type { DomainEventBus } from '../../events.js';
import { InvalidTransition, NotFound } from '../../errors.js';
import type { Outbox } from '../webhooks/index.js';
import { presentConversation } from '../../presenters/conversation.js';

/** Allowed status changes; closed is final. */
const TRANSITIONS: Record<ConversationStatus, ConversationStatus[]> = {
  open: ['pending', 'resolved', 'closed'],
  pending: ['open', 'resolved', 'closed'],
  resolved: ['open', 'closed'],
  closed: [],
};

export interface ConversationFilters {
  status?: ConversationStatus;
  assignedToMe?: boolean;
  unassigned?: boolean;
  q?: string;
  limit: number;
  offset: number;
}

export interface ContactInput {
  contactId?: string | null;
  name?: string;
  email?: string;
  phone?: string;
  company?: string;
}

const RECENTS_KEPT = 20;

// The most read route of the inbox in one round trip: the conversation, its whole history oldest first (as json,
// which the client parses natively instead of row by row), and the viewer's recents row, written only for a
// conversation of this organization.
const HISTORY_SQL = `
with conv as (
  select * from conversations where id = $1::uuid and organization_id = $2::uuid
), viewed as (
  insert into conversation_views (user_id, conversation_id, organization_id, viewed_at)
  select $3::uuid, id, organization_id, now() from conv
  on conflict (user_id, conversation_id) do update set viewed_at = excluded.viewed_at
)
select row_to_json(conv) as conversation,
  coalesce((select json_agg(m order by m.seq) from messages m where m.organization_id = $2::uuid and m.conversation_id = $1::uuid), '[]'::json) as messages
from conv`;

export class ConversationService {
  /** Webhook events, written in the change's transaction. */
  outbox: Outbox | null = null;

  private readonly history: Statement<{ conversation: Record<string, unknown>; messages: Record<string, unknown>[] }>;

  constructor(private readonly deps: { models: Models; knex: Knex; statement: StatementFactory; events: DomainEventBus; contacts: ContactService }) {
    this.history = deps.statement('conversation_history', HISTORY_SQL);
  }

  private get models() {
    return this.deps.models;
  }

  async list(orgId: string, userId: string, f: ConversationFilters): Promise<{ conversations: Conversation[]; total: number }> {
    const base = this.models.Conversation.forOrg(orgId);
    if (f.status) base.where('conversations.status', f.status);
    if (f.assignedToMe) base.where('conversations.assignedTo', userId);
    if (f.unassigned) base.whereNull('conversations.assignedTo');
    if (f.q) {
      const like = containsPattern(f.q);
      base.where((w) =>
        w
          .whereILike('conversations.subject', like)
          .orWhereILike('conversations.visitorName', like)
          .orWhereILike('conversations.visitorEmail', like)
          .orWhereExists(this.models.Message.forOrg(orgId).whereColumn('messages.conversationId', 'conversations.id').whereILike('messages.content', like)),
      );
    }
    const [total, conversations] = await Promise.all([
      base.clone().resultSize(),
      base.clone().orderByRaw('coalesce(conversations.last_message_at, conversations.created_at) desc').orderBy('conversations.id', 'desc').limit(f.limit).offset(f.offset),
    ]);
    return { conversations, total };
  }

  async get(orgId: string, conversationId: string, trx?: Knex.Transaction): Promise<Conversation> {
    const conversation = await this.models.Conversation.forOrg(orgId, trx).findById(conversationId);
    if (!conversation) throw new NotFound('Conversation');
    return conversation;
  }

  async withContact(conversation: Conversation): Promise<Conversation> {
    conversation.contact = conversation.contactId ? ((await this.models.Contact.forOrg(conversation.organizationId).findById(conversation.contactId)) ?? null) : null;
    return conversation;
  }

  /** Spec endpoint 6: the conversation with its whole history, oldest first; remembered in the viewer's recents. */
  async getWithHistory(orgId: string, userId: string, conversationId: string): Promise<{ conversation: Conversation; messages: Message[] }> {
    const [row] = await this.history.rows([conversationId, orgId, userId]);
    if (!row) throw new NotFound('Conversation');
    return { conversation: await this.withContact(rowFromJson<Conversation>(row.conversation)), messages: row.messages.map((m) => rowFromJson<Message>(m)) };
  }

  async changeStatus(orgId: string, conversationId: string, status: ConversationStatus, opts: { byAi?: boolean } = {}): Promise<Conversation> {
    const { conversation, changed } = await this.deps.knex.transaction(async (trx) => {
      const current = await this.models.Conversation.forOrg(orgId, trx).findById(conversationId).forNoKeyUpdate();
      if (!current) throw new NotFound('Conversation');
      if (current.status === status) return { conversation: current, changed: false };
      if (!TRANSITIONS[current.status].includes(status)) throw new InvalidTransition(`A ${current.status} conversation cannot become ${status}`);
      const now = new Date();
      const patch: Partial<Conversation> = { status };
      if (status === 'resolved') patch.resolvedAt = now;
      // Analytics: the first resolution, and whether the AI service made it with no agent ever in the conversation.
      if (status === 'resolved' && !current.firstResolvedAt) {
        patch.firstResolvedAt = now;
        patch.firstResolvedByAi = !!opts.byAi && !current.humanJoinedAt && !current.firstHumanReplyAt;
      }
      if (status === 'open') patch.resolvedAt = null;
      if (status === 'closed') patch.closedAt = now;
      const updated = await this.models.Conversation.forOrg(orgId, trx).patchAndFetchById(current.id, patch);
      await this.outbox?.record(trx, orgId, 'conversation.updated', () => ({ conversation: presentConversation(updated), changes: ['status'] }));
      if (status === 'resolved') await this.outbox?.record(trx, orgId, 'conversation.resolved', () => ({ conversation: presentConversation(updated) }));
      return { conversation: updated, changed: true };
    });
    if (changed) this.deps.events.publish('conversation.updated', { conversation, statusChanged: true });
    return conversation;
  }

  /** Priority and tags (tags lowercased, trimmed, once each); only a real change is written and announced. */
  async update(orgId: string, conversationId: string, input: { priority?: Priority; tags?: string[] }): Promise<Conversation> {
    const { conversation, changes } = await this.deps.knex.transaction(async (trx) => {
      const current = await this.models.Conversation.forOrg(orgId, trx).findById(conversationId).forNoKeyUpdate();
      if (!current) throw new NotFound('Conversation');
      const patch: Partial<Conversation> = {};
      if (input.priority !== undefined && input.priority !== current.priority) patch.priority = input.priority;
      const tags = input.tags && [...new Set(input.tags.map((t) => t.trim().toLowerCase()))];
      if (tags && JSON.stringify(tags) !== JSON.stringify(current.tags ?? [])) patch.tags = tags;
      const changes = Object.keys(patch);
      if (changes.length === 0) return { conversation: current, changes };
      const updated = await this.models.Conversation.forOrg(orgId, trx).patchAndFetchById(current.id, patch);
      await this.outbox?.record(trx, orgId, 'conversation.updated', () => ({ conversation: presentConversation(updated), changes }));
      return { conversation: updated, changes };
    });
    if (changes.length > 0) this.deps.events.publish('conversation.updated', { conversation });
    return conversation;
  }

  /** An agent opened the conversation live: from now on a human is in it (the AI gate closes). */
  async agentJoined(orgId: string, conversationId: string): Promise<Conversation> {
    const conversation = await this.get(orgId, conversationId);
    if (conversation.humanJoinedAt) return conversation;
    const updated = await this.models.Conversation.forOrg(orgId).patchAndFetchById(conversation.id, { humanJoinedAt: new Date() });
    this.deps.events.publish('conversation.updated', { conversation: updated });
    return updated;
  }

  async markRead(orgId: string, conversationId: string): Promise<Conversation> {
    const conversation = await this.get(orgId, conversationId);
    if (conversation.unreadCount === 0) return conversation;
    return this.models.Conversation.forOrg(orgId).patchAndFetchById(conversation.id, { unreadCount: 0 });
  }

  async recents(orgId: string, userId: string): Promise<Conversation[]> {
    return this.models.Conversation.forOrg(orgId)
      .join('conversation_views as v', 'v.conversation_id', 'conversations.id')
      .where('v.user_id', userId)
      .select('conversations.*')
      .orderBy('v.viewed_at', 'desc')
      .limit(RECENTS_KEPT);
  }

  async clearRecents(orgId: string, userId: string): Promise<void> {
    await this.deps.knex('conversation_views').where({ user_id: userId, organization_id: orgId }).delete();
  }

  /**
   * Spec endpoint 3: `contactId` links, `contactId: null` unlinks, or name/email/phone/company finds a contact by
   * email (creating it when missing) and links it.
   */
  async linkContact(orgId: string, conversationId: string, input: ContactInput): Promise<Conversation> {
    const conversation = await this.deps.knex.transaction(async (trx) => {
      const current = await this.models.Conversation.forOrg(orgId, trx).findById(conversationId).forNoKeyUpdate();
      if (!current) throw new NotFound('Conversation');
      let contact: Contact | null = null;
      // An id merged away links its survivor; find-or-create is the contacts' own (normalized, race-safe).
      if (input.contactId) contact = await this.deps.contacts.resolve(orgId, input.contactId, trx);
      else if (input.contactId !== null) contact = await this.deps.contacts.findOrCreate(orgId, input, trx);
      if (contact) await this.deps.contacts.touch(orgId, contact.id, trx);
      const updated = await this.models.Conversation.forOrg(orgId, trx).patchAndFetchById(current.id, { contactId: contact?.id ?? null });
      updated.contact = contact;
      await this.outbox?.record(trx, orgId, 'conversation.updated', () => ({ conversation: presentConversation(updated), changes: ['contactId'] }));
      return updated;
    });
    this.deps.events.publish('conversation.updated', { conversation });
    return conversation;
  }
}
