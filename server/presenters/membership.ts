// Membership shape: a pending invitation shows the invited name and email until a user accepts it.
import type { Membership } from '../../db/models/Membership.js';
import { iso } from './time.js';

export interface MembershipView {
  id: string;
  organizationId: string;
  userId: string | null;
  name: string | null;
  email: string;
  role: string;
  status: string;
  invitedAt: string | null;
  activatedAt: string | null;
}

export type MembershipWithUser = Membership & { userName?: string | null; userEmail?: string | null };


export function presentMembership(m: MembershipWithUser): MembershipView {
  return {
    id: m.id,
    organizationId: m.organizationId,
    userId: m.userId ?? null,
    name: m.userName ?? m.name ?? null,
    email: m.userEmail ?? m.email,
    role: m.role,
    status: m.status,
    invitedAt: iso(m.invitedAt),
    activatedAt: iso(m.activatedAt),
  };
}
