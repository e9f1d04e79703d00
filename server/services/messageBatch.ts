// Group commit for the common send: a message appended to a conversation that is not closed, with no earlier
// message under its clientMessageId. Sends that arrive in the same event-loop turn are written together by one
// statement (lock, seq, counters and insert), committed once. One statement per batch instead of a transaction of
// six round trips per message is what lets one instance carry thousands of messages a second: on loopback each
// statement costs a write syscall and a wake-up of its own, and the commit an fsync.
//
// The batch only takes the path with no decisions to make. Anything else (conversation missing, closed or not the
// visitor's, locked by another transaction, a clientMessageId seen before, or the statement failing as a whole)
// comes back without a result, and the caller runs its transactional path, which owns every rule and error. The unique index on
// (conversation_id, client_message_id) guards the race the batch cannot see: a concurrent retry makes the
// statement fail, and the retries then meet the stored message on the transactional path.
import type { Conversation } from '../../db/models/Conversation.js';
import type { Message } from '../../db/models/Message.js';
import { rowFromJson, type Statement, type StatementFactory } from '../../db/statements.js';
import { isUuid } from '../validation.js';
import { WEBHOOK_QUEUE } from './webhooks/queue.js';
import type { Outbox } from './webhooks/index.js';
// A value import from the service that owns this batcher: used only at call time, so the cycle is harmless.
import { senderIdOf, type Sender, type SendInput } from './messages.js';

export interface BatchedSend {
  message: Message;
  conversation: Conversation;
  reopened: boolean;
}

/** What a send gets from the batcher: the stored message, or null and a release for the transactional path. */
export interface BatchAnswer {
  batched: BatchedSend | null;
  release: () => void;
}

interface Pending {
  sender: Sender;
  input: SendInput;
  resolve: (answer: BatchAnswer) => void;
}

export interface MessageBatcherOptions {
  /** Batches in flight at once; each holds one pooled connection for one statement. */
  concurrency: number;
  /** Most messages one statement carries. */
  maxBatch: number;
}

interface AppendRow {
  ord: number;
  previous_status: string;
  conversation: Record<string, unknown>;
  message: Record<string, unknown>;
}

