// Knowledge shapes: sources, search hits, unanswered questions and assist answers.
import type { KnowledgeSource } from '../../db/models/KnowledgeSource.js';
import type { UnansweredQuestion } from '../../db/models/UnansweredQuestion.js';
import { iso } from './time.js';

export function presentKnowledgeSource(s: KnowledgeSource) {
  return {
    id: s.id,
    title: s.title,
    source: s.source,
    status: s.status,
    url: s.url ?? null,
    fetchMode: s.fetchMode ?? null,
    crawlDepth: s.crawlDepth ?? null,
    maxPages: s.maxPages ?? null,
    syncFrequency: s.syncFrequency,
    catalog: s.catalog ?? null,
    objectId: s.objectId ?? null,
    chunkCount: s.chunkCount,
    errorMessage: s.errorMessage ?? null,
    embeddingModel: s.embeddingModel ?? null,
    indexedAt: iso(s.indexedAt),
    createdAt: iso(s.createdAt),
    updatedAt: iso(s.updatedAt),
  };
}

/** With its text, for a text or FAQ source read one at a time. */
export function presentKnowledgeDetail(s: KnowledgeSource) {
  return { ...presentKnowledgeSource(s), content: s.content ?? null };
}

export function presentUnanswered(q: UnansweredQuestion) {
  return { id: q.id, question: q.question, status: q.status, occurrences: q.occurrences, answer: q.answer ?? null, sourceId: q.sourceId ?? null, lastAskedAt: iso(q.lastAskedAt), createdAt: iso(q.createdAt) };
}
