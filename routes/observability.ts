// /observability: AI-call ingestion from the internal AI service (spec endpoint 4) and the organization's summary.
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { jsonLimits, object } from './schemas/common.js';
import { aiCallEventSchema } from '../server/services/observability.js';

const tag = 'Observability';
/** An event is flat; these bounds only refuse structural abuse, so every other fault is still reported per event. */
const eventLimits = jsonLimits({ maxDepth: 4, maxBytes: 65_536 });
const group = { calls: { type: 'integer' }, successRate: { type: 'number' }, avgLatencyMs: { type: 'number' }, totalTokens: { type: 'integer' }, totalCostUsd: { type: 'number' } } as const;

export function observabilityRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'post', path: '/observability/ai-calls', operationId: 'ingestAiCalls', tag, auth: { kind: 'ai' },
      summary: 'Ingest a batch of 1..500 AI call events (spec endpoint 4)',
      description:
        'Needs the x-ai-tool-secret header; no JWT is used or accepted instead. Each event is validated on its own: the valid ones are stored in one bulk statement, the invalid ones reported by index. `organizationId` must name an existing organization.',
      body: object({ events: { type: 'array', minItems: 1, maxItems: 500, items: { type: 'object', ...eventLimits } } }, ['events']),
      // Events are validated one by one (an invalid one is reported, not fatal); the document shows their schema.
      documentedBody: object({ events: { type: 'array', minItems: 1, maxItems: 500, items: { ...aiCallEventSchema, ...eventLimits } } }, ['events']),
      response: {
        status: 201, description: 'Stored',
        data: object({ inserted: { type: 'integer' }, failed: { type: 'integer' }, errors: { type: 'array', items: object({ index: { type: 'integer' }, message: { type: 'string' } }) } }),
      },
      handler: async ({ body }) => {
        const result = await s.observability.ingest(body.events);
        return { message: `${result.inserted} events stored`, data: result };
      },
    }),
    defineRoute({
      method: 'get', path: '/observability/ai-calls/summary', operationId: 'summarizeAiCalls', tag, auth: { kind: 'org', role: 'agent', orgFrom: 'token' },
      summary: "AI call figures of the active organization over the last `days` (default 30)",
      query: object({ days: { type: 'integer', minimum: 1, maximum: 365, default: 30 } }),
      response: {
        status: 200, description: 'Summary',
        data: object({
          days: { type: 'integer' }, totalCalls: { type: 'integer' }, successRate: { type: 'number' }, avgLatencyMs: { type: 'number' }, p95LatencyMs: { type: 'number' },
          totalTokens: { type: 'integer' }, totalCostUsd: { type: 'number' },
          byModel: { type: 'array', items: object({ modelId: { type: 'string' }, provider: { type: 'string' }, ...group }) },
          byProvider: { type: 'array', items: object({ provider: { type: 'string' }, ...group }) },
          byDay: { type: 'array', items: object({ day: { type: 'string', format: 'date' }, ...group }) },
        }),
      },
      handler: async ({ orgId, query }) => ({ message: 'AI call summary', data: await s.observability.summary(orgId, query.days) }),
    }),
  ];
}
