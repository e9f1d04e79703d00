// Schemas of the storage routes and of the objects they return.
import { STORAGE_PURPOSES } from '../../db/models/StorageObject.js';
import type { JsonSchema } from '../registry.js';
import { dateTime, nullableDateTime, object, uuid } from './common.js';

export const purpose = { type: 'string', enum: [...STORAGE_PURPOSES] } as const;
export const fileName = { type: 'string', minLength: 1, maxLength: 255, pattern: '\\S' } as const;
export const mimeType = { type: 'string', minLength: 3, maxLength: 255, pattern: '^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+' } as const;
export const sizeBytes = { type: 'integer', minimum: 1, maximum: 26_214_400, description: 'Bytes; limits per purpose: knowledge and channel_media 25 MiB, attachment 10 MiB, avatar and logo 2 MiB' } as const;
export const expiresIn = { type: 'integer', minimum: 60, maximum: 3600, default: 900, description: 'Seconds the signed URL works' } as const;

export const StorageObjectView: JsonSchema = object({
  id: uuid,
  key: { type: 'string', description: '`org/{organizationId}/{purpose}/{uuid}/{file name}`, built by the server' },
  purpose,
  fileName: { type: 'string' },
  mimeType: { type: 'string' },
  sizeBytes: { type: 'integer' },
  status: { type: 'string', enum: ['pending', 'uploaded'] },
  createdBy: { type: ['string', 'null'], format: 'uuid' },
  uploadedAt: nullableDateTime,
  createdAt: dateTime,
});

export const VisitorObjectView: JsonSchema = object({ id: uuid, fileName: { type: 'string' }, mimeType: { type: 'string' }, sizeBytes: { type: 'integer' }, status: { type: 'string' } });

export const UploadView: JsonSchema = object({
  url: { type: 'string', description: 'Send the bytes here' },
  method: { const: 'PUT' },
  headers: { type: 'object', additionalProperties: { type: 'string' }, description: 'Headers the upload must carry (Content-Type)' },
});

export const PresignedUploadView = (objectView: JsonSchema): JsonSchema => object({ objectId: uuid, object: objectView, upload: UploadView, expiresAt: dateTime });
export const DownloadView: JsonSchema = object({ url: { type: 'string' }, expiresAt: dateTime });

export const signedQuery = {
  type: 'object',
  required: ['expires', 'signature'],
  properties: { expires: { type: 'integer', minimum: 0 }, signature: { type: 'string', minLength: 1, maxLength: 200 } },
} as const;