// Per input row (`ord`): which conversation, who sends and what; every later step joins on ord, so a row only ever
// writes where its own organization and visitor checks passed. Locks are taken in id order, and a conversation
// another transaction holds is skipped (declined) rather than waited for: one busy row never stalls the batch.
// NO KEY UPDATE is enough to serialize writers and still lets inserts that merely reference the row (views, runs)
// through. The `= any(array(...))` lets the planner find the rows by primary key (it cannot size the recordset).
// Since no lock is waited for, the time taken just before the statement is the time of the write. The NOT EXISTS reads the statement's snapshot; a retry
// committed meanwhile is caught by the unique index instead. Messages of channel conversations (email, WhatsApp,
// Telegram) are declined: their replies write a delivery in the transaction, which only the transactional path does.
const APPEND_SQL = `
with input as (
  select * from jsonb_to_recordset($1::jsonb) as i(
    ord int, organization_id uuid, conversation_id uuid, sender_type text, sender_id uuid, visitor_session_id uuid,
    content text, type text, private boolean, metadata jsonb, client_message_id text)
),
target as (
  select c.id, i.ord, c.status as previous_status
  from conversations c join input i on i.conversation_id = c.id
  where c.id = any(array(select conversation_id from input))
    and c.organization_id = i.organization_id and c.status <> 'closed'
    and (i.visitor_session_id is null or c.visitor_session_id = i.visitor_session_id)
    and c.channel = 'widget'
  order by c.id
  for no key update of c skip locked
),
conv as (
  update conversations c set
    last_seq = c.last_seq + 1,
    last_message_at = $2::timestamptz,
    updated_at = $2::timestamptz,
    unread_count = c.unread_count + (case when i.sender_type = 'visitor' then 1 else 0 end),
    status = case when i.sender_type = 'visitor' and c.status = 'resolved' then 'open' else c.status end,
    resolved_at = case when i.sender_type = 'visitor' and c.status = 'resolved' then null else c.resolved_at end,
    first_reply_at = case when i.sender_type = 'agent' and not i.private then coalesce(c.first_reply_at, $2::timestamptz) else c.first_reply_at end,
    human_joined_at = case when i.sender_type = 'agent' then coalesce(c.human_joined_at, $2::timestamptz) else c.human_joined_at end,
    first_response_at = case when i.sender_type in ('agent', 'ai') and not i.private then coalesce(c.first_response_at, $2::timestamptz) else c.first_response_at end,
    first_human_reply_at = case when i.sender_type = 'agent' and not i.private and (c.first_human_reply_at is null or c.first_human_reply_at < c.escalated_at) then $2::timestamptz else c.first_human_reply_at end,
    first_human_reply_by = case when i.sender_type = 'agent' and not i.private and (c.first_human_reply_at is null or c.first_human_reply_at < c.escalated_at) then i.sender_id else c.first_human_reply_by end
  from target t join input i on i.ord = t.ord
  where c.id = t.id
    and (i.client_message_id is null or not exists (
      select 1 from messages m where m.conversation_id = c.id and m.client_message_id = i.client_message_id))
  returning c.*, t.previous_status as batch_previous_status, i.ord as batch_ord
),
msg as (
  insert into messages (organization_id, conversation_id, seq, sender_type, sender_id, content, type, private, metadata, client_message_id)
  select i.organization_id, i.conversation_id, conv.last_seq, i.sender_type, i.sender_id, i.content, i.type, i.private, i.metadata, i.client_message_id
  from conv join input i on i.ord = conv.batch_ord
  returning *
)
select conv.batch_ord as ord, conv.batch_previous_status as previous_status, to_jsonb(conv) as conversation, to_jsonb(msg) as message
from conv join msg on msg.conversation_id = conv.id`;

/**
 * The same statement when an organization in the batch has webhooks wanting message.created: a delivery row and
 * its job per public message and subscription, written by the statement that stores the message (the outbox).
 * Batches of organizations without such webhooks run APPEND_SQL and pay nothing.
 */
const APPEND_WITH_WEBHOOKS_SQL = APPEND_SQL.replace(
  /\)\nselect conv\.batch_ord/,
  `),
hook as (
  select w.id, w.organization_id from webhooks w
  where w.organization_id in (select organization_id from msg where not private) and w.enabled
    and jsonb_exists_any(w.events, array['*', 'message.*', 'message.created'])
),
delivery as (
  insert into webhook_deliveries (organization_id, webhook_id, event_id, event_type, payload, message_id)
  select msg.organization_id, hook.id, md5('message.created:' || msg.id::text)::uuid, 'message.created', '{}'::jsonb, msg.id
  from msg join hook on hook.organization_id = msg.organization_id
  where not msg.private
  returning id, organization_id
),
delivery_job as (
  insert into jobs (queue, payload, organization_id)
  select '${WEBHOOK_QUEUE}', jsonb_build_object('deliveryId', delivery.id), delivery.organization_id from delivery
)
select conv.batch_ord`,
);

if (APPEND_WITH_WEBHOOKS_SQL === APPEND_SQL) throw new Error('the webhook variant of the append statement did not apply');

/** Counters since start: how sends went, for benchmarks and tests. */
export interface BatchStats {
  /** Statements run. */
  batches: number;
  /** Messages stored by a batch. */
  appended: number;
  /** Sends handed back to the transactional path. */
  declined: number;
  /** Batches whose statement failed as a whole (every send in it was handed back). */
  failed: number;
}

export class MessageBatcher {
  readonly stats: BatchStats = { batches: 0, appended: 0, declined: 0, failed: 0 };
  private queue: Pending[] = [];
  private running = 0;
  private scheduled = false;
  /**
   * Conversations with a send in flight, in a batch or handed back to the transactional path: their next message
   * waits until that one is stored (or refused), so one conversation's sends keep their order.
   */
  private busy = new Set<string>();

