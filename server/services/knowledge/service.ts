// Knowledge sources: creation (text, FAQ, URL, uploaded file) under the plan's limit, edits, deletion, reindexing,
// search and what the AI service reads and writes (embeddings, status, sync info).
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import type { StatementFactory } from '../../../db/statements.js';
import type { KnowledgeKind, KnowledgeSource, KnowledgeStatus, SyncFrequency } from '../../../db/models/KnowledgeSource.js';
import { containsPattern } from '../../../db/search.js';
import { NotFound, PlanLimitReached, ValidationFailed } from '../../errors.js';
import type { StorageService } from '../../storage/service.js';
import type { OrganizationService } from '../organizations.js';
import { resolvePublic } from './fetch.js';
import type { KnowledgeIndexer } from './indexer.js';
import { searchChunks, type SearchHit, type SearchOptions } from './search.js';

export interface CreateInput {
  title: string;
  source: Exclude<KnowledgeKind, 'file'>;
  content?: string;
  url?: string;
  fetchMode?: 'single' | 'crawl';
  crawlDepth?: number;
  maxPages?: number;
  syncFrequency?: SyncFrequency;
  catalog?: string;
}

export interface UpdateInput {
  title?: string;
  catalog?: string | null;
  content?: string;
  isPaused?: boolean;
  syncFrequency?: SyncFrequency;
}

export interface KnowledgeDeps {
  models: Models;
  knex: Knex;
  statement: StatementFactory;
  storage: StorageService;
  organizations: OrganizationService;
  indexer: KnowledgeIndexer;
  allowPrivate: boolean;
}

export class KnowledgeService {
  constructor(private readonly deps: KnowledgeDeps) {}

  private get models() {
    return this.deps.models;
  }

  async list(orgId: string, opts: { status?: KnowledgeStatus; source?: KnowledgeKind; q?: string; limit: number; offset: number }): Promise<{ rows: KnowledgeSource[]; total: number }> {
    const base = this.models.KnowledgeSource.forOrg(orgId);
    if (opts.status) base.where('status', opts.status);
    if (opts.source) base.where('source', opts.source);
    if (opts.q) base.whereILike('title', containsPattern(opts.q));
    const [rows, total] = await Promise.all([base.clone().orderBy([{ column: 'createdAt', order: 'desc' }, { column: 'id', order: 'desc' }]).limit(opts.limit).offset(opts.offset), base.clone().resultSize()]);
    return { rows, total };
  }

  async get(orgId: string, id: string, trx?: Knex): Promise<KnowledgeSource> {
    const source = await this.models.KnowledgeSource.forOrg(orgId, trx).findById(id);
    if (!source) throw new NotFound('Knowledge source');
    return source;
  }

  /** The plan's `knowledgeSources` caps the sources an organization keeps; the organization row is locked for the count. */
  private async requireRoom(orgId: string, trx: Knex.Transaction): Promise<void> {
    const organization = await this.models.Organization.query(trx).findById(orgId).forNoKeyUpdate();
    if (!organization) throw new NotFound('Organization');
    const limit = this.deps.organizations.planOf(organization).limits.knowledgeSources;
    if (limit === null) return;
    const count = await this.models.KnowledgeSource.forOrg(orgId, trx).resultSize();
    if (count >= limit) throw new PlanLimitReached(`The ${organization.plan} plan allows ${limit} knowledge sources; delete some or upgrade`);
  }

  /** A text, FAQ or URL source, queued for indexing in the same transaction. */
  async create(orgId: string, userId: string | null, input: CreateInput, outer?: Knex.Transaction): Promise<KnowledgeSource> {
    if (input.source === 'url') {
      if (!input.url) throw new ValidationFailed('A URL source needs a url', [{ field: 'url', message: 'is required' }]);
      // Checked now for a clear 400, and again at every fetch (DNS may change).
      await resolvePublic(input.url, { allowPrivate: this.deps.allowPrivate });
    } else if (!input.content?.trim()) throw new ValidationFailed(`A ${input.source} source needs content`, [{ field: 'content', message: 'is required' }]);
    const write = async (trx: Knex.Transaction) => {
      await this.requireRoom(orgId, trx);
      const source = await this.models.KnowledgeSource.forOrg(orgId, trx).insertAndFetch({
        organizationId: orgId,
        title: input.title,
        source: input.source,
        status: 'queued',
        content: input.source === 'url' ? null : input.content!,
        url: input.source === 'url' ? input.url! : null,
        fetchMode: input.source === 'url' ? (input.fetchMode ?? 'single') : null,
        crawlDepth: input.source === 'url' ? (input.crawlDepth ?? (input.fetchMode === 'crawl' ? 1 : 0)) : null,
        maxPages: input.source === 'url' ? (input.maxPages ?? 100) : null,
        syncFrequency: input.syncFrequency ?? 'never',
        catalog: input.catalog ?? null,
        createdBy: userId,
      });
      await this.deps.indexer.enqueue(source, trx);
      return source;
    };
    return outer ? write(outer) : this.deps.knex.transaction(write);
  }

