// The rules of appending a message, written once: what a send may carry, and the one statement that appends it
// (next seq, counters, reopening, first reply, human joined, the analytics moments). The batch runs the statement
// for many sends at once on its own connection; the transactional path runs it for one send inside its transaction,
// after the locks and decisions only it makes. Both therefore store exactly the same thing.
import type { Knex } from 'knex';
import { v7 as timeOrderedUuid } from 'uuid';
import type { Conversation } from '../../../db/models/Conversation.js';
import type { Message } from '../../../db/models/Message.js';
import { rowFromJson, rowsIn } from '../../../db/statements.js';
import { ValidationFailed } from '../../errors.js';
import { WEBHOOK_FANOUT_QUEUE } from '../webhooks/queue.js';
import { senderIdOf, storedSenderType, type Appended, type AppendedInTransaction, type ConversationRef, type MessageInput, type Sender } from './types.js';
import { MESSAGE_CONTENT_MAX } from '../../limits.js';

/** A NUL escape in JSON text: `\u0000` after an even number of backslashes (an odd one would be a literal backslash). */
const NUL_IN_JSON = /(?:^|[^\\])(?:\\\\)*\\u0000/;

/** Refuses what no path may store: an internal note from a customer or the AI, empty or oversized text, NUL. */
export function checkMessage(sender: Sender, input: MessageInput): void {
  // Internal notes come from agents, or from the platform itself (the AI's resolution summary).
  if (input.private && sender.type !== 'agent' && sender.type !== 'system') throw new ValidationFailed('Only agents write internal notes', [{ field: 'private', message: 'is for agents only' }]);
  if (input.content.length === 0 || input.content.length > MESSAGE_CONTENT_MAX) {
    throw new ValidationFailed(`content must be 1..${MESSAGE_CONTENT_MAX} characters`, [{ field: 'content', message: 'has the wrong length' }]);
  }
  // PostgreSQL text cannot hold NUL; refused here with a clear error rather than failing a batch of other people's sends.
  if (input.content.includes('\u0000') || (input.metadata && NUL_IN_JSON.test(JSON.stringify(input.metadata)))) {
    throw new ValidationFailed('Text must not contain NUL characters', [{ field: input.content.includes('\u0000') ? 'content' : 'metadata', message: 'contains a NUL character' }]);
  }
}

/** One send as the statement reads it (a row of its `$1` recordset). */
export interface AppendRow {
  ord: number;
  /**
   * The message's id, time-ordered (UUIDv7): consecutive messages go to the right edge of the primary key's index
   * rather than each to a random leaf page of it, so a batch dirties a few pages, not one per message, and after a
   * checkpoint writes a few full-page images to the WAL, not one per message.
   */
  message_id: string;
  organization_id: string;
  conversation_id: string;
  sender_type: string;
  sender_id: string | null;
  visitor_session_id: string | null;
  /** A channel's contact: the conversation must be that contact's. */
  contact_id: string | null;
  content: string;
  type: string;
  private: boolean;
  metadata: Record<string, unknown>;
  client_message_id: string | null;
  /**
   * Set by the batch: no replies in channel conversations, and no reopening when the organization's webhooks want
   * conversation.updated (that event is written by the transactional path, in the message's transaction).
   */
  batched: boolean;
  decline_reopen: boolean;
}

export function appendRow(ord: number, sender: Sender, input: MessageInput & { conversationId: string }, batch: { batched: boolean; declineReopen: boolean }): AppendRow {
  return {
    ord,
    message_id: timeOrderedUuid(),
    organization_id: sender.orgId,
    conversation_id: input.conversationId,
    sender_type: storedSenderType(sender),
    sender_id: senderIdOf(sender),
    visitor_session_id: sender.type === 'visitor' ? sender.sessionId : null,
    contact_id: sender.type === 'contact' ? sender.contactId : null,
    content: input.content,
    type: input.type ?? 'text',
    private: !!input.private,
    metadata: input.metadata ?? {},
    client_message_id: input.clientMessageId ?? null,
    batched: batch.batched,
    decline_reopen: batch.declineReopen,
  };
}

/**
 * What the statement answers per stored send: what only the database knows. The rest of the message is the send's
 * own input (messageOf), so neither side builds or parses a json copy of what the client already holds.
 */
export interface AppendResultRow {
  ord: number;
  previous_status: string;
  /** The conversation's whole row (row_to_json), or null when a batched send left its status as it was. */
  conversation: Record<string, unknown> | null;
  /** The conversation's visitor session (an agent's send does not carry it, and its announcement needs it). */
  visitor_session_id: string | null;
  id: string;
  seq: number;
  created_at: Date;
  /** The stored metadata (jsonb normalizes it), or null when it is empty. */
  metadata: Record<string, unknown> | null;
}

/** A visitor's message reopened a resolved conversation (the only move of its status an append makes). */
const reopens = (row: AppendResultRow): boolean => row.previous_status === 'resolved' && row.conversation?.status === 'open';

