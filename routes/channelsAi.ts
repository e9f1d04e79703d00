// The internal AI service writing into a channel conversation (x-ai-tool-secret): the recipient is always the
// conversation's own contact on that channel; there is no free `to`. The reply leaves through the delivery worker.
import { NotFound } from '../server/errors.js';
import { presentMessage } from '../server/presenters/conversation.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { object, params, uuid } from './schemas/common.js';
import { clientMessageId, content } from './schemas/live.js';

const tag = 'Channels';

export function channelAiRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'post', path: '/channels/:channelId/send', operationId: 'sendChannelMessageAi', tag, auth: { kind: 'ai' },
      summary: 'AI service: reply in a channel conversation; queued for delivery to the conversation\'s contact',
      description: 'The channel and the conversation must belong to `organizationId`, and the conversation to the channel (else 404). A repeated `clientMessageId` answers the stored message and queues nothing again.',
      params: params('channelId'),
      body: object({ organizationId: uuid, conversationId: uuid, content, clientMessageId }, ['organizationId', 'conversationId', 'content', 'clientMessageId']),
      response: { status: 201, description: 'Stored and queued', data: object({ status: { type: 'string', enum: ['queued'] }, message: { type: 'object' } }, ['status', 'message']), also: { status: 200, description: 'A repeated `clientMessageId`: the message stored the first time, not sent again' } },
      errors: [404],
      handler: async ({ params: a, body }) => {
        const channel = await s.channels.provisioning.get(body.organizationId, a.channelId);
        const conversation = (await s.conversations.get(body.organizationId, body.conversationId)) as { channelId?: string | null };
        if (conversation.channelId !== channel.id) throw new NotFound('Conversation');
        const sent = await s.messages.send({ type: 'ai', orgId: body.organizationId }, { conversationId: body.conversationId, content: body.content, clientMessageId: body.clientMessageId });
        return { status: sent.duplicate ? 200 : 201, message: 'Queued', data: { status: 'queued', message: presentMessage(sent.message) } };
      },
    }),
  ];
}
