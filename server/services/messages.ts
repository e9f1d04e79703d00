// The one send path for REST, agent sockets, visitor sockets and the AI service: store first, announce after commit.
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { StatementFactory } from '../../db/statements.js';
import type { Conversation } from '../../db/models/Conversation.js';
import type { Message, MessageType, SenderType } from '../../db/models/Message.js';
import type { DomainEventBus } from '../events.js';
import { Conflict, InvalidTransition, NotFound, ValidationFailed } from '../errors.js';
import { MessageBatcher, type BatchStats, type MessageBatcherOptions } from './messageBatch.js';
import type { Outbox } from './webhooks/index.js';
import { presentConversation } from '../presenters/conversation.js';
import { MESSAGE_CONTENT_MAX } from '../limits.js';

export type Sender =
  | { type: 'agent'; orgId: string; userId: string }
  | { type: 'visitor'; orgId: string; sessionId: string }
  | { type: 'ai'; orgId: string }
  | { type: 'system'; orgId: string }
  /** A customer writing through a channel (email, WhatsApp, Telegram): stored as a visitor message of its contact. */
  | { type: 'contact'; orgId: string; contactId: string };

/** Writes a channel delivery of a public agent or AI message in a channel conversation, in the message's transaction. */
export interface ChannelOutbox {
  record(trx: Knex.Transaction, conversation: Conversation, message: Message): Promise<void>;
}

export interface SendInput {
  conversationId: string;
  content: string;
  type?: MessageType;
  private?: boolean;
  clientMessageId?: string | null;
  metadata?: Record<string, unknown>;
  /** Uploaded files (storage object ids) shown with the message. */
  attachments?: string[];
}

/** A file of a message as every presentation shows it; `url` is a short-lived download link minted for that view. */
export interface AttachmentView {
  objectId: string;
  fileName: string;
  mimeType: string;
  sizeBytes: number;
  url: string;
}

/** What the storage module does for messages with files. */
export interface AttachmentPort {
  /** Checks the files and stores them with the message, inside the message's transaction. */
  attach(trx: Knex.Transaction, sender: Sender, message: Message, objectIds: string[]): Promise<AttachmentView[]>;
  /** Sets `attachments` (with fresh URLs) on messages that carry files, an empty list on the others. */
  decorate(orgId: string, messages: Message[]): Promise<void>;
}

export interface SendResult {
  message: Message;
  conversation: Conversation;
  /** The clientMessageId was seen before: this is the stored message, nothing new was written or announced. */
  duplicate: boolean;
  /** A visitor wrote to a closed conversation, so a new one was started. */
  started: boolean;
  /** A visitor wrote to a resolved conversation, which is open again. */
  reopened: boolean;
}

/** A NUL escape in JSON text: `\u0000` after an even number of backslashes (an odd one would be a literal backslash). */
const NUL_IN_JSON = /(?:^|[^\\])(?:\\\\)*\\u0000/;

/** The id stored as a message's senderId: the agent's user, the visitor's session, none for ai and system. */
export const senderIdOf = (sender: Sender): string | null => (sender.type === 'agent' ? sender.userId : sender.type === 'visitor' ? sender.sessionId : sender.type === 'contact' ? sender.contactId : null);
/** The sender_type column: a channel's contact writes as the customer side, like a widget visitor. */
const storedSenderType = (sender: Sender): SenderType => (sender.type === 'contact' ? 'visitor' : sender.type);

export class MessageService {
  /** Called after commit when a send started a new conversation (routing, notifications). */
  onConversationStarted: (conversation: Conversation) => Promise<void> = async () => undefined;

  private readonly batcher: MessageBatcher;
  private webhookOutbox: Outbox | null = null;
  /** Set when channels are configured on this server: replies in channel conversations leave through it. */
  channelOutbox: ChannelOutbox | null = null;
  /** Webhook events are written with the message: in its transaction, or in the batch's statement. */
  set outbox(outbox: Outbox | null) {
    this.webhookOutbox = outbox;
    this.batcher.outbox = outbox;
  }
  /** How sends were written: batched appends vs the transactional path. */
  get batchStats(): Readonly<BatchStats> {
    return this.batcher.stats;
  }

