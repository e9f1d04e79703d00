// The one way a message enters: REST, agent and visitor sockets, the AI service and the channels all call `send`.
// Store first (batched, or in a transaction when a decision is needed), announce after commit.
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import type { StatementFactory } from '../../../db/statements.js';
import type { Conversation } from '../../../db/models/Conversation.js';
import type { Message } from '../../../db/models/Message.js';
import type { DomainEventBus } from '../../events.js';
import { InvalidTransition, NotFound, ValidationFailed } from '../../errors.js';
import { presentConversation } from '../../presenters/conversation.js';
import type { Outbox } from '../webhooks/index.js';
import { MessageBatcher, type BatchStats, type MessageBatcherOptions } from './batch.js';
import { earlierSend } from './retries.js';
import { SyncReader, type SyncRequest } from './sync.js';
import { appendInTransaction, checkMessage } from './rules.js';
import type { Appended, AppendedInTransaction, AttachmentPort, ChannelOutbox, MessageInput, NewConversation, Sender, SendInput, SendResult, StartInput, StartResult } from './types.js';

type Customer = Extract<Sender, { type: 'visitor' | 'contact' }>;
/** What the transactional path answers: the conversation's whole row, read in the transaction. */
type TransactionalResult = AppendedInTransaction & { duplicate: boolean; started: boolean };

const isStart = (input: SendInput | StartInput): input is StartInput => 'start' in input && !!input.start;

