// What each purpose of stored file may hold: size limits, content types, safe names, and sniffing a file's real type.
import type { StoragePurpose } from '../../db/models/StorageObject.js';

const MiB = 1024 * 1024;

const IMAGES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];
const DOCUMENTS = [
  'application/pdf',
  'text/plain',
  'text/csv',
  'text/markdown',
  'application/msword',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  'application/vnd.ms-excel',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  'application/zip',
];
const MEDIA = ['audio/mpeg', 'audio/ogg', 'audio/mp4', 'video/mp4', 'video/webm'];

export const KNOWLEDGE_TYPES = ['application/pdf', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'text/plain', 'text/markdown', 'text/html'];

export interface PurposeRule {
  maxBytes: number;
  types: string[];
  /** Served without a signed URL (avatars and logos appear on public pages). */
  public: boolean;
}

// SVG is never allowed for avatars and logos: it can carry script and is served from our own origin.
export const PURPOSE_RULES: Record<StoragePurpose, PurposeRule> = {
  knowledge: { maxBytes: 25 * MiB, types: KNOWLEDGE_TYPES, public: false },
  attachment: { maxBytes: 10 * MiB, types: [...IMAGES, ...DOCUMENTS, ...MEDIA], public: false },
  avatar: { maxBytes: 2 * MiB, types: IMAGES, public: true },
  logo: { maxBytes: 2 * MiB, types: IMAGES, public: true },
  channel_media: { maxBytes: 25 * MiB, types: [...IMAGES, ...DOCUMENTS, ...MEDIA], public: false },
};

/** The media type without parameters, lowercased (`Text/Plain; charset=utf-8` -> `text/plain`). */
export function baseType(mimeType: string): string {
  return mimeType.split(';')[0]!.trim().toLowerCase();
}

/** A file name safe in a key and a Content-Disposition header: no path, no control or odd characters, ≤100 chars. */
export function safeFileName(name: string): string {
  const last = name.split(/[\\/]/).pop() ?? '';
  const cleaned = last
    .normalize('NFKC')
    .replace(/[^\p{L}\p{N}._ -]+/gu, '_')
    .replace(/\s+/g, '_')
    .replace(/^\.+/, '')
    .slice(-100);
  return cleaned || 'file';
}

const SIGNATURES: { type: string; bytes: number[]; offset?: number }[] = [
  { type: 'image/png', bytes: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { type: 'image/jpeg', bytes: [0xff, 0xd8, 0xff] },
  { type: 'image/gif', bytes: [0x47, 0x49, 0x46, 0x38] },
  { type: 'application/pdf', bytes: [0x25, 0x50, 0x44, 0x46, 0x2d] },
  { type: 'application/zip', bytes: [0x50, 0x4b, 0x03, 0x04] },
];

function startsWith(head: Buffer, bytes: number[], offset = 0): boolean {
  return head.length >= offset + bytes.length && bytes.every((b, i) => head[offset + i] === b);
}

/** The type the first bytes prove, when they prove one (images, PDF, zip containers); null for anything else. */
export function sniff(head: Buffer): string | null {
  for (const s of SIGNATURES) if (startsWith(head, s.bytes, s.offset)) return s.type;
  if (startsWith(head, [0x52, 0x49, 0x46, 0x46]) && startsWith(head, [0x57, 0x45, 0x42, 0x50], 8)) return 'image/webp';
  return null;
}

/** Zip-based office formats start like any zip file. */
const ZIP_FAMILY = new Set(['application/zip', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet']);
const SNIFFABLE = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'application/pdf', ...ZIP_FAMILY]);
const TEXTUAL = new Set(['text/plain', 'text/csv', 'text/markdown', 'text/html']);

/**
 * Whether the first bytes of a file agree with its declared type: a type with a signature must show it, and a text
 * type must not show a binary signature or NUL bytes. Types without a signature we know pass.
 */
export function contentMatches(declared: string, head: Buffer): boolean {
  const type = baseType(declared);
  const found = sniff(head);
  if (SNIFFABLE.has(type)) return found !== null && (found === type || (ZIP_FAMILY.has(type) && found === 'application/zip'));
  if (TEXTUAL.has(type)) return found === null && !head.includes(0);
  return true;
}
