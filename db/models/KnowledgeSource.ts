import { TenantModel } from '../BaseModel.js';

export const KNOWLEDGE_KINDS = ['text', 'faq', 'url', 'file'] as const;
export type KnowledgeKind = (typeof KNOWLEDGE_KINDS)[number];
export const KNOWLEDGE_STATUSES = ['awaiting_upload', 'queued', 'indexing', 'indexed', 'failed', 'paused'] as const;
export type KnowledgeStatus = (typeof KNOWLEDGE_STATUSES)[number];
export type SyncFrequency = 'never' | 'daily' | 'weekly' | 'monthly';

/** A document the organization's answers come from: pasted text, an FAQ entry, a web page (or site) or a file. */
export class KnowledgeSource extends TenantModel {
  static override tableName = 'knowledge_sources';

  declare title: string;
  declare source: KnowledgeKind;
  declare status: KnowledgeStatus;
  declare content: string | null;
  declare url: string | null;
  declare fetchMode: 'single' | 'crawl' | null;
  declare crawlDepth: number | null;
  declare maxPages: number | null;
  declare syncFrequency: SyncFrequency;
  declare catalog: string | null;
  declare objectId: string | null;
  declare chunkCount: number;
  declare errorMessage: string | null;
  declare embeddingModel: string | null;
  declare createdBy: string | null;
  declare indexedAt: Date | null;
}
