// Storage test helpers: an S3-compatible server on loopback (s3rver), and upload/download round trips over HTTP.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import S3rver from 's3rver';
import type { Api, ApiResponse } from './http.js';

export const S3_BUCKET = 'support-test';

export interface FakeS3 {
  env: Record<string, string>;
  stop(): Promise<void>;
  /** Connections the store holds open from its clients. */
  connections(): Promise<number>;
}

/** s3rver (a pure-npm S3 implementation) in a fresh directory, with the test bucket made. */
export async function startFakeS3(): Promise<FakeS3> {
  const directory = mkdtempSync(path.join(tmpdir(), 'support-s3-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory, configureBuckets: [{ name: S3_BUCKET, configs: [] }] });
  const { port } = await server.run();
  // An idle connection stays open until its client closes it (Node's default would close it after 5 s).
  server.httpServer.keepAliveTimeout = 10 * 60_000;
  return {
    env: { STORAGE_DRIVER: 's3', S3_ENDPOINT: `http://127.0.0.1:${port}`, S3_BUCKET, S3_REGION: 'us-east-1', S3_ACCESS_KEY_ID: 'S3RVER', S3_SECRET_ACCESS_KEY: 'S3RVER', S3_FORCE_PATH_STYLE: 'true' },
    async stop() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
    connections: () => new Promise((resolve, reject) => server.httpServer.getConnections((e, n) => (e ? reject(e) : resolve(n)))),
  };
}

/** Local URLs carry PUBLIC_URL's origin (a test server listens on another port): send them to the test server. */
export function reachable(url: string, baseUrl: string): string {
  const u = new URL(url);
  return u.pathname.startsWith('/api/v1/storage/local/') ? `${baseUrl}${u.pathname}${u.search}` : url;
}

export const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(56, 7)]);
export const PDF = Buffer.from('%PDF-1.4\n% fake but well-started\n');

export interface Uploaded {
  objectId: string;
  presign: ApiResponse;
  put: Response;
  complete: ApiResponse;
}

/**
 * presign -> PUT the bytes -> complete. `declared` overrides what the presign claims (a lying client), and
 * `contentType` what the PUT sends.
 */
export async function upload(
  api: Api,
  token: string,
  baseUrl: string,
  file: { name: string; type: string; bytes: Buffer },
  opts: { purpose?: string; declared?: { type?: string; size?: number }; contentType?: string; widget?: boolean } = {},
): Promise<Uploaded> {
  const prefix = opts.widget ? '/widget/storage' : '/storage';
  const body: Record<string, unknown> = { fileName: file.name, mimeType: opts.declared?.type ?? file.type, sizeBytes: opts.declared?.size ?? file.bytes.length };
  if (!opts.widget) body.purpose = opts.purpose ?? 'attachment';
  const presign = await api.post(`${prefix}/presigned-upload`, body, { token });
  expect(presign.status, JSON.stringify(presign.body)).to.equal(201);
  const { objectId, upload: target } = presign.body.data;
  const put = await fetch(reachable(target.url, baseUrl), { method: 'PUT', headers: { ...target.headers, ...(opts.contentType ? { 'Content-Type': opts.contentType } : {}) }, body: new Uint8Array(file.bytes) });
  const complete = await api.post(`${prefix}/objects/${objectId}/complete`, {}, { token });
  return { objectId, presign, put, complete };
}

export async function download(url: string, baseUrl: string): Promise<{ status: number; bytes: Buffer; type: string | null }> {
  const res = await fetch(reachable(url, baseUrl));
  return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()), type: res.headers.get('content-type') };
}
