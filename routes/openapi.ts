// Builds the OpenAPI 3.1 document from the same route definitions that validate requests.
import { polishOpenApi } from './openapiDocs.js';
import type { AnyRoute, JsonSchema, RouteAuth } from './registry.js';
import { ALL_SCOPES, describeScope, keyAllows, requiredScope } from '../server/services/apiKeys/index.js';

const ERROR_TEXT: Record<number, string> = {
  400: 'Invalid input (validation_failed, invalid_json, invalid_otp or invalid_transition)',
  401: 'Missing, invalid, expired or revoked credentials (unauthorized)',
  403: 'Not allowed (forbidden, or plan_limit_reached)',
  404: 'Not found, or in another organization (not_found)',
  409: 'Conflicts with existing data (conflict)',
  410: 'Used or expired (gone)',
  413: 'Body over 1 MiB (payload_too_large)',
  415: 'Body is not application/json (unsupported_media_type)',
  429: 'Too many requests (rate_limited); see Retry-After',
  503: 'A dependency is unavailable or not configured (service_unavailable)',
};

function securityFor(auth: RouteAuth): Record<string, string[]>[] | undefined {
  switch (auth.kind) {
    case 'public':
      return auth.optionalBearer ? [{}, { bearerAuth: [] }] : [];
    case 'ai':
      return [{ aiToolSecret: [] }];
    case 'widget':
      return [{ widgetSession: [] }];
    default:
      return [{ bearerAuth: [] }];
  }
}

function impliedErrors(route: AnyRoute): number[] {
  const codes = new Set<number>(route.errors ?? []);
  const hasBody = ['post', 'put', 'patch', 'delete'].includes(route.method);
  if (hasBody || route.query || route.params) codes.add(400);
  if (hasBody) {
    codes.add(413);
    codes.add(415);
  }
  if (route.auth.kind !== 'public') codes.add(401);
  if (route.auth.kind === 'org') codes.add(403);
  // An API key on a route that takes an operator's own token (personal and owner routes) is refused with 403.
  if (route.auth.kind === 'bearer' || (route.auth.kind === 'public' && route.auth.optionalBearer)) codes.add(403);
  if (route.auth.kind === 'ai') codes.add(503);
  if (route.params) codes.add(404);
  if (route.rateLimit) codes.add(429);
  return [...codes].sort();
}

function parametersOf(route: AnyRoute) {
  const out: unknown[] = [];
  for (const [where, schema] of [['path', route.params], ['query', route.query]] as const) {
    const props = (schema?.properties ?? {}) as Record<string, JsonSchema>;
    const required = new Set((schema?.required as string[] | undefined) ?? []);
    for (const [name, prop] of Object.entries(props)) {
      const { description, ...rest } = prop as JsonSchema & { description?: string };
      out.push({ name, in: where, required: where === 'path' || required.has(name), schema: rest, ...(description ? { description } : {}) });
    }
  }
  return out;
}

export function buildOpenApi(routes: AnyRoute[], info: { serverUrl: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = `/api/v1${route.path}`.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    const success: JsonSchema = {
      type: 'object',
      required: ['success', 'message', 'data'],
      properties: {
        success: { const: true },
        message: { type: 'string' },
        data: route.response.data ?? { type: 'object', maxProperties: 0, description: 'Always present; empty when the answer carries nothing more' },
        ...(route.response.paginated ? { pagination: { $ref: '#/components/schemas/Pagination' } } : {}),
      },
    };
    const responses: Record<string, unknown> = {
      [route.response.status]: { description: route.response.description, content: { 'application/json': { schema: success } } },
    };
    if (route.response.also) responses[route.response.also.status] = { description: route.response.also.description, content: { 'application/json': { schema: success } } };
    for (const code of impliedErrors(route)) {
      responses[code] = { description: ERROR_TEXT[code] ?? 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    }
    const hasBody = ['post', 'put', 'patch', 'delete'].includes(route.method);
    (paths[path] ??= {})[route.method] = {
      operationId: route.operationId,
      tags: [route.tag],
      summary: route.summary,
      ...(route.description || route.auth.kind === 'org' ? { description: [route.description, route.auth.kind === 'org' ? describeScope(requiredScope(route), route.auth.role) : null].filter(Boolean).join('\n\n') } : {}),
      security: route.auth.kind === 'org' ? [{ bearerAuth: [] }, { apiKey: [] }] : securityFor(route.auth),
      ...(route.rateLimit ? { 'x-rate-limit': route.rateLimit } : {}),
      ...(route.auth.kind === 'org' ? { 'x-required-role': route.auth.role, 'x-required-scope': keyAllows(ALL_SCOPES, requiredScope(route), route.auth.role) ? requiredScope(route) : null } : {}),
      parameters: parametersOf(route),
      ...(hasBody && route.body
        ? { requestBody: { required: Array.isArray(route.body.required) && route.body.required.length > 0, content: { 'application/json': { schema: route.documentedBody ?? route.body } } } }
        : {}),
      responses,
    };
  }
  return polishOpenApi({
    openapi: '3.1.0',
    info: {
      title: 'Support Platform API',
      version: '1.0.0',
      description: 'Multi-tenant customer-support platform. Every success body is `{ success: true, message, data }`; every error body is `{ success: false, message, error: { code, details }, requestId }`. Requests the HTTP parser refuses get it too: a URL and headers past 16 KB answer 431 `payload_too_large`, a malformed request 400 `validation_failed`. A path asked with a method it does not have answers 405 `method_not_allowed` with an `Allow` header naming the methods it has.',
    },
    servers: [{ url: info.serverUrl }],
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Operator access token' },
        widgetSession: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'widget_session token from POST /widget/auth/token' },
        apiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'sp_live_<32 hex id>_<43 base64url secret>', description: 'Organization API key (POST /api-keys): a bot member of its organization with the agent role, limited to the route\'s x-required-scope (`<area>:read` or `<area>:write`; write implies read). Routes whose x-required-scope is null refuse keys (403).' },
        aiToolSecret: { type: 'apiKey', in: 'header', name: 'x-ai-tool-secret', description: 'Internal AI service secret' },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['success', 'message', 'error', 'requestId'],
          properties: {
            success: { const: false },
            message: { type: 'string' },
            error: { type: 'object', required: ['code', 'details'], properties: { code: { type: 'string' }, details: { type: 'array', items: { type: 'object' } } } },
            requestId: { type: 'string' },
          },
        },
        Pagination: { type: 'object', required: ['limit', 'offset', 'total'], properties: { limit: { type: 'integer' }, offset: { type: 'integer' }, total: { type: 'integer' } } },
      },
    },
    paths,
  });
}
