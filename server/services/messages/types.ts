// The words of the message path, shared by its callers (routes, sockets, channels, AI, storage) without pulling in
// the service: who sends, what, and what a send answers.
import type { Knex } from 'knex';
import type { Conversation } from '../../../db/models/Conversation.js';
import type { AttachmentView, Message, MessageType, SenderType } from '../../../db/models/Message.js';

export type { AttachmentView };

export type Sender =
  | { type: 'agent'; orgId: string; userId: string }
  | { type: 'visitor'; orgId: string; sessionId: string }
  | { type: 'ai'; orgId: string }
  | { type: 'system'; orgId: string }
  /** A customer writing through a channel (email, WhatsApp, Telegram): stored as a visitor message of its contact. */
  | { type: 'contact'; orgId: string; contactId: string };

/** What a message says, wherever it goes. */
export interface MessageInput {
  content: string;
  type?: MessageType;
  private?: boolean;
  clientMessageId?: string | null;
  metadata?: Record<string, unknown>;
  /** Uploaded files (storage object ids) shown with the message. */
  attachments?: string[];
}

/** A message to an existing conversation. */
export interface SendInput extends MessageInput {
  conversationId: string;
}

/**
 * How a conversation a customer's first message opens is filed. The organization, status, visitor session or
 * contact come from the sender.
 */
export interface NewConversation {
  /** `widget` (the default) or the channel's type. */
  channel?: string;
  source?: string | null;
  subject?: string | null;
  visitorName?: string | null;
  visitorEmail?: string | null;
  channelId?: string | null;
  channelAddress?: string | null;
}

/** A customer's first message, which opens a conversation (visitors and channel contacts only). */
export interface StartInput extends MessageInput {
  start: NewConversation;
}

/**
 * The fields of its conversation every send answers. A batched send that changed nothing in the conversation but
 * its seq reads no more of the row (building and parsing the whole row was a good share of a message's cost);
 * a send that changed more (opened or reopened it) or took the transaction answers the whole row.
 */
export type ConversationRef = Pick<Conversation, 'id' | 'organizationId' | 'visitorSessionId' | 'lastSeq' | 'lastMessageAt'>;

/** What one append wrote: the message and the conversation after it (whole when the append reopened it). */
export type Appended =
  | { message: Message; conversation: ConversationRef; reopened: false }
  /** A visitor wrote to a resolved conversation, which is open again. */
  | { message: Message; conversation: Conversation; reopened: true };

/** What the transactional path's append answers: always the whole conversation. */
export interface AppendedInTransaction {
  message: Message;
  conversation: Conversation;
  reopened: boolean;
}

export type SendResult = Appended & {
  /** The clientMessageId was seen before: this is the stored message, nothing new was written or announced. */
  duplicate: boolean;
  /** The message opened a new conversation (a first message, or a visitor writing to a closed one). */
  started: boolean;
};

/** What a customer's first message answers: the conversation it opened (or an earlier try opened), whole. */
export type StartResult = SendResult & { conversation: Conversation };

/** Writes a channel delivery of a public agent or AI message in a channel conversation, in the message's transaction. */
export interface ChannelOutbox {
  record(trx: Knex.Transaction, conversation: Conversation, message: Message): Promise<void>;
}

/** What the storage module does for messages with files. */
export interface AttachmentPort {
  /** Checks the files and stores them with the message, inside the message's transaction. */
  attach(trx: Knex.Transaction, sender: Sender, message: Message, objectIds: string[]): Promise<AttachmentView[]>;
  /** Sets `attachments` (with fresh URLs) on messages that carry files, an empty list on the others. */
  decorate(orgId: string, messages: Message[]): Promise<void>;
}

/** The id stored as a message's senderId: the agent's user, the visitor's session, the contact; none for ai and system. */
export const senderIdOf = (sender: Sender): string | null =>
  sender.type === 'agent' ? sender.userId : sender.type === 'visitor' ? sender.sessionId : sender.type === 'contact' ? sender.contactId : null;

/** The sender_type column: a channel's contact writes as the customer side, like a widget visitor. */
export const storedSenderType = (sender: Sender): SenderType => (sender.type === 'contact' ? 'visitor' : sender.type);
