// The AI service's knowledge routes (x-ai-tool-secret): search with an optional query embedding, embeddings and
// status of a source, sync info, and capturing questions it could not answer. `organizationId` is checked against
// the source or conversation (404).
import { presentKnowledgeSource } from '../server/presenters/knowledge.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { object, params, uuid } from './schemas/common.js';
import { embedding, KnowledgeSourceView, searchLimit, searchQuery, SearchHitView } from './schemas/knowledge.js';
import type { RouteServices } from './services.js';

const tag = 'Knowledge (AI service)';
const ai = { kind: 'ai' } as const;

export function knowledgeAiRoutes(s: RouteServices): AnyRoute[] {
  const k = s.knowledge;
  return [
    defineRoute({
      method: 'post', path: '/knowledge/ai/search', operationId: 'aiSearchKnowledge', tag, auth: ai,
      summary: 'Search the organization\'s chunks; with `embedding`, full-text and vector rankings are fused (reciprocal rank fusion)',
      description: 'Vector ranking uses the chunks that have an embedding of the same length (PUT /knowledge/ai/{documentId}/embeddings), by cosine similarity.',
      body: object({ organizationId: uuid, q: searchQuery, limit: searchLimit, sourceId: uuid, embedding }, ['organizationId', 'q']),
      response: { status: 200, description: 'Best chunks first', data: { type: 'array', items: SearchHitView } },
      // A `sourceId` of no source of the organization.
      errors: [404],
      handler: async ({ body }) => ({ message: 'Results', data: await k.search(body.organizationId, body.q, { limit: body.limit, sourceId: body.sourceId, embedding: body.embedding }) }),
    }),
    defineRoute({
      method: 'post', path: '/knowledge/ai/unanswered-questions', operationId: 'aiCaptureUnansweredQuestion', tag, auth: ai,
      summary: 'Record a question the AI could not answer: one row per normalized question, one occurrence per conversation',
      body: object({ organizationId: uuid, conversationId: uuid, question: { type: 'string', minLength: 1, maxLength: 2000, pattern: '\\S' } }, ['organizationId', 'conversationId', 'question']),
      response: { status: 201, description: '`saved` is false when this conversation already asked it', data: object({ saved: { type: 'boolean' }, id: uuid }) },
      errors: [404],
      handler: async ({ body }) => ({ message: 'Question recorded', data: await s.unanswered.capture(body.organizationId, body.conversationId, body.question) }),
    }),
    defineRoute({
      method: 'put', path: '/knowledge/ai/:documentId/embeddings', operationId: 'aiStoreKnowledgeEmbeddings', tag, auth: ai,
      summary: 'Store embeddings for chunks of a source (real[]; pgvector is not required)',
      params: params('documentId'),
      body: object({ organizationId: uuid, model: { type: 'string', minLength: 1, maxLength: 200 }, items: { type: 'array', minItems: 1, maxItems: 500, items: object({ chunkId: uuid, embedding }, ['chunkId', 'embedding']) } }, ['organizationId', 'model', 'items']),
      response: { status: 200, description: 'Stored', data: object({ updated: { type: 'integer' } }) },
      errors: [404],
      handler: async ({ params: p, body }) => ({ message: 'Embeddings stored', data: await k.storeEmbeddings(body.organizationId, p.documentId, body.model, body.items) }),
    }),
    defineRoute({
      method: 'patch', path: '/knowledge/ai/:documentId/status', operationId: 'aiSetKnowledgeStatus', tag, auth: ai,
      summary: 'Report the outcome of the AI service\'s processing of a source',
      params: params('documentId'),
      body: object({ organizationId: uuid, status: { type: 'string', enum: ['indexed', 'failed'] }, errorMessage: { type: 'string', maxLength: 1000 } }, ['organizationId', 'status']),
      response: { status: 200, description: 'Source', data: KnowledgeSourceView },
      errors: [404],
      handler: async ({ params: p, body }) => ({ message: 'Status set', data: presentKnowledgeSource(await k.setStatus(body.organizationId, p.documentId, body.status, body.errorMessage ?? null)) }),
    }),
    defineRoute({
      method: 'get', path: '/knowledge/ai/:documentId/sync-info', operationId: 'aiKnowledgeSyncInfo', tag, auth: ai,
      summary: 'A source and its chunks (text, and whether each has an embedding), to (re)compute embeddings',
      params: params('documentId'),
      query: object({ organizationId: uuid }, ['organizationId']),
      response: {
        status: 200, description: 'Sync info',
        data: object({ document: KnowledgeSourceView, chunks: { type: 'array', items: object({ chunkId: uuid, position: { type: 'integer' }, content: { type: 'string' }, tokenCount: { type: 'integer' }, embedded: { type: 'boolean' } }) } }),
      },
      errors: [404],
      handler: async ({ params: p, query }) => {
        const { source, chunks } = await k.syncInfo(query.organizationId, p.documentId);
        return { message: 'Sync info', data: { document: presentKnowledgeSource(source), chunks: chunks.map((c) => ({ chunkId: c.id, position: c.position, content: c.content, tokenCount: c.tokenCount, embedded: c.embedded })) } };
      },
    }),
  ];
}
