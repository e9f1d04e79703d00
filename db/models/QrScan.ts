import { TenantModel } from '../BaseModel.js';

export class QrScan extends TenantModel {
  static override tableName = 'qr_scans';

  declare widgetId: string;
  declare userAgent: string | null;
  declare referrer: string | null;

  override $beforeUpdate(): void {}
}
