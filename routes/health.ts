// Liveness, readiness and the API description.
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { ServiceUnavailable } from '../server/errors.js';
import { object } from './schemas/common.js';

const tag = 'Health';

export function healthRoutes(s: RouteServices, openapi: () => unknown): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/health', operationId: 'health', tag, auth: { kind: 'public' },
      summary: 'Answers 200 while the process lives',
      response: { status: 200, description: 'Alive', data: object({ status: { const: 'ok' }, uptimeSeconds: { type: 'number' } }) },
      handler: async () => ({ message: 'ok', data: { status: 'ok', uptimeSeconds: Math.round(process.uptime()) } }),
    }),
    defineRoute({
      method: 'get', path: '/health/ready', operationId: 'ready', tag, auth: { kind: 'public' },
      summary: 'Answers 200 only while the database (and Redis, when configured) answer; 503 otherwise',
      response: { status: 200, description: 'Ready', data: object({ status: { const: 'ready' } }) },
      errors: [503],
      handler: async () => {
        try {
          await s.ready();
        } catch {
          throw new ServiceUnavailable('A dependency is not answering');
        }
        return { message: 'ready', data: { status: 'ready' } };
      },
    }),
    defineRoute({
      method: 'get', path: '/openapi.json', operationId: 'openapi', tag, auth: { kind: 'public' },
      summary: 'This OpenAPI 3.1 document',
      response: { status: 200, description: 'The document itself (not wrapped in the success envelope)' },
      handler: async () => ({ message: 'OpenAPI document', raw: { contentType: 'application/json', body: openapi() } }),
    }),
  ];
}
