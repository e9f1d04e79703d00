import { BaseModel } from '../BaseModel.js';

export type OtpType = 'email_verification' | 'password_reset' | 'contact_verification';

export class OtpChallenge extends BaseModel {
  static override tableName = 'otp_challenges';
  static override jsonAttributes = ['payload'];

  declare email: string;
  declare type: OtpType;
  declare codeHash: string;
  declare attempts: number;
  declare expiresAt: Date;
  declare verifiedAt: Date | null;
  declare consumedAt: Date | null;
  declare payload: Record<string, unknown>;
}
