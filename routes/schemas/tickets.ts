// Request pieces and response shapes of the Tickets area (documented in OpenAPI; presenters guarantee the shapes).
import type { JsonSchema } from '../registry.js';
import { AttachmentsView } from './live.js';
import { dateTime, email, nullableDateTime, object, personName, uuid } from './common.js';
import { SEARCH_TEXT_MAX, TAG_LENGTH_MAX, TAGS_MAX } from '../../server/limits.js';

const nullableString = { type: ['string', 'null'] } as const;
const nullableUuid = { type: ['string', 'null'], format: 'uuid' } as const;
const NO_NUL = '^[^\\u0000]*$';
/** Text with at least one visible character and no NUL (PostgreSQL text cannot hold one). */
const visible = (max: number, description?: string) => ({ type: 'string', minLength: 1, maxLength: max, pattern: '^[^\\u0000]*\\S[^\\u0000]*$', ...(description ? { description } : {}) }) as const;

export const TICKET_STATUSES = ['open', 'in_progress', 'pending', 'resolved', 'closed', 'merged'] as const;
export const ticketStatus = { type: 'string', enum: TICKET_STATUSES } as const;
/** What PATCH may set: `merged` is reached only through the merge route. */
export const settableStatus = {
  type: 'string',
  enum: TICKET_STATUSES.filter((s) => s !== 'merged'),
  description: 'open <-> in_progress, open|in_progress <-> pending, open|in_progress|pending -> resolved, resolved -> open, any but merged -> closed; closed and merged are final. Anything else: 400 invalid_transition. The current status again changes nothing.',
} as const;
export const priority = { type: 'string', enum: ['low', 'medium', 'high', 'urgent'], description: 'Default medium' } as const;
export const title = visible(300);
export const description = { type: ['string', 'null'], maxLength: 20000, pattern: NO_NUL } as const;
export const eventText = visible(50000);
export const tags = {
  type: 'array',
  maxItems: TAGS_MAX,
  items: { type: 'string', minLength: 1, maxLength: TAG_LENGTH_MAX, pattern: '^[^\\u0000,]*\\S[^\\u0000,]*$' },
  description: `At most ${TAGS_MAX}; each is trimmed and lowercased, duplicates dropped`,
} as const;
export const dueAt = { ...nullableDateTime, description: 'ISO 8601 date-time; null clears it' } as const;
export const requester = {
  ...object({ name: personName, email }, ['email']),
  description: 'Found (case-insensitive email) or created as a contact of the organization, which becomes the ticket\'s contactId',
};
export const assignedTo = { ...nullableUuid, description: 'A user id of an accepted member of the organization (else 400 validation_failed); null unassigns. The assignee receives a ticket_assigned notification (not when assigning yourself).' } as const;
export const idempotencyKey = { type: 'string', minLength: 1, maxLength: 200, pattern: '^[\\x21-\\x7e]+$', description: 'Printable ASCII without spaces; unique per organization for 30 days' } as const;
export const searchQuery = {
  type: 'string',
  maxLength: SEARCH_TEXT_MAX,
  pattern: NO_NUL,
  description: 'Literal text found anywhere in the title or description (case-insensitive; no wildcards or patterns), or a ticket number ("42" or "#42")',
} as const;

export const TicketView: JsonSchema = {
  type: 'object',
  properties: {
    id: uuid,
    organizationId: uuid,
    number: { type: 'integer', description: 'Per organization: 1, 2, 3, ... without gaps, in order of creation' },
    title: { type: 'string' },
    description: nullableString,
    status: ticketStatus,
    priority,
    source: { type: 'string', enum: ['agent', 'ai', 'email', 'widget', 'whatsapp', 'telegram'] },
    contactId: nullableUuid,
    requester: { oneOf: [{ type: 'object', properties: { name: nullableString, email: nullableString } }, { type: 'null' }], description: 'Recorded when the ticket is created or its contact changes; ticket mail goes to this address' },
    conversationId: nullableUuid,
    assignedTo: nullableUuid,
    createdBy: nullableUuid,
    tags: { type: 'array', items: { type: 'string' } },
    dueAt: nullableDateTime,
    resolvedAt: nullableDateTime,
    closedAt: nullableDateTime,
    mergedIntoId: nullableUuid,
    createdAt: dateTime,
    updatedAt: dateTime,
  },
  required: ['id', 'number', 'title', 'status', 'priority', 'source', 'tags', 'createdAt', 'updatedAt'],
};

export const TicketEventView: JsonSchema = {
  type: 'object',
  properties: {
    id: uuid,
    ticketId: uuid,
    type: { type: 'string', enum: ['created', 'updated', 'status_changed', 'assigned', 'priority_changed', 'note', 'reply', 'merged', 'linked'] },
    actorType: { type: 'string', enum: ['agent', 'ai', 'contact', 'system'] },
    actorId: nullableUuid,
    content: { ...nullableString, description: 'The note or reply text; for status_changed, an optional resolution note' },
    data: { type: 'object', description: 'created: {number, source, assignedTo, conversationId}; updated: {fields}; status_changed, priority_changed, assigned, linked: {from, to}; merged: {direction: into|from, ticketId, number}; reply: {delivery}' },
    clientMessageId: nullableString,
    attachments: { ...AttachmentsView, description: 'Files of a customer\'s mail (reply events); each `url` expires after 15 minutes' },
    createdAt: dateTime,
  },
};

export const DeliveryView: JsonSchema = {
  type: 'object',
  properties: {
    emailId: uuid,
    status: { type: 'string', enum: ['queued', 'logged'], description: 'queued: in the outbox for SMTP delivery; logged: no SMTP transport is configured, the mail is only logged' },
    to: { type: 'string' },
    cc: { type: 'array', items: { type: 'string' } },
    messageId: { type: 'string', description: 'The Message-ID of the mail, threaded after the ticket\'s previous mail' },
  },
};