  constructor(private readonly deps: { models: Models; knex: Knex; statement: StatementFactory; events: DomainEventBus; batching: MessageBatcherOptions; attachments?: AttachmentPort }) {
    this.batcher = new MessageBatcher(deps.statement, deps.batching);
  }

  private get models() {
    return this.deps.models;
  }

  async send(sender: Sender, input: SendInput): Promise<SendResult> {
    // Internal notes come from agents, or from the platform itself (the AI's resolution summary).
    if (input.private && sender.type !== 'agent' && sender.type !== 'system') throw new ValidationFailed('Only agents write internal notes', [{ field: 'private', message: 'is for agents only' }]);
    if (input.content.length === 0 || input.content.length > MESSAGE_CONTENT_MAX) {
      throw new ValidationFailed(`content must be 1..${MESSAGE_CONTENT_MAX} characters`, [{ field: 'content', message: 'has the wrong length' }]);
    }
    // PostgreSQL text cannot hold NUL; refused here with a clear error rather than failing a batch of other people's sends.
    if (input.content.includes('\u0000') || (input.metadata && NUL_IN_JSON.test(JSON.stringify(input.metadata)))) {
      throw new ValidationFailed('Text must not contain NUL characters', [{ field: input.content.includes('\u0000') ? 'content' : 'metadata', message: 'contains a NUL character' }]);
    }
    const withFiles = !!input.attachments?.length;
    if (withFiles) {
      if (!this.deps.attachments) throw new ValidationFailed('This server stores no files', [{ field: 'attachments', message: 'not supported' }]);
      // A message with files is a file (or image) message: that is how pages know which messages to look up files for.
      if (input.type !== 'image' && input.type !== 'file') input = { ...input, type: 'file' };
    }
    // Most sends are plain appends and go out in a batch with others; the rest (and anything the batch declines)
    // take the transaction below, which holds every rule. Files are written with the message, so those sends take
    // the transaction too and text sends keep the batch to themselves.
    // A channel's contact also takes the transaction (channel traffic is light, and the batch knows visitors only).
    const { batched, release } = withFiles || sender.type === 'contact' ? { batched: null, release: () => undefined } : await this.batcher.append(sender, input);
    if (batched) {
      const result = { ...batched, duplicate: false, started: false };
      this.announce(result);
      return result;
    }
    try {
      const result = await this.store(sender, input);
      if (result.duplicate) await this.decorate(sender.orgId, [result.message]);
      else this.announce(result);
      return result;
    } finally {
      // Announced (or refused): the conversation's next send may go.
      release();
    }
  }

