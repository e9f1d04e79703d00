// /conversations: the agents' inbox, history, replies, status, routing, read marks, recents and contact links.
import { presentConversation, presentMessage } from '../server/presenters/conversation.js';
import type { Rule } from '../server/policies/index.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { aliasOf, unalias } from './schemas/aliases.js';
import { email, object, pageSize, paginationQuery, params, personName } from './schemas/common.js';
import { tags } from './schemas/contacts.js';
import { attachmentIds, clientMessageId, content, ConversationView, MessageView } from './schemas/live.js';
import { SEARCH_TEXT_MAX } from '../server/limits.js';

const tag = 'Conversations';
const status = { type: 'string', enum: ['open', 'pending', 'resolved', 'closed'] } as const;
const priority = { type: 'string', enum: ['low', 'medium', 'high', 'urgent'] } as const;
const assignee = { type: ['string', 'null'], format: 'uuid', description: 'The agent to assign (a user id of the organization); null unassigns' } as const;
/** A route's auth and API key scope, from the conversation policy (the socket events apply the same rules). */
const by = (rule: Rule) => ({ auth: { kind: 'org', role: rule.role, orgFrom: 'token' } as const, scope: rule.scope });
const withMessages = { ...ConversationView, properties: { ...(ConversationView.properties as object), messages: { type: 'array', items: MessageView } } };

