import { BaseModel } from '../BaseModel.js';

export class User extends BaseModel {
  static override tableName = 'users';

  declare email: string;
  declare name: string;
  declare passwordHash: string;
  declare avatarUrl: string | null;
  declare emailVerifiedAt: Date | null;
  declare passwordChangedAt: Date | null;
  declare lastOrganizationId: string | null;
}
