import { TenantModel } from '../BaseModel.js';

export class ApiKey extends TenantModel {
  static override tableName = 'api_keys';
  static override jsonAttributes = ['scopes'];

  /** The bot user the key acts as. */
  declare userId: string;
  declare name: string;
  declare scopes: string[];
  declare secretHash: string;
  declare lastFour: string;
  declare createdBy: string | null;
  declare expiresAt: Date | null;
  declare lastUsedAt: Date | null;
  declare revokedAt: Date | null;
}
