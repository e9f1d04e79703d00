// Ranked search over an organization's chunks: full text (websearch_to_tsquery + ts_rank_cd, ts_headline snippets),
// and, when the caller brings a query embedding and chunks have theirs, both rankings fused by reciprocal rank.
import type { Knex } from 'knex';
import type { StatementFactory } from '../../../db/statements.js';

export interface SearchHit {
  chunkId: string;
  documentId: string;
  title: string;
  snippet: string;
  score: number;
}

/** Where the search runs: the full-text path is one fixed statement (prepared on PostgreSQL), the rest knex. */
export interface SearchDb {
  knex: Knex;
  statement: StatementFactory;
}

export interface SearchOptions {
  limit: number;
  sourceId?: string;
  /** A query embedding (the AI service's model); used when chunks have embeddings of the same length. */
  embedding?: number[];
  /** `all` words (a search box) or `any` word (assist: the visitor's sentences), ranked by how many match. */
  match?: 'all' | 'any';
}

/** Reciprocal rank fusion constant: how much the top ranks dominate. */
const RRF_K = 60;
const CANDIDATES = 50;
const HEADLINE = 'MaxWords=40, MinWords=15, MaxFragments=2, FragmentDelimiter=" … "';

/** Words of free text joined with `or`, the websearch syntax for "any of these". */
export function anyWordsQuery(text: string): string {
  const words = text.toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) ?? [];
  return [...new Set(words)].slice(0, 40).join(' or ');
}

export async function searchChunks(db: SearchDb, orgId: string, q: string, opts: SearchOptions): Promise<SearchHit[]> {
  const { knex } = db;
  const query = opts.match === 'any' ? anyWordsQuery(q) : q;
  const limit = Math.min(Math.max(opts.limit, 1), 50);
  const useVectors = !!opts.embedding?.length;
  if (!useVectors) return query.trim() ? rankedWithSnippets(db, orgId, query, limit, opts.sourceId) : [];
  const textIds = query.trim() ? await textRanking(knex, orgId, query, CANDIDATES, opts.sourceId) : [];
  const vectorIds = await vectorRanking(knex, orgId, opts.embedding!, CANDIDATES, opts.sourceId);
  const fused = new Map<string, number>();
  textIds.forEach((r, i) => fused.set(r.id, (fused.get(r.id) ?? 0) + 1 / (RRF_K + i + 1)));
  vectorIds.forEach((r, i) => fused.set(r.id, (fused.get(r.id) ?? 0) + 1 / (RRF_K + i + 1)));
  const top = [...fused.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit).map(([id, score]) => ({ id, score }));
  return withSnippets(knex, orgId, query, top);
}

/**
 * The full-text search as one statement: rank the organization's matching chunks, headline the top `limit` only.
 * $1 headline options, $2 the websearch query, $3 the organization, $4 the limit, $5 the source (`bySource`).
 */
export function rankedSearchSql(bySource: boolean): string {
  return `select r.id, r.source_id, s.title, ts_headline('english', c.content, r.query, $1) as snippet, r.score
       from (select c.id, c.source_id, q.query, ts_rank_cd(c.tsv, q.query) as score
               from knowledge_chunks c, websearch_to_tsquery('english', $2) as q(query)
              where c.organization_id = $3 and c.tsv @@ q.query ${bySource ? 'and c.source_id = $5' : ''}
              order by score desc, c.id
              limit $4) r
       join knowledge_chunks c on c.id = r.id
       join knowledge_sources s on s.id = r.source_id
      order by r.score desc, r.id`;
}

/** Its parameters, in the order of its placeholders. */
export function rankedSearchValues(orgId: string, query: string, limit: number, sourceId?: string): unknown[] {
  return [HEADLINE, query, orgId, limit, ...(sourceId ? [sourceId] : [])];
}

const RANKED_SQL = rankedSearchSql(false);
const RANKED_IN_SOURCE_SQL = rankedSearchSql(true);

