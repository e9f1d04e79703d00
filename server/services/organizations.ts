// Organizations: creation with their first owner, settings, deletion, switching and plan entitlements.
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { Organization, Plan } from '../../db/models/Organization.js';
import type { Role } from '../../db/models/Membership.js';
import type { User } from '../../db/models/User.js';
import type { OperatorActor } from '../auth/actor.js';
import { noticeRevocation } from '../auth/revocations.js';
import type { SessionMeta, SessionService, TokenPair } from '../auth/sessions.js';
import type { DomainEventBus } from '../events.js';
import { Forbidden, NotFound, ServiceUnavailable, ValidationFailed } from '../errors.js';
import { isTimeZone } from '../timezone.js';
import type { PlanCatalog, PlanDefinition } from './plans.js';

export interface OrganizationSettings {
  autoAssignment?: boolean;
  notifyAgentsOnNewConversation?: boolean;
  timezone?: string;
  locale?: string;
}

function slugify(name: string): string {
  const base = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60);
  return base || 'org';
}

export class OrganizationService {
  constructor(
    private readonly deps: {
      models: Models;
      knex: Knex;
      sessions: SessionService;
      events: DomainEventBus;
      /** The configured plans, and the one new organizations get. */
      plans: { catalog: PlanCatalog; defaultPlan: Plan };
    },
  ) {}

  private get models() {
    return this.deps.models;
  }

  /** Organizations the user has an accepted membership in, oldest membership first. */
  async listForUser(userId: string): Promise<{ organization: Organization; role: Role }[]> {
    const rows = await this.models.Organization.query()
      .select('organizations.*', 'm.role as memberRole')
      .join('memberships as m', 'm.organization_id', 'organizations.id')
      .where('m.user_id', userId)
      .andWhere('m.status', 'accepted')
      .orderBy('m.activated_at', 'asc')
      .orderBy('organizations.created_at', 'asc');
    return rows.map((row) => {
      const role = (row as unknown as { memberRole: Role }).memberRole;
      delete (row as unknown as { memberRole?: Role }).memberRole;
      return { organization: row, role };
    });
  }

  /** A unique slug: the name's own when free, else with a short random suffix. */
  private async uniqueSlug(name: string, trx: Knex.Transaction): Promise<string> {
    const base = slugify(name);
    const taken = await this.models.Organization.query(trx).findOne({ slug: base });
    if (!taken) return base;
    return `${base.slice(0, 52)}-${randomBytes(4).toString('hex')}`;
  }

  async createWithOwner(owner: User, input: { name: string; domain: string | null }, trx: Knex.Transaction): Promise<Organization> {
    const organization = await this.models.Organization.query(trx).insertAndFetch({
      name: input.name.trim(),
      slug: await this.uniqueSlug(input.name, trx),
      domain: input.domain,
      plan: this.deps.plans.defaultPlan,
      settings: {},
    });
    const now = new Date();
    await this.models.Membership.forOrg(organization.id, trx).insert({
      organizationId: organization.id,
      userId: owner.id,
      email: owner.email,
      role: 'owner',
      status: 'accepted',
      invitedAt: now,
      activatedAt: now,
    });
    return organization;
  }

  async create(actor: OperatorActor, input: { name: string; domain?: string | null }): Promise<Organization> {
    const owner = await this.models.User.query().findById(actor.userId);
    if (!owner) throw new NotFound('User');
    return this.deps.knex.transaction((trx) => this.createWithOwner(owner, { name: input.name, domain: input.domain ?? null }, trx));
  }

  async get(orgId: string): Promise<Organization> {
    const organization = await this.models.Organization.query().findById(orgId);
    if (!organization) throw new NotFound('Organization');
    return organization;
  }

  async update(orgId: string, input: { name?: string; domain?: string | null; logoUrl?: string | null; settings?: OrganizationSettings }): Promise<Organization> {
    return this.deps.knex.transaction(async (trx) => {
      const organization = await this.models.Organization.query(trx).findById(orgId).forNoKeyUpdate();
      if (!organization) throw new NotFound('Organization');
      const patch: Partial<Organization> = {};
      if (input.name !== undefined) patch.name = input.name.trim();
      if (input.domain !== undefined) patch.domain = input.domain;
      if (input.logoUrl !== undefined) patch.logoUrl = input.logoUrl;
      if (input.settings?.timezone !== undefined && !isTimeZone(input.settings.timezone)) {
        throw new ValidationFailed('settings.timezone is not an IANA time zone', [{ field: 'settings.timezone', message: 'is not an IANA time zone (e.g. Europe/Paris, UTC)', in: 'body' }]);
      }
      // Settings merge key by key, so a client changing one setting cannot wipe the others.
      if (input.settings !== undefined) patch.settings = { ...organization.settings, ...input.settings };
      return this.models.Organization.query(trx).patchAndFetchById(orgId, patch);
    });
  }

