// Trusted routes of the internal AI service (x-ai-tool-secret). `organizationId` is required and checked against
// the conversation, so a mistaken id answers 404 like any cross-tenant id.
import { presentConversation, presentMessage } from '../server/presenters/conversation.js';
import { presentAgentRun } from '../server/presenters/agentRun.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { dateTime, freeForm, object, pageSize, params, uuid, type Properties } from './schemas/common.js';
import { clientMessageId, content, ConversationView, MessageView } from './schemas/live.js';

const tag = 'Conversations (AI service)';
const ai = { kind: 'ai' } as const;
const orgQuery = <const E extends Properties = {}>(extra?: E) => object({ organizationId: uuid, ...(extra as E) }, ['organizationId']);

const AgentRunView = {
  type: 'object',
  properties: {
    id: uuid, conversationId: uuid, status: { type: 'string' }, modelId: { type: ['string', 'null'] }, input: { type: ['string', 'null'] }, output: { type: ['string', 'null'] },
    steps: { type: 'array' }, latencyMs: { type: ['integer', 'null'] }, totalTokens: { type: ['integer', 'null'] }, error: { type: ['string', 'null'] }, createdAt: dateTime,
  },
};

export function aiRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/conversations/ai/:id/memory', operationId: 'aiGetMemory', tag, auth: ai,
      summary: 'The conversation, its contact, its last N messages (oldest first) and the stored memory facts',
      params: params('id'), query: orgQuery({ limit: pageSize(20) }),
      response: { status: 200, description: 'Memory', data: object({ conversation: ConversationView, messages: { type: 'array', items: MessageView }, facts: { type: 'object' } }) },
      handler: async ({ params, query }) => {
        const m = await s.ai.memory(query.organizationId, params.id, query.limit);
        return { message: 'Conversation memory', data: { conversation: presentConversation(m.conversation), messages: m.messages.map(presentMessage), facts: m.facts } };
      },
    }),
    defineRoute({
      method: 'patch', path: '/conversations/ai/:id/memory', operationId: 'aiUpdateMemory', tag, auth: ai,
      summary: 'Merge memory facts key by key (a key set to null is forgotten)',
      params: params('id'), body: object({ organizationId: uuid, facts: freeForm({ maxProperties: 200, maxBytes: 65_536 }) }, ['organizationId', 'facts']),
      response: { status: 200, description: 'The facts after the merge', data: object({ facts: { type: 'object' } }) },
      handler: async ({ params, body }) => ({ message: 'Memory updated', data: { facts: await s.ai.rememberFacts(body.organizationId, params.id, body.facts) } }),
    }),
    defineRoute({
      method: 'get', path: '/conversations/ai/:id/gate', operationId: 'aiGate', tag, auth: ai,
      summary: 'Whether the AI should answer: not once a human joined, or when assigned, escalated, resolved or closed',
      params: params('id'), query: orgQuery(),
      response: { status: 200, description: 'Gate', data: object({ shouldRespond: { type: 'boolean' }, reason: { type: 'string', enum: ['ok', 'human_joined', 'assigned', 'escalated', 'resolved', 'closed'] }, conversationStatus: { type: 'string' } }) },
      handler: async ({ params, query }) => ({ message: 'Gate', data: await s.ai.gate(query.organizationId, params.id) }),
    }),
    defineRoute({
      method: 'post', path: '/conversations/ai/:id/messages', operationId: 'aiReply', tag, auth: ai,
      summary: 'An AI reply (senderType ai), stored and delivered live to the visitor and the agents',
      description: 'A repeated clientMessageId answers 200 with the stored message and announces nothing again.',
      params: params('id'), body: object({ organizationId: uuid, content, clientMessageId, metadata: freeForm({ maxBytes: 32_768 }) }, ['organizationId', 'content']),
      response: { status: 201, description: 'Stored and announced', data: MessageView, also: { status: 200, description: 'A repeated `clientMessageId`: the message stored the first time, not announced again' } },
      handler: async ({ params, body }) => {
        const { message, duplicate } = await s.ai.reply(body.organizationId, params.id, body);
        return { status: duplicate ? 200 : 201, message: duplicate ? 'Already stored' : 'Reply sent', data: presentMessage(message) };
      },
    }),
    defineRoute({
      method: 'post', path: '/conversations/ai/:id/resolve', operationId: 'aiResolve', tag, auth: ai,
      summary: 'Resolve the conversation (an optional summary is kept as an internal system message)',
      params: params('id'), body: object({ organizationId: uuid, summary: { type: 'string', minLength: 1, maxLength: 5000 } }, ['organizationId']),
      response: { status: 200, description: 'Resolved', data: ConversationView },
      handler: async ({ params, body }) => ({ message: 'Conversation resolved', data: presentConversation(await s.ai.resolve(body.organizationId, params.id, body.summary)) }),
    }),
    defineRoute({
      method: 'post', path: '/conversations/ai/:id/escalate', operationId: 'aiEscalate', tag, auth: ai,
      summary: 'Hand the conversation to humans: escalatedAt, status open, routed to an online agent when auto-assignment is on, else left unassigned',
      description: 'Agents receive conversation_escalated and conversation_updated; the assignee (or, when unassigned, every agent) is notified.',
      params: params('id'), body: object({ organizationId: uuid, reason: { type: 'string', minLength: 1, maxLength: 1000 } }, ['organizationId']),
      response: { status: 200, description: 'Escalated', data: ConversationView },
      handler: async ({ params, body }) => ({ message: 'Conversation escalated', data: presentConversation(await s.ai.escalate(body.organizationId, params.id, body.reason ?? null)) }),
    }),
    defineRoute({
      method: 'post', path: '/conversations/ai/:id/agent-runs', operationId: 'aiRecordAgentRun', tag, auth: ai,
      summary: 'Record one run of the AI agent in the conversation',
      params: params('id'),
      body: object(
        {
          organizationId: uuid,
          status: { type: 'string', enum: ['succeeded', 'failed', 'running'] },
          modelId: { type: 'string', maxLength: 200 },
          input: { type: 'string', maxLength: 100000 },
          output: { type: 'string', maxLength: 100000 },
          // A step holds a tool call and its arguments, which nest a little deeper than settings do.
          steps: freeForm({ type: 'array', maxItems: 200, maxDepth: 10, maxBytes: 524_288 }),
          latencyMs: { type: 'integer', minimum: 0 },
          totalTokens: { type: 'integer', minimum: 0 },
          error: { type: 'string', maxLength: 5000 },
        },
        ['organizationId', 'status'],
      ),
      response: { status: 201, description: 'Recorded', data: AgentRunView },
      handler: async ({ params, body }) => {
        const { organizationId, ...run } = body;
        return { message: 'Agent run recorded', data: presentAgentRun(await s.ai.recordRun(organizationId, params.id, run)) };
      },
    }),
    defineRoute({
      method: 'post', path: '/conversations/ai/close-inactive', operationId: 'aiCloseInactive', tag, auth: ai,
      summary: 'Close bot-only conversations (no human joined or assigned) without messages for `inactiveMinutes` (default 60)',
      body: object({ organizationId: uuid, inactiveMinutes: { type: 'integer', minimum: 1, maximum: 525600, default: 60 } }, ['organizationId']),
      response: { status: 200, description: 'Closed', data: object({ closed: { type: 'integer' }, conversationIds: { type: 'array', items: uuid } }) },
      handler: async ({ body }) => {
        const ids = await s.ai.closeInactive(body.organizationId, body.inactiveMinutes);
        return { message: `${ids.length} conversations closed`, data: { closed: ids.length, conversationIds: ids } };
      },
    }),
    defineRoute({
      method: 'post', path: '/notifications/ai', operationId: 'aiNotify', tag: 'Notifications', auth: ai,
      summary: 'Notify members of the organization (the given userIds, or every agent); pushed live as notification_created',
      body: object(
        { organizationId: uuid, userIds: { type: 'array', items: uuid, maxItems: 500 }, type: { type: 'string', minLength: 1, maxLength: 50 }, title: { type: 'string', minLength: 1, maxLength: 300 }, body: { type: 'string', maxLength: 5000 }, data: freeForm() },
        ['organizationId', 'title'],
      ),
      response: { status: 201, description: 'Created', data: object({ created: { type: 'integer' } }) },
      handler: async ({ body }) => {
        const created = await s.ai.notify(body.organizationId, body.userIds, { type: body.type ?? 'ai', title: body.title, body: body.body ?? null, data: body.data ?? {} });
        return { message: `${created} notifications created`, data: { created } };
      },
    }),
    defineRoute({
      method: 'get', path: '/conversations/:conversationId/agent-runs', operationId: 'listAgentRuns', tag: 'Conversations', auth: { kind: 'org', role: 'agent', orgFrom: 'token' },
      summary: 'The AI agent runs recorded in a conversation, newest first',
      params: params('conversationId'),
      response: { status: 200, description: 'Agent runs', data: { type: 'array', items: AgentRunView } },
      handler: async ({ params, orgId }) => ({ message: 'Agent runs', data: (await s.ai.runs(orgId, params.conversationId)).map(presentAgentRun) }),
    }),
  ];
}
