import { TenantModel } from '../BaseModel.js';
import type { Contact } from './Contact.js';

export type ConversationStatus = 'open' | 'pending' | 'resolved' | 'closed';
export type Priority = 'low' | 'medium' | 'high' | 'urgent';

export class Conversation extends TenantModel {
  static override tableName = 'conversations';
  static override jsonAttributes = ['tags'];

  declare status: ConversationStatus;
  declare priority: Priority;
  declare subject: string | null;
  declare channel: string;
  declare source: string | null;
  declare assignedTo: string | null;
  declare contactId: string | null;
  declare visitorSessionId: string | null;
  declare visitorName: string | null;
  declare visitorEmail: string | null;
  declare tags: string[];
  declare unreadCount: number;
  declare lastSeq: number;
  declare escalatedAt: Date | null;
  declare humanJoinedAt: Date | null;
  declare firstReplyAt: Date | null;
  declare lastMessageAt: Date | null;
  declare resolvedAt: Date | null;
  declare closedAt: Date | null;
  /** Analytics moments, set on the message path and by status changes (see the analytics migration). */
  declare firstResponseAt?: Date | null;
  declare firstHumanReplyAt?: Date | null;
  declare firstHumanReplyBy?: string | null;
  declare firstResolvedAt?: Date | null;
  declare firstResolvedByAi?: boolean;
  declare contact?: Contact | null;
}
