// Liveness, readiness and the API description.
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { ServiceUnavailable } from '../server/errors.js';
import { object } from './schemas/common.js';

const tag = 'Health';

const dependency = {
  type: 'object',
  properties: { status: { enum: ['up', 'down', 'not_configured'] }, latencyMs: { type: 'number' }, reason: { type: 'string' } },
  required: ['status'],
} as const;

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
      description:
        'Each dependency is checked with a deadline of about a second, so the answer is bounded whatever hangs. The 503 body ' +
        'lists every dependency in `error.details` (`field` = dependency, `status` = up | down | not_configured). Once a ' +
        'graceful stop begins the answer is 503 at once, also on connections that were already open. During a Redis ' +
        'outage the instance keeps serving everything (rate limits, presence and fan-out fall back to this instance) ' +
        'but is reported not ready.',
      response: { status: 200, description: 'Ready', data: object({ status: { const: 'ready' }, checks: object({ database: dependency, redis: dependency }) }) },
      errors: [503],
      handler: async () => {
        const report = await s.readiness.check();
        if (!report.ready) {
          const details = Object.entries(report.checks).map(([field, check]) => ({ field, message: check.reason ?? check.status, ...check }));
          if (report.stopping) details.unshift({ field: 'instance', message: 'stopping', status: 'down' });
          throw new ServiceUnavailable(report.stopping ? 'This instance is stopping' : 'A dependency is not answering', details);
        }
        return { message: 'ready', data: { status: 'ready', checks: report.checks } };
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
