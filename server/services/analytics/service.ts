// Analytics for one organization, an agent's own row, and an owner's view over several organizations: checks the
// input, resolves the period, and answers from a 60-second per-organization cache in front of the SQL.
import type { Knex } from 'knex';
import type { ReadSession } from '../../../db/statements.js';
import { Forbidden, ValidationFailed } from '../../errors.js';
import { isUuid } from '../../validation.js';
import { AnalyticsQueries, type AgentFigures, type AgentSort, type DayFigures, type Filters, type SummaryFigures } from './queries.js';
import { AggregateQueries, cover, wholeHours, type Cover } from './aggregates.js';
import { agentsFromTotals, wholeDays } from './agentTotals.js';
import { resolveRange, wholeHourZone, type AnalyticsRange, type RangeQuery } from './range.js';
import { MessageRollup } from './rollup.js';

export interface AnalyticsQuery extends RangeQuery {
  channel?: string;
  agentId?: string;
}

/** How medians and p90s were computed: sorting every conversation, or from the daily and hourly histograms (within 9.1%). */
export type Percentiles = 'exact' | 'histogram';

export interface Computed<T> {
  range: AnalyticsRange;
  generatedAt: Date;
  percentiles: Percentiles;
  figures: T;
}

export interface OwnerView<T> {
  range: AnalyticsRange;
  generatedAt: Date;
  percentiles: Percentiles;
  totals: T;
  organizations: { organizationId: string; name: string; figures: T }[];
}

export const CACHE_TTL_MS = 60_000;
const CACHE_MAX_ENTRIES = 5_000;
/** Periods reading at most this many conversations are answered exactly (sorting them is cheap at this size). */
export const EXACT_ROWS = 10_000;

interface Answer<T> {
  percentiles: Percentiles;
  figures: T;
}

export class AnalyticsService {
  readonly rollup: MessageRollup;
  private readonly cache = new Map<string, { expires: number; value: Promise<unknown> }>();
  /** Above this many conversations in a period, summary and trends read the hourly aggregates. */
  exactRows = EXACT_ROWS;

  constructor(private readonly deps: {
    knex: Knex;
    /** Database['readOnly']: an answer's statements on one connection, prepared on PostgreSQL. */
    readOnly: <T>(settings: readonly string[], fn: (session: ReadSession) => Promise<T>) => Promise<T>;
    rollupIntervalMs?: number;
    onRollupError?: (err: unknown) => void;
  }) {
    this.rollup = new MessageRollup({ knex: deps.knex, intervalMs: deps.rollupIntervalMs ?? 15_000, onError: deps.onRollupError ?? (() => undefined) });
  }

  async summary(orgId: string, query: AnalyticsQuery): Promise<Computed<SummaryFigures>> {
    const { range, filters } = await this.prepare([orgId], query);
    return this.cached(['summary', orgId, range, filters], async () => ({ range, generatedAt: new Date(), ...(await this.summaryOf([orgId], range, filters)) }));
  }

  async trends(orgId: string, query: AnalyticsQuery): Promise<Computed<DayFigures[]>> {
    const { range, filters } = await this.prepare([orgId], query);
    return this.cached(['trends', orgId, range, filters], async () => ({ range, generatedAt: new Date(), ...(await this.trendsOf([orgId], range, filters)) }));
  }

  async agents(orgId: string, query: AnalyticsQuery, page: { sort: AgentSort; limit: number; offset: number }): Promise<Computed<{ rows: AgentFigures[]; total: number }>> {
    const { range, filters } = await this.prepare([orgId], query);
    return this.cached(['agents', orgId, range, filters, page], async () => ({ range, generatedAt: new Date(), ...(await this.agentsOf(orgId, range, filters, page)) }));
  }

  /** The caller's own row (zeros when nothing was assigned to them in the range). */
  async agentStats(orgId: string, userId: string, query: Omit<AnalyticsQuery, 'agentId'>): Promise<Computed<AgentFigures>> {
    const result = await this.agents(orgId, { ...query, agentId: userId }, { sort: 'assigned', limit: 1, offset: 0 });
    const row = result.figures.rows[0] ?? { userId, name: null, assigned: 0, resolved: 0, open: 0, firstHumanResponses: 0, medianFirstResponse: null, medianResolution: null };
    return { range: result.range, generatedAt: result.generatedAt, percentiles: result.percentiles, figures: row };
  }

  ownerSummary(userId: string, organizationIds: string, query: AnalyticsQuery): Promise<OwnerView<SummaryFigures>> {
    return this.owner(userId, organizationIds, query, 'summary', (ids, range, f) => this.summaryOf(ids, range, f));
  }

  ownerTrends(userId: string, organizationIds: string, query: AnalyticsQuery): Promise<OwnerView<DayFigures[]>> {
    return this.owner(userId, organizationIds, query, 'trends', (ids, range, f) => this.trendsOf(ids, range, f));
  }

