// The realtime protocol, declared once: event names and payloads in both directions, for the server and for
// agent and widget clients (import these types into a socket.io-client `Socket<ServerToClient, ClientToServer>`).
// What clients send is typed from the payload schemas that validate it (schemas.ts).
import type { FromSchema } from 'json-schema-to-ts';
import type { ContactConflictView, ContactView } from '../server/presenters/contact.js';
import type { ConversationView, MessageView } from '../server/presenters/conversation.js';
import type { NotificationView } from '../server/presenters/notification.js';
import type { TicketView } from '../server/presenters/ticket.js';
import type { ChannelDeliveryView, ChannelView } from '../server/presenters/channel.js';
import type { LocalAssist } from '../server/services/knowledge/index.js';
import type { TicketAction } from '../server/services/tickets/index.js';
import type * as schemas from './schemas.js';

export type Ack<T> = { success: true; data: T } | { success: false; error: { code: string; message: string; details: { field?: string; message: string; in?: string }[] } };
export type AckFn<T> = (response: Ack<T>) => void;

export type AgentStatus = UpdateStatusPayload['status'];

/** An agent's message; `private` (agents only) makes it an internal note that never reaches the visitor. */
export interface SendMessagePayload extends FromSchema<typeof schemas.agentSendMessage> {}
export interface VisitorSendMessagePayload extends FromSchema<typeof schemas.visitorSendMessage> {}
export interface ConversationRef extends FromSchema<typeof schemas.conversationRef> {}
export interface SyncPayload extends FromSchema<typeof schemas.sync> {}
export interface UpdateStatusPayload extends FromSchema<typeof schemas.updateStatus> {}

/** Events an agent's client sends. */
export interface AgentToServerEvents {
  send_message: (payload: SendMessagePayload, ack: AckFn<{ message: MessageView }>) => void;
  join_conversation: (payload: ConversationRef, ack: AckFn<Record<string, never>>) => void;
  leave_conversation: (payload: ConversationRef, ack: AckFn<Record<string, never>>) => void;
  typing_start: (payload: ConversationRef, ack: AckFn<Record<string, never>>) => void;
  typing_stop: (payload: ConversationRef, ack: AckFn<Record<string, never>>) => void;
  update_status: (payload: UpdateStatusPayload, ack: AckFn<{ status: AgentStatus }>) => void;
  sync: (payload: SyncPayload, ack: AckFn<{ messages: MessageView[]; hasMore: boolean }>) => void;
  /** Knowledge passages and templates for the conversation at once; the AI service's suggestion follows as assist_result. */
  request_assist: (payload: ConversationRef, ack: AckFn<LocalAssist & { aiPending: boolean }>) => void;
}

/** Events a visitor's widget sends. */
export interface VisitorToServerEvents {
  send_message: (payload: VisitorSendMessagePayload, ack: AckFn<{ message: MessageView }>) => void;
  typing_start: (payload: ConversationRef, ack: AckFn<Record<string, never>>) => void;
  typing_stop: (payload: ConversationRef, ack: AckFn<Record<string, never>>) => void;
  sync: (payload: SyncPayload, ack: AckFn<{ messages: MessageView[]; hasMore: boolean }>) => void;
}

export type ClientToServerEvents = AgentToServerEvents & VisitorToServerEvents;

/** Events the server sends; a visitor only ever receives new_message (public), status_updated, agent typing and session_expired. */
export interface ServerToClientEvents {
  new_message: (payload: { conversationId: string; message: MessageView }) => void;
  new_widget_conversation: (payload: { conversation: ConversationView }) => void;
  conversation_updated: (payload: { conversation: ConversationView }) => void;
  conversation_assigned: (payload: { conversationId: string; assignedTo: string | null }) => void;
  conversation_escalated: (payload: { conversation: ConversationView; reason: string | null }) => void;
  status_updated: (payload: { conversationId: string; status: string }) => void;
  customer_typing: (payload: ConversationRef) => void;
  customer_stopped_typing: (payload: ConversationRef) => void;
  agent_typing: (payload: { conversationId: string; agent: { id: string; name: string } }) => void;
  agent_stopped_typing: (payload: { conversationId: string; agent: { id: string; name: string } }) => void;
  user_status_update: (payload: { userId: string; status: AgentStatus }) => void;
  notification_created: (payload: { notification: NotificationView }) => void;
  /** Agents only: a ticket was created, changed, merged, linked, answered or deleted. */
  ticket_updated: (payload: { action: TicketAction; ticket: TicketView }) => void;
  session_expired: (payload: Record<string, never>) => void;
  contact_created: (payload: { contact: ContactView }) => void;
  contact_updated: (payload: { contact: ContactView }) => void;
  /** `sourceContactId` no longer exists; its conversations, notes and identities now belong to `contact`. */
  contact_merged: (payload: { contact: ContactView; sourceContactId: string }) => void;
  contact_conflict_created: (payload: { conflict: ContactConflictView }) => void;
  /** Agents only: a knowledge source is being (re)indexed. */
  message_delivery_updated: (payload: { delivery: ChannelDeliveryView }) => void;
  /** Agents only: a channel's status moved (`channel.status` is the new one; secrets masked). */
  channel_status_changed: (payload: { channel: ChannelView; previousStatus: string }) => void;
  knowledge_indexing_progress: (payload: { documentId: string; status: string; chunksDone: number; chunksTotal: number }) => void;
  /** Agents only: the AI recorded a question it could not answer. */
  unanswered_question_created: (payload: { question: { id: string; question: string; occurrences: number; status: string } }) => void;
  /** The asking agent's socket only: the AI service's suggestion after request_assist (null when it failed). */
  assist_result: (payload: { conversationId: string; suggestion: Record<string, unknown> | null }) => void;
}
