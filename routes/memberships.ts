// /memberships: members and invitations of an organization, and the public invitation flow.
import { presentMembership } from '../server/presenters/membership.js';
import { presentSignedIn } from '../server/presenters/session.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { email, MembershipView, object, OrganizationView, paginationQuery, params, personName, role, TokenPairView, UserView, uuid } from './schemas/common.js';
import { SEARCH_TEXT_MAX } from '../server/limits.js';

const tag = 'Memberships';
const withInviteLink = { ...MembershipView, properties: { ...(MembershipView.properties as object), inviteLink: { type: 'string', format: 'uri', description: 'Only when no mail transport is configured' } } };

export function membershipRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/memberships/organizations/:orgId/members', operationId: 'listMembers', tag, auth: { kind: 'org', role: 'agent', orgFrom: 'path' },
      summary: 'Members and pending invitations of the organization',
      params: params('orgId'),
      query: object({ ...paginationQuery, q: { type: 'string', maxLength: SEARCH_TEXT_MAX, description: 'Matches name or email' }, role, status: { type: 'string', enum: ['pending', 'accepted', 'suspended'] } }),
      response: { status: 200, description: 'Members', data: { type: 'array', items: MembershipView }, paginated: true },
      handler: async ({ params, query }) => {
        const { members, total } = await s.memberships.list(params.orgId, query);
        return { message: 'Members', data: members.map(presentMembership), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'post', path: '/memberships/organizations/:orgId/members/invite', operationId: 'inviteMember', tag, auth: { kind: 'org', role: 'admin', orgFrom: 'path' },
      summary: 'Invite someone by email (a single-use link valid 7 days)',
      description: "409 when the email is already a member or invited; 403 plan_limit_reached when the plan's humanAgents seats (accepted + pending) are taken; only owners invite owners.",
      params: params('orgId'),
      body: object({ email, role, name: personName }, ['email', 'role']),
      response: { status: 201, description: 'Invitation created', data: withInviteLink },
      errors: [409],
      handler: async ({ params, body, actor, membership }) => {
        const { membership: invited, inviteLink } = await s.memberships.invite(actor, membership, params.orgId, body);
        return { message: 'Invitation sent', data: { ...presentMembership(invited), ...(inviteLink ? { inviteLink } : {}) } };
      },
    }),
    defineRoute({
      method: 'post', path: '/memberships/organizations/:orgId/members/:memberId/resend-invite', operationId: 'resendInvite', tag, auth: { kind: 'org', role: 'admin', orgFrom: 'path' },
      summary: 'Send a new invitation link (the previous link stops working)',
      params: params('orgId', 'memberId'),
      response: { status: 200, description: 'Invitation sent again', data: withInviteLink },
      errors: [409],
      handler: async ({ params, actor }) => {
        const { membership, inviteLink } = await s.memberships.resendInvite(actor, params.orgId, params.memberId);
        return { message: 'Invitation sent again', data: { ...presentMembership(membership), ...(inviteLink ? { inviteLink } : {}) } };
      },
    }),
    defineRoute({
      method: 'patch', path: '/memberships/organizations/:orgId/members/:memberId/role', operationId: 'changeMemberRole', tag, auth: { kind: 'org', role: 'admin', orgFrom: 'path' },
      summary: "Change a member's role (not your own; admins cannot touch owners or grant owner)",
      params: params('orgId', 'memberId'),
      body: object({ role }, ['role']),
      response: { status: 200, description: 'Role changed', data: MembershipView },
      handler: async ({ params, body, membership }) => ({
        message: 'Role changed',
        data: presentMembership(await s.memberships.withUser(await s.memberships.changeRole(membership, params.orgId, params.memberId, body.role))),
      }),
    }),
    defineRoute({
      method: 'patch', path: '/memberships/organizations/:orgId/members/:memberId/status', operationId: 'changeMemberStatus', tag, auth: { kind: 'org', role: 'admin', orgFrom: 'path' },
      summary: 'Suspend a member (access ends at once, the record stays) or make them active again',
      params: params('orgId', 'memberId'),
      body: object({ status: { type: 'string', enum: ['active', 'suspended'] } }, ['status']),
      response: { status: 200, description: 'Status changed', data: MembershipView },
      errors: [409],
      handler: async ({ params, body, membership }) => ({
        message: 'Status changed',
        data: presentMembership(await s.memberships.withUser(await s.memberships.changeStatus(membership, params.orgId, params.memberId, body.status))),
      }),
    }),
    defineRoute({
      method: 'delete', path: '/memberships/organizations/:orgId/members/:memberId', operationId: 'removeMember', tag, auth: { kind: 'org', role: 'admin', orgFrom: 'path' },
      summary: 'Remove a member or withdraw an invitation',
      params: params('orgId', 'memberId'),
      response: { status: 200, description: 'Removed' },
      handler: async ({ params, membership }) => {
        await s.memberships.remove(membership, params.orgId, params.memberId);
        return { message: 'Member removed' };
      },
    }),
    defineRoute({
      method: 'get', path: '/memberships/verify-invite/:token', operationId: 'verifyInvite', tag, auth: { kind: 'public' },
      summary: 'What an invitation link is for; 404 unknown, 410 used or expired',
      description: '`requiresPassword` is true when the invited email has no account yet (the client asks for a name and a new password).',
      params: object({ token: { type: 'string', minLength: 1, maxLength: 512 } }, ['token']),
      response: {
        status: 200, description: 'Invitation',
        data: object({ email: { type: 'string' }, organization: object({ id: uuid, name: { type: 'string' } }), role, requiresPassword: { type: 'boolean' }, existingUser: { type: 'boolean' } }),
      },
      errors: [404, 410],
      handler: async ({ params }) => ({ message: 'Invitation', data: await s.memberships.verifyInvite(params.token) }),
    }),
    defineRoute({
      method: 'post', path: '/memberships/accept-invite', operationId: 'acceptInvite', tag, auth: { kind: 'public', optionalBearer: true },
      summary: 'Accept an invitation and sign in to the organization',
      description: 'A new person sends `name` and `password`; someone with an account sends their `password` or their bearer token.',
      body: object({ token: { type: 'string', minLength: 1, maxLength: 512 }, name: personName, password: { type: 'string', minLength: 8, maxLength: 128 } }, ['token']),
      response: {
        status: 200, description: 'Accepted and signed in',
        data: object({ user: UserView, organization: OrganizationView, role, ...TokenPairView }),
      },
      errors: [401, 404, 410],
      handler: async ({ body, actor, meta }) => {
        const accepted = await s.memberships.acceptInvite(body, actor, meta);
        const { organizations, ...signedIn } = presentSignedIn({ ...accepted, organizations: [{ organization: accepted.organization, role: accepted.role }] });
        void organizations;
        return { message: 'Invitation accepted', data: signedIn };
      },
    }),
  ];
}