/** The stored message: the send's input and what the statement answered, keyed as a row of the messages table. */
function messageOf(row: AppendResultRow, input: AppendRow): Message {
  return {
    id: row.id,
    organizationId: input.organization_id,
    conversationId: input.conversation_id,
    seq: row.seq,
    senderType: input.sender_type,
    senderId: input.sender_id,
    content: input.content,
    type: input.type,
    private: input.private,
    metadata: row.metadata ?? {},
    clientMessageId: input.client_message_id,
    createdAt: row.created_at,
  } as Message;
}

/**
 * A batched append's answer, from the statement's row, the send's input row and the time the statement wrote as
 * last_message_at: the conversation's whole row came back only when the message reopened it.
 */
export function appendedOf(row: AppendResultRow, input: AppendRow, at: string): Appended {
  const message = messageOf(row, input);
  if (reopens(row)) return { message, conversation: rowFromJson<Conversation>(row.conversation!), reopened: true };
  const conversation: ConversationRef = {
    id: input.conversation_id,
    organizationId: input.organization_id,
    visitorSessionId: row.visitor_session_id,
    lastSeq: row.seq,
    lastMessageAt: new Date(at),
  };
  return { message, conversation, reopened: false };
}

// Per input row (`ord`): which conversation, who sends and what; every later step joins on ord, so a row only ever
// writes where its own organization and visitor checks passed. Locks are taken in id order, and a conversation
// another transaction holds is skipped (declined) rather than waited for: one busy row never stalls the batch (a
// row the caller's own transaction locked is not skipped). NO KEY UPDATE is enough to serialize writers and still
// lets inserts that merely reference the row (views, runs) through. The `= any(array(...))` lets the planner find
// the rows by primary key (it cannot size the recordset). Since no lock is waited for, the time taken just before
// the statement is the time of the write. The NOT EXISTS reads the statement's snapshot; a retry committed meanwhile
// is caught by the unique index instead. Batched replies in channel conversations (email, WhatsApp, Telegram) are
// declined: they write a delivery in the transaction, which only the transactional path does; a customer's message
// there writes none and may be batched.
// A customer's message (sender_type visitor) counts as unread and reopens a resolved conversation; an agent's marks
// a human joined, and a public one the first reply; public agent and AI messages the first response; the first
// human reply counts from the escalation (a reply before it is replaced by the first one after it).
// Each send answers only what the database decided: the message's id, seq, created_at and stored metadata (when
// not empty), and the conversation's visitor session; the rest is the send's own input (appendedOf). The
// conversation's whole row comes back as json text (row_to_json, half the work of to_jsonb, which also sorts and
// binary-encodes keys) only when the status moved or the send is not batched. Building and parsing json copies of
// both rows was about a sixth of the statement's time. The message's id comes with the input (AppendRow), its
// created_at is now() (the column's default), and its metadata is the input's jsonb, which is what the column
// stores: the answer is read from the update alone, and the insert answers nothing (joining its answer back to the
// update's, a nested loop over both, was a tenth of the statement). The input is joined once: the locked target
// carries the send's columns on to the update, and the update's answer carries them on to the insert (each join
// of a CTE builds a hash table of its own, most of a small batch's fixed cost).
// updated_at moves only when one of those changes the conversation itself (readers take the later of it and
// last_message_at): a plain message then changes no indexed column, so its row update is a heap-only (HOT) update
// that adds no entry to any of the conversation's indexes. On PostgreSQL 15 and older the BRIN index on updated_at
// would otherwise make every message's update write a new entry into each of them.
export const APPEND_SQL = `
with input as (
  select * from jsonb_to_recordset($1::jsonb) as i(
    ord int, message_id uuid, organization_id uuid, conversation_id uuid, sender_type text, sender_id uuid,
    visitor_session_id uuid, contact_id uuid, content text, type text, private boolean, metadata jsonb, client_message_id text,
    batched boolean, decline_reopen boolean)
),
target as (
  select c.id, c.status as previous_status, i.ord, i.message_id, i.organization_id, i.sender_type, i.sender_id, i.content, i.type, i.private, i.metadata, i.client_message_id, i.batched
  from conversations c join input i on i.conversation_id = c.id
  where c.id = any(array(select conversation_id from input))
    and c.organization_id = i.organization_id and c.status <> 'closed'
    and (i.visitor_session_id is null or c.visitor_session_id = i.visitor_session_id)
    and (i.contact_id is null or c.contact_id = i.contact_id)
    and (not i.batched or c.channel = 'widget' or i.sender_type = 'visitor')
    and not (i.decline_reopen and i.sender_type = 'visitor' and c.status = 'resolved')
  order by c.id
  for no key update of c skip locked
),
conv as (
  update conversations c set
    last_seq = c.last_seq + 1,
    last_message_at = $2::timestamptz,
    updated_at = case when (i.sender_type = 'visitor' and c.status = 'resolved')
      or (i.sender_type = 'agent' and (c.human_joined_at is null or (not i.private and (c.first_reply_at is null or c.first_human_reply_at is null or c.first_human_reply_at < c.escalated_at))))
      or (i.sender_type in ('agent', 'ai') and not i.private and c.first_response_at is null)
      then $2::timestamptz else c.updated_at end,
    unread_count = c.unread_count + (case when i.sender_type = 'visitor' then 1 else 0 end),
    status = case when i.sender_type = 'visitor' and c.status = 'resolved' then 'open' else c.status end,
    resolved_at = case when i.sender_type = 'visitor' and c.status = 'resolved' then null else c.resolved_at end,
    first_reply_at = case when i.sender_type = 'agent' and not i.private then coalesce(c.first_reply_at, $2::timestamptz) else c.first_reply_at end,
    human_joined_at = case when i.sender_type = 'agent' then coalesce(c.human_joined_at, $2::timestamptz) else c.human_joined_at end,
    first_response_at = case when i.sender_type in ('agent', 'ai') and not i.private then coalesce(c.first_response_at, $2::timestamptz) else c.first_response_at end,
    first_human_reply_at = case when i.sender_type = 'agent' and not i.private and (c.first_human_reply_at is null or c.first_human_reply_at < c.escalated_at) then $2::timestamptz else c.first_human_reply_at end,
    first_human_reply_by = case when i.sender_type = 'agent' and not i.private and (c.first_human_reply_at is null or c.first_human_reply_at < c.escalated_at) then i.sender_id else c.first_human_reply_by end
  from target i
  where c.id = i.id
    and (i.client_message_id is null or not exists (
      select 1 from messages m where m.conversation_id = c.id and m.client_message_id = i.client_message_id))
  returning c.id, c.last_seq, i.ord as batch_ord, i.previous_status as batch_previous_status,
    case when i.batched and c.status = i.previous_status then null else row_to_json(c) end as conversation,
    c.visitor_session_id as batch_visitor_session_id, i.message_id, now() as message_created_at,
    nullif(i.metadata, '{}'::jsonb) as message_metadata,
    i.organization_id, i.sender_type, i.sender_id, i.content, i.type, i.private, i.metadata, i.client_message_id
),
msg as (
  insert into messages (id, organization_id, conversation_id, seq, sender_type, sender_id, content, type, private, metadata, client_message_id, created_at)
  select message_id, organization_id, id, last_seq, sender_type, sender_id, content, type, private, metadata, client_message_id, message_created_at
  from conv
)
select batch_ord as ord, batch_previous_status as previous_status, conversation, batch_visitor_session_id as visitor_session_id,
  message_id as id, last_seq as seq, message_created_at as created_at, message_metadata as metadata
from conv`;

