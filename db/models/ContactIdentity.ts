import { TenantModel } from '../BaseModel.js';

/** How a contact is known on one channel (a WhatsApp number, a Telegram chat id, ...); unique per organization. */
export class ContactIdentity extends TenantModel {
  static override tableName = 'contact_identities';

  declare contactId: string;
  declare channel: string;
  declare externalId: string;

  override $beforeUpdate(): void {}
}
