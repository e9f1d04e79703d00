// Splits a document into overlapping chunks of about 800 tokens (a token is approximated by a word), so a search hit
// carries enough context and a sentence cut at a boundary still appears whole in the next chunk.

export interface Chunk {
  position: number;
  content: string;
  tokenCount: number;
}

export const CHUNK_TOKENS = 800;
export const CHUNK_OVERLAP = 100;

/** Whitespace normalized per line, runs of blank lines collapsed; NUL removed (PostgreSQL text cannot hold it). */
export function normalizeText(text: string): string {
  return text
    .replace(/\u0000/g, '')
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((line) => line.replace(/[ \t\f\v]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

export function chunkText(text: string, size = CHUNK_TOKENS, overlap = CHUNK_OVERLAP): Chunk[] {
  const words = normalizeText(text).split(/\s+/).filter(Boolean);
  if (words.length === 0) return [];
  const step = Math.max(1, size - overlap);
  const chunks: Chunk[] = [];
  for (let start = 0; start < words.length; start += step) {
    const slice = words.slice(start, start + size);
    chunks.push({ position: chunks.length, content: slice.join(' '), tokenCount: slice.length });
    if (start + size >= words.length) break;
  }
  return chunks;
}
