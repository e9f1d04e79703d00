import { TenantModel } from '../BaseModel.js';

export type AttributeType = 'text' | 'number' | 'date' | 'boolean' | 'list' | 'link';

/** An admin-defined custom field of contacts; a value under an undefined key is refused. */
export class ContactAttributeDefinition extends TenantModel {
  static override tableName = 'contact_attribute_definitions';
  static override jsonAttributes = ['options'];

  declare key: string;
  declare label: string;
  declare type: AttributeType;
  /** The allowed values of a `list` attribute (empty for the other types). */
  declare options: string[];
  declare description: string | null;
}
