// Group commit for the common send: a message appended to a conversation that is not closed, with no earlier
// message under its clientMessageId. Sends that arrive in the same event-loop turn are written together by one
// statement (lock, seq, counters and insert), committed once. One statement per batch instead of a transaction of
// six round trips per message is what lets one instance carry thousands of messages a second: on loopback each
// statement costs a write syscall and a wake-up of its own, and the commit an fsync.
//
// The batch only takes the path with no decisions to make. Anything else (conversation missing, closed or not the
// visitor's, a clientMessageId seen before, or the statement failing as a whole) comes back as `null` and the
// caller runs its transactional path, which owns every rule and error. The unique index on
// (conversation_id, client_message_id) guards the race the batch cannot see: a concurrent retry makes the
// statement fail, and the retries then meet the stored message on the transactional path.
import type { Knex } from 'knex';
import type { Conversation } from '../../db/models/Conversation.js';
import type { Message } from '../../db/models/Message.js';
import type { Sender, SendInput } from './messages.js';

export interface BatchedSend {
  message: Message;
  conversation: Conversation;
  reopened: boolean;
}

interface Pending {
  sender: Sender;
  input: SendInput;
  resolve: (result: BatchedSend | null) => void;
}

export interface MessageBatcherOptions {
  /** Batches in flight at once; each holds one pooled connection for one statement. */
  concurrency: number;
  /** Most messages one statement carries. */
  maxBatch: number;
  /**
   * Run the statement as a named prepared statement (node-postgres): PostgreSQL parses and plans it once per
   * connection instead of once per batch. PGlite's driver has no named statements.
   */
  prepared: boolean;
}

/** The two drivers behind knex: node-postgres takes a query config, PGlite text and values. */
interface DriverConnection {
  query(config: { name: string; text: string; values: unknown[] } | string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}
interface PooledClient {
  acquireConnection(): Promise<DriverConnection>;
  releaseConnection(connection: DriverConnection): Promise<void>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

// Per input row: which conversation, who sends and what. Locks are taken in id order so two batches never deadlock;
// the `= any(array(...))` lets the planner find the rows by primary key (it cannot estimate the recordset's size).
// The UPDATE's SET reads the row version it locked, so last_seq + 1 is right even after waiting for another writer.
// The NOT EXISTS reads the statement's snapshot; a retry committed meanwhile is caught by the unique index instead.
const APPEND_SQL = `
with input as (
  select * from jsonb_to_recordset($1::jsonb) as i(
    ord int, organization_id uuid, conversation_id uuid, sender_type text, sender_id uuid, visitor_session_id uuid,
    content text, type text, private boolean, metadata jsonb, client_message_id text)
),
target as (
  select c.id, c.status as previous_status
  from conversations c join input i on i.conversation_id = c.id
  where c.id = any(array(select conversation_id from input))
    and c.organization_id = i.organization_id and c.status <> 'closed'
    and (i.visitor_session_id is null or c.visitor_session_id = i.visitor_session_id)
  order by c.id
  for update of c
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
    human_joined_at = case when i.sender_type = 'agent' then coalesce(c.human_joined_at, $2::timestamptz) else c.human_joined_at end
  from target t join input i on i.conversation_id = t.id
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

const camelKeys = new Map<string, string>();
const camel = (key: string): string => {
  let k = camelKeys.get(key);
  if (k === undefined) {
    k = key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
    camelKeys.set(key, k);
  }
  return k;
};

/** A row that came back as jsonb, shaped like a knex row: camelCased keys, timestamp columns (`*_at`) as Dates. */
function rowOf<T>(json: Record<string, unknown>): T {
  const row: Record<string, unknown> = {};
  for (const key in json) {
    if (key.startsWith('batch_')) continue;
    const value = json[key];
    row[camel(key)] = key.endsWith('_at') && typeof value === 'string' ? new Date(value) : value;
  }
  return row as T;
}

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
  /** Conversations with a batch in flight: their next message waits, so one conversation's sends keep their order. */
  private busy = new Set<string>();

  constructor(
    private readonly knex: Knex,
    private readonly options: MessageBatcherOptions,
  ) {}

  /** Appends through a batch, or answers null when the send needs the transactional path. */
  append(sender: Sender, input: SendInput): Promise<BatchedSend | null> {
    if (!UUID.test(input.conversationId)) {
      this.stats.declined++;
      return Promise.resolve(null);
    }
    return new Promise((resolve) => {
      this.queue.push({ sender, input, resolve });
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

  private pump(): void {
    while (this.running < this.options.concurrency && this.queue.length > 0) {
      const batch: Pending[] = [];
      const rest: Pending[] = [];
      const taken = new Set<string>();
      for (const p of this.queue) {
        const id = p.input.conversationId;
        if (batch.length < this.options.maxBatch && !this.busy.has(id) && !taken.has(id)) {
          batch.push(p);
          taken.add(id);
        } else {
          rest.push(p);
        }
      }
      if (batch.length === 0) return;
      this.queue = rest;
      for (const id of taken) this.busy.add(id);
      this.running++;
      void this.run(batch).finally(() => {
        this.running--;
        for (const id of taken) this.busy.delete(id);
        if (this.queue.length > 0) this.schedule();
      });
    }
  }

  /** One statement on a pooled connection, outside knex's query builder: the SQL is fixed, only values change. */
  private async execute(values: unknown[]): Promise<unknown[]> {
    const client = this.knex.client as unknown as PooledClient;
    const connection = await client.acquireConnection();
    try {
      const result = this.options.prepared ? await connection.query({ name: 'append_messages', text: APPEND_SQL, values }) : await connection.query(APPEND_SQL, values);
      return result.rows;
    } finally {
      await client.releaseConnection(connection);
    }
  }

  private async run(batch: Pending[]): Promise<void> {
    const now = new Date();
    const input = batch.map(({ sender, input }, ord) => ({
      ord,
      organization_id: sender.orgId,
      conversation_id: input.conversationId,
      sender_type: sender.type,
      sender_id: sender.type === 'agent' ? sender.userId : sender.type === 'visitor' ? sender.sessionId : null,
      visitor_session_id: sender.type === 'visitor' ? sender.sessionId : null,
      content: input.content,
      type: input.type ?? 'text',
      private: !!input.private,
      metadata: input.metadata ?? {},
      client_message_id: input.clientMessageId ?? null,
    }));
    this.stats.batches++;
    let rows: Array<{ ord: number; previous_status: string; conversation: Record<string, unknown>; message: Record<string, unknown> }>;
    try {
      rows = (await this.execute([JSON.stringify(input), now.toISOString()])) as typeof rows;
    } catch {
      // Nothing was written (one statement): every send of the batch takes the transactional path, which reports its own error.
      this.stats.failed++;
      this.stats.declined += batch.length;
      for (const p of batch) p.resolve(null);
      return;
    }
    const done = new Array<BatchedSend | null>(batch.length).fill(null);
    for (const r of rows) {
      const sender = batch[r.ord]!.sender;
      done[r.ord] = {
        conversation: rowOf<Conversation>(r.conversation),
        message: rowOf<Message>(r.message),
        reopened: sender.type === 'visitor' && r.previous_status === 'resolved',
      };
    }
    this.stats.appended += rows.length;
    this.stats.declined += batch.length - rows.length;
    batch.forEach((p, i) => p.resolve(done[i]!));
  }
}