  /** Totals are computed over all the organizations at once (a median of medians would be wrong), then each alone. */
  private async owner<T>(userId: string, organizationIds: string, query: AnalyticsQuery, kind: string, compute: (ids: string[], range: AnalyticsRange, f: Filters) => Promise<Answer<T>>): Promise<OwnerView<T>> {
    const ids = [...new Set(organizationIds.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean))];
    if (!ids.length || ids.length > 50 || !ids.every(isUuid)) {
      throw new ValidationFailed('organizationIds must be 1..50 comma-separated organization ids', [{ field: 'organizationIds', message: 'is not a list of ids' }]);
    }
    const owned = (await this.deps.knex.raw(
      `select o.id, o.name from organizations o join memberships m on m.organization_id = o.id
       where m.user_id = ? and m.role = 'owner' and m.status = 'accepted' and o.id = any(?::uuid[])`,
      [userId, `{${ids.join(',')}}`],
    )).rows as { id: string; name: string }[];
    if (owned.length !== ids.length) throw new Forbidden('You own only some of these organizations');
    // Organizations can sit in different zones: the owner view counts days in the query's zone, else UTC.
    const { range, filters } = await this.prepare([], query);
    ids.sort();
    return this.cached(['owner', kind, ids, range, filters], async () => {
      const [totals, ...each] = await Promise.all([compute(ids, range, filters), ...ids.map((id) => compute([id], range, filters))]);
      return {
        range, generatedAt: new Date(), totals: totals!.figures,
        percentiles: [totals!, ...each].some((a) => a!.percentiles === 'histogram') ? 'histogram' : 'exact',
        organizations: ids.map((id, i) => ({ organizationId: id, name: owned.find((o) => o.id === id)!.name, figures: each[i]!.figures })),
      };
    });
  }

  /**
   * From the agents' running totals when the period holds a whole UTC day, no `channel` filter (the totals hold no
   * channel; `agentId` only picks the member) and more conversations than are cheap to sort exactly.
   */
  private agentsOf(orgId: string, range: AnalyticsRange, f: Filters, page: { sort: AgentSort; limit: number; offset: number }): Promise<Answer<{ rows: AgentFigures[]; total: number }>> {
    return this.sql(async (q, db) => {
      const days = wholeDays(range);
      const whole = days && !f.channel ? this.wholeHours(range, { channel: null, agentId: null }) : null;
      const conversations = whole ? { ...new AggregateQueries(db, q).conversationsSql([orgId], whole), atMost: this.exactRows } : null;
      const figures = days && conversations ? await agentsFromTotals(db, orgId, range, days, f.agentId, page, conversations) : null;
      return figures ? { percentiles: 'histogram', figures } : { percentiles: 'exact', figures: await q.agents(orgId, range, f, page) };
    });
  }

  private summaryOf(ids: string[], range: AnalyticsRange, f: Filters): Promise<Answer<SummaryFigures>> {
    return this.sql(async (q, db) => {
      const whole = this.wholeHours(range, f);
      const figures = whole ? await new AggregateQueries(db, q).summary(ids, range, whole, this.exactRows) : null;
      return figures ? { percentiles: 'histogram', figures } : { percentiles: 'exact', figures: await q.summary(ids, range, f) };
    });
  }

  private trendsOf(ids: string[], range: AnalyticsRange, f: Filters): Promise<Answer<DayFigures[]>> {
    return this.sql(async (q, db) => {
      // A zone half an hour off UTC splits hours between local days: such periods are read exactly.
      const whole = wholeHourZone(range) ? this.wholeHours(range, f) : null;
      const figures = whole ? await new AggregateQueries(db, q).trends(ids, range, whole, this.exactRows) : null;
      return figures ? { percentiles: 'histogram', figures } : { percentiles: 'exact', figures: await q.trends(ids, range, f) };
    });
  }

  /**
   * The whole hours the aggregates would answer for: none when the period is filtered (they hold no channel or
   * assignee) or holds no whole hour. Whether it holds enough conversations is decided from the rows read.
   */
  private wholeHours(range: AnalyticsRange, f: Filters): Cover | null {
    const hours = wholeHours(range);
    return hours && !f.channel && !f.agentId ? cover(hours) : null;
  }

  /**
   * Runs the statements of one answer on one connection in a read-only transaction, prepared on PostgreSQL and
   * planned once per connection (a generic plan: planning these statements cost more than running them, and their
   * plans do not depend on the period), with JIT compilation off (on these statements PostgreSQL's cost estimate
   * turned it on, and compiling took seconds where running takes milliseconds) and no parallel workers (the
   * aggregate statements read a few hundred rows; starting workers for them cost more than it saved).
   */
  private sql<T>(fn: (q: AnalyticsQueries, db: ReadSession) => Promise<T>): Promise<T> {
    return this.deps.readOnly(['jit = off', 'max_parallel_workers_per_gather = 0', 'plan_cache_mode = force_generic_plan'], (db) => fn(new AnalyticsQueries(db), db));
  }

  private async prepare(orgIds: string[], query: AnalyticsQuery): Promise<{ range: AnalyticsRange; filters: Filters }> {
    if (query.agentId !== undefined && !isUuid(query.agentId)) throw new ValidationFailed('agentId must be a user id', [{ field: 'agentId', message: 'is not an id' }]);
    let zone: string | null = null;
    if (query.timezone === undefined && orgIds.length === 1) {
      const row = (await this.deps.knex.raw(`select settings->>'timezone' as timezone from organizations where id = ?`, [orgIds[0]!])).rows[0] as { timezone: string | null } | undefined;
      zone = row?.timezone ?? null;
    }
    return { range: resolveRange(query, zone), filters: { channel: query.channel ?? null, agentId: query.agentId?.toLowerCase() ?? null } };
  }

  private cached<T>(keyParts: unknown[], compute: () => Promise<T>): Promise<T> {
    const key = JSON.stringify(keyParts);
    const now = Date.now();
    const hit = this.cache.get(key);
    if (hit && hit.expires > now) return hit.value as Promise<T>;
    if (this.cache.size >= CACHE_MAX_ENTRIES) {
      for (const [k, v] of this.cache) if (v.expires <= now) this.cache.delete(k);
      // Still full of live entries: forget the oldest rather than grow without bound.
      if (this.cache.size >= CACHE_MAX_ENTRIES) this.cache.delete(this.cache.keys().next().value as string);
    }
    const value = compute();
    this.cache.set(key, { expires: now + CACHE_TTL_MS, value });
    // A failed computation is not remembered.
    value.catch(() => this.cache.delete(key));
    return value;
  }
}
