// /organizations: the caller's organizations, settings, deletion, switching and plan entitlements.
import { presentOrganization, presentOrganizationEntry } from '../server/presenters/organization.js';
import { presentTokens } from '../server/presenters/session.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { nullableUrl, object, OrganizationEntryView, OrganizationView, params, personName, role, TokenPairView } from './schemas/common.js';

const tag = 'Organizations';
const domain = { type: ['string', 'null'], maxLength: 253, pattern: '^[A-Za-z0-9.-]+$' } as const;
const settings = object({
  autoAssignment: { type: 'boolean', description: 'Assign new conversations to the least busy online agent' },
  notifyAgentsOnNewConversation: { type: 'boolean', description: 'Notify every agent of a new widget conversation' },
  timezone: { type: 'string', maxLength: 64, description: 'IANA time zone the organization counts its days in (analytics); 400 when unknown' },
  locale: { type: 'string', maxLength: 35 },
});
const limitValue = { type: ['integer', 'null'], description: 'null means unlimited' } as const;

export function organizationRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/organizations', operationId: 'listOrganizations', tag, auth: { kind: 'bearer' },
      summary: 'Organizations you are an accepted member of, with your role in each',
      response: { status: 200, description: 'Organizations', data: { type: 'array', items: OrganizationEntryView } },
      handler: async ({ actor }) => {
        const list = await s.organizations.listForUser(actor.userId);
        return { message: 'Organizations', data: list.map((o) => presentOrganizationEntry(o.organization, o.role)) };
      },
    }),
    defineRoute({
      method: 'post', path: '/organizations', operationId: 'createOrganization', tag, auth: { kind: 'bearer' },
      summary: 'Create an organization; you become its owner (switch to it to work in it)',
      body: object({ name: personName, domain }, ['name']),
      response: { status: 201, description: 'Created', data: OrganizationView },
      handler: async ({ body, actor }) => ({ message: 'Organization created', data: presentOrganization(await s.organizations.create(actor, body)) }),
    }),
    defineRoute({
      method: 'get', path: '/organizations/billing/entitlements', operationId: 'getEntitlements', tag, auth: { kind: 'org', role: 'agent', orgFrom: 'token' },
      summary: "The active organization's plan, its limits and features",
      response: {
        status: 200, description: 'Entitlements',
        data: object({
          plan: { type: 'string' },
          limits: object({ humanAgents: limitValue, aiCallsPerMonth: limitValue, knowledgeSources: limitValue, widgets: limitValue, channels: limitValue, storageMb: limitValue }),
          features: { type: 'array', items: { type: 'string' } },
        }),
      },
      handler: async ({ orgId }) => ({ message: 'Entitlements', data: await s.organizations.entitlements(orgId) }),
    }),
    defineRoute({
      method: 'get', path: '/organizations/billing/usage', operationId: 'getUsage', tag, auth: { kind: 'org', role: 'agent', orgFrom: 'token' },
      summary: "The active organization's usage in the current calendar month (UTC)",
      description: '`usage.humanAgents` counts accepted and pending members (the seats the plan limits); `usage.conversations` the conversations started this month; `usage.aiCalls` the AI calls ingested for this month.',
      response: {
        status: 200, description: 'Usage',
        data: object({ periodStart: { type: 'string', format: 'date-time' }, periodEnd: { type: 'string', format: 'date-time' }, usage: { type: 'object', additionalProperties: { type: 'integer' } } }),
      },
      handler: async ({ orgId }) => ({ message: 'Usage', data: await s.organizations.usage(orgId) }),
    }),
    defineRoute({
      method: 'get', path: '/organizations/:orgId', operationId: 'getOrganization', tag, auth: { kind: 'org', role: 'agent', orgFrom: 'path' },
      summary: 'One organization you are a member of',
      params: params('orgId'),
      response: { status: 200, description: 'Organization', data: OrganizationView },
      handler: async ({ params }) => ({ message: 'Organization', data: presentOrganization(await s.organizations.get(params.orgId)) }),
    }),
    defineRoute({
      method: 'patch', path: '/organizations/:orgId', operationId: 'updateOrganization', tag, auth: { kind: 'org', role: 'admin', orgFrom: 'path' },
      summary: 'Change name, domain, logo or settings (settings merge key by key)',
      params: params('orgId'),
      body: { ...object({ name: personName, domain, logoUrl: nullableUrl, settings }), minProperties: 1 },
      response: { status: 200, description: 'Updated', data: OrganizationView },
      handler: async ({ params, body }) => ({ message: 'Organization updated', data: presentOrganization(await s.organizations.update(params.orgId, body)) }),
    }),
    defineRoute({
      method: 'delete', path: '/organizations/:orgId', operationId: 'deleteOrganization', tag, auth: { kind: 'org', role: 'owner', orgFrom: 'path' },
      summary: 'Delete the organization and everything it owns',
      params: params('orgId'),
      response: { status: 200, description: 'Deleted' },
      handler: async ({ params }) => {
        await s.organizations.remove(params.orgId);
        return { message: 'Organization deleted' };
      },
    }),
    defineRoute({
      method: 'post', path: '/organizations/:orgId/switch', operationId: 'switchOrganization', tag, auth: { kind: 'bearer' },
      summary: 'Fresh tokens whose active organization is the selection (403 without an accepted membership there)',
      params: params('orgId'),
      response: { status: 200, description: 'Switched', data: object({ ...TokenPairView, organization: OrganizationView, role }) },
      errors: [403],
      handler: async ({ params, actor, meta }) => {
        const switched = await s.organizations.switchTo(actor, params.orgId, meta);
        return { message: 'Switched organization', data: { ...presentTokens(switched), organization: presentOrganization(switched.organization), role: switched.role } };
      },
    }),
  ];
}
