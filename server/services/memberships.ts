// Members of an organization: invitations, roles, suspension and removal, with the guard rules in one place.
import type { Knex } from 'knex';
import { containsPattern } from '../../db/search.js';
import type { Models } from '../../db/index.js';
import { type Membership, type MembershipStatus, type Role } from '../../db/models/Membership.js';
import type { Organization } from '../../db/models/Organization.js';
import type { User } from '../../db/models/User.js';
import type { OperatorActor } from '../auth/actor.js';
import { assertRole } from '../policies/roles.js';
import type { PasswordHasher } from '../auth/passwords.js';
import { noticeRevocation } from '../auth/revocations.js';
import { generateLinkToken, hashSecret } from '../auth/secrets.js';
import type { SessionMeta, SessionService, TokenPair } from '../auth/sessions.js';
import type { DomainEventBus } from '../events.js';
import { Conflict, Forbidden, Gone, NotFound, PlanLimitReached, Unauthorized, ValidationFailed } from '../errors.js';
import type { Mailer } from '../mail/index.js';
import { invitationMail } from '../mail/templates.js';
import type { MembershipWithUser } from '../presenters/membership.js';
import { normalizeEmail } from './auth.js';
import type { OrganizationService } from './organizations.js';
import { withinLimit } from './plans.js';

const INVITE_TTL_SECONDS = 7 * 86400;

export interface MemberListQuery {
  limit: number;
  offset: number;
  q?: string;
  role?: Role;
  status?: MembershipStatus;
}

export class MembershipService {
  constructor(
    private readonly deps: {
      models: Models;
      knex: Knex;
      passwords: PasswordHasher;
      sessions: SessionService;
      organizations: OrganizationService;
      mailer: Mailer;
      events: DomainEventBus;
      /** Base of the links in mail: the operators' dashboard (APP_URL). */
      appUrl: string;
      tokenHashKey: string;
    },
  ) {}

  private get models() {
    return this.deps.models;
  }

  /** The caller's accepted membership in `orgId` with at least `minRole`; 403 otherwise (non-members included). */
  async requireRole(userId: string, orgId: string, minRole: Role): Promise<Membership> {
    const membership = await this.models.Membership.forOrg(orgId).findOne({ userId });
    assertRole(membership, minRole, 'You are not a member of this organization');
    return membership;
  }

  async list(orgId: string, query: MemberListQuery): Promise<{ members: MembershipWithUser[]; total: number }> {
    const base = this.models.Membership.forOrg(orgId).leftJoin('users as u', 'u.id', 'memberships.user_id');
    if (query.role) base.where('memberships.role', query.role);
    if (query.status) base.where('memberships.status', query.status);
    if (query.q) {
      const like = containsPattern(query.q);
      base.where((w) => w.whereILike('u.name', like).orWhereILike('u.email', like).orWhereILike('memberships.email', like).orWhereILike('memberships.name', like));
    }
    const [countRow, members] = await Promise.all([
      base.clone().clearSelect().count('* as count').first() as unknown as Promise<{ count: string | number }>,
      base
        .clone()
        .select('memberships.*', 'u.name as userName', 'u.email as userEmail')
        .orderBy('memberships.created_at', 'asc')
        .orderBy('memberships.id', 'asc')
        .limit(query.limit)
        .offset(query.offset),
    ]);
    return { members: members as MembershipWithUser[], total: Number(countRow.count) };
  }

  private async getMember(orgId: string, memberId: string, trx?: Knex.Transaction): Promise<Membership> {
    const member = await this.models.Membership.forOrg(orgId, trx).findById(memberId);
    if (!member) throw new NotFound('Member');
    return member;
  }

  /** Locks the organization row, so seat counts and owner counts cannot change under a membership change. */
  private async lockOrganization(orgId: string, trx: Knex.Transaction): Promise<Organization> {
    const organization = await this.models.Organization.query(trx).findById(orgId).forNoKeyUpdate();
    if (!organization) throw new NotFound('Organization');
    return organization;
  }

  /** The plan's `humanAgents` caps accepted + pending members: one more must still fit. */
  private async requireSeat(organization: Organization, trx: Knex.Transaction): Promise<void> {
    const limit = this.deps.organizations.planOf(organization).limits.humanAgents;
    const seats = await this.deps.organizations.countSeats(organization.id, trx);
    if (!withinLimit(limit, seats)) throw new PlanLimitReached(`The ${organization.plan} plan allows ${limit} members; upgrade to add more`);
  }

  private inviteLink(token: string): string {
    return `${this.deps.appUrl}/accept-invite?token=${encodeURIComponent(token)}`;
  }

