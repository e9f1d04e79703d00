// Schemas of the knowledge routes and the shapes they return.
import { KNOWLEDGE_KINDS, KNOWLEDGE_STATUSES } from '../../db/models/KnowledgeSource.js';
import type { JsonSchema } from '../registry.js';
import { dateTime, nullableDateTime, object, uuid } from './common.js';

const nullableString = { type: ['string', 'null'] } as const;
export const title = { type: 'string', minLength: 1, maxLength: 300, pattern: '\\S' } as const;
export const sourceKind = { type: 'string', enum: [...KNOWLEDGE_KINDS] } as const;
export const status = { type: 'string', enum: [...KNOWLEDGE_STATUSES] } as const;
export const syncFrequency = { type: 'string', enum: ['never', 'daily', 'weekly', 'monthly'] } as const;
/** 1 MiB of text (characters: a UTF-8 byte bound is checked by the body limit). */
export const sourceContent = { type: 'string', minLength: 1, maxLength: 1_048_576 } as const;
export const catalog = { type: 'string', minLength: 1, maxLength: 100 } as const;
export const searchQuery = { type: 'string', minLength: 1, maxLength: 500 } as const;
export const searchLimit = { type: 'integer', minimum: 1, maximum: 20, default: 10 } as const;
export const embedding = { type: 'array', minItems: 1, maxItems: 4096, items: { type: 'number' } } as const;

export const KnowledgeSourceView: JsonSchema = object({
  id: uuid, title: { type: 'string' }, source: sourceKind, status, url: nullableString, fetchMode: nullableString, crawlDepth: { type: ['integer', 'null'] }, maxPages: { type: ['integer', 'null'] },
  syncFrequency, catalog: nullableString, objectId: { type: ['string', 'null'] }, chunkCount: { type: 'integer' }, errorMessage: nullableString, embeddingModel: nullableString,
  indexedAt: nullableDateTime, createdAt: dateTime, updatedAt: dateTime, content: nullableString,
});

export const SearchHitView: JsonSchema = object({ chunkId: uuid, documentId: uuid, title: { type: 'string' }, snippet: { type: 'string', description: 'Matching words in <b>…</b>' }, score: { type: 'number' } });

export const UnansweredView: JsonSchema = object({
  id: uuid, question: { type: 'string' }, status: { type: 'string', enum: ['open', 'resolved', 'dismissed'] }, occurrences: { type: 'integer', description: 'Conversations that asked it' },
  answer: nullableString, sourceId: { type: ['string', 'null'] }, lastAskedAt: dateTime, createdAt: dateTime,
});

export const AssistView: JsonSchema = object({
  conversationId: uuid,
  query: { type: 'string', description: "The visitor's last messages the suggestions answer" },
  passages: { type: 'array', items: SearchHitView },
  templates: { type: 'array', items: object({ templateId: uuid, title: { type: 'string' }, content: { type: 'string' }, shortcut: nullableString, score: { type: 'number' } }) },
  suggestion: { type: ['object', 'null'], description: "The AI service's suggestion when AI_ASSIST_URL is set and it answered in time" },
});
