// What a storage backend offers: signed upload and download URLs, and the few reads and writes the server does itself.
import type { Readable } from 'node:stream';

export interface StoredRef {
  id: string;
  key: string;
  mimeType: string;
  fileName: string;
  sizeBytes: number;
}

export interface UploadTarget {
  url: string;
  method: 'PUT';
  /** Headers the client must send with the bytes (the signature covers them). */
  headers: Record<string, string>;
}

export interface ObjectHead {
  sizeBytes: number;
  /** As the store recorded it; null when the store keeps none (the local driver enforced it at upload). */
  contentType: string | null;
}

export interface StorageDriver {
  readonly name: 'local' | 's3';
  uploadTarget(ref: StoredRef, expiresInSeconds: number): Promise<UploadTarget>;
  /** `inline` lets a browser show an image; everything else downloads as a file. */
  downloadUrl(ref: StoredRef, expiresInSeconds: number, disposition: 'inline' | 'attachment'): Promise<string>;
  head(key: string): Promise<ObjectHead | null>;
  /** The first `bytes` bytes (fewer when the object is shorter). */
  readStart(key: string, bytes: number): Promise<Buffer>;
  read(key: string): Promise<Buffer>;
  stream(key: string): Promise<Readable>;
  put(key: string, body: Buffer, contentType: string): Promise<void>;
  delete(key: string): Promise<void>;
  /** Lets go of what the driver holds open (an S3 client's pooled connections), once the server stops. */
  close(): void;
}

/** Content-Disposition with a plain ASCII fallback and the UTF-8 name (RFC 6266). */
export function contentDisposition(disposition: 'inline' | 'attachment', fileName: string): string {
  const ascii = fileName.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `${disposition}; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(fileName)}`;
}
