import { TenantModel } from '../BaseModel.js';

export class Widget extends TenantModel {
  static override tableName = 'widgets';
  static override jsonAttributes = ['appearance', 'behavior', 'allowedOrigins', 'ai', 'collectUserInfo'];

  declare publicKey: string;
  declare displayName: string;
  declare appearance: Record<string, unknown>;
  declare behavior: Record<string, unknown>;
  declare allowedOrigins: string[];
  declare ai: Record<string, unknown>;
  declare collectUserInfo: Record<string, unknown>;
}
