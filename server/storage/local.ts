// The embedded default: objects as files under DATA_DIR/objects, reached through HMAC-signed expiring URLs that the
// server itself answers (PUT and GET /api/v1/storage/local/{objectId}).
import { createHmac } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { safeEqual } from '../auth/secrets.js';
import type { ObjectHead, StorageDriver, StoredRef, UploadTarget } from './driver.js';

export type SignedMethod = 'PUT' | 'GET';

export class LocalDriver implements StorageDriver {
  readonly name = 'local' as const;
  readonly root: string;

  constructor(
    dataDir: string,
    private readonly opts: { publicUrl: string; signingKey: string },
  ) {
    this.root = path.join(dataDir, 'objects');
  }

  /** The file of a key; a key that would leave the root (it never should: the server builds keys) is refused. */
  pathOf(key: string): string {
    const file = path.resolve(this.root, key);
    if (!file.startsWith(this.root + path.sep)) throw new Error('storage key outside the objects directory');
    return file;
  }

  sign(method: SignedMethod, objectId: string, expires: number): string {
    return createHmac('sha256', this.opts.signingKey).update(`${method}\n${objectId.toLowerCase()}\n${expires}`).digest('base64url');
  }

  /** Whether a signed URL's parameters are genuine and not yet expired. */
  verify(method: SignedMethod, objectId: string, expires: number, signature: string): boolean {
    if (!Number.isSafeInteger(expires) || expires * 1000 < Date.now()) return false;
    return safeEqual(signature, this.sign(method, objectId, expires));
  }

  private signedUrl(method: SignedMethod, objectId: string, expiresInSeconds: number): string {
    const expires = Math.floor(Date.now() / 1000) + expiresInSeconds;
    return `${this.opts.publicUrl}/api/v1/storage/local/${objectId}?expires=${expires}&signature=${this.sign(method, objectId, expires)}`;
  }

  async uploadTarget(ref: StoredRef, expiresInSeconds: number): Promise<UploadTarget> {
    return { url: this.signedUrl('PUT', ref.id, expiresInSeconds), method: 'PUT', headers: { 'Content-Type': ref.mimeType } };
  }

  async downloadUrl(ref: StoredRef, expiresInSeconds: number): Promise<string> {
    return this.signedUrl('GET', ref.id, expiresInSeconds);
  }

  async head(key: string): Promise<ObjectHead | null> {
    try {
      const s = await stat(this.pathOf(key));
      return s.isFile() ? { sizeBytes: s.size, contentType: null } : null;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async readStart(key: string, bytes: number): Promise<Buffer> {
    const handle = await open(this.pathOf(key), 'r');
    try {
      const buffer = Buffer.alloc(bytes);
      const { bytesRead } = await handle.read(buffer, 0, bytes, 0);
      return buffer.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  }

  read(key: string): Promise<Buffer> {
    return readFile(this.pathOf(key));
  }

  async stream(key: string): Promise<Readable> {
    return createReadStream(this.pathOf(key));
  }

  async put(key: string, body: Buffer): Promise<void> {
    const file = this.pathOf(key);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, body);
  }

  async delete(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  close(): void {
    // Files are opened and closed per call: nothing stays open.
  }
}
