// AI-call observability: batches from the AI service validated event by event and stored in one statement.
import type { Knex } from 'knex';
import { createAjv, errorDetails } from '../validation.js';

// The first error of an event is enough to report it.
const ajv = createAjv({ allErrors: false });
// The columns are 32-bit integers: input + output (the default total) must fit too.
const count = { type: 'integer', minimum: 0, maximum: 1_000_000_000 } as const;
const total = { type: 'integer', minimum: 0, maximum: 2_000_000_000 } as const;

/** One AI call event: the spec's fields plus `callType`. */
export const aiCallEventSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['timestamp', 'provider', 'modelId', 'latencyMs', 'success', 'organizationId'],
  properties: {
    timestamp: { type: 'string', format: 'date-time' },
    provider: { type: 'string', minLength: 1, maxLength: 100 },
    modelId: { type: 'string', minLength: 1, maxLength: 200 },
    latencyMs: { type: 'number', minimum: 0, maximum: 86_400_000 },
    success: { type: 'boolean' },
    inputTokens: count,
    outputTokens: count,
    totalTokens: total,
    estimatedCostUsd: { type: 'number', minimum: 0, maximum: 1_000_000 },
    error: { type: ['string', 'null'], maxLength: 5000 },
    organizationId: { type: 'string', format: 'uuid' },
    conversationId: { type: ['string', 'null'], format: 'uuid' },
    callType: { type: 'string', enum: ['llm', 'embedding'] },
  },
} as const;

const validateEvent = ajv.compile(aiCallEventSchema);

export interface AiCallEvent {
  timestamp: string;
  provider: string;
  modelId: string;
  latencyMs: number;
  success: boolean;
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  estimatedCostUsd?: number;
  error?: string | null;
  organizationId: string;
  conversationId?: string | null;
  callType?: 'llm' | 'embedding';
}

export interface IngestResult {
  inserted: number;
  failed: number;
  errors: { index: number; message: string }[];
}

/** The row of an event, as a raw multi-row INSERT takes it (also used by the ingest benchmark's baseline). */
export function aiCallRow(e: AiCallEvent) {
  const input = e.inputTokens ?? 0;
  const output = e.outputTokens ?? 0;
  return {
    organization_id: e.organizationId,
    conversation_id: e.conversationId ?? null,
    occurred_at: new Date(e.timestamp),
    provider: e.provider,
    model_id: e.modelId,
    call_type: e.callType ?? 'llm',
    latency_ms: Math.round(e.latencyMs),
    success: e.success,
    input_tokens: input,
    output_tokens: output,
    total_tokens: e.totalTokens ?? input + output,
    estimated_cost_usd: e.estimatedCostUsd ?? 0,
    error: e.error ?? null,
  };
}

export class ObservabilityService {
  constructor(private readonly deps: { knex: Knex }) {}

  async ingest(events: unknown[]): Promise<IngestResult> {
    const errors: IngestResult['errors'] = [];
    const valid: { index: number; event: AiCallEvent }[] = [];
    events.forEach((event, index) => {
      if (validateEvent(event)) valid.push({ index, event: event as AiCallEvent });
      else {
        const [first] = errorDetails(validateEvent.errors, 'event');
        errors.push({ index, message: first ? `${first.field} ${first.message}` : 'is invalid' });
      }
    });
    // One query for every organization named, instead of one per event.
    const named = [...new Set(valid.map((v) => v.event.organizationId))];
    const existing = new Set(named.length ? (await this.deps.knex('organizations').whereIn('id', named).pluck('id')) as string[] : []);
    const rows = [];
    for (const { index, event } of valid) {
      if (existing.has(event.organizationId)) rows.push(aiCallRow(event));
      else errors.push({ index, message: 'organizationId does not name an existing organization' });
    }
    if (rows.length) await this.deps.knex('ai_call_events').insert(rows);
    errors.sort((a, b) => a.index - b.index);
    return { inserted: rows.length, failed: errors.length, errors };
  }

  async summary(orgId: string, days: number) {
    const since = new Date(Date.now() - days * 86_400_000);
    const scoped = () => this.deps.knex('ai_call_events').where('organization_id', orgId).andWhere('occurred_at', '>=', since);
    const aggregates = [
      this.deps.knex.raw('count(*)::int as calls'),
      this.deps.knex.raw('coalesce(avg(case when success then 1.0 else 0.0 end), 0)::float as success_rate'),
      this.deps.knex.raw('coalesce(avg(latency_ms), 0)::float as avg_latency_ms'),
      this.deps.knex.raw('coalesce(sum(total_tokens), 0)::bigint as total_tokens'),
      this.deps.knex.raw('coalesce(sum(estimated_cost_usd), 0)::float as total_cost_usd'),
    ];
    const [totals, byModel, byProvider, byDay] = await Promise.all([
      scoped().select(...aggregates, this.deps.knex.raw('coalesce(percentile_cont(0.95) within group (order by latency_ms), 0)::float as p95_latency_ms')).first(),
      scoped().select('model_id', 'provider', ...aggregates).groupBy('model_id', 'provider').orderBy('calls', 'desc'),
      scoped().select('provider', ...aggregates).groupBy('provider').orderBy('calls', 'desc'),
      scoped().select(this.deps.knex.raw(`to_char(date_trunc('day', occurred_at at time zone 'UTC'), 'YYYY-MM-DD') as day`), ...aggregates).groupByRaw('1').orderBy('day', 'asc'),
    ]);
    const group = (r: Record<string, unknown>) => ({
      calls: Number(r.calls),
      successRate: round(Number(r.successRate)),
      avgLatencyMs: round(Number(r.avgLatencyMs)),
      totalTokens: Number(r.totalTokens),
      totalCostUsd: round(Number(r.totalCostUsd), 6),
    });
    return {
      days,
      totalCalls: Number(totals.calls),
      successRate: round(Number(totals.successRate)),
      avgLatencyMs: round(Number(totals.avgLatencyMs)),
      p95LatencyMs: round(Number(totals.p95LatencyMs)),
      totalTokens: Number(totals.totalTokens),
      totalCostUsd: round(Number(totals.totalCostUsd), 6),
      byModel: byModel.map((r: Record<string, unknown>) => ({ modelId: r.modelId, provider: r.provider, ...group(r) })),
      byProvider: byProvider.map((r: Record<string, unknown>) => ({ provider: r.provider, ...group(r) })),
      byDay: byDay.map((r: Record<string, unknown>) => ({ day: r.day, ...group(r) })),
    };
  }

  /** Deletes events older than the retention period; returns how many. */
  async prune(retentionDays: number): Promise<number> {
    const removed = await this.deps.knex('ai_call_events').where('occurred_at', '<', new Date(Date.now() - retentionDays * 86_400_000)).delete().returning('id');
    return removed.length;
  }
}

const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;