  /** Invites by email. The plan's `humanAgents` caps accepted + pending members; admins cannot grant owner. */
  async invite(actor: OperatorActor, by: Membership, orgId: string, input: { email: string; role: Role; name?: string }): Promise<{ membership: Membership; inviteLink: string | null }> {
    if (input.role === 'owner' && by.role !== 'owner') throw new Forbidden('Only an owner can invite another owner');
    const email = normalizeEmail(input.email);
    const token = generateLinkToken();
    const { membership, organization } = await this.deps.knex.transaction(async (trx) => {
      // Locking the organization row serializes invitations, so two at once cannot both take the last seat.
      const organization = await this.lockOrganization(orgId, trx);
      const existing = await this.models.Membership.forOrg(orgId, trx).findOne({ email });
      if (existing) throw new Conflict('This email is already a member or invited');
      await this.requireSeat(organization, trx);
      const now = new Date();
      const membership = await this.models.Membership.forOrg(orgId, trx).insertAndFetch({
        organizationId: orgId,
        email,
        name: input.name?.trim() || null,
        role: input.role,
        status: 'pending',
        invitedBy: actor.userId,
        inviteTokenHash: hashSecret(this.deps.tokenHashKey, token),
        inviteExpiresAt: new Date(now.getTime() + INVITE_TTL_SECONDS * 1000),
        invitedAt: now,
      });
      return { membership, organization };
    });
    await this.deps.mailer.queue(invitationMail(email, organization.name, actor.name, this.inviteLink(token)));
    return { membership, inviteLink: this.deps.mailer.delivers ? null : this.inviteLink(token) };
  }

  /** A new link (the old one stops working) and a fresh 7 days. */
  async resendInvite(actor: OperatorActor, orgId: string, memberId: string): Promise<{ membership: Membership; inviteLink: string | null }> {
    const member = await this.getMember(orgId, memberId);
    if (member.status !== 'pending') throw new Conflict('This invitation was already accepted');
    const token = generateLinkToken();
    const membership = await this.models.Membership.forOrg(orgId).patchAndFetchById(member.id, {
      inviteTokenHash: hashSecret(this.deps.tokenHashKey, token),
      inviteExpiresAt: new Date(Date.now() + INVITE_TTL_SECONDS * 1000),
      invitedAt: new Date(),
    });
    const organization = await this.deps.organizations.get(orgId);
    await this.deps.mailer.queue(invitationMail(member.email, organization.name, actor.name, this.inviteLink(token)));
    return { membership, inviteLink: this.deps.mailer.delivers ? null : this.inviteLink(token) };
  }

  /**
   * Guard rules: nobody acts on their own membership; admins cannot touch owners or grant owner.
   * Together they keep an organization from losing its last owner: only an accepted owner can demote, suspend or
   * remove an owner, and never themselves, so that other accepted owner remains (the lock orders concurrent changes,
   * and the caller is read again under it).
   */
  private async guard(caller: Membership, target: Membership, change: { role?: Role }, trx: Knex.Transaction): Promise<void> {
    // The caller's membership again, under the organization lock: a concurrent change (a demotion, a suspension)
    // must not let a stale role through.
    const by = await this.models.Membership.forOrg(target.organizationId, trx).findById(caller.id);
    assertRole(by, 'admin', 'This needs the admin role');
    // A user holds at most one membership per organization (a unique index), so the same id is the same person.
    if (target.id === by.id) throw new Forbidden('You cannot change your own membership');
    if (target.role === 'owner' && by.role !== 'owner') throw new Forbidden('Only an owner can change an owner');
    if (change.role === 'owner' && by.role !== 'owner') throw new Forbidden('Only an owner can grant the owner role');
  }

  async changeRole(by: Membership, orgId: string, memberId: string, role: Role): Promise<Membership> {
    const updated = await this.deps.knex.transaction(async (trx) => {
      await this.lockOrganization(orgId, trx);
      const target = await this.getMember(orgId, memberId, trx);
      await this.guard(by, target, { role }, trx);
      if (target.userId) await noticeRevocation(trx, { organizationId: target.organizationId, userId: target.userId });
      return this.models.Membership.forOrg(target.organizationId, trx).patchAndFetchById(target.id, { role });
    });
    this.publishChange(updated, false);
    return updated;
  }

  /** `active` restores access, `suspended` cuts it at once while keeping the record. */
  async changeStatus(by: Membership, orgId: string, memberId: string, status: 'active' | 'suspended'): Promise<Membership> {
    const updated = await this.deps.knex.transaction(async (trx) => {
      const organization = await this.lockOrganization(orgId, trx);
      const target = await this.getMember(orgId, memberId, trx);
      if (target.status === 'pending') throw new Conflict('A pending invitation is activated by accepting it');
      await this.guard(by, target, {}, trx);
      // A suspended member holds no seat; coming back takes one, within the plan's limit.
      if (status === 'active' && target.status === 'suspended') await this.requireSeat(organization, trx);
      if (target.userId) await noticeRevocation(trx, { organizationId: target.organizationId, userId: target.userId });
      return this.models.Membership.forOrg(target.organizationId, trx).patchAndFetchById(target.id, { status: status === 'active' ? 'accepted' : 'suspended' });
    });
    this.publishChange(updated, false);
    return updated;
  }

