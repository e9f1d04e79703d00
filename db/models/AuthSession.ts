import { BaseModel } from '../BaseModel.js';

export class AuthSession extends BaseModel {
  static override tableName = 'auth_sessions';

  declare userId: string;
  declare organizationId: string | null;
  declare refreshJti: string;
  declare expiresAt: Date;
  declare revokedAt: Date | null;
  declare revokedReason: string | null;
  declare userAgent: string | null;
  declare ip: string | null;
  declare lastRefreshedAt: Date | null;
}