export function conversationRoutes(s: RouteServices): AnyRoute[] {
  const rules = s.policies.conversation;
  return [
    defineRoute({
      method: 'get', path: '/conversations', operationId: 'listConversations', tag, ...by(rules.read),
      summary: 'Conversations of the active organization, newest activity first (without messages)',
      query: object({ ...paginationQuery, status, assignedToMe: { type: 'boolean' }, unassigned: { type: 'boolean' }, q: { type: 'string', maxLength: SEARCH_TEXT_MAX, description: 'Matches subject, visitor name or email, and message text' } }),
      response: { status: 200, description: 'Conversations', data: { type: 'array', items: ConversationView }, paginated: true },
      handler: async ({ query, orgId, actor }) => {
        const { conversations, total } = await s.conversations.list(orgId, actor.userId, query);
        return { message: 'Conversations', data: conversations.map(presentConversation), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'get', path: '/conversations/recents', operationId: 'listRecentConversations', tag, ...by(rules.read),
      summary: 'The conversations you opened most recently (up to 20)',
      response: { status: 200, description: 'Recently viewed', data: { type: 'array', items: ConversationView } },
      handler: async ({ orgId, actor }) => ({ message: 'Recent conversations', data: (await s.conversations.recents(orgId, actor.userId)).map(presentConversation) }),
    }),
    defineRoute({
      method: 'delete', path: '/conversations/recents', operationId: 'clearRecentConversations', tag, ...by(rules.markRead),
      summary: 'Forget your recently viewed conversations',
      response: { status: 200, description: 'Cleared' },
      handler: async ({ orgId, actor }) => {
        await s.conversations.clearRecents(orgId, actor.userId);
        return { message: 'Recent conversations cleared' };
      },
    }),
    defineRoute({
      method: 'get', path: '/conversations/:conversationId', operationId: 'getConversation', tag, ...by(rules.read),
      summary: 'One conversation with its whole message history, oldest first (internal notes included)',
      params: params('conversationId'),
      response: { status: 200, description: 'Conversation', data: withMessages },
      handler: async ({ params, orgId, actor }) => {
        const { conversation, messages } = await s.conversations.getWithHistory(orgId, actor.userId, params.conversationId);
        await s.messages.decorate(orgId, messages);
        return { message: 'Conversation', data: { ...presentConversation(conversation), messages: messages.map(presentMessage) } };
      },
    }),
    defineRoute({
      method: 'patch', path: '/conversations/:conversationId', operationId: 'updateConversation', tag, ...by(rules.update),
      summary: 'Change the priority and/or the tags (tags replace the list; stored lowercased and trimmed, once each)',
      description: 'A real change is announced as the per-field changes are: `conversation_updated` to the agents, and the `conversation.updated` webhook naming the changed fields. Status, assignee and contact have their own routes.',
      params: params('conversationId'),
      body: { ...object({ priority, tags }), minProperties: 1 },
      response: { status: 200, description: 'The conversation', data: ConversationView },
      handler: async ({ params, body, orgId }) => ({ message: 'Conversation updated', data: presentConversation(await s.conversations.update(orgId, params.conversationId, body)) }),
    }),
    defineRoute({
      method: 'get', path: '/conversations/:conversationId/messages', operationId: 'listMessages', tag, ...by(rules.read),
      summary: 'A page of messages: after `afterSeq` (ascending), or the newest before `beforeSeq`',
      params: params('conversationId'),
      query: object({ afterSeq: { type: 'integer', minimum: 0 }, beforeSeq: { type: 'integer', minimum: 1 }, limit: pageSize() }),
      response: { status: 200, description: 'Messages, ascending by seq', data: { type: 'array', items: MessageView } },
      handler: async ({ params, query, orgId }) => {
        await s.conversations.get(orgId, params.conversationId);
        const messages = await s.messages.page(orgId, params.conversationId, { ...query, publicOnly: false });
        return { message: 'Messages', data: messages.map(presentMessage) };
      },
    }),
    defineRoute({
      method: 'post', path: '/conversations/:conversationId/messages', operationId: 'replyToConversation', tag, ...by(rules.reply),
      summary: 'Reply as an agent (or write an internal note with `private: true`)',
      description: 'A repeated `clientMessageId` answers 200 with the first message and announces nothing again; one already used by another sender in this conversation answers 409. A closed conversation answers 400 invalid_transition.',
      params: params('conversationId'),
      body: object({ content, type: { type: 'string', enum: ['text', 'image', 'file'] }, private: { type: 'boolean' }, clientMessageId, attachments: attachmentIds }, ['content']),
      response: { status: 201, description: 'Stored and announced', data: MessageView, also: { status: 200, description: 'A repeated `clientMessageId`: the message stored the first time, not announced again' } },
      errors: [409],
      handler: async ({ params, body, orgId, actor }) => {
        const { message, duplicate } = await s.messages.send({ type: 'agent', orgId: orgId, userId: actor.userId }, { ...body, conversationId: params.conversationId });
        return { status: duplicate ? 200 : 201, message: duplicate ? 'Already stored' : 'Message sent', data: presentMessage(message) };
      },
    }),
    defineRoute({
      method: 'patch', path: '/conversations/:conversationId/status', operationId: 'changeConversationStatus', tag, ...by(rules.changeStatus),
      summary: 'Change the status: open <-> pending, open|pending -> resolved, resolved -> open, any -> closed (final)',
      params: params('conversationId'),
      body: object({ status }, ['status']),
      response: { status: 200, description: 'Changed', data: ConversationView },
      handler: async ({ params, body, orgId }) => ({ message: 'Status changed', data: presentConversation(await s.conversations.changeStatus(orgId, params.conversationId, body.status)) }),
    }),
    defineRoute({
      method: 'post', path: '/conversations/:conversationId/route', operationId: 'routeConversation', tag, ...by(rules.assign),
      summary: 'Assign to an agent of the organization, or unassign with `assignedTo: null`',
      description: '`assignedTo` is required (`agentId`, its old name here, is still accepted).',
      params: params('conversationId'),
      body: object({ assignedTo: assignee, agentId: aliasOf('assignedTo', assignee), reason: { type: 'string', maxLength: 500 } }),
      response: { status: 200, description: 'Routed', data: ConversationView },
      // Which of the two names is given is checked in the handler: a missing conversation is 404 before that.
      load: ({ params, orgId }) => s.conversations.get(orgId, params.conversationId),
      handler: async ({ params, body, orgId, actor }) => {
        const assignedTo = unalias<string | null>(body, 'assignedTo', 'agentId', { required: true })!;
        return {
          message: assignedTo ? 'Conversation assigned' : 'Conversation unassigned',
          data: presentConversation(await s.routing.assign(orgId, params.conversationId, assignedTo, { reason: body.reason ?? null, byUserId: actor.userId })),
        };
      },
    }),
    defineRoute({
      method: 'post', path: '/conversations/:conversationId/read', operationId: 'markConversationRead', tag, ...by(rules.markRead),
      summary: "Mark the visitor's messages as read (unreadCount back to 0)",
      params: params('conversationId'),
      response: { status: 200, description: 'Read', data: ConversationView },
      handler: async ({ params, orgId }) => ({ message: 'Marked as read', data: presentConversation(await s.conversations.markRead(orgId, params.conversationId)) }),
    }),
    defineRoute({
      method: 'post', path: '/conversations/:conversationId/contact', operationId: 'linkConversationContact', tag, ...by(rules.linkContact),
      summary: 'Link a contact (`contactId`), unlink (`contactId: null`), or find-or-create by email and link',
      description: 'With name/email/phone/company and no contactId, the contact with that email is found (or created) and linked.',
      params: params('conversationId'),
      body: {
        ...object({ contactId: { type: ['string', 'null'], format: 'uuid' }, name: personName, email, phone: { type: 'string', minLength: 3, maxLength: 50 }, company: { type: 'string', minLength: 1, maxLength: 200 } }),
        minProperties: 1,
      },
      response: { status: 200, description: 'The conversation with `contact`', data: ConversationView },
      handler: async ({ params, body, orgId }) => ({ message: body.contactId === null ? 'Contact unlinked' : 'Contact linked', data: presentConversation(await s.conversations.linkContact(orgId, params.conversationId, body)) }),
    }),
  ];
}

