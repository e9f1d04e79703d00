// Storage routes: presigned uploads and downloads for agents and widget visitors, the file list, deletion, the local
// driver's signed URLs and the public avatar/logo link.
import type { Context } from 'koa';
import { NotFound } from '../server/errors.js';
import { contentDisposition } from '../server/storage/driver.js';
import { presentStorageObject, presentVisitorObject } from '../server/presenters/storage.js';
import type { Uploader } from '../server/storage/service.js';
import { defineRoute, type AnyRoute, type HandlerArgs } from './registry.js';
import { object, paginationQuery, params, uuid } from './schemas/common.js';
import { DownloadView, expiresIn, fileName, mimeType, PresignedUploadView, purpose, signedQuery, sizeBytes, StorageObjectView, VisitorObjectView } from './schemas/storage.js';
import type { RouteServices } from './services.js';

const tag = 'Storage';
const agent = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;
const widget = { kind: 'widget' } as const;

const operator = (a: Pick<HandlerArgs<unknown, unknown, unknown, typeof agent>, 'orgId' | 'actor' | 'membership'>): Extract<Uploader, { kind: 'operator' }> => ({
  kind: 'operator',
  orgId: a.orgId,
  userId: a.actor.userId,
  role: a.membership.role,
});

/** Files served from our own origin download rather than render (images excepted), and may be embedded anywhere. */
function serveHeaders(ctx: Context, mime: string, name: string, size?: number): void {
  ctx.set('Content-Disposition', contentDisposition(mime.startsWith('image/') ? 'inline' : 'attachment', name));
  ctx.set('Cross-Origin-Resource-Policy', 'cross-origin');
  ctx.set('Cache-Control', 'private, max-age=300');
  if (size !== undefined) ctx.length = size;
}

