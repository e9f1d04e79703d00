import { TenantModel } from '../BaseModel.js';

export const STORAGE_PURPOSES = ['knowledge', 'attachment', 'avatar', 'logo', 'channel_media'] as const;
export type StoragePurpose = (typeof STORAGE_PURPOSES)[number];
export type StorageObjectStatus = 'pending' | 'uploaded';

/** A file in the organization's storage: pending until the client's upload is confirmed. */
export class StorageObject extends TenantModel {
  static override tableName = 'storage_objects';

  declare key: string;
  declare purpose: StoragePurpose;
  declare fileName: string;
  declare mimeType: string;
  declare sizeBytes: number;
  declare status: StorageObjectStatus;
  declare createdBy: string | null;
  declare visitorSessionId: string | null;
  declare uploadedAt: Date | null;
}