  /** A file source: a pending upload (purpose knowledge) and a source awaiting it. */
  async requestUpload(orgId: string, userId: string, role: 'owner' | 'admin' | 'agent', input: { title: string; fileName: string; mimeType: string; sizeBytes: number; catalog?: string }) {
    return this.deps.knex.transaction(async (trx) => {
      await this.requireRoom(orgId, trx);
      const presigned = await this.deps.storage.presignUpload({ kind: 'operator', orgId, userId, role }, { fileName: input.fileName, mimeType: input.mimeType, sizeBytes: input.sizeBytes, purpose: 'knowledge' }, trx);
      const source = await this.models.KnowledgeSource.forOrg(orgId, trx).insertAndFetch({
        organizationId: orgId, title: input.title, source: 'file', status: 'awaiting_upload', objectId: presigned.object.id, syncFrequency: 'never', catalog: input.catalog ?? null, createdBy: userId,
      });
      return { source, presigned };
    });
  }

  /** Checks the uploaded file (400 and deleted when it is not what was declared) and queues the source. */
  async confirmUpload(orgId: string, id: string): Promise<KnowledgeSource> {
    const source = await this.get(orgId, id);
    if (source.source !== 'file' || !source.objectId) throw new ValidationFailed('Only file sources are confirmed', [{ field: 'documentId', message: 'is not a file source' }]);
    if (source.status !== 'awaiting_upload') return source;
    const object = await this.deps.storage.get(orgId, source.objectId);
    // A mismatched file is deleted: the source then fails rather than waiting for a file that is gone.
    await this.deps.storage.verifyUpload(object, async () => {
      await this.models.KnowledgeSource.forOrg(orgId).patch({ status: 'failed', errorMessage: 'The uploaded file did not match its declaration', objectId: null }).where('id', id);
    });
    return this.deps.knex.transaction(async (trx) => {
      const queued = await this.models.KnowledgeSource.forOrg(orgId, trx).patchAndFetchById(id, { status: 'queued', errorMessage: null });
      await this.deps.indexer.enqueue(queued, trx);
      return queued;
    });
  }

  async update(orgId: string, id: string, input: UpdateInput): Promise<KnowledgeSource> {
    return this.deps.knex.transaction(async (trx) => {
      const source = await this.models.KnowledgeSource.forOrg(orgId, trx).findById(id).forUpdate();
      if (!source) throw new NotFound('Knowledge source');
      if (input.content !== undefined && source.source !== 'text' && source.source !== 'faq') throw new ValidationFailed('Only text and FAQ sources have editable content', [{ field: 'content', message: 'not editable for this source' }]);
      // Pausing would forget that the file never arrived: unpaused, it would be indexed without one and fail.
      if (input.isPaused === true && source.status === 'awaiting_upload') throw new ValidationFailed('A source awaiting its upload cannot be paused', [{ field: 'isPaused', message: 'the file has not been confirmed yet' }]);
      const patch: Partial<KnowledgeSource> = {};
      if (input.title !== undefined) patch.title = input.title;
      if (input.catalog !== undefined) patch.catalog = input.catalog;
      if (input.syncFrequency !== undefined) patch.syncFrequency = input.syncFrequency;
      if (input.content !== undefined) patch.content = input.content;
      let reindex = input.content !== undefined || (input.title !== undefined && source.source === 'faq');
      if (input.isPaused === true) patch.status = 'paused';
      if (input.isPaused === false && source.status === 'paused') reindex = true;
      // Only `isPaused: false` resumes: new content of a paused source is kept and indexed when it is resumed.
      const staysPaused = source.status === 'paused' && input.isPaused !== false;
      if (reindex && patch.status !== 'paused' && !staysPaused && source.status !== 'awaiting_upload') patch.status = 'queued';
      const updated = await this.models.KnowledgeSource.forOrg(orgId, trx).patchAndFetchById(id, patch);
      if (patch.status === 'queued') await this.deps.indexer.enqueue(updated, trx);
      return updated;
    });
  }

  /** Deletes the source, its chunks and its file. */
  async delete(orgId: string, id: string): Promise<void> {
    const source = await this.get(orgId, id);
    await this.models.KnowledgeSource.forOrg(orgId).deleteById(source.id);
    if (source.objectId) {
      const object = await this.models.StorageObject.forOrg(orgId).findById(source.objectId);
      if (object && !(await this.deps.storage.isReferenced(object.id))) await this.deps.storage.remove(object);
    }
  }