  /** The transactional path: every rule of a send, one conversation locked at a time. */
  private store(sender: Sender, input: SendInput): Promise<SendResult> {
    return this.deps.knex.transaction(async (trx) => {
      // The row lock serializes senders of one conversation: seq has no gaps and clientMessageId is checked race-free.
      // The hot path speaks knex directly: rows come back camelCased (the snake-case mappers sit on knex itself)
      // without Objection's per-query and per-model work, which was most of a send's CPU.
      const conversation = (await trx('conversations').where({ id: input.conversationId, organizationId: sender.orgId }).forNoKeyUpdate().first()) as Conversation | undefined;
      if (!conversation || (sender.type === 'visitor' && conversation.visitorSessionId !== sender.sessionId) || (sender.type === 'contact' && conversation.contactId !== sender.contactId)) throw new NotFound('Conversation');
      if (input.clientMessageId) {
        // A statement of its own, after the lock: its snapshot sees what a concurrent sender committed meanwhile
        // (a subquery in the locking SELECT would still read the snapshot taken before the wait).
        const existing = (await trx('messages').where({ conversationId: conversation.id, clientMessageId: input.clientMessageId }).first()) as Message | undefined;
        if (existing) {
          // Only the sender's own retry gets the stored message back: anyone else would read a message (perhaps an internal note) by guessing its id.
          if (existing.senderType !== storedSenderType(sender) || (existing.senderId ?? null) !== senderIdOf(sender)) throw new Conflict('This clientMessageId is already used by another message');
          return { message: existing, conversation, duplicate: true, started: false, reopened: false };
        }
      }
      if (conversation.status === 'closed') {
        if (sender.type !== 'visitor') throw new InvalidTransition('This conversation is closed');
        // A retry of the send that already started the follow-up conversation gets that message back, not a third conversation.
        const retried = input.clientMessageId ? await this.followUpMessage(trx, conversation, sender.sessionId, input.clientMessageId) : null;
        if (retried) return { ...retried, duplicate: true, started: false, reopened: false };
        const fresh = await this.models.Conversation.query(trx).insertAndFetch({
          organizationId: conversation.organizationId,
          status: 'open',
          priority: conversation.priority,
          channel: conversation.channel,
          source: conversation.source,
          contactId: conversation.contactId,
          visitorSessionId: conversation.visitorSessionId,
          visitorName: conversation.visitorName,
          visitorEmail: conversation.visitorEmail,
          tags: [],
        });
        const appended = await this.appendWithFiles(trx, fresh, sender, input);
        await this.recordStarted(trx, appended.conversation);
        return { ...appended, duplicate: false, started: true };
      }
      const appended = await this.appendWithFiles(trx, conversation, sender, input);
      return { ...appended, duplicate: false, started: false };
    });
  }

  private async appendWithFiles(trx: Knex.Transaction, conversation: Conversation, sender: Sender, input: SendInput): Promise<{ message: Message; conversation: Conversation; reopened: boolean }> {
    const appended = await this.append(trx, conversation, sender, input);
    if (input.attachments?.length && this.deps.attachments) appended.message.attachments = await this.deps.attachments.attach(trx, sender, appended.message, input.attachments);
    return appended;
  }

  /** Sets `attachments` on messages about to be presented (a page of text messages costs nothing). */
  async decorate(orgId: string, messages: Message[]): Promise<Message[]> {
    if (this.deps.attachments) await this.deps.attachments.decorate(orgId, messages);
    return messages;
  }

  /** Publishes what a committed send changed; called after the transaction, never inside it. */
  announce(result: Omit<SendResult, 'duplicate'>): void {
    if (result.started) this.deps.events.publish('conversation.created', { conversation: result.conversation });
    this.deps.events.publish('message.created', { conversation: result.conversation, message: result.message });
    if (result.reopened) this.deps.events.publish('conversation.updated', { conversation: result.conversation, statusChanged: true });
    if (result.started) void this.onConversationStarted(result.conversation);
  }

  /** The visitor's message with this clientMessageId in a conversation the session started after `closed` was closed. */
  private async followUpMessage(trx: Knex.Transaction, closed: Conversation, sessionId: string, clientMessageId: string): Promise<{ message: Message; conversation: Conversation } | null> {
    const later = this.models.Conversation.forOrg(closed.organizationId, trx)
      .where('visitorSessionId', sessionId)
      .where('createdAt', '>=', closed.closedAt ?? closed.createdAt)
      .select('id');
    const message = await this.models.Message.forOrg(closed.organizationId, trx)
      .where({ clientMessageId, senderType: 'visitor', senderId: sessionId })
      .whereIn('conversationId', later)
      .orderBy('createdAt', 'asc')
      .first();
    if (!message) return null;
    const conversation = await this.models.Conversation.forOrg(closed.organizationId, trx).findById(message.conversationId);
    return conversation ? { message, conversation } : null;
  }

