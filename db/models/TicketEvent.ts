import { TenantModel } from '../BaseModel.js';

export type TicketEventType = 'created' | 'updated' | 'status_changed' | 'assigned' | 'priority_changed' | 'note' | 'reply' | 'merged' | 'linked';
export type TicketActorType = 'agent' | 'ai' | 'contact' | 'system';

/** One entry of a ticket's timeline; `seq` orders it exactly (events of one transaction share createdAt). */
export class TicketEvent extends TenantModel {
  static override tableName = 'ticket_events';
  static override jsonAttributes = ['data'];

  declare seq: string;
  declare ticketId: string;
  declare type: TicketEventType;
  declare actorType: TicketActorType;
  declare actorId: string | null;
  declare content: string | null;
  declare data: Record<string, unknown>;
  declare clientMessageId: string | null;
  /** Set when presented: files of the event (a customer's mail), with download URLs. */
  attachments?: { objectId: string; fileName: string; mimeType: string; sizeBytes: number; url: string }[];

  override $beforeUpdate(): void {}
}
