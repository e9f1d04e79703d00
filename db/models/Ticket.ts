import { TenantModel } from '../BaseModel.js';
import type { Priority } from './Conversation.js';

export type TicketStatus = 'open' | 'in_progress' | 'pending' | 'resolved' | 'closed' | 'merged';
export type TicketSource = 'agent' | 'ai' | 'email' | 'widget' | 'whatsapp' | 'telegram';
export type TicketPriority = Priority;

/** A customer request tracked to its resolution; `number` counts up per organization without gaps. */
export class Ticket extends TenantModel {
  static override tableName = 'tickets';
  static override jsonAttributes = ['tags'];

  declare number: number;
  declare title: string;
  declare description: string | null;
  declare status: TicketStatus;
  declare priority: TicketPriority;
  declare source: TicketSource;
  declare contactId: string | null;
  /** Who the ticket is for, recorded when it is created or its contact changes; mail goes to this address. */
  declare requesterName: string | null;
  declare requesterEmail: string | null;
  declare conversationId: string | null;
  declare assignedTo: string | null;
  declare createdBy: string | null;
  declare tags: string[];
  declare dueAt: Date | null;
  declare resolvedAt: Date | null;
  declare closedAt: Date | null;
  declare mergedIntoId: string | null;
}
