import { TenantModel } from '../BaseModel.js';

/** Belongs to one recipient user inside one organization. */
export class Notification extends TenantModel {
  static override tableName = 'notifications';
  static override jsonAttributes = ['data'];

  declare userId: string;
  declare type: string;
  declare title: string;
  declare body: string | null;
  declare data: Record<string, unknown>;
  declare readAt: Date | null;

  override $beforeUpdate(): void {}
}
