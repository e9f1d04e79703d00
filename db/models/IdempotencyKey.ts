import { TenantModel } from '../BaseModel.js';

/** A client's idempotency key within one organization and scope; it names the resource the first request made. */
export class IdempotencyKey extends TenantModel {
  static override tableName = 'idempotency_keys';

  declare scope: string;
  declare key: string;
  declare requestHash: string;
  declare resourceId: string | null;
  declare expiresAt: Date;

  override $beforeUpdate(): void {}
}