  async remove(orgId: string): Promise<void> {
    const deleted = await this.deps.knex.transaction(async (trx) => {
      const n = await this.models.Organization.query(trx).deleteById(orgId);
      if (n > 0) await noticeRevocation(trx, { organizationId: orgId });
      return n;
    });
    if (deleted === 0) throw new NotFound('Organization');
    this.deps.events.publish('organization.deleted', { organizationId: orgId });
  }

  /** Fresh tokens whose `orgId` is the selection, only for an accepted membership there. */
  async switchTo(actor: OperatorActor, orgId: string, meta: SessionMeta): Promise<TokenPair & { organization: Organization; role: Role }> {
    const membership = await this.models.Membership.forOrg(orgId).findOne({ userId: actor.userId, status: 'accepted' });
    if (!membership) throw new Forbidden('You are not a member of this organization');
    const organization = await this.get(orgId);
    const tokens = await this.deps.sessions.create({ id: actor.userId, email: actor.email }, orgId, meta);
    await this.models.User.query().patch({ lastOrganizationId: orgId }).where('id', actor.userId);
    return { ...tokens, organization, role: membership.role };
  }

  /** The definition of the organization's plan; one the configuration no longer defines is an operator error. */
  planOf(organization: Organization): PlanDefinition {
    const plan = this.deps.plans.catalog[organization.plan];
    // Answered as 503 (the server's configuration, not the request, is wrong) rather than a bare 500.
    if (!plan) throw new ServiceUnavailable(`This organization's plan "${organization.plan}" is not configured on this server; the operator must define it again (PLANS_FILE) or move the organization to another plan (npm run org -- plan)`);
    return plan;
  }

  async entitlements(orgId: string): Promise<{ plan: string } & PlanDefinition> {
    const organization = await this.get(orgId);
    const plan = this.planOf(organization);
    return { plan: organization.plan, limits: plan.limits, features: plan.features };
  }

  /** Moves an organization to another configured plan (operators, `npm run org -- plan`); returns the plan it left. */
  async changePlan(orgId: string, plan: Plan): Promise<{ organization: Organization; previous: Plan }> {
    if (!Object.hasOwn(this.deps.plans.catalog, plan)) {
      throw new ValidationFailed(`Unknown plan "${plan}"; the configured plans are ${Object.keys(this.deps.plans.catalog).join(', ')}`, [{ field: 'plan', message: 'unknown plan' }]);
    }
    return this.deps.knex.transaction(async (trx) => {
      const current = await this.models.Organization.query(trx).findById(orgId).forNoKeyUpdate();
      if (!current) throw new NotFound('Organization');
      const organization = current.plan === plan ? current : await this.models.Organization.query(trx).patchAndFetchById(orgId, { plan });
      return { organization, previous: current.plan };
    });
  }

  /** Organizations in which the user with this email is an accepted owner, oldest first. */
  async ownedBy(email: string): Promise<Organization[]> {
    return this.models.Organization.query()
      .select('organizations.*')
      .join('memberships as m', 'm.organization_id', 'organizations.id')
      .join('users as u', 'u.id', 'm.user_id')
      .where('u.email', email.trim().toLowerCase())
      .andWhere('m.role', 'owner')
      .andWhere('m.status', 'accepted')
      .orderBy('organizations.created_at', 'asc');
  }

  /** Usage in the current calendar month (UTC) against the plan's limits. */
  async usage(orgId: string): Promise<{ periodStart: string; periodEnd: string; usage: Record<string, number> }> {
    const now = new Date();
    const periodStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    const periodEnd = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
    const [humanAgents, conversations, aiCalls] = await Promise.all([
      this.countSeats(orgId),
      this.models.Conversation.forOrg(orgId).where('createdAt', '>=', periodStart).where('createdAt', '<', periodEnd).resultSize(),
      this.deps.knex('ai_call_events').where('organization_id', orgId).andWhere('occurred_at', '>=', periodStart).andWhere('occurred_at', '<', periodEnd).count('* as count').first(),
    ]);
    return { periodStart: periodStart.toISOString(), periodEnd: periodEnd.toISOString(), usage: { humanAgents, conversations, aiCalls: Number(aiCalls?.count ?? 0) } };
  }

  /** Seats taken: accepted and pending memberships (a pending invitation holds its seat). */
  async countSeats(orgId: string, trx?: Knex.Transaction): Promise<number> {
    const row = (await this.models.Membership.forOrg(orgId, trx).whereIn('status', ['accepted', 'pending']).count('* as count').first()) as unknown as { count: string | number };
    return Number(row.count);
  }
}
