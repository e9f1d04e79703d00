// Who may do what to a conversation, for REST routes and agent socket events alike.
import type { Rule } from './access.js';

export type ConversationAction =
  /** Read it and its messages (REST reads, socket join, sync and assist). */
  | 'read'
  /** Write a message or an internal note in it (REST reply, socket send_message). */
  | 'reply'
  /** Change its priority or tags. */
  | 'update'
  | 'changeStatus'
  | 'assign'
  | 'markRead'
  | 'linkContact';

export type ConversationRules = Record<ConversationAction, Rule>;

export const conversationRules: ConversationRules = {
  read: { role: 'agent', scope: 'conversations:read' },
  reply: { role: 'agent', scope: 'conversations:write' },
  update: { role: 'agent', scope: 'conversations:write' },
  changeStatus: { role: 'agent', scope: 'conversations:write' },
  assign: { role: 'agent', scope: 'conversations:write' },
  markRead: { role: 'agent', scope: 'conversations:write' },
  linkContact: { role: 'agent', scope: 'conversations:write' },
};
