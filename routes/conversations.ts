// /conversations: the agents' inbox, history, replies, status, routing, read marks, recents and contact links.
import { presentConversation, presentMessage } from '../server/presenters/conversation.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { email, object, pageSize, paginationQuery, params, personName } from './schemas/common.js';
import { attachmentIds, clientMessageId, content, ConversationView, MessageView } from './schemas/live.js';
import { SEARCH_TEXT_MAX } from '../server/limits.js';

const tag = 'Conversations';
const auth = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;
const status = { type: 'string', enum: ['open', 'pending', 'resolved', 'closed'] } as const;
const withMessages = { ...ConversationView, properties: { ...(ConversationView.properties as object), messages: { type: 'array', items: MessageView } } };

export function conversationRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/conversations', operationId: 'listConversations', tag, auth,
      summary: 'Conversations of the active organization, newest activity first (without messages)',
      query: object({ ...paginationQuery, status, assignedToMe: { type: 'boolean' }, unassigned: { type: 'boolean' }, q: { type: 'string', maxLength: SEARCH_TEXT_MAX, description: 'Matches subject, visitor name or email, and message text' } }),
      response: { status: 200, description: 'Conversations', data: { type: 'array', items: ConversationView }, paginated: true },
      handler: async ({ query, orgId, actor }) => {
        const { conversations, total } = await s.conversations.list(orgId!, actor!.userId, query);
        return { message: 'Conversations', data: conversations.map(presentConversation), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'get', path: '/conversations/recents', operationId: 'listRecentConversations', tag, auth,
      summary: 'The conversations you opened most recently (up to 20)',
      response: { status: 200, description: 'Recently viewed', data: { type: 'array', items: ConversationView } },
      handler: async ({ orgId, actor }) => ({ message: 'Recent conversations', data: (await s.conversations.recents(orgId!, actor!.userId)).map(presentConversation) }),
    }),
    defineRoute({
      method: 'delete', path: '/conversations/recents', operationId: 'clearRecentConversations', tag, auth,
      summary: 'Forget your recently viewed conversations',
      response: { status: 200, description: 'Cleared' },
      handler: async ({ orgId, actor }) => {
        await s.conversations.clearRecents(orgId!, actor!.userId);
        return { message: 'Recent conversations cleared' };
      },
    }),
    defineRoute({
      method: 'get', path: '/conversations/:conversationId', operationId: 'getConversation', tag, auth,
      summary: 'One conversation with its whole message history, oldest first (internal notes included)',
      params: params('conversationId'),
      response: { status: 200, description: 'Conversation', data: withMessages },
      handler: async ({ params, orgId, actor }) => {
        const { conversation, messages } = await s.conversations.getWithHistory(orgId!, actor!.userId, params.conversationId);
        await s.messages.decorate(orgId!, messages);
        return { message: 'Conversation', data: { ...presentConversation(conversation), messages: messages.map(presentMessage) } };
      },
    }),
    defineRoute({
      method: 'get', path: '/conversations/:conversationId/messages', operationId: 'listMessages', tag, auth,
      summary: 'A page of messages: after `afterSeq` (ascending), or the newest before `beforeSeq`',
      params: params('conversationId'),
      query: object({ afterSeq: { type: 'integer', minimum: 0 }, beforeSeq: { type: 'integer', minimum: 1 }, limit: pageSize() }),
      response: { status: 200, description: 'Messages, ascending by seq', data: { type: 'array', items: MessageView } },
      handler: async ({ params, query, orgId }) => {
        await s.conversations.get(orgId!, params.conversationId);
        const messages = await s.messages.page(orgId!, params.conversationId, { ...query, publicOnly: false });
        return { message: 'Messages', data: messages.map(presentMessage) };
      },
    }),
    defineRoute({
      method: 'post', path: '/conversations/:conversationId/messages', operationId: 'replyToConversation', tag, auth,
      summary: 'Reply as an agent (or write an internal note with `private: true`)',
      description: 'A repeated `clientMessageId` answers 200 with the first message and announces nothing again; one already used by another sender in this conversation answers 409. A closed conversation answers 400 invalid_transition.',
      params: params('conversationId'),
      body: object({ content, type: { type: 'string', enum: ['text', 'image', 'file'] }, private: { type: 'boolean' }, clientMessageId, attachments: attachmentIds }, ['content']),
      response: { status: 201, description: 'Stored and announced', data: MessageView },
      errors: [409],
      handler: async ({ params, body, orgId, actor }) => {
        const { message, duplicate } = await s.messages.send({ type: 'agent', orgId: orgId!, userId: actor!.userId }, { ...body, conversationId: params.conversationId });
        return { status: duplicate ? 200 : 201, message: duplicate ? 'Already stored' : 'Message sent', data: presentMessage(message) };
      },
    }),
    defineRoute({
      method: 'patch', path: '/conversations/:conversationId/status', operationId: 'changeConversationStatus', tag, auth,
      summary: 'Change the status: open <-> pending, open|pending -> resolved, resolved -> open, any -> closed (final)',
      params: params('conversationId'),
      body: object({ status }, ['status']),
      response: { status: 200, description: 'Changed', data: ConversationView },
      handler: async ({ params, body, orgId }) => ({ message: 'Status changed', data: presentConversation(await s.conversations.changeStatus(orgId!, params.conversationId, body.status)) }),
    }),
    defineRoute({
      method: 'post', path: '/conversations/:conversationId/route', operationId: 'routeConversation', tag, auth,
      summary: 'Assign to an agent of the organization, or unassign with `agentId: null`',
      params: params('conversationId'),
      body: object({ agentId: { type: ['string', 'null'], format: 'uuid' }, reason: { type: 'string', maxLength: 500 } }, ['agentId']),
      response: { status: 200, description: 'Routed', data: ConversationView },
      handler: async ({ params, body, orgId, actor }) => ({
        message: body.agentId ? 'Conversation assigned' : 'Conversation unassigned',
        data: presentConversation(await s.routing.assign(orgId!, params.conversationId, body.agentId, { reason: body.reason ?? null, byUserId: actor!.userId })),
      }),
    }),
    defineRoute({
      method: 'post', path: '/conversations/:conversationId/read', operationId: 'markConversationRead', tag, auth,
      summary: "Mark the visitor's messages as read (unreadCount back to 0)",
      params: params('conversationId'),
      response: { status: 200, description: 'Read', data: ConversationView },
      handler: async ({ params, orgId }) => ({ message: 'Marked as read', data: presentConversation(await s.conversations.markRead(orgId!, params.conversationId)) }),
    }),
    defineRoute({
      method: 'post', path: '/conversations/:conversationId/contact', operationId: 'linkConversationContact', tag, auth,
      summary: 'Link a contact (`contactId`), unlink (`contactId: null`), or find-or-create by email and link',
      description: 'With name/email/phone/company and no contactId, the contact with that email is found (or created) and linked.',
      params: params('conversationId'),
      body: {
        ...object({ contactId: { type: ['string', 'null'], format: 'uuid' }, name: personName, email, phone: { type: 'string', minLength: 3, maxLength: 50 }, company: { type: 'string', minLength: 1, maxLength: 200 } }),
        minProperties: 1,
      },
      response: { status: 200, description: 'The conversation with `contact`', data: ConversationView },
      handler: async ({ params, body, orgId }) => ({ message: body.contactId === null ? 'Contact unlinked' : 'Contact linked', data: presentConversation(await s.conversations.linkContact(orgId!, params.conversationId, body)) }),
    }),
  ];
}

