// The answer to a successful sign-in: the user, the active organization and role, the organization list, tokens.
import type { Organization } from '../../db/models/Organization.js';
import type { Role } from '../../db/models/Membership.js';
import type { User } from '../../db/models/User.js';
import type { TokenPair } from '../auth/sessions.js';
import { presentOrganization, presentOrganizationEntry } from './organization.js';
import { presentUser } from './user.js';

export interface OrganizationContext {
  organization: Organization | null;
  role: Role | null;
  organizations: { organization: Organization; role: Role }[];
}

export function presentOrganizationContext(user: User, context: OrganizationContext) {
  return {
    user: presentUser(user),
    organization: context.organization ? presentOrganization(context.organization) : null,
    role: context.role,
    organizations: context.organizations.map((o) => presentOrganizationEntry(o.organization, o.role)),
  };
}

export function presentTokens(tokens: TokenPair) {
  return { accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, accessTokenExpiresAt: tokens.accessTokenExpiresAt };
}

export function presentSignedIn(signedIn: TokenPair & OrganizationContext & { user: User }) {
  return { ...presentOrganizationContext(signedIn.user, signedIn), ...presentTokens(signedIn) };
}
