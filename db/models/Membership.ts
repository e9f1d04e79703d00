import { TenantModel } from '../BaseModel.js';

export type Role = 'owner' | 'admin' | 'agent';
export type MembershipStatus = 'pending' | 'accepted' | 'suspended';
export type Availability = 'online' | 'away' | 'busy' | 'offline';

export const ROLE_RANK: Record<Role, number> = { agent: 1, admin: 2, owner: 3 };

export class Membership extends TenantModel {
  static override tableName = 'memberships';

  declare userId: string | null;
  declare email: string;
  declare name: string | null;
  declare role: Role;
  declare status: MembershipStatus;
  declare invitedBy: string | null;
  declare inviteTokenHash: string | null;
  declare inviteExpiresAt: Date | null;
  declare invitedAt: Date | null;
  declare activatedAt: Date | null;
  /** The status an agent chose; they count as online only while they also hold a socket. */
  declare availability: Availability;
  declare signature: string | null;
  declare maxOpenConversations: number;
  declare lastAssignedAt: Date | null;
}
