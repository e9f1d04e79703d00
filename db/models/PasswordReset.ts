import { BaseModel } from '../BaseModel.js';

export class PasswordReset extends BaseModel {
  static override tableName = 'password_resets';

  declare userId: string;
  declare tokenHash: string;
  declare expiresAt: Date;
  declare usedAt: Date | null;
}
