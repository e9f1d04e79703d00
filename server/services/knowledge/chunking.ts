// Splits a document into overlapping chunks of about 800 tokens (a token is approximated by a word), so a search hit
// carries enough context and a sentence cut at a boundary still appears whole in the next chunk.

export interface Chunk {
  position: number;
  content: string;
  tokenCount: number;
}

export const CHUNK_TOKENS = 800;
export const CHUNK_OVERLAP = 100;

export function chunkText(text: string, size = CHUNK_TOKENS, overlap = CHUNK_OVERLAP): Chunk[] {
  // Words, however they were spaced, joined by one space in a chunk; NUL removed (PostgreSQL text cannot hold it).
  const words = text.replace(/\u0000/g, '').split(/\s+/).filter(Boolean);
  const step = Math.max(1, size - overlap);
  const chunks: Chunk[] = [];
  for (let start = 0; start < words.length; start += step) {
    const slice = words.slice(start, start + size);
    chunks.push({ position: chunks.length, content: slice.join(' '), tokenCount: slice.length });
    if (start + size >= words.length) break;
  }
  return chunks;
}
