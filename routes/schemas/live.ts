// Response shapes of the live-support areas (documented in OpenAPI; presenters guarantee them).
import type { JsonSchema } from '../registry.js';
import { dateTime, nullableDateTime, uuid } from './common.js';
import { CLIENT_MESSAGE_ID_MAX, MESSAGE_ATTACHMENTS_MAX, MESSAGE_CONTENT_MAX } from '../../server/limits.js';

const nullableString = { type: ['string', 'null'] } as const;
const nullableUuid = { type: ['string', 'null'], format: 'uuid' } as const;

export const ContactView: JsonSchema = {
  type: 'object',
  properties: { id: uuid, name: nullableString, email: nullableString, phone: nullableString, company: nullableString, createdAt: dateTime, updatedAt: dateTime },
};

export const ConversationView: JsonSchema = {
  type: 'object',
  properties: {
    id: uuid,
    organizationId: uuid,
    status: { type: 'string', enum: ['open', 'pending', 'resolved', 'closed'] },
    priority: { type: 'string', enum: ['low', 'medium', 'high', 'urgent'] },
    subject: nullableString,
    channel: { type: 'string' },
    source: nullableString,
    assignedTo: nullableUuid,
    contactId: nullableUuid,
    contact: { oneOf: [ContactView, { type: 'null' }] },
    visitor: { type: 'object', properties: { sessionId: nullableUuid, name: nullableString, email: nullableString } },
    tags: { type: 'array', items: { type: 'string' } },
    unreadCount: { type: 'integer' },
    lastSeq: { type: 'integer', description: 'seq of the newest message' },
    escalatedAt: nullableDateTime,
    humanJoinedAt: nullableDateTime,
    firstReplyAt: nullableDateTime,
    lastMessageAt: nullableDateTime,
    resolvedAt: nullableDateTime,
    createdAt: dateTime,
    updatedAt: dateTime,
  },
};

/** Files shown with a message or a ticket's reply. */
export const AttachmentsView: JsonSchema = {
  type: 'array',
  description: 'Files of the message; each `url` is a download link minted for this response (it expires after 15 minutes)',
  items: {
    type: 'object',
    properties: { objectId: uuid, fileName: { type: 'string' }, mimeType: { type: 'string' }, sizeBytes: { type: 'integer' }, url: { type: 'string' } },
  },
};

export const MessageView: JsonSchema = {
  type: 'object',
  properties: {
    id: uuid,
    conversationId: uuid,
    seq: { type: 'integer', description: 'Increases by one per conversation, without gaps' },
    senderType: { type: 'string', enum: ['visitor', 'agent', 'ai', 'system'] },
    senderId: nullableString,
    content: { type: 'string', maxLength: MESSAGE_CONTENT_MAX },
    type: { type: 'string', enum: ['text', 'image', 'file', 'system'] },
    private: { type: 'boolean', description: 'An internal note; never shown to the visitor' },
    metadata: { type: 'object' },
    clientMessageId: nullableString,
    attachments: AttachmentsView,
    createdAt: dateTime,
  },
};

/** Storage object ids of uploaded files to show with a message (purpose `attachment`, uploaded by the sender's side). */
export const attachmentIds = { type: 'array', maxItems: MESSAGE_ATTACHMENTS_MAX, uniqueItems: true, items: { type: 'string', format: 'uuid' }, description: 'Uploaded attachment objects (POST /storage/presigned-upload, then complete)' } as const;

export const VisitorConversationView: JsonSchema = {
  type: 'object',
  properties: { id: uuid, status: { type: 'string' }, subject: nullableString, lastSeq: { type: 'integer' }, lastMessageAt: nullableDateTime, createdAt: dateTime },
};

export const NotificationView: JsonSchema = {
  type: 'object',
  properties: {
    id: uuid,
    organizationId: uuid,
    userId: uuid,
    type: { type: 'string' },
    title: { type: 'string' },
    body: nullableString,
    data: { type: 'object' },
    readAt: nullableDateTime,
    createdAt: dateTime,
  },
};

export const WidgetView: JsonSchema = {
  type: 'object',
  properties: {
    id: uuid,
    organizationId: uuid,
    publicKey: { type: 'string' },
    displayName: { type: 'string' },
    appearance: { type: 'object' },
    behavior: { type: 'object' },
    allowedOrigins: { type: 'array', items: { type: 'string' } },
    ai: { type: 'object' },
    collectUserInfo: { type: 'object' },
    createdAt: dateTime,
    updatedAt: dateTime,
  },
};

export const content = { type: 'string', minLength: 1, maxLength: MESSAGE_CONTENT_MAX, description: 'Message text; a NUL character (U+0000) is refused with 400 validation_failed' } as const;
export const clientMessageId = { type: 'string', minLength: 1, maxLength: CLIENT_MESSAGE_ID_MAX, description: 'Client-chosen id; a repeat returns the stored message' } as const;