export class MessageService {
  private readonly batcher: MessageBatcher;
  private readonly syncReader: SyncReader;
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
    // Reads: up to 200 syncs per statement, two statements in flight (as the handshakes' caller lookup).
    this.syncReader = new SyncReader(deps.statement, { maxBatch: 200, concurrency: 2 });
  }

  /**
   * Sends a message to a conversation, or (`start`) opens a conversation with a customer's first message. A retry
   * (same sender, same clientMessageId) answers the stored message with `duplicate` and announces nothing.
   */
  send(sender: Sender, input: StartInput): Promise<StartResult>;
  send(sender: Sender, input: SendInput | StartInput): Promise<SendResult>;
  async send(sender: Sender, input: SendInput | StartInput): Promise<SendResult> {
    checkMessage(sender, input);
    if (isStart(input) && sender.type !== 'visitor' && sender.type !== 'contact') throw new ValidationFailed('Only customers open conversations', [{ field: 'conversationId', message: 'is required' }]);
    if (input.attachments?.length) {
      if (!this.deps.attachments) throw new ValidationFailed('This server stores no files', [{ field: 'attachments', message: 'not supported' }]);
      // A message with files is a file (or image) message: that is how pages know which messages to look up files for.
      if (input.type !== 'image' && input.type !== 'file') input = { ...input, type: 'file' };
    }
    // Most sends are plain appends and go out in a batch with others; the rest (and anything the batch declines)
    // take the transaction below, which makes every decision. Files are written with the message, so those sends
    // take the transaction too and text sends keep the batch to themselves. A channel's contact writing to its open
    // conversation is batched like a visitor: inbound processing sends many at once.
    const { batched, release } = !isStart(input) && !input.attachments?.length ? await this.batcher.append(sender, input) : { batched: null, release: () => undefined };
    if (batched) {
      this.announce(batched);
      return { ...batched, duplicate: false, started: false };
    }
    try {
      const result = await this.deps.knex.transaction((trx) => (isStart(input) ? this.start(trx, sender as Customer, input) : this.store(trx, sender, input)));
      if (result.duplicate) await this.decorate(sender.orgId, [result.message]);
      else this.announce(result, result.started ? result.conversation : null);
      return result;
    } finally {
      // Announced (or refused): the conversation's next send may go.
      release();
    }
  }

  /** The transactional path to an existing conversation, locked for the transaction. */
  private async store(trx: Knex.Transaction, sender: Sender, input: SendInput): Promise<TransactionalResult> {
    // The row lock serializes senders of one conversation: seq has no gaps and clientMessageId is checked race-free.
    // The hot path speaks knex directly: rows come back camelCased (the snake-case mappers sit on knex itself)
    // without Objection's per-query and per-model work, which was most of a send's CPU.
    const conversation = (await trx('conversations').where({ id: input.conversationId, organizationId: sender.orgId }).forNoKeyUpdate().first()) as Conversation | undefined;
    if (!conversation || (sender.type === 'visitor' && conversation.visitorSessionId !== sender.sessionId) || (sender.type === 'contact' && conversation.contactId !== sender.contactId)) throw new NotFound('Conversation');
    const earlier = await earlierSend(trx, sender, input.clientMessageId, { conversation });
    if (earlier) return { ...earlier, duplicate: true, started: false, reopened: false };
    if (conversation.status !== 'closed') return { ...(await this.appendWithFiles(trx, conversation, sender, input)), duplicate: false, started: false };
    if (sender.type !== 'visitor') throw new InvalidTransition('This conversation is closed');
    // A visitor writing to a closed conversation opens a follow-up; a retry of that send gets its message back.
    const followUp = await earlierSend(trx, sender, input.clientMessageId, { openedSince: conversation.closedAt ?? conversation.createdAt });
    if (followUp) return { ...followUp, duplicate: true, started: false, reopened: false };
    const { priority, channel, source, contactId, visitorName, visitorEmail } = conversation;
    return this.open(trx, sender, input, { priority, channel, source, contactId, visitorName, visitorEmail });
  }

  /** A customer's first message: the customer's row lock serializes their starts, so a retry sees the first one. */
  private async start(trx: Knex.Transaction, sender: Customer, input: StartInput): Promise<TransactionalResult> {
    if (sender.type === 'visitor') await trx('visitor_sessions').where({ id: sender.sessionId, organizationId: sender.orgId }).forUpdate().first('id');
    else await trx('contacts').where({ id: sender.contactId, organizationId: sender.orgId }).forNoKeyUpdate().first('id');
    const earlier = await earlierSend(trx, sender, input.clientMessageId, { openedSince: null });
    if (earlier) return { ...earlier, duplicate: true, started: false, reopened: false };
    return this.open(trx, sender, input, input.start);
  }

  /** Opens a conversation for the customer with this message, and writes its webhook event in the transaction. */
  private async open(trx: Knex.Transaction, sender: Customer, input: MessageInput, filed: NewConversation & Partial<Pick<Conversation, 'priority' | 'contactId'>>): Promise<TransactionalResult> {
    const [fresh] = (await trx('conversations').insert({
      organizationId: sender.orgId,
      status: 'open',
      priority: filed.priority ?? 'medium',
      channel: filed.channel ?? 'widget',
      source: filed.source === undefined ? 'widget' : filed.source,
      subject: filed.subject ?? null,
      contactId: sender.type === 'contact' ? sender.contactId : (filed.contactId ?? null),
      visitorSessionId: sender.type === 'visitor' ? sender.sessionId : null,
      visitorName: filed.visitorName ?? null,
      visitorEmail: filed.visitorEmail ?? null,
      channelId: filed.channelId ?? null,
      channelAddress: filed.channelAddress ?? null,
      tags: JSON.stringify([]),
    }, '*')) as Conversation[];
    const appended = await this.appendWithFiles(trx, fresh!, sender, { ...input, conversationId: fresh!.id });
    await this.webhookOutbox?.record(trx, sender.orgId, 'conversation.created', { conversation: presentConversation(appended.conversation) });
    return { ...appended, duplicate: false, started: true };
  }

  private async appendWithFiles(trx: Knex.Transaction, conversation: Conversation, sender: Sender, input: SendInput): Promise<AppendedInTransaction> {
    const appended = await this.append(trx, conversation, sender, input);
    if (input.attachments?.length && this.deps.attachments) appended.message.attachments = await this.deps.attachments.attach(trx, sender, appended.message, input.attachments);
    return appended;
  }

  /**
   * Appends a message to a conversation locked by the caller's transaction (the rules of rules.ts), with what
   * leaves with it: the channel delivery of a reply, and the webhook events.
   */
  async append(trx: Knex.Transaction, conversation: Conversation, sender: Sender, input: SendInput): Promise<AppendedInTransaction> {
    const appended = await appendInTransaction(trx, sender, { ...input, conversationId: conversation.id });
    const { message, conversation: updated } = appended;
    // Only channel conversations pay for this check's outcome; widget chats skip it on the channel's name.
    if (conversation.channel !== 'widget' && this.channelOutbox && !message.private && (sender.type === 'agent' || sender.type === 'ai')) await this.channelOutbox.record(trx, updated, message);
    if (this.webhookOutbox) {
      if (!message.private) await this.webhookOutbox.recordMessage(trx, conversation.organizationId, message.id);
      if (appended.reopened) await this.webhookOutbox.record(trx, conversation.organizationId, 'conversation.updated', { conversation: presentConversation(updated), changes: ['status'] });
    }
    return appended;
  }

  /** Sets `attachments` on messages about to be presented (a page of text messages costs nothing). */
  async decorate(orgId: string, messages: Message[]): Promise<Message[]> {
    if (this.deps.attachments) await this.deps.attachments.decorate(orgId, messages);
    return messages;
  }

  /** Publishes what a committed send changed; called after the transaction, never inside it. */
  private announce(appended: Appended, opened: Conversation | null = null): void {
    // Routing, notifications and the agents' inboxes react to conversation.created (see conversations/arrivals.ts).
    if (opened) this.deps.events.publish('conversation.created', { conversation: opened });
    this.deps.events.publish('message.created', { conversation: appended.conversation, message: appended.message });
    if (appended.reopened) this.deps.events.publish('conversation.updated', { conversation: appended.conversation, statusChanged: true });
  }

  /**
   * What a reconnecting client missed: the messages after `afterSeq`, oldest first, up to `limit` (a visitor: of
   * their own conversation, public ones only); 404 for a conversation that is not the caller's. The syncs of one
   * moment share one statement (sync.ts).
   */
  async missed(request: SyncRequest): Promise<Message[]> {
    return this.decorate(request.orgId, await this.syncReader.read(request));
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
