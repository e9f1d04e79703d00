import { TenantModel } from '../BaseModel.js';

/** A saved reply agents insert by shortcut. */
export class Template extends TenantModel {
  static override tableName = 'templates';

  declare title: string;
  declare content: string;
  declare shortcut: string | null;
  declare category: string | null;
  declare createdBy: string | null;
}
