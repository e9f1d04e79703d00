import { BaseModel } from '../BaseModel.js';

/** `logged`: no transport configured, kept for the operator to read; `pending` -> `sent` | `failed` otherwise. */
export type OutboxStatus = 'logged' | 'pending' | 'sent' | 'failed';

export class OutboxEmail extends BaseModel {
  static override tableName = 'outbox_emails';

  declare kind: string;
  declare toAddress: string;
  declare subject: string;
  declare textBody: string;
  declare htmlBody: string | null;
  declare status: OutboxStatus;
  declare attempts: number;
  declare lastError: string | null;
  declare nextAttemptAt: Date | null;
  declare sentAt: Date | null;
}
