// The knowledge-index job: reads a source (its text, its file, or its web pages), chunks it and replaces its chunks
// in one transaction, telling the organization's agents how far it got. Safe to run twice (a job may be retaken
// after a dead instance's lease): the chunks are replaced, never appended.
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import type { KnowledgeSource, KnowledgeStatus } from '../../../db/models/KnowledgeSource.js';
import { ValidationFailed } from '../../errors.js';
import type { DomainEventBus } from '../../events.js';
import { GiveUp, RetryLater, type Job, type JobQueue } from '../../jobs/index.js';
import type { Logger } from '../../logger.js';
import { presentKnowledgeSource } from '../../presenters/knowledge.js';
import type { StorageDriver } from '../../storage/driver.js';
import type { NotificationService } from '../notifications.js';
import type { Outbox } from '../webhooks/index.js';
import { chunkText } from './chunking.js';
import { fetchPage, MAX_PAGES, PAGE_TIMEOUT_MS, sameHostLinks, UnsafeUrl } from './fetch.js';
import { extractText, htmlToText } from './parsers.js';

export const KNOWLEDGE_QUEUE = 'knowledge-index';
const RETRY_DELAYS = [30, 120, 600];
/** Chunks written per INSERT, and how often progress is reported. */
const BATCH = 200;
/** A run holds its job this long; past it another worker may take the job over and index the source again. */
const LEASE_SECONDS = 300;
/** A crawl fetches no further page after this long, so the run ends (and writes) well inside its lease. */
const CRAWL_BUDGET_MS = (LEASE_SECONDS - 60) * 1000;
const SYNC_PERIOD_DAYS: Record<string, number> = { daily: 1, weekly: 7, monthly: 30 };

export interface IndexPayload {
  sourceId: string;
}

export interface IndexerDeps {
  models: Models;
  knex: Knex;
  driver: StorageDriver;
  events: DomainEventBus;
  logger: Logger;
  jobs: JobQueue;
  workers: number;
  allowPrivate: boolean;
  /** The most one page of a URL source may take (KNOWLEDGE_FETCH_TIMEOUT_MS; 15 s when not given). */
  fetchTimeoutMs?: number;
  /** How long a crawl goes on fetching pages (4 minutes when not given). */
  crawlBudgetMs?: number;
  notifications: NotificationService;
}

/**
 * The status a finished run writes, unless the source was paused while it ran: pausing wins (its chunks are kept, and
 * resuming indexes it again), where the run's own write would have silently resumed it.
 */
function unlessPaused(knex: Knex, status: 'indexed' | 'failed' | 'queued'): KnowledgeStatus {
  return knex.raw("case when status = 'paused' then 'paused' else ? end", [status]) as unknown as KnowledgeStatus;
}

export class KnowledgeIndexer {
  /** Set when webhooks are on: `knowledge.indexed` and `knowledge.failed` are recorded with the status change. */
  outbox: Outbox | null = null;

  constructor(private readonly deps: IndexerDeps) {
    deps.jobs.define<IndexPayload>({ queue: KNOWLEDGE_QUEUE, handle: (job) => this.run(job), retryDelaysSeconds: RETRY_DELAYS, leaseSeconds: LEASE_SECONDS, concurrency: deps.workers });
  }

  /** Queues (re)indexing of a source, in the caller's transaction; one pending job per source. */
  enqueue(source: Pick<KnowledgeSource, 'id' | 'organizationId'>, trx?: Knex.Transaction, runAt?: Date): Promise<{ id: string }> {
    return this.deps.jobs.enqueue<IndexPayload>(KNOWLEDGE_QUEUE, { sourceId: source.id }, { organizationId: source.organizationId, trx, runAt, dedupeKey: `${runAt ? 'sync' : 'index'}:${source.id}` });
  }

  private progress(source: KnowledgeSource, status: KnowledgeStatus, chunksDone: number, chunksTotal: number): void {
    this.deps.events.publish('knowledge.progress', { organizationId: source.organizationId, documentId: source.id, status, chunksDone, chunksTotal });
  }