  /**
   * Appends a message to a conversation locked by the caller's transaction: next seq, counters,
   * first reply and reopening a resolved conversation when the visitor writes again.
   */
  async append(trx: Knex.Transaction, conversation: Conversation, sender: Sender, input: SendInput): Promise<{ message: Message; conversation: Conversation; reopened: boolean }> {
    const now = new Date();
    const seq = conversation.lastSeq + 1;
    const isPublicAgentReply = sender.type === 'agent' && !input.private;
    const patch: Partial<Conversation> = { lastSeq: seq, lastMessageAt: now };
    let reopened = false;
    if (sender.type === 'visitor' || sender.type === 'contact') {
      patch.unreadCount = conversation.unreadCount + 1;
      if (conversation.status === 'resolved') {
        patch.status = 'open';
        patch.resolvedAt = null;
        reopened = true;
      }
    }
    if (isPublicAgentReply && !conversation.firstReplyAt) patch.firstReplyAt = now;
    if (sender.type === 'agent' && !conversation.humanJoinedAt) patch.humanJoinedAt = now;
    // Analytics moments (the row is locked, so "only the first counts" needs no coalesce here).
    if ((sender.type === 'agent' || sender.type === 'ai') && !input.private && !conversation.firstResponseAt) patch.firstResponseAt = now;
    // The first human reply counts from the escalation: a reply before it is replaced by the first one after it.
    if (sender.type === 'agent' && !input.private && (!conversation.firstHumanReplyAt || (conversation.escalatedAt && conversation.firstHumanReplyAt < conversation.escalatedAt))) {
      patch.firstHumanReplyAt = now;
      patch.firstHumanReplyBy = sender.userId;
    }
    // RETURNING instead of a re-read: one round trip per statement on the hot path.
    const [updated] = (await trx('conversations').where('id', conversation.id).update({ ...patch, updatedAt: now }, '*')) as Conversation[];
    const [message] = (await trx('messages').insert({
      organizationId: conversation.organizationId,
      conversationId: conversation.id,
      seq,
      senderType: storedSenderType(sender),
      senderId: senderIdOf(sender),
      content: input.content,
      type: input.type ?? 'text',
      private: !!input.private,
      metadata: JSON.stringify(input.metadata ?? {}),
      clientMessageId: input.clientMessageId ?? null,
    }, '*')) as Message[];
    // Only channel conversations pay for this check's outcome; widget chats skip it on the channel's name.
    if (conversation.channel !== 'widget' && this.channelOutbox && !message!.private && (sender.type === 'agent' || sender.type === 'ai')) await this.channelOutbox.record(trx, updated!, message!);
    if (this.webhookOutbox) {
      if (!message!.private) await this.webhookOutbox.record(trx, conversation.organizationId, 'message.created', {}, { messageId: message!.id });
      if (reopened) await this.webhookOutbox.record(trx, conversation.organizationId, 'conversation.updated', { conversation: presentConversation(updated!), changes: ['status'] });
    }
    return { message, conversation: updated, reopened };
  }

  /** The webhook event of a conversation a send started, in that send's transaction. */
  async recordStarted(trx: Knex.Transaction, conversation: Conversation): Promise<void> {
    await this.webhookOutbox?.record(trx, conversation.organizationId, 'conversation.created', { conversation: presentConversation(conversation) });
  }

  /** A page of messages by seq: after `afterSeq` (ascending) or before `beforeSeq` (the newest ones before it). */
  async page(orgId: string, conversationId: string, opts: { afterSeq?: number; beforeSeq?: number; limit: number; publicOnly: boolean }): Promise<Message[]> {
    // Plain rows (knex, no models): sync and history pages are read far more often than anything else.
    const query = this.deps.knex('messages').where({ organizationId: orgId, conversationId });
    if (opts.publicOnly) query.where('private', false);
    if (opts.beforeSeq !== undefined) {
      const rows = (await query.where('seq', '<', opts.beforeSeq).orderBy('seq', 'desc').limit(opts.limit)) as Message[];
      return this.decorate(orgId, rows.reverse());
    }
    return this.decorate(orgId, (await query.where('seq', '>', opts.afterSeq ?? 0).orderBy('seq', 'asc').limit(opts.limit)) as Message[]);
  }
}
