import { BaseModel } from '../BaseModel.js';

/** What a mail sets beyond the server's defaults: its sender, replies, copies and thread. */
export interface MailHeaders {
  from?: { name: string; address: string };
  replyTo?: string;
  cc?: string[];
  messageId?: string;
  inReplyTo?: string;
  references?: string[];
  /** The organization the mail is sent for: its DKIM key signs mail From its verified domain. */
  organizationId?: string;
}

/** `logged`: no transport configured, kept for the operator to read; `pending` -> `sent` | `failed` otherwise. */
export type OutboxStatus = 'logged' | 'pending' | 'sent' | 'failed';

export class OutboxEmail extends BaseModel {
  static override tableName = 'outbox_emails';
  static override jsonAttributes = ['headers'];

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
  declare headers: MailHeaders | null;
  /** When the body was cleared after the retention period (MAIL_RETENTION_DAYS); null while it is kept. */
  declare bodyClearedAt: Date | null;
}
