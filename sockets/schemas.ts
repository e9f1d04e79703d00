// Payload schemas of client events (ajv), shared by the agent and visitor handlers.
const uuid = { type: 'string', format: 'uuid' } as const;

/** Any payload: for events a caller may not send at all (answered forbidden whatever they carry). */
export const anything = {};

export const conversationRef = { type: 'object', additionalProperties: false, required: ['conversationId'], properties: { conversationId: uuid } };

export const agentSendMessage = {
  type: 'object',
  additionalProperties: false,
  required: ['conversationId', 'content'],
  properties: {
    conversationId: uuid,
    content: { type: 'string', minLength: 1, maxLength: 50_000 },
    type: { type: 'string', enum: ['text', 'image', 'file'] },
    private: { type: 'boolean' },
    clientMessageId: { type: 'string', minLength: 1, maxLength: 100 },
    attachments: { type: 'array', maxItems: 10, uniqueItems: true, items: uuid },
  },
};

/** A visitor's message: the agent's shape without `private` (visitors never write internal notes). */
const { private: _agentsOnly, ...visitorMessageFields } = agentSendMessage.properties;
export const visitorSendMessage = { ...agentSendMessage, properties: visitorMessageFields };

export const updateStatus = { type: 'object', additionalProperties: false, required: ['status'], properties: { status: { type: 'string', enum: ['online', 'away', 'busy', 'offline'] } } };

export const sync = {
  type: 'object',
  additionalProperties: false,
  required: ['conversationId', 'afterSeq'],
  properties: { conversationId: uuid, afterSeq: { type: 'integer', minimum: 0 } },
};

/** How many missed messages one sync answers at most; `hasMore` tells the client to ask again. */
export const SYNC_LIMIT = 1000;
