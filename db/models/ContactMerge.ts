import { TenantModel } from '../BaseModel.js';

/** The record a survivor keeps of a contact merged into it (the merged contact itself is gone). */
export class ContactMerge extends TenantModel {
  static override tableName = 'contact_merges';
  static override jsonAttributes = ['sourceSnapshot', 'moved'];

  declare survivorContactId: string;
  declare sourceContactId: string;
  declare sourceSnapshot: Record<string, unknown>;
  /** How many rows of each kind moved to the survivor. */
  declare moved: Record<string, number>;
  declare mergedBy: string | null;

  override $beforeUpdate(): void {}
}
