// /templates: saved responses. PATCH follows the spec's rule 1: 401, then 403 (admin), then 404, then 400.
import { presentTemplate } from '../server/presenters/template.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { dateTime, object, paginationQuery, params, uuid } from './schemas/common.js';
import { SEARCH_TEXT_MAX } from '../server/limits.js';

const tag = 'Templates';
const agent = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;
const admin = { kind: 'org', role: 'admin', orgFrom: 'token' } as const;
const nonEmpty = (max: number) => ({ type: 'string', minLength: 1, maxLength: max, pattern: '\\S' }) as const;
const fields = {
  title: nonEmpty(200),
  content: nonEmpty(20000),
  shortcut: { type: ['string', 'null'], maxLength: 50, pattern: '^[^\\s]*$', description: 'Typed by agents, e.g. "refund"; unique per organization' },
  category: { type: ['string', 'null'], maxLength: 100 },
} as const;
const TemplateView = {
  type: 'object',
  properties: { id: uuid, title: { type: 'string' }, content: { type: 'string' }, shortcut: { type: ['string', 'null'] }, category: { type: ['string', 'null'] }, createdBy: { type: ['string', 'null'] }, createdAt: dateTime, updatedAt: dateTime },
};

export function templateRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/templates', operationId: 'listTemplates', tag, auth: agent,
      summary: 'Templates of the active organization, by title; filter by category, search title and shortcut',
      query: object({ ...paginationQuery, category: { type: 'string', maxLength: 100 }, q: { type: 'string', maxLength: SEARCH_TEXT_MAX } }),
      response: { status: 200, description: 'Templates', data: { type: 'array', items: TemplateView }, paginated: true },
      handler: async ({ orgId, query }) => {
        const { templates, total } = await s.templates.list(orgId, query);
        return { message: 'Templates', data: templates.map(presentTemplate), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'get', path: '/templates/:id', operationId: 'getTemplate', tag, auth: agent,
      summary: 'One template',
      params: params('id'),
      response: { status: 200, description: 'Template', data: TemplateView },
      handler: async ({ orgId, params }) => ({ message: 'Template', data: presentTemplate(await s.templates.get(orgId, params.id)) }),
    }),
    defineRoute({
      method: 'post', path: '/templates', operationId: 'createTemplate', tag, auth: admin,
      summary: 'Create a template',
      body: object(fields, ['title', 'content']),
      response: { status: 201, description: 'Created', data: TemplateView },
      errors: [409],
      handler: async ({ orgId, actor, body }) => ({ message: 'Template created', data: presentTemplate(await s.templates.create(orgId, actor.userId, body)) }),
    }),
    defineRoute({
      method: 'patch', path: '/templates/:id', operationId: 'updateTemplate', tag, auth: admin,
      summary: 'Update a template (spec endpoint 1)',
      description: '401 without authentication, 403 without the admin role, 404 when the template does not exist in the organization, 400 for invalid input (wrong types, empty title or content, unknown fields), in that order.',
      params: params('id'),
      body: { ...object(fields), minProperties: 1 },
      response: { status: 200, description: 'Template updated', data: TemplateView },
      errors: [409],
      load: ({ orgId, params }) => s.templates.get(orgId, params.id),
      handler: async ({ orgId, params, body }) => ({ message: 'Template updated', data: presentTemplate(await s.templates.update(orgId, params.id, body)) }),
    }),
    defineRoute({
      method: 'delete', path: '/templates/:id', operationId: 'deleteTemplate', tag, auth: admin,
      summary: 'Delete a template',
      params: params('id'),
      response: { status: 200, description: 'Deleted' },
      load: ({ orgId, params }) => s.templates.get(orgId, params.id),
      handler: async ({ orgId, params }) => {
        await s.templates.remove(orgId, params.id);
        return { message: 'Template deleted' };
      },
    }),
  ];
}
