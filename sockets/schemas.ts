// Payload schemas of client events (ajv), shared by the agent and visitor handlers; the payload types in events.ts
// are derived from them, so a handler sees exactly what validation let through.
import { CLIENT_MESSAGE_ID_MAX, MESSAGE_ATTACHMENTS_MAX, MESSAGE_CONTENT_MAX } from '../server/limits.js';

const uuid = { type: 'string', format: 'uuid' } as const;

/** Any payload: for events a caller may not send at all (answered forbidden whatever they carry). */
export const anything = {} as const;

export const conversationRef = { type: 'object', additionalProperties: false, required: ['conversationId'], properties: { conversationId: uuid } } as const;

export const agentSendMessage = {
  type: 'object',
  additionalProperties: false,
  required: ['conversationId', 'content'],
  properties: {
    conversationId: uuid,
    content: { type: 'string', minLength: 1, maxLength: MESSAGE_CONTENT_MAX },
    type: { type: 'string', enum: ['text', 'image', 'file'] },
    /** An internal note that never reaches the visitor. */
    private: { type: 'boolean' },
    clientMessageId: { type: 'string', minLength: 1, maxLength: CLIENT_MESSAGE_ID_MAX },
    /** Uploaded attachment objects (storage ids) shown with the message. */
    attachments: { type: 'array', maxItems: MESSAGE_ATTACHMENTS_MAX, uniqueItems: true, items: uuid },
  },
} as const;

/** A visitor's message: the agent's shape without `private` (visitors never write internal notes). */
const { private: _agentsOnly, ...visitorMessageFields } = agentSendMessage.properties;
export const visitorSendMessage = { ...agentSendMessage, properties: visitorMessageFields } as const;

export const updateStatus = { type: 'object', additionalProperties: false, required: ['status'], properties: { status: { type: 'string', enum: ['online', 'away', 'busy', 'offline'] } } } as const;

export const sync = {
  type: 'object',
  additionalProperties: false,
  required: ['conversationId', 'afterSeq'],
  properties: { conversationId: uuid, afterSeq: { type: 'integer', minimum: 0 } },
} as const;

/** How many missed messages one sync answers at most; `hasMore` tells the client to ask again. */
export const SYNC_LIMIT = 1000;