export function storageRoutes(s: RouteServices): AnyRoute[] {
  const storage = s.storage;
  return [
    defineRoute({
      method: 'post', path: '/storage/presigned-upload', operationId: 'presignUpload', tag, auth: agent,
      summary: 'Start an upload: checks type, size and the plan\'s storage, and answers a signed PUT URL',
      description: 'Send the bytes with `upload.method` to `upload.url` carrying `upload.headers`, then call POST /storage/objects/{objectId}/complete. Uploads never completed are deleted after 24 hours. The plan\'s `storageMb` counts pending and uploaded files (403 plan_limit_reached).',
      body: object({ fileName, mimeType, sizeBytes, purpose, expiresIn }, ['fileName', 'mimeType', 'sizeBytes', 'purpose']),
      response: { status: 201, description: 'Pending object and its upload', data: PresignedUploadView(StorageObjectView) },
      errors: [403],
      handler: async (a) => {
        const p = await storage.presignUpload(operator(a), a.body);
        return { message: 'Upload ready', data: { objectId: p.object.id, object: presentStorageObject(p.object), upload: p.upload, expiresAt: p.expiresAt.toISOString() } };
      },
    }),
    defineRoute({
      method: 'post', path: '/storage/objects/:objectId/complete', operationId: 'completeUpload', tag, auth: agent,
      summary: 'Confirm an upload (its creator): the stored size and type are checked against the declaration',
      description: 'Missing bytes answer 400 (the upload may still be sent); a size or type that differs from the declaration answers 400 and deletes the object.',
      params: params('objectId'),
      response: { status: 200, description: 'Uploaded object', data: StorageObjectView },
      handler: async (a) => ({ message: 'Upload complete', data: presentStorageObject(await storage.complete(operator(a), a.params.objectId)) }),
    }),
    defineRoute({
      method: 'post', path: '/storage/presigned-download', operationId: 'presignDownload', tag, auth: agent,
      summary: 'A signed download URL for an uploaded file of the organization',
      body: object({ objectId: uuid, expiresIn }, ['objectId']),
      response: { status: 200, description: 'URL', data: DownloadView },
      errors: [404],
      handler: async ({ body, orgId }) => {
        const d = await storage.downloadUrl(await storage.get(orgId, body.objectId), body.expiresIn);
        return { message: 'Download URL', data: { url: d.url, expiresAt: d.expiresAt.toISOString() } };
      },
    }),
    defineRoute({
      method: 'get', path: '/storage/files', operationId: 'listFiles', tag, auth: agent,
      summary: 'The organization\'s files, newest first',
      query: object({ purpose, status: { type: 'string', enum: ['pending', 'uploaded'] }, ...paginationQuery }),
      response: { status: 200, description: 'Files', data: { type: 'array', items: StorageObjectView }, paginated: true },
      handler: async ({ query, orgId }) => {
        const { rows, total } = await storage.list(orgId, query);
        return { message: 'Files', data: rows.map(presentStorageObject), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'get', path: '/storage/metadata/:objectId', operationId: 'getFileMetadata', tag, auth: agent,
      summary: 'One file\'s metadata',
      params: params('objectId'),
      response: { status: 200, description: 'File', data: StorageObjectView },
      handler: async ({ params: p, orgId }) => ({ message: 'File', data: presentStorageObject(await storage.get(orgId, p.objectId)) }),
    }),
    defineRoute({
      method: 'delete', path: '/storage/:objectId', operationId: 'deleteFile', tag, auth: agent,
      summary: 'Delete a file (its uploader or an admin); a file still attached to a message or used by a knowledge source answers 409',
      params: params('objectId'),
      response: { status: 200, description: 'Deleted' },
      errors: [409],
      handler: async (a) => {
        await storage.delete(operator(a), a.params.objectId);
        return { message: 'File deleted' };
      },
    }),
    defineRoute({
      method: 'put', path: '/storage/local/:objectId', operationId: 'uploadLocalFile', tag, auth: { kind: 'public' }, rawBody: true,
      summary: 'The local driver\'s signed upload URL: the raw bytes, with the declared Content-Type',
      description: 'Only as handed out by POST /storage/presigned-upload. A different Content-Type answers 415, more bytes than declared 413, a bad or expired signature 403.',
      params: params('objectId'),
      query: signedQuery,
      response: { status: 200, description: 'Stored (call complete next)' },
      errors: [403, 404, 409, 413, 415],
      handler: async ({ params: p, query, ctx }) => {
        const length = ctx.get('content-length');
        await storage.receiveLocal(p.objectId, query, { contentType: ctx.get('content-type'), contentLength: length ? Number(length) : null, body: ctx.req });
        return { message: 'Stored' };
      },
    }),
    defineRoute({
      method: 'get', path: '/storage/local/:objectId', operationId: 'downloadLocalFile', tag, auth: { kind: 'public' },
      summary: 'The local driver\'s signed download URL: the file itself',
      params: params('objectId'),
      query: signedQuery,
      response: { status: 200, description: 'The bytes (not wrapped in the success envelope)' },
      errors: [403, 404],
      handler: async ({ params: p, query, ctx }) => {
        const { object: o, body } = await storage.sendLocal(p.objectId, query);
        serveHeaders(ctx, o.mimeType, o.fileName, o.sizeBytes);
        return { message: 'File', raw: { contentType: o.mimeType, body } };
      },
    }),
    defineRoute({
      method: 'get', path: '/storage/public/:objectId', operationId: 'getPublicFile', tag, auth: { kind: 'public' },
      summary: 'An avatar or logo, without a signature (other purposes answer 404)',
      description: 'Local storage answers the bytes; S3 answers 302 to a fresh signed URL.',
      params: params('objectId'),
      response: { status: 200, description: 'The image (not wrapped in the success envelope)' },
      errors: [302, 404],
      handler: async ({ params: p, ctx }) => {
        const file = await storage.publicFile(p.objectId);
        if ('redirect' in file) {
          ctx.set('Location', file.redirect);
          return { status: 302, message: 'Redirect', raw: { contentType: 'text/plain', body: '' } };
        }
        serveHeaders(ctx, file.object.mimeType, file.object.fileName, file.object.sizeBytes);
        ctx.set('Cache-Control', 'public, max-age=3600');
        return { message: 'File', raw: { contentType: file.object.mimeType, body: file.body } };
      },
    }),

    // Widget visitors: attachments only, and only their own files or those of their own conversations.
    defineRoute({
      method: 'post', path: '/widget/storage/presigned-upload', operationId: 'presignWidgetUpload', tag, auth: widget,
      summary: 'A visitor starts uploading an attachment (then completes it and sends it with a message\'s `attachments`)',
      body: object({ fileName, mimeType, sizeBytes, expiresIn }, ['fileName', 'mimeType', 'sizeBytes']),
      response: { status: 201, description: 'Pending object and its upload', data: PresignedUploadView(VisitorObjectView) },
      errors: [403],
      handler: async ({ visitor, body }) => {
        const p = await storage.presignUpload({ kind: 'visitor', orgId: visitor.orgId, sessionId: visitor.sessionId }, { ...body, purpose: 'attachment' });
        return { message: 'Upload ready', data: { objectId: p.object.id, object: presentVisitorObject(p.object), upload: p.upload, expiresAt: p.expiresAt.toISOString() } };
      },
    }),
    defineRoute({
      method: 'post', path: '/widget/storage/objects/:objectId/complete', operationId: 'completeWidgetUpload', tag, auth: widget,
      summary: 'A visitor confirms its own upload (checked like an agent\'s)',
      params: params('objectId'),
      response: { status: 200, description: 'Uploaded object', data: VisitorObjectView },
      handler: async ({ visitor, params: p }) => ({ message: 'Upload complete', data: presentVisitorObject(await storage.complete({ kind: 'visitor', orgId: visitor.orgId, sessionId: visitor.sessionId }, p.objectId)) }),
    }),
    defineRoute({
      method: 'post', path: '/widget/storage/presigned-download', operationId: 'presignWidgetDownload', tag, auth: widget,
      summary: 'A download URL for the visitor\'s own upload or a file of a public message in one of its conversations',
      body: object({ objectId: uuid, expiresIn }, ['objectId']),
      response: { status: 200, description: 'URL', data: DownloadView },
      errors: [404],
      handler: async ({ visitor, body }) => {
        const o = await storage.get(visitor.orgId, body.objectId);
        if (!(await s.attachments.visitorMay(visitor.orgId, visitor.sessionId, o))) throw new NotFound('File');
        const d = await storage.downloadUrl(o, body.expiresIn);
        return { message: 'Download URL', data: { url: d.url, expiresAt: d.expiresAt.toISOString() } };
      },
    }),
  ];
}