  async run(job: Job<IndexPayload>): Promise<void> {
    const { models, knex } = this.deps;
    const source = job.organizationId ? await models.KnowledgeSource.forOrg(job.organizationId).findById(job.payload.sourceId) : undefined;
    // Deleted, paused or not uploaded since it was queued: nothing to do.
    if (!source || source.status === 'paused' || source.status === 'awaiting_upload') return;
    await models.KnowledgeSource.forOrg(source.organizationId).patch({ status: 'indexing' }).where('id', source.id);
    this.progress(source, 'indexing', 0, 0);
    try {
      const chunks = chunkText(await this.textOf(source));
      if (chunks.length === 0) throw new GiveUp('The document has no text to index');
      const finished = await knex.transaction(async (trx) => {
        await trx('knowledge_chunks').where({ sourceId: source.id }).delete();
        for (let i = 0; i < chunks.length; i += BATCH) {
          const rows = chunks.slice(i, i + BATCH).map((c) => ({ organizationId: source.organizationId, sourceId: source.id, position: c.position, content: c.content, tokenCount: c.tokenCount }));
          await trx('knowledge_chunks').insert(rows);
          // Progress of the work, not an announcement of rows: the chunks become searchable at commit.
          this.progress(source, 'indexing', Math.min(i + BATCH, chunks.length), chunks.length);
        }
        const done = await models.KnowledgeSource.forOrg(source.organizationId, trx).patchAndFetchById(source.id, { status: unlessPaused(trx, 'indexed'), chunkCount: chunks.length, errorMessage: null, indexedAt: new Date(), updatedAt: new Date() });
        if (done) await this.outbox?.record(trx, source.organizationId, 'knowledge.indexed', () => ({ document: presentKnowledgeSource(done) }));
        const days = SYNC_PERIOD_DAYS[source.syncFrequency];
        if (days && source.source === 'url') await this.enqueue(source, trx, new Date(Date.now() + days * 86_400_000));
        return done;
      });
      this.progress(source, finished?.status ?? 'indexed', chunks.length, chunks.length);
    } catch (err) {
      const message = (err instanceof Error ? err.message : 'indexing failed').slice(0, 1000);
      const final = err instanceof GiveUp || err instanceof ValidationFailed || job.attempt > RETRY_DELAYS.length;
      const changed = await knex.transaction(async (trx) => {
        const changed = await models.KnowledgeSource.forOrg(source.organizationId, trx).patchAndFetchById(source.id, { status: unlessPaused(trx, final ? 'failed' : 'queued'), errorMessage: message, updatedAt: new Date() });
        // Deleted while it ran: no event about a source that is gone.
        if (final && changed) await this.outbox?.record(trx, source.organizationId, 'knowledge.failed', () => ({ document: presentKnowledgeSource(changed), error: message, attempts: job.attempt }));
        return changed;
      });
      this.progress(source, changed?.status ?? (final ? 'failed' : 'queued'), 0, 0);
      if (final) {
        await this.notifyAdmins(source, message);
        throw new GiveUp(message);
      }
      throw new RetryLater(message);
    }
  }

  /** Indexing failed for good: the organization's admins and owners hear of it (the retries are over). */
  private async notifyAdmins(source: KnowledgeSource, error: string): Promise<void> {
    try {
      const admins = (await this.deps.knex('memberships').where({ organizationId: source.organizationId, status: 'accepted' }).whereIn('role', ['owner', 'admin']).select('userId')) as { userId: string }[];
      await this.deps.notifications.notify(source.organizationId, admins.map((m) => m.userId), {
        type: 'knowledge_failed',
        title: `"${source.title}" could not be indexed`,
        body: error,
        data: { documentId: source.id, source: source.source },
      });
    } catch (err) {
      this.deps.logger.warn({ err, sourceId: source.id }, 'could not notify admins of a failed knowledge source');
    }
  }

  private async textOf(source: KnowledgeSource): Promise<string> {
    switch (source.source) {
      case 'text':
        return source.content ?? '';
      case 'faq':
        return `${source.title}\n\n${source.content ?? ''}`;
      case 'file': {
        const object = source.objectId ? await this.deps.models.StorageObject.forOrg(source.organizationId).findById(source.objectId) : undefined;
        if (!object || object.status !== 'uploaded') throw new GiveUp('The file of this source is missing');
        try {
          return await extractText(await this.deps.driver.read(object.key), object.mimeType);
        } catch (err) {
          throw new GiveUp(`The file could not be read: ${err instanceof Error ? err.message : 'unknown format'}`);
        }
      }
      case 'url':
        return this.crawl(source);
    }
  }

  /** The start page, then (crawl mode) same-host links breadth first, to the depth and page limits. */
  private async crawl(source: KnowledgeSource): Promise<string> {
    const start = new URL(source.url!).toString();
    const depthLimit = source.fetchMode === 'crawl' ? Math.min(source.crawlDepth ?? 1, 5) : 0;
    const pageLimit = Math.min(source.maxPages ?? MAX_PAGES, MAX_PAGES);
    // Breadth first: pages are fetched in the order their links were found, each once.
    const seen = new Set([start]);
    const queue = [{ url: start, depth: 0 }];
    const texts: string[] = [];
    const fetchTimeoutMs = this.deps.fetchTimeoutMs ?? PAGE_TIMEOUT_MS;
    const endsAt = Date.now() + (this.deps.crawlBudgetMs ?? CRAWL_BUDGET_MS);
    for (let i = 0; i < queue.length && texts.length < pageLimit; i++) {
      const { url, depth } = queue[i]!;
      // The start page gets its full time; later pages only what is left of the crawl's, and none once it is spent.
      const left = endsAt - Date.now();
      if (i > 0 && left <= 0) {
        this.deps.logger.info({ sourceId: source.id, pages: texts.length, left: queue.length - i }, 'a crawl ran out of time: the pages fetched are indexed');
        break;
      }
      try {
        const page = await fetchPage(url, { allowPrivate: this.deps.allowPrivate, timeoutMs: i === 0 ? fetchTimeoutMs : Math.min(fetchTimeoutMs, left) });
        const type = page.contentType.split(';')[0]!.trim().toLowerCase();
        const html = type === 'text/html' || type === 'application/xhtml+xml' ? page.body.toString('utf8') : null;
        texts.push(html !== null ? htmlToText(html) : await extractText(page.body, type));
        if (html !== null && depth < depthLimit) for (const link of sameHostLinks(html, new URL(page.url))) if (!seen.has(link)) (seen.add(link), queue.push({ url: link, depth: depth + 1 }));
      } catch (err) {
        // The start page decides the source; a later page that fails is skipped.
        if (i === 0) throw err instanceof UnsafeUrl ? new GiveUp(err.message) : err;
        this.deps.logger.debug({ err, url, sourceId: source.id }, 'a crawled page was skipped');
      }
    }
    return texts.join('\n\n');
  }
}
