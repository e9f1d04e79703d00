import { TenantModel } from '../BaseModel.js';

export type TicketMailKind = 'created' | 'reply' | 'resolved' | 'closed';

/** A mail sent for a ticket: its Message-ID threads the next one and matches inbound replies to the ticket. */
export class TicketMail extends TenantModel {
  static override tableName = 'ticket_mails';

  declare ticketId: string;
  declare kind: TicketMailKind;
  declare messageId: string;
  declare inReplyTo: string | null;
  declare toAddress: string;
  declare outboxEmailId: string | null;
  declare eventId: string | null;

  override $beforeUpdate(): void {}
}
