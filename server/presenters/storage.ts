// Stored file shapes: what agents see of an object (never the driver's internals beyond the key).
import type { StorageObject } from '../../db/models/StorageObject.js';
import { iso } from './time.js';

export function presentStorageObject(o: StorageObject) {
  return {
    id: o.id,
    key: o.key,
    purpose: o.purpose,
    fileName: o.fileName,
    mimeType: o.mimeType,
    sizeBytes: o.sizeBytes,
    status: o.status,
    createdBy: o.createdBy ?? null,
    uploadedAt: iso(o.uploadedAt),
    createdAt: iso(o.createdAt),
  };
}

/** A visitor sees only what it needs to show its own file. */
export function presentVisitorObject(o: StorageObject) {
  return { id: o.id, fileName: o.fileName, mimeType: o.mimeType, sizeBytes: o.sizeBytes, status: o.status };
}

export type StorageObjectView = ReturnType<typeof presentStorageObject>;
