import { TenantModel } from '../BaseModel.js';

export class Contact extends TenantModel {
  static override tableName = 'contacts';
  static override jsonAttributes = ['attributes'];

  declare name: string | null;
  declare email: string | null;
  declare phone: string | null;
  declare company: string | null;
  declare attributes: Record<string, unknown>;
}
