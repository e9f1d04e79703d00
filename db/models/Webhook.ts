import { TenantModel } from '../BaseModel.js';

export class Webhook extends TenantModel {
  static override tableName = 'webhooks';
  static override jsonAttributes = ['events'];

  declare url: string;
  /** Event types or `area.*` / `*` patterns. */
  declare events: string[];
  declare enabled: boolean;
  declare secretEncrypted: string;
  declare previousSecretEncrypted: string | null;
  declare previousSecretExpiresAt: Date | null;
  declare consecutiveFailures: number;
  declare disabledReason: string | null;
  declare createdBy: string | null;
}