/**
 * Full text only: rank and headline in one statement (one round trip), headlines for the top `limit` only. A named
 * prepared statement on PostgreSQL: parsed and planned once per connection instead of on every search.
 */
async function rankedWithSnippets(db: SearchDb, orgId: string, query: string, limit: number, sourceId?: string): Promise<SearchHit[]> {
  const statement = sourceId ? db.statement<RankedRow>('knowledge_search_in_source', RANKED_IN_SOURCE_SQL) : db.statement<RankedRow>('knowledge_search', RANKED_SQL);
  const rows = await statement.rows(rankedSearchValues(orgId, query, limit, sourceId));
  return rows.map((r) => ({ chunkId: r.id, documentId: r.source_id, title: r.title, snippet: r.snippet, score: Number(r.score) }));
}

interface RankedRow {
  id: string;
  source_id: string;
  title: string;
  snippet: string;
  score: number;
}

async function textRanking(knex: Knex, orgId: string, query: string, limit: number, sourceId?: string): Promise<{ id: string; score: number }[]> {
  const result = await knex.raw(
    `select c.id, ts_rank_cd(c.tsv, q.query) as score
       from knowledge_chunks c, websearch_to_tsquery('english', ?) as q(query)
      where c.organization_id = ? and c.tsv @@ q.query ${sourceId ? 'and c.source_id = ?' : ''}
      order by score desc, c.id
      limit ?`,
    sourceId ? [query, orgId, sourceId, limit] : [query, orgId, limit],
  );
  return (result.rows as { id: string; score: number }[]).map((r) => ({ id: r.id, score: Number(r.score) }));
}

/** Cosine similarity over real[] embeddings (no extension needed); chunks of another length are skipped. */
async function vectorRanking(knex: Knex, orgId: string, embedding: number[], limit: number, sourceId?: string): Promise<{ id: string; score: number }[]> {
  const result = await knex.raw(
    `select c.id, s.dot / nullif(sqrt(s.nn) * sqrt(?), 0) as score
       from knowledge_chunks c
       cross join lateral (select sum(a * b) as dot, sum(a * a) as nn from unnest(c.embedding, ?::real[]) as t(a, b)) s
      where c.organization_id = ? and c.embedding is not null and cardinality(c.embedding) = ? ${sourceId ? 'and c.source_id = ?' : ''}
      order by score desc nulls last
      limit ?`,
    [embedding.reduce((n, x) => n + x * x, 0), `{${embedding.join(',')}}`, orgId, embedding.length, ...(sourceId ? [sourceId] : []), limit],
  );
  return (result.rows as { id: string; score: number | null }[]).filter((r) => r.score !== null).map((r) => ({ id: r.id, score: Number(r.score) }));
}

/** Titles and highlighted snippets for the chosen chunks only (ts_headline is the costly part), in the given order. */
async function withSnippets(knex: Knex, orgId: string, query: string, ranked: { id: string; score: number }[]): Promise<SearchHit[]> {
  if (ranked.length === 0) return [];
  const result = await knex.raw(
    `select c.id, c.source_id, s.title,
            case when q.query::text = '' then left(c.content, 300) else ts_headline('english', c.content, q.query, ?) end as snippet
       from knowledge_chunks c join knowledge_sources s on s.id = c.source_id, websearch_to_tsquery('english', ?) as q(query)
      where c.organization_id = ? and c.id = any(?::uuid[])`,
    [HEADLINE, query, orgId, ranked.map((r) => r.id)],
  );
  const byId = new Map((result.rows as { id: string; source_id: string; title: string; snippet: string }[]).map((r) => [r.id, r]));
  return ranked.flatMap((r) => {
    const row = byId.get(r.id);
    return row ? [{ chunkId: r.id, documentId: row.source_id, title: row.title, snippet: row.snippet, score: r.score }] : [];
  });
}
