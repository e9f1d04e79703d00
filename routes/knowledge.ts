// Knowledge routes for operators: sources (list, read, create, upload, edit, delete, reindex), search, unanswered
// questions and agent assist on a conversation.
import { presentKnowledgeDetail, presentKnowledgeSource, presentUnanswered } from '../server/presenters/knowledge.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { object, paginationQuery, params, uuid } from './schemas/common.js';
import { AssistView, catalog, KnowledgeSourceView, searchLimit, searchQuery, SearchHitView, sourceContent, status, sourceKind, syncFrequency, title, UnansweredView } from './schemas/knowledge.js';
import { fileName, mimeType } from './schemas/storage.js';
import { KNOWLEDGE_TYPES } from '../server/storage/rules.js';
import type { RouteServices } from './services.js';
import { SEARCH_TEXT_MAX } from '../server/limits.js';

const tag = 'Knowledge';
const agent = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;
const admin = { kind: 'org', role: 'admin', orgFrom: 'token' } as const;
const unansweredStatus = { type: 'string', enum: ['open', 'resolved', 'dismissed'] } as const;

export function knowledgeRoutes(s: RouteServices): AnyRoute[] {
  const k = s.knowledge;
  return [
    // Fixed paths first: `/knowledge/:documentId` would take `search` or `unanswered` for an id.
    defineRoute({
      method: 'get', path: '/knowledge/search', operationId: 'searchKnowledge', tag, auth: agent,
      summary: 'Full-text search over the organization\'s indexed chunks (websearch syntax: "quoted phrases", or, -excluded)',
      query: object({ q: searchQuery, limit: searchLimit, sourceId: uuid }, ['q']),
      response: { status: 200, description: 'Best chunks first', data: { type: 'array', items: SearchHitView } },
      // A `sourceId` of no source of the organization.
      errors: [404],
      handler: async ({ query, orgId }) => ({ message: 'Results', data: await k.search(orgId, query.q, { limit: query.limit, sourceId: query.sourceId }) }),
    }),
    defineRoute({
      method: 'get', path: '/knowledge/unanswered', operationId: 'listUnansweredQuestions', tag, auth: agent,
      summary: 'Questions the AI could not answer',
      query: object({ status: unansweredStatus, sort: { type: 'string', enum: ['recent', 'frequent'], default: 'recent' }, ...paginationQuery }),
      response: { status: 200, description: 'Questions', data: { type: 'array', items: UnansweredView }, paginated: true },
      handler: async ({ query, orgId }) => {
        const { rows, total } = await s.unanswered.list(orgId, query);
        return { message: 'Unanswered questions', data: rows.map(presentUnanswered), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'get', path: '/knowledge/unanswered/count', operationId: 'countUnansweredQuestions', tag, auth: agent,
      summary: 'How many questions have a status (default open)',
      query: object({ status: { ...unansweredStatus, default: 'open' } }),
      response: { status: 200, description: 'Count', data: object({ count: { type: 'integer' } }) },
      handler: async ({ query, orgId }) => ({ message: 'Count', data: { count: await s.unanswered.count(orgId, query.status) } }),
    }),
    defineRoute({
      method: 'patch', path: '/knowledge/unanswered/:questionId', operationId: 'updateUnansweredQuestion', tag, auth: admin,
      summary: 'Resolve or dismiss a question; an `answer` becomes an FAQ source (indexed) and resolves it',
      params: params('questionId'),
      body: { ...object({ status: unansweredStatus, answer: { type: 'string', minLength: 1, maxLength: 20_000, pattern: '\\S' } }), minProperties: 1 },
      response: { status: 200, description: 'Question', data: UnansweredView },
      errors: [403],
      handler: async ({ params: p, body, orgId, actor }) => ({ message: 'Question updated', data: presentUnanswered(await s.unanswered.update(orgId, actor.userId, p.questionId, body)) }),
    }),
    defineRoute({
      method: 'post', path: '/knowledge/request-upload', operationId: 'requestKnowledgeUpload', tag, auth: admin,
      summary: 'Start a file source: a signed upload for the file (pdf, docx, txt, md, html; at most 25 MiB), then confirm',
      body: object({ title, fileName, mimeType: { ...mimeType, enum: KNOWLEDGE_TYPES }, sizeBytes: { type: 'integer', minimum: 1, maximum: 26_214_400 }, catalog }, ['title', 'fileName', 'mimeType', 'sizeBytes']),
      response: { status: 201, description: 'The source (awaiting_upload) and its upload', data: object({ documentId: uuid, document: KnowledgeSourceView, upload: object({ objectId: uuid, url: { type: 'string' }, method: { const: 'PUT' }, headers: { type: 'object' }, expiresAt: { type: 'string' } }) }) },
      errors: [403],
      handler: async ({ body, orgId, actor, membership }) => {
        const { source, presigned } = await k.requestUpload(orgId, actor.userId, membership.role, body);
        return { message: 'Upload ready', data: { documentId: source.id, document: presentKnowledgeSource(source), upload: { objectId: presigned.object.id, ...presigned.upload, expiresAt: presigned.expiresAt.toISOString() } } };
      },
    }),
    defineRoute({
      method: 'post', path: '/knowledge/reindex', operationId: 'reindexAllKnowledge', tag, auth: admin,
      summary: 'Queue every source of the organization for reindexing (paused and awaiting sources, and file sources whose file was refused, excepted)',
      response: { status: 202, description: 'Queued', data: object({ queued: { type: 'integer' } }) },
      handler: async ({ orgId }) => ({ message: 'Reindexing queued', data: { queued: await k.reindexAll(orgId) } }),
    }),
    defineRoute({
      method: 'get', path: '/knowledge', operationId: 'listKnowledge', tag, auth: agent,
      summary: 'The organization\'s knowledge sources, newest first (`q` searches titles)',
      query: object({ status, source: sourceKind, q: { type: 'string', minLength: 1, maxLength: SEARCH_TEXT_MAX }, ...paginationQuery }),
      response: { status: 200, description: 'Sources', data: { type: 'array', items: KnowledgeSourceView }, paginated: true },
      handler: async ({ query, orgId }) => {
        const { rows, total } = await k.list(orgId, query);
        return { message: 'Knowledge sources', data: rows.map(presentKnowledgeSource), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'post', path: '/knowledge', operationId: 'createKnowledge', tag, auth: admin,
      summary: 'Add a text, FAQ (title = question, content = answer) or URL source; queued for indexing',
      description: 'URL sources: public http(s) addresses only (checked after DNS resolution, and again at every fetch); pages of at most 5 MiB; `fetchMode: crawl` follows links on the same host to `crawlDepth`, at most `maxPages` (≤100) pages. The plan\'s `knowledgeSources` limit answers 403 plan_limit_reached.',
      body: object({
        title, source: { type: 'string', enum: ['text', 'faq', 'url'] }, content: sourceContent, url: { type: 'string', format: 'uri', maxLength: 2048 },
        fetchMode: { type: 'string', enum: ['single', 'crawl'] }, crawlDepth: { type: 'integer', minimum: 0, maximum: 5 }, maxPages: { type: 'integer', minimum: 1, maximum: 100 }, syncFrequency, catalog,
      }, ['title', 'source']),
      response: { status: 201, description: 'Queued source', data: KnowledgeSourceView },
      errors: [403],
      handler: async ({ body, orgId, actor }) => ({ message: 'Source queued', data: presentKnowledgeSource(await k.create(orgId, actor.userId, body)) }),
    }),
    defineRoute({
      method: 'get', path: '/knowledge/:documentId', operationId: 'getKnowledge', tag, auth: agent,
      summary: 'One source (with its text for text and FAQ sources)',
      params: params('documentId'),
      response: { status: 200, description: 'Source', data: KnowledgeSourceView },
      handler: async ({ params: p, orgId }) => ({ message: 'Knowledge source', data: presentKnowledgeDetail(await k.get(orgId, p.documentId)) }),
    }),
    defineRoute({
      method: 'get', path: '/knowledge/:documentId/view-url', operationId: 'getKnowledgeViewUrl', tag, auth: agent,
      summary: 'Where to read a source: a signed URL of its file, its web address, or null for text',
      params: params('documentId'),
      response: { status: 200, description: 'URL', data: object({ url: { type: ['string', 'null'] }, expiresAt: { type: ['string', 'null'] } }) },
      handler: async ({ params: p, orgId }) => ({ message: 'View URL', data: await k.viewUrl(orgId, p.documentId) }),
    }),
    defineRoute({
      method: 'post', path: '/knowledge/:documentId/confirm', operationId: 'confirmKnowledgeUpload', tag, auth: admin,
      summary: 'Confirm a file source\'s upload: the file is checked (missing or mismatched: 400) and queued for indexing',
      params: params('documentId'),
      response: { status: 200, description: 'Queued source', data: KnowledgeSourceView },
      handler: async ({ params: p, orgId }) => ({ message: 'Source queued', data: presentKnowledgeSource(await k.confirmUpload(orgId, p.documentId)) }),
    }),
    defineRoute({
      method: 'patch', path: '/knowledge/:documentId', operationId: 'updateKnowledge', tag, auth: admin,
      summary: 'Edit a source; new content reindexes it, `isPaused` pauses or resumes it (the status itself is never set)',
      description: 'A file source still awaiting its upload cannot be paused (400): confirm the upload first. Only `isPaused: false` resumes a paused source: new content of a paused source is kept and indexed when it is resumed. A source paused while it is being indexed stays paused when that run ends (what it indexed is kept).',
      params: params('documentId'),
      body: { ...object({ title, catalog: { type: ['string', 'null'], maxLength: 100 }, content: sourceContent, isPaused: { type: 'boolean' }, syncFrequency }), minProperties: 1 },
      response: { status: 200, description: 'Source', data: KnowledgeSourceView },
      handler: async ({ params: p, body, orgId }) => ({ message: 'Source updated', data: presentKnowledgeSource(await k.update(orgId, p.documentId, body)) }),
    }),
    defineRoute({
      method: 'delete', path: '/knowledge/:documentId', operationId: 'deleteKnowledge', tag, auth: admin,
      summary: 'Delete a source with its chunks and its file',
      params: params('documentId'),
      response: { status: 200, description: 'Deleted' },
      handler: async ({ params: p, orgId }) => {
        await k.delete(orgId, p.documentId);
        return { message: 'Source deleted' };
      },
    }),
    defineRoute({
      method: 'post', path: '/knowledge/:documentId/reindex', operationId: 'reindexKnowledge', tag, auth: admin,
      summary: 'Queue one source for reindexing (400 for a paused or awaiting source, or a file source whose file was refused)',
      params: params('documentId'),
      response: { status: 202, description: 'Queued', data: KnowledgeSourceView },
      handler: async ({ params: p, orgId }) => ({ message: 'Reindexing queued', data: presentKnowledgeSource(await k.reindex(orgId, p.documentId)) }),
    }),
    defineRoute({
      method: 'post', path: '/conversations/:conversationId/assist', operationId: 'assistConversation', tag, auth: agent,
      summary: 'Help for an agent: knowledge passages and templates matching the visitor\'s last messages (+ the AI service\'s suggestion when AI_ASSIST_URL is set)',
      description: 'The suggestion is asked with a timeout; when the AI service is slow or failing, `suggestion` is null.',
      params: params('conversationId'),
      response: { status: 200, description: 'Suggestions', data: AssistView },
      handler: async ({ params: p, orgId, actor }) => {
        const local = await s.assist.local(orgId, p.conversationId);
        return { message: 'Assist', data: { ...local, suggestion: await s.assist.suggestion(orgId, local, actor.userId) } };
      },
    }),
  ];
}