  async reindex(orgId: string, id: string): Promise<KnowledgeSource> {
    return this.deps.knex.transaction(async (trx) => {
      const source = await this.get(orgId, id, trx);
      if (source.status === 'awaiting_upload' || source.status === 'paused') throw new ValidationFailed(`A ${source.status} source is not reindexed`, [{ field: 'documentId', message: source.status }]);
      // Its file was refused and deleted: indexing could only fail again. A new upload is a new source.
      if (source.source === 'file' && !source.objectId) throw new ValidationFailed('A file source whose file was refused is not reindexed', [{ field: 'documentId', message: 'has no file' }]);
      const queued = await this.models.KnowledgeSource.forOrg(orgId, trx).patchAndFetchById(id, { status: 'queued' });
      await this.deps.indexer.enqueue(queued, trx);
      return queued;
    });
  }

  /** Queues every source that can be indexed; returns how many. */
  async reindexAll(orgId: string): Promise<number> {
    return this.deps.knex.transaction(async (trx) => {
      const sources = await this.models.KnowledgeSource.forOrg(orgId, trx).whereNotIn('status', ['awaiting_upload', 'paused']).whereNot((q) => q.where('source', 'file').whereNull('objectId'));
      for (const source of sources) await this.deps.indexer.enqueue(source, trx);
      await this.models.KnowledgeSource.forOrg(orgId, trx).whereIn('id', sources.map((s) => s.id)).patch({ status: 'queued' });
      return sources.length;
    });
  }

  /** Where a source can be read: its file (a signed URL) or its web address; text sources have none. */
  async viewUrl(orgId: string, id: string): Promise<{ url: string | null; expiresAt: string | null }> {
    const source = await this.get(orgId, id);
    if (source.source === 'url') return { url: source.url, expiresAt: null };
    if (source.source !== 'file' || !source.objectId) return { url: null, expiresAt: null };
    const object = await this.deps.storage.get(orgId, source.objectId);
    if (object.status !== 'uploaded') return { url: null, expiresAt: null };
    const d = await this.deps.storage.downloadUrl(object);
    return { url: d.url, expiresAt: d.expiresAt.toISOString() };
  }

  async search(orgId: string, q: string, opts: SearchOptions): Promise<SearchHit[]> {
    if (opts.sourceId) await this.get(orgId, opts.sourceId);
    return searchChunks(this.deps, orgId, q, opts);
  }

  /** Embeddings computed by the AI service for chunks of one source (chunks of other sources are refused). */
  async storeEmbeddings(orgId: string, id: string, model: string, items: { chunkId: string; embedding: number[] }[]): Promise<{ updated: number }> {
    return this.deps.knex.transaction(async (trx) => {
      await this.get(orgId, id, trx);
      const known = new Set((await trx('knowledge_chunks').where({ sourceId: id, organizationId: orgId }).whereIn('id', items.map((i) => i.chunkId)).select('id')).map((r: { id: string }) => r.id));
      const unknown = items.filter((i) => !known.has(i.chunkId.toLowerCase()));
      if (unknown.length) throw new ValidationFailed('Some chunks are not chunks of this source', unknown.slice(0, 20).map((i) => ({ field: 'items', message: `${i.chunkId} is not a chunk of this source` })));
      for (const item of items) await trx('knowledge_chunks').where({ id: item.chunkId }).update({ embedding: trx.raw('?::real[]', [`{${item.embedding.join(',')}}`]) });
      await trx('knowledge_sources').where({ id }).update({ embeddingModel: model, updatedAt: new Date() });
      return { updated: items.length };
    });
  }

  /** The AI service reports the outcome of its own processing (embedding) of a source. */
  async setStatus(orgId: string, id: string, status: 'indexed' | 'failed', errorMessage: string | null): Promise<KnowledgeSource> {
    await this.get(orgId, id);
    return this.models.KnowledgeSource.forOrg(orgId).patchAndFetchById(id, { status, errorMessage: status === 'failed' ? (errorMessage ?? 'Failed') : null });
  }

  /** What the AI service needs to (re)embed a source: its chunks and which already have an embedding. */
  async syncInfo(orgId: string, id: string) {
    const source = await this.get(orgId, id);
    const chunks = (await this.deps.knex('knowledge_chunks').where({ sourceId: id, organizationId: orgId }).orderBy('position').select('id', 'position', 'content', 'tokenCount', this.deps.knex.raw('embedding is not null as embedded'))) as { id: string; position: number; content: string; tokenCount: number; embedded: boolean }[];
    return { source, chunks };
  }
}
