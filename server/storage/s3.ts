// S3 and S3-compatible servers (MinIO, Ceph, R2...): presigned PUT and GET, HEAD and ranged reads for the checks.
import type { Readable } from 'node:stream';
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { contentDisposition, type ObjectHead, type StorageDriver, type StoredRef, type UploadTarget } from './driver.js';

export interface S3Options {
  endpoint: string | null;
  region: string;
  bucket: string;
  accessKeyId: string | null;
  secretAccessKey: string | null;
  /** Path-style URLs (`endpoint/bucket/key`), which most S3-compatible servers need. */
  forcePathStyle: boolean;
}

// A HEAD answer has no body, so its error is known by its status alone (the SDK names a 404 "NotFound" after it).
const isMissing = (err: unknown) => err instanceof S3ServiceException && err.$metadata.httpStatusCode === 404;

export class S3Driver implements StorageDriver {
  readonly name = 's3' as const;
  private readonly client: S3Client;
  private readonly bucket: string;

  constructor(options: S3Options) {
    this.bucket = options.bucket;
    this.client = new S3Client({
      region: options.region,
      forcePathStyle: options.forcePathStyle,
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      // Without keys the SDK's default chain applies (instance roles, AWS_* variables of the platform).
      ...(options.accessKeyId && options.secretAccessKey ? { credentials: { accessKeyId: options.accessKeyId, secretAccessKey: options.secretAccessKey } } : {}),
    });
  }

  async uploadTarget(ref: StoredRef, expiresInSeconds: number): Promise<UploadTarget> {
    const command = new PutObjectCommand({ Bucket: this.bucket, Key: ref.key, ContentType: ref.mimeType });
    // Content-Type is signed, so the upload cannot change it; the size is checked when the upload is completed.
    const url = await getSignedUrl(this.client, command, { expiresIn: expiresInSeconds, signableHeaders: new Set(['content-type']) });
    return { url, method: 'PUT', headers: { 'Content-Type': ref.mimeType } };
  }

  downloadUrl(ref: StoredRef, expiresInSeconds: number, disposition: 'inline' | 'attachment'): Promise<string> {
    const command = new GetObjectCommand({ Bucket: this.bucket, Key: ref.key, ResponseContentType: ref.mimeType, ResponseContentDisposition: contentDisposition(disposition, ref.fileName) });
    return getSignedUrl(this.client, command, { expiresIn: expiresInSeconds });
  }

  async head(key: string): Promise<ObjectHead | null> {
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { sizeBytes: out.ContentLength ?? 0, contentType: out.ContentType ?? null };
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  async readStart(key: string, bytes: number): Promise<Buffer> {
    const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: `bytes=0-${bytes - 1}` }));
    const body = out.Body ? Buffer.from(await out.Body.transformToByteArray()) : Buffer.alloc(0);
    // A server that ignores Range sends everything.
    return body.subarray(0, bytes);
  }

  async read(key: string): Promise<Buffer> {
    const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
    return out.Body ? Buffer.from(await out.Body.transformToByteArray()) : Buffer.alloc(0);
  }

  async stream(key: string): Promise<Readable> {
    const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
    return out.Body as Readable;
  }

  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType }));
  }

  async delete(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  close(): void {
    this.client.destroy();
  }
}
