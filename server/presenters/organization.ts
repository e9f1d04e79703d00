// Organization shapes: the full record and the short entry of an organization picker.
import type { Organization } from '../../db/models/Organization.js';
import type { Role } from '../../db/models/Membership.js';
import { iso } from './time.js';

export interface OrganizationView {
  id: string;
  name: string;
  slug: string;
  domain: string | null;
  logoUrl: string | null;
  plan: string;
  settings: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

export function presentOrganization(org: Organization): OrganizationView {
  return {
    id: org.id,
    name: org.name,
    slug: org.slug,
    domain: org.domain ?? null,
    logoUrl: org.logoUrl ?? null,
    plan: org.plan,
    settings: org.settings ?? {},
    createdAt: iso(org.createdAt),
    updatedAt: iso(org.updatedAt),
  };
}

export interface OrganizationEntryView {
  id: string;
  name: string;
  slug: string;
  role: Role;
  plan: string;
}

export function presentOrganizationEntry(org: Pick<Organization, 'id' | 'name' | 'slug' | 'plan'>, role: Role): OrganizationEntryView {
  return { id: org.id, name: org.name, slug: org.slug, role, plan: org.plan };
}
