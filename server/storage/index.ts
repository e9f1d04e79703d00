// The storage module's face: the driver named by STORAGE_DRIVER, the file service and message attachments.
import type { Config } from '../config.js';
import { hashSecret } from '../auth/secrets.js';
import type { StorageDriver } from './driver.js';
import { LocalDriver } from './local.js';
import { S3Driver } from './s3.js';

export { MessageAttachments } from './attachments.js';
export { StorageService, type Uploader } from './service.js';
export type { StorageDriver } from './driver.js';

export function createStorageDriver(config: Config): StorageDriver {
  if (config.storage.driver === 's3') return new S3Driver({ ...config.storage.s3, bucket: config.storage.s3.bucket! });
  // The signing key derives from a server secret: signed links survive restarts and work on every instance.
  return new LocalDriver(config.dataDir, { publicUrl: config.publicUrl, signingKey: hashSecret(config.secrets.refresh, 'local-storage-urls') });
}
