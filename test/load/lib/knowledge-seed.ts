// The knowledge scenario's corpus and queries, made inside the app server process. Documents are drawn from a
// vocabulary with Zipf's word frequencies (as in any natural text: a few words are in most documents, most words in
// few), so queries taken from the corpus hit thousands of chunks, hundreds, tens, a handful, or none.
import type { AppServer } from '../../../server/server.js';

export interface KnowledgeSeedRequest {
  orgId: string;
  userId: string;
  docs: number;
}

export interface QueryClass {
  label: string;
  /** What an agent would type: words and phrases taken from the indexed documents. */
  queries: string[];
  /** Chunks each query matches (the statement ranks them all, then headlines the top ones). */
  matches: number[];
}

export interface KnowledgeSeedResult {
  documents: number;
  bytes: number;
  chunks: number;
  indexingSeconds: number;
  classes: QueryClass[];
}

const VOCABULARY = 20_000;
const WORDS_PER_DOC = 300;
const QUERIES_PER_CLASS = 16;

/** A deterministic generator (same corpus and queries on every run). */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  // 32-bit arithmetic (Math.imul): a float product would lose its low bits and fall into a short cycle.
  return () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 0x100000000;
}

function vocabulary(size: number, rnd: () => number): string[] {
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  const seen = new Set<string>();
  while (seen.size < size) seen.add(Array.from({ length: 4 + Math.floor(rnd() * 6) }, () => letters[Math.floor(rnd() * 26)]).join(''));
  return [...seen];
}

/** Documents as arrays of vocabulary ranks (0: the most frequent word), word frequency ~ 1/rank. */
export function corpus(docs: number): { words: string[]; documents: Int32Array[] } {
  const rnd = lcg(7);
  const words = vocabulary(VOCABULARY, rnd);
  const cumulative = new Float64Array(VOCABULARY);
  let sum = 0;
  for (let r = 0; r < VOCABULARY; r++) cumulative[r] = sum += 1 / (r + 1);
  const draw = () => {
    const target = rnd() * sum;
    let lo = 0;
    let hi = VOCABULARY - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < target) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const documents = Array.from({ length: docs }, () => Int32Array.from({ length: WORDS_PER_DOC }, draw));
  return { words, documents };
}

/** Queries of each selectivity, chosen by how many documents hold the words (counted over the generated text). */
export function queryClasses(words: string[], documents: Int32Array[]): { label: string; queries: string[] }[] {
  const df = new Int32Array(words.length);
  for (const doc of documents) for (const r of new Set(doc)) df[r]!++;
  const n = documents.length;
  const band = (lo: number, hi: number) => [...df.keys()].filter((r) => df[r]! >= lo * n && df[r]! <= hi * n);
  const spreadOver = <T>(list: T[], k: number) => Array.from({ length: Math.min(k, list.length) }, (_, i) => list[Math.floor((i * list.length) / Math.min(k, list.length))]!);
  const common = spreadOver(band(0.05, 0.15), QUERIES_PER_CLASS);
  const frequent = spreadOver(band(0.005, 0.02), QUERIES_PER_CLASS * 2);
  const rare = spreadOver(band(Math.max(2, 0.0002 * n) / n, Math.max(5, 0.001 * n) / n), QUERIES_PER_CLASS);
  // A phrase an agent copies out of a document: two neighbouring words that are each in 0.5-5 % of documents.
  const mid = new Set(band(0.005, 0.05));
  const phrases: string[] = [];
  for (let d = 0; d < documents.length && phrases.length < QUERIES_PER_CLASS; d += Math.max(1, Math.floor(documents.length / 97))) {
    const doc = documents[d]!;
    for (let p = 0; p + 1 < doc.length; p++) {
      if (mid.has(doc[p]!) && mid.has(doc[p + 1]!)) {
        phrases.push(`"${words[doc[p]!]} ${words[doc[p + 1]!]}"`);
        break;
      }
    }
  }
  return [
    { label: 'common word', queries: common.map((r) => words[r]!) },
    { label: 'frequent word', queries: frequent.slice(0, QUERIES_PER_CLASS).map((r) => words[r]!) },
    { label: 'rare word', queries: rare.map((r) => words[r]!) },
    // websearch syntax: both words must be there (ranked by how close they are).
    { label: 'two words', queries: Array.from({ length: QUERIES_PER_CLASS }, (_, i) => `${words[frequent[i]!]!} ${words[frequent[frequent.length - 1 - i]!]!}`) },
    { label: 'quoted phrase', queries: phrases },
    // Words of no document: what a search for something the base does not cover costs.
    { label: 'no match', queries: Array.from({ length: QUERIES_PER_CLASS }, (_, i) => `zzqxjv${i}`) },
  ];
}

/** Writes the documents as text sources, then times the job queue indexing them all; picks the queries. */
export async function seedKnowledge(server: AppServer, req: KnowledgeSeedRequest): Promise<KnowledgeSeedResult> {
  const { words, documents } = corpus(req.docs);
  // Indexing alone is timed: the queue stops claiming while the sources are written, then drains them.
  await server.jobs.stop();
  let bytes = 0;
  let next = 0;
  const writer = async () => {
    for (let i = next++; i < documents.length; i = next++) {
      const text = Array.from(documents[i]!, (r) => words[r]).join(' ');
      bytes += Buffer.byteLength(text);
      await server.services.knowledge.create(req.orgId, req.userId, { title: `Document ${i}`, source: 'text', content: text });
    }
  };
  await Promise.all(Array.from({ length: 4 }, writer));
  const t0 = performance.now();
  const ran = await server.jobs.drain('knowledge-index');
  const indexingSeconds = (performance.now() - t0) / 1000;
  await server.jobs.start();
  const { knex } = server.db;
  const chunks = Number((await knex('knowledge_chunks').where({ organizationId: req.orgId }).count({ n: '*' }).first())?.n ?? 0);
  // Fresh chunks sit in the GIN index's pending list until a vacuum merges them, and autovacuum would do it in the
  // middle of the measures (whichever side ran then paid for it): done first, for both sides.
  await knex.raw('vacuum analyze knowledge_chunks');
  await knex.raw('vacuum analyze knowledge_sources');
  const classes: QueryClass[] = [];
  for (const c of queryClasses(words, documents)) {
    const matches: number[] = [];
    for (const q of c.queries) {
      const r = await knex.raw(`select count(*)::int as n from knowledge_chunks where organization_id = ? and tsv @@ websearch_to_tsquery('english', ?)`, [req.orgId, q]);
      matches.push((r.rows as { n: number }[])[0]!.n);
    }
    classes.push({ ...c, matches });
  }
  return { documents: ran, bytes, chunks, indexingSeconds, classes };
}
