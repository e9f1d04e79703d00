// /api-keys: organization API keys, managed by admins. A key itself can never call these routes.
import { presentApiKey } from '../server/presenters/apiKey.js';
import { ALL_SCOPES } from '../server/services/apiKeys/index.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { dateTime, nullableDateTime, object, paginationQuery, params, uuid } from './schemas/common.js';

const tag = 'API keys';
const admin = { kind: 'org', role: 'admin', orgFrom: 'token' } as const;
const ApiKeyView = {
  type: 'object',
  properties: {
    id: uuid, name: { type: 'string' }, scopes: { type: 'array', items: { type: 'string', enum: ALL_SCOPES } }, hint: { type: 'string' },
    botUserId: uuid, createdBy: { type: ['string', 'null'] }, expiresAt: nullableDateTime, lastUsedAt: nullableDateTime, revokedAt: nullableDateTime, createdAt: dateTime,
  },
};

export function apiKeyRoutes(s: RouteServices): AnyRoute[] {
  const revoke = (method: 'delete' | 'post', path: string, operationId: string) =>
    defineRoute({
      method, path, operationId, tag, auth: admin, scope: null,
      summary: 'Revokes an API key: its next request answers 401 and its sockets are disconnected on every instance',
      params: params('keyId'),
      response: { status: 200, description: 'The revoked key', data: ApiKeyView },
      handler: async ({ orgId, params: p }) => ({ message: 'API key revoked', data: presentApiKey(await s.apiKeys.revoke(orgId, p.keyId)) }),
    });
  return [
    defineRoute({
      method: 'post', path: '/api-keys', operationId: 'createApiKey', tag, auth: admin, scope: null,
      summary: 'Creates an API key; `token` is shown only in this answer',
      description:
        'The token looks like `sp_live_<32 hex characters>_<43 base64url characters>` (the fixed prefix lets secret scanners find leaked keys). ' +
        'Send it as `Authorization: Bearer <token>` on REST, or as `auth.token` of an agent socket. The key acts as a bot member with the agent role, ' +
        'narrowed to its scopes (`<area>:read` or `<area>:write`; write implies read); each route states the scope it needs (`x-required-scope`). ' +
        'Admin routes accept a key holding their area\'s write scope, except organization and membership management; owner routes and /api-keys never accept keys.',
      body: object({
        name: { type: 'string', minLength: 1, maxLength: 100, pattern: '\\S' },
        scopes: { type: 'array', minItems: 1, maxItems: ALL_SCOPES.length, uniqueItems: true, items: { type: 'string', enum: ALL_SCOPES } },
        expiresAt: { ...nullableDateTime, description: 'After this time the key answers 401; null or absent: until revoked' },
      }, ['name', 'scopes']),
      response: { status: 201, description: 'The key and its token (shown once)', data: { type: 'object', properties: { apiKey: ApiKeyView, token: { type: 'string' } } } },
      handler: async ({ orgId, actor, body }) => {
        const { key, token } = await s.apiKeys.create(orgId, actor.userId, body);
        return { message: 'API key created; store the token now, it is not shown again', data: { apiKey: presentApiKey(key), token } };
      },
    }),
    defineRoute({
      method: 'get', path: '/api-keys', operationId: 'listApiKeys', tag, auth: admin, scope: null,
      summary: 'API keys of the active organization, newest first (revoked ones only with includeRevoked)',
      query: object({ ...paginationQuery, includeRevoked: { type: 'boolean', default: false } }),
      response: { status: 200, description: 'API keys', data: { type: 'array', items: ApiKeyView }, paginated: true },
      handler: async ({ orgId, query }) => {
        const { keys, total } = await s.apiKeys.list(orgId, query);
        return { message: 'API keys', data: keys.map(presentApiKey), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'get', path: '/api-keys/:keyId', operationId: 'getApiKey', tag, auth: admin, scope: null,
      summary: 'One API key (never its token)',
      params: params('keyId'),
      response: { status: 200, description: 'API key', data: ApiKeyView },
      handler: async ({ orgId, params: p }) => ({ message: 'API key', data: presentApiKey(await s.apiKeys.get(orgId, p.keyId)) }),
    }),
    revoke('delete', '/api-keys/:keyId', 'revokeApiKey'),
    revoke('post', '/api-keys/:keyId/revoke', 'revokeApiKeyPost'),
  ];
}
