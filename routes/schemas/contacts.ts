// Request pieces and response shapes of /contacts (the OpenAPI document shows them; presenters guarantee them).
import type { JsonSchema } from '../registry.js';
import { dateTime, email, nullableDateTime, object, uuid } from './common.js';
import { CONTACT_ATTRIBUTES_MAX, NOTE_LENGTH_MAX, PERSON_NAME_MAX, TAG_LENGTH_MAX, TAGS_MAX } from '../../server/limits.js';

const nullableString = { type: ['string', 'null'] } as const;
const nullableUuid = { type: ['string', 'null'], format: 'uuid' } as const;

export const attributeKey = { type: 'string', pattern: '^[a-z][a-z0-9_]{0,63}$', description: 'lowercase letters, digits and _, starting with a letter (at most 64)' } as const;
export const tag = { type: 'string', minLength: 1, maxLength: TAG_LENGTH_MAX, pattern: '\\S', description: 'Stored lowercased and trimmed' } as const;
export const tags = { type: 'array', items: tag, maxItems: TAGS_MAX, description: `At most ${TAGS_MAX} (after lowercasing, duplicates count once)` } as const;
export const phone = { type: ['string', 'null'], maxLength: 50, description: 'International format; stored as E.164 ("+49 151 2345 6789" -> "+4915123456789"). Unparsable: 400' } as const;
export const attributes = {
  type: 'object',
  maxProperties: CONTACT_ATTRIBUTES_MAX,
  propertyNames: attributeKey,
  additionalProperties: { anyOf: [{ type: 'string', maxLength: 2048 }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }] },
  description: `Values of defined attributes by key (an undefined key is 400): text (<= 2000 chars), number, date (ISO 8601), boolean, list (one of its options), link (http/https URL). At most ${CONTACT_ATTRIBUTES_MAX} per contact.`,
} as const;
export const identities = {
  type: 'array',
  maxItems: 20,
  items: object({ channel: { type: 'string', minLength: 1, maxLength: 30, pattern: '^[a-z0-9_-]+$' }, externalId: { type: 'string', minLength: 1, maxLength: 320, pattern: '\\S' } }, ['channel', 'externalId']),
  description: 'How the contact is known on channels; unique per organization (taken: 409)',
} as const;
export const noteContent = { type: 'string', minLength: 1, maxLength: NOTE_LENGTH_MAX, pattern: '\\S' } as const;

export const scalar = { anyOf: [{ type: 'string', maxLength: 2000 }, { type: 'number' }, { type: 'boolean' }] } as const;

const text = (max: number) => ({ type: ['string', 'null'], maxLength: max }) as const;
export const contactFields = { name: text(PERSON_NAME_MAX), email: { ...email, type: ['string', 'null'] }, phone, company: text(200) } as const;

export const ContactView: JsonSchema = {
  type: 'object',
  properties: {
    id: uuid,
    name: nullableString,
    email: nullableString,
    phone: { ...nullableString, description: 'E.164' },
    company: nullableString,
    tags: { type: 'array', items: { type: 'string' } },
    attributes: { type: 'object' },
    identities: { type: 'array', items: object({ channel: { type: 'string' }, externalId: { type: 'string' } }) },
    emailVerifiedAt: nullableDateTime,
    lastActivityAt: { ...nullableDateTime, description: 'Last linked conversation, AI or channel activity' },
    createdAt: dateTime,
    updatedAt: dateTime,
    mergedFrom: {
      type: 'array',
      description: 'Only on a single contact: the contacts merged into this one, newest first',
      items: object({ contactId: uuid, name: nullableString, email: nullableString, mergedBy: nullableUuid, mergedAt: dateTime }),
    },
  },
  required: ['id', 'name', 'email', 'phone', 'company', 'tags', 'attributes', 'identities', 'emailVerifiedAt', 'lastActivityAt', 'createdAt', 'updatedAt'],
};

export const NoteView: JsonSchema = {
  type: 'object',
  properties: { id: uuid, contactId: uuid, content: { type: 'string' }, authorId: nullableUuid, source: { type: 'string', enum: ['agent', 'ai', 'channel'] }, conversationId: nullableUuid, createdAt: dateTime, updatedAt: dateTime },
};

export const AttributeDefinitionView: JsonSchema = {
  type: 'object',
  properties: { key: { type: 'string' }, label: { type: 'string' }, type: { type: 'string', enum: ['text', 'number', 'date', 'boolean', 'list', 'link'] }, options: { type: 'array', items: { type: 'string' } }, description: nullableString, createdAt: dateTime, updatedAt: dateTime },
};

export const ConflictView: JsonSchema = {
  type: 'object',
  properties: {
    id: uuid,
    kind: { type: 'string', enum: ['field', 'duplicate'] },
    status: { type: 'string', enum: ['open', 'applied', 'dismissed'] },
    contactId: uuid,
    otherContactId: { ...nullableUuid, description: 'For a duplicate: the other contact' },
    field: { ...nullableString, description: '`name`, `email`, `phone`, `company`, `attributes.<key>` or `identity`' },
    currentValue: { description: 'The recorded value' },
    proposedValue: { description: 'What the source proposed' },
    source: { type: 'string', description: '`ai`, `channel` (or `migration`)' },
    conversationId: nullableUuid,
    resolvedBy: nullableUuid,
    resolvedAt: nullableDateTime,
    createdAt: dateTime,
  },
};