/**
 * The same statement when an organization in the batch has webhooks wanting message.created: it also writes, per
 * organization with such a subscription and public messages in the batch, one fan-out job carrying those messages'
 * ids (the outbox: it commits exactly when the messages do). The job then writes a delivery per subscription and
 * message (see webhooks/fanout.ts), off the message path. Batches of organizations without such webhooks run
 * APPEND_SQL and pay nothing.
 */
export const APPEND_WITH_WEBHOOKS_SQL = APPEND_SQL.replace(
  /\)\nselect batch_ord/,
  `),
hook_org as (
  select distinct w.organization_id from webhooks w
  where w.organization_id in (select organization_id from conv where not private) and w.enabled
    and jsonb_exists_any(w.events, array['*', 'message.*', 'message.created'])
),
fanout_job as (
  insert into jobs (queue, payload, organization_id)
  select '${WEBHOOK_FANOUT_QUEUE}', jsonb_build_object('messageIds', jsonb_agg(conv.message_id)), conv.organization_id
  from conv join hook_org on hook_org.organization_id = conv.organization_id
  where not conv.private
  group by conv.organization_id
)
select batch_ord`,
);

if (APPEND_WITH_WEBHOOKS_SQL === APPEND_SQL) throw new Error('the webhook variant of the append statement did not apply');

/**
 * Appends one message to a conversation the caller's transaction has locked and found open to this sender: the
 * same statement as a batch, with a batch of one.
 */
export async function appendInTransaction(trx: Knex.Transaction, sender: Sender, input: MessageInput & { conversationId: string }): Promise<AppendedInTransaction> {
  const row = appendRow(0, sender, input, { batched: false, declineReopen: false });
  const rows = await rowsIn<AppendResultRow>(trx, APPEND_SQL, [JSON.stringify([row]), new Date().toISOString()]);
  // The caller holds the row and checked closed, owner and clientMessageId: a missing row is a broken invariant.
  const stored = rows[0];
  if (!stored?.conversation) {
    throw new Error(`the append to conversation ${input.conversationId} stored nothing or answered no conversation row`);
  }
  // Not batched: the statement answered the conversation's whole row.
  return { message: messageOf(stored, row), conversation: rowFromJson<Conversation>(stored.conversation), reopened: reopens(stored) };
}