  private readonly appendStatement: Statement<AppendRow>;
  private readonly appendWithWebhooksStatement: Statement<AppendRow>;
  /** Set when webhooks are on: decides per batch whether the outbox variant of the statement runs. */
  outbox: Outbox | null = null;

  constructor(
    statement: StatementFactory,
    private readonly options: MessageBatcherOptions,
  ) {
    this.appendStatement = statement<AppendRow>('append_messages', APPEND_SQL);
    this.appendWithWebhooksStatement = statement<AppendRow>('append_messages_webhooks', APPEND_WITH_WEBHOOKS_SQL);
  }

  /**
   * Appends through a batch. When the answer has no `batched` result the send needs the transactional path, and
   * the caller must call `release` once that path is done: until then the conversation's later sends wait.
   */
  append(sender: Sender, input: SendInput): Promise<BatchAnswer> {
    if (!isUuid(input.conversationId)) {
      this.stats.declined++;
      return Promise.resolve({ batched: null, release: () => undefined });
    }
    // One spelling per conversation, so "busy" and one-per-batch hold however the client cased the id.
    const conversationId = input.conversationId.toLowerCase();
    return new Promise((resolve) => {
      this.queue.push({ sender, input: { ...input, conversationId }, resolve });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate runs after the current poll phase: every send read from the sockets in this turn joins the batch.
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private release(conversationId: string): void {
    this.busy.delete(conversationId);
    if (this.queue.length > 0) this.schedule();
  }

  private pump(): void {
    while (this.running < this.options.concurrency && this.queue.length > 0) {
      const batch: Pending[] = [];
      const rest: Pending[] = [];
      for (const p of this.queue) {
        const id = p.input.conversationId;
        if (batch.length < this.options.maxBatch && !this.busy.has(id)) {
          batch.push(p);
          this.busy.add(id);
        } else {
          rest.push(p);
        }
      }
      if (batch.length === 0) return;
      this.queue = rest;
      this.running++;
      void this.run(batch).finally(() => {
        this.running--;
        if (this.queue.length > 0) this.schedule();
      });
    }
  }

  private async run(batch: Pending[]): Promise<void> {
    const answers: BatchAnswer[] = batch.map((p) => ({ batched: null, release: () => this.release(p.input.conversationId) }));
    try {
      const rows = await this.write(batch);
      for (const r of rows) {
        const p = batch[r.ord]!;
        answers[r.ord] = {
          batched: {
            conversation: rowFromJson<Conversation>(r.conversation, 'batch_'),
            message: rowFromJson<Message>(r.message),
            reopened: p.sender.type === 'visitor' && r.previous_status === 'resolved',
          },
          release: () => undefined,
        };
        // Stored: the conversation's next send may go.
        this.busy.delete(p.input.conversationId);
      }
      this.stats.appended += rows.length;
      this.stats.declined += batch.length - rows.length;
    } catch {
      // Nothing was written (one statement): every send of the batch takes the transactional path, which reports
      // its own error. Their conversations stay busy until each is released.
      this.stats.failed++;
      this.stats.declined += batch.length;
    }
    batch.forEach((p, i) => p.resolve(answers[i]!));
  }

  private async write(batch: Pending[]): Promise<AppendRow[]> {
    const input = batch.map(({ sender, input }, ord) => ({
      ord,
      organization_id: sender.orgId,
      conversation_id: input.conversationId,
      sender_type: sender.type,
      sender_id: senderIdOf(sender),
      visitor_session_id: sender.type === 'visitor' ? sender.sessionId : null,
      content: input.content,
      type: input.type ?? 'text',
      private: !!input.private,
      metadata: input.metadata ?? {},
      client_message_id: input.clientMessageId ?? null,
    }));
    this.stats.batches++;
    const withWebhooks = this.outbox ? await this.outbox.wantsMessages(batch.map((p) => p.sender.orgId)) : false;
    return (withWebhooks ? this.appendWithWebhooksStatement : this.appendStatement).rows([JSON.stringify(input), new Date().toISOString()]);
  }
}
