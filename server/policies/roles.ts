// Membership rules: the one definition of "an active member with at least role X" that REST, sockets and services use.
import { ROLE_RANK, type MembershipStatus, type Role } from '../../db/models/Membership.js';
import { Forbidden } from '../errors.js';

interface MembershipLike {
  role: Role;
  status: MembershipStatus;
}

/** Whether `role` satisfies a requirement of `min` (owner > admin > agent). */
export function atLeast(role: Role, min: Role): boolean {
  return ROLE_RANK[role] >= ROLE_RANK[min];
}

/** Only an accepted membership acts in its organization: pending and suspended ones do nothing. */
export function assertActiveMember<M extends MembershipLike>(membership: M | null | undefined, refusal = 'You are not an active member of this organization'): asserts membership is M {
  if (!membership || membership.status !== 'accepted') throw new Forbidden(refusal);
}

/** An accepted membership whose role is at least `min`; 403 otherwise. */
export function assertRole<M extends MembershipLike>(membership: M | null | undefined, min: Role, refusal?: string): asserts membership is M {
  assertActiveMember(membership, refusal);
  if (!atLeast(membership.role, min)) throw new Forbidden(`This needs the ${min} role`);
}

/** Something a member made (a note, a file): its maker, or anyone with at least `min`; 403 otherwise. */
export function assertMakerOr(madeBy: string | null, by: { userId: string; role: Role }, min: Role, refusal: string): void {
  if (madeBy !== by.userId && !atLeast(by.role, min)) throw new Forbidden(refusal);
}