  async remove(by: Membership, orgId: string, memberId: string): Promise<void> {
    const removed = await this.deps.knex.transaction(async (trx) => {
      await this.lockOrganization(orgId, trx);
      const target = await this.getMember(orgId, memberId, trx);
      await this.guard(by, target, {}, trx);
      await this.models.Membership.forOrg(target.organizationId, trx).deleteById(target.id);
      if (target.userId) await noticeRevocation(trx, { organizationId: target.organizationId, userId: target.userId });
      return target;
    });
    this.publishChange(removed, true);
  }

  private publishChange(m: Membership, removed: boolean): void {
    this.deps.events.publish('membership.changed', { organizationId: m.organizationId, userId: m.userId, membershipId: m.id, status: m.status, role: m.role, removed });
  }

  private async findInvite(token: string, trx?: Knex.Transaction): Promise<{ membership: Membership; organization: Organization }> {
    // The invitation link's token is what names the organization: it is looked up across all of them.
    const membership = await this.models.Membership.acrossOrgs(trx).findOne({ inviteTokenHash: hashSecret(this.deps.tokenHashKey, token) });
    if (!membership) throw new NotFound('Invitation');
    if (membership.status !== 'pending') throw new Gone('This invitation was already used');
    if (!membership.inviteExpiresAt || membership.inviteExpiresAt.getTime() <= Date.now()) throw new Gone('This invitation has expired');
    const organization = await this.models.Organization.query(trx).findById(membership.organizationId);
    if (!organization) throw new NotFound('Invitation');
    return { membership, organization };
  }

  async verifyInvite(token: string): Promise<{ email: string; organization: { id: string; name: string }; role: Role; requiresPassword: boolean; existingUser: boolean }> {
    const { membership, organization } = await this.findInvite(token);
    const existing = await this.models.User.query().findOne({ email: membership.email });
    return {
      email: membership.email,
      organization: { id: organization.id, name: organization.name },
      role: membership.role,
      // A new person chooses a password; someone with an account proves it with theirs (or their session).
      requiresPassword: !existing,
      existingUser: !!existing,
    };
  }

  async acceptInvite(
    input: { token: string; name?: string; password?: string },
    bearer: OperatorActor | null,
    meta: SessionMeta,
  ): Promise<TokenPair & { user: User; organization: Organization; role: Role }> {
    const preview = await this.findInvite(input.token);
    const existing = await this.models.User.query().findOne({ email: preview.membership.email });
    let passwordHash: string | null = null;
    if (existing) {
      const bySession = bearer !== null && bearer.userId === existing.id;
      if (bearer && !bySession) throw new Forbidden('This invitation is for another account');
      if (!bySession) {
        if (!input.password) throw new ValidationFailed('Your password is required to accept', [{ field: 'password', message: 'is required' }]);
        if (!(await this.deps.passwords.verify(input.password, existing.passwordHash))) throw new Unauthorized('Invalid email or password');
      }
    } else {
      const missing = [!input.name?.trim() && 'name', !input.password && 'password'].filter(Boolean) as string[];
      if (missing.length) throw new ValidationFailed('A name and a password are needed to create your account', missing.map((field) => ({ field, message: 'is required' })));
      passwordHash = await this.deps.passwords.hash(input.password!);
    }
    const result = await this.deps.knex.transaction(async (trx) => {
      const { membership, organization } = await this.findInvite(input.token, trx);
      const user =
        existing ??
        (await this.models.User.query(trx).insertAndFetch({ email: membership.email, name: input.name!.trim(), passwordHash: passwordHash!, emailVerifiedAt: new Date() }));
      // Conditional on still pending: one invitation link is accepted once, however many requests race.
      const accepted = await this.models.Membership.forOrg(membership.organizationId, trx)
        .patch({ status: 'accepted', userId: user.id, activatedAt: new Date() })
        .where({ id: membership.id, status: 'pending' });
      if (accepted === 0) throw new Gone('This invitation was already used');
      await this.models.User.query(trx).patch({ lastOrganizationId: organization.id }).where('id', user.id);
      const tokens = await this.deps.sessions.create(user, organization.id, meta, trx);
      return { ...tokens, user, organization, role: membership.role };
    });
    return result;
  }

  /** For presenting a freshly written membership with the user's own name and email. */
  async withUser(m: Membership): Promise<MembershipWithUser> {
    if (!m.userId) return m;
    const user = await this.models.User.query().findById(m.userId);
    return Object.assign(m, { userName: user?.name ?? null, userEmail: user?.email ?? null });
  }
}
