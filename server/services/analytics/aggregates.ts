// Figures of long periods from the hourly aggregates: the whole hours of the period from `analytics_hourly`, its
// partial first and last hours from the conversations and minute message counts themselves, merged. Counts, sums and
// averages are exact; medians and p90s come from the log-scale histograms (see `fromHistogram` for the error).
import type { Knex } from 'knex';
import { resolvedFigures, startedFigures } from './hourly.js';
import type { AnalyticsQueries, DayFigures, Durations, SummaryFigures } from './queries.js';
import type { AnalyticsRange } from './range.js';

const HOUR_MS = 3_600_000;
const BUCKETS = 101;

/** What an hour (or a partial hour) holds; histograms are BUCKETS counts. */
interface Part {
  started: number; escalated: number; resolved: number; aiResolved: number; done: number;
  fr: Dist; hr: Dist; res: Dist;
  msgVisitor: number; msgAgent: number; msgAi: number; msgSystem: number;
}
interface Dist { n: number; sum: number; hist: number[] }

const emptyDist = (): Dist => ({ n: 0, sum: 0, hist: new Array<number>(BUCKETS).fill(0) });
const emptyPart = (): Part => ({ started: 0, escalated: 0, resolved: 0, aiResolved: 0, done: 0, fr: emptyDist(), hr: emptyDist(), res: emptyDist(), msgVisitor: 0, msgAgent: 0, msgAi: 0, msgSystem: 0 });

function addDist(into: Dist, d: Dist): void {
  into.n += d.n;
  into.sum += d.sum;
  for (let i = 0; i < BUCKETS; i++) into.hist[i]! += d.hist[i] ?? 0;
}

function addPart(into: Part, p: Part): void {
  for (const k of ['started', 'escalated', 'resolved', 'aiResolved', 'done', 'msgVisitor', 'msgAgent', 'msgAi', 'msgSystem'] as const) into[k] += p[k];
  addDist(into.fr, p.fr);
  addDist(into.hr, p.hr);
  addDist(into.res, p.res);
}

/** The value a bucket stands for: its geometric middle (bucket b >= 1 holds [2^((b-1)/4), 2^(b/4)) seconds). */
export function bucketValue(b: number): number {
  return b === 0 ? 0 : 2 ** ((b - 0.5) / 4);
}

/**
 * The p-quantile of a histogram, ranked like percentile_cont (rank p * (n - 1)), answered as its bucket's middle:
 * within 9.1% of a value in that bucket (half a bucket, 2^(1/8) - 1), and 0 for durations under a second.
 */
export function fromHistogram(hist: number[], n: number, p: number): number | null {
  if (n === 0) return null;
  const rank = p * (n - 1);
  let seen = 0;
  for (let b = 0; b < hist.length; b++) {
    seen += hist[b]!;
    if (seen > rank) return Math.round(bucketValue(b));
  }
  return Math.round(bucketValue(hist.length - 1));
}

function durations(d: Dist): Durations {
  return { avg: d.n ? Math.round(d.sum / d.n) : null, median: fromHistogram(d.hist, d.n, 0.5), p90: fromHistogram(d.hist, d.n, 0.9), count: d.n };
}

const num = (v: unknown) => Number(v ?? 0);
const orgArray = (ids: string[]) => `{${ids.join(',')}}`;

/** The whole hours inside [from, to); null when the period holds none (it is then read exactly). */
export function wholeHours(range: AnalyticsRange): { from: Date; to: Date } | null {
  const from = new Date(Math.ceil(range.from.getTime() / HOUR_MS) * HOUR_MS);
  const to = new Date(Math.floor(range.to.getTime() / HOUR_MS) * HOUR_MS);
  return from < to ? { from, to } : null;
}

export class AggregateQueries {
  constructor(private readonly knex: Knex, private readonly exact: AnalyticsQueries) {}

  /** Conversations the period's figures would read (created or first resolved in its whole hours). */
  async rowsIn(orgIds: string[], hours: { from: Date; to: Date }): Promise<number> {
    const row = (await this.knex.raw(
      'select coalesce(sum(started + resolved), 0)::bigint as n from analytics_hourly where organization_id = any(?::uuid[]) and hour >= ? and hour < ?',
      [orgArray(orgIds), hours.from, hours.to],
    )).rows[0] as { n: string };
    return num(row.n);
  }

  /** Sums of the whole hours, grouped by `groupBy` (a date expression of `hour`, or a constant). */
  private async hours(orgIds: string[], hours: { from: Date; to: Date }, groupBy: string, groupBindings: Knex.RawBinding[], histograms: 'all' | 'firstResponse'): Promise<Map<string, Part>> {
    const orgs = orgArray(orgIds);
    const where = 'organization_id = any(?::uuid[]) and hour >= ? and hour < ?';
    const [sums, hists] = await Promise.all([
      this.knex.raw(
        `select ${groupBy} as g, sum(started) as started, sum(escalated) as escalated, sum(resolved) as resolved, sum(ai_resolved) as ai_resolved, sum(done) as done,
           sum(fr_n) as fr_n, sum(fr_sum) as fr_sum, sum(hr_n) as hr_n, sum(hr_sum) as hr_sum, sum(res_n) as res_n, sum(res_sum) as res_sum,
           sum(msg_visitor) as msg_visitor, sum(msg_agent) as msg_agent, sum(msg_ai) as msg_ai, sum(msg_system) as msg_system
         from analytics_hourly where ${where} group by 1`,
        [...groupBindings, orgs, hours.from, hours.to],
      ),
      // Unnesting is most of the cost: only the histograms the answer uses.
      histograms === 'all'
        ? this.knex.raw(
          `select ${groupBy} as g, u.i, sum(u.f) as fr, sum(u.h) as hr, sum(u.r) as res
           from analytics_hourly a cross join lateral unnest(a.fr_hist, a.hr_hist, a.res_hist) with ordinality as u(f, h, r, i)
           where ${where} and (u.f > 0 or u.h > 0 or u.r > 0) group by 1, 2`,
          [...groupBindings, orgs, hours.from, hours.to],
        )
        : this.knex.raw(
          `select ${groupBy} as g, u.i, sum(u.f) as fr, 0 as hr, 0 as res
           from analytics_hourly a cross join lateral unnest(a.fr_hist) with ordinality as u(f, i)
           where ${where} and u.f > 0 group by 1, 2`,
          [...groupBindings, orgs, hours.from, hours.to],
        ),
    ]);
    const parts = new Map<string, Part>();
    const partOf = (g: unknown) => {
      const key = String(g);
      let p = parts.get(key);
      if (!p) parts.set(key, (p = emptyPart()));
      return p;
    };
    for (const r of sums.rows as Record<string, unknown>[]) {
      const p = partOf(r.g);
      Object.assign(p, { started: num(r.started), escalated: num(r.escalated), resolved: num(r.resolved), aiResolved: num(r.ai_resolved), done: num(r.done) });
      Object.assign(p, { msgVisitor: num(r.msg_visitor), msgAgent: num(r.msg_agent), msgAi: num(r.msg_ai), msgSystem: num(r.msg_system) });
      p.fr.n = num(r.fr_n); p.fr.sum = num(r.fr_sum);
      p.hr.n = num(r.hr_n); p.hr.sum = num(r.hr_sum);
      p.res.n = num(r.res_n); p.res.sum = num(r.res_sum);
    }
    for (const r of hists.rows as Record<string, unknown>[]) {
      const p = partOf(r.g);
      const i = num(r.i) - 1;
      p.fr.hist[i] = num(r.fr);
      p.hr.hist[i] = num(r.hr);
      p.res.hist[i] = num(r.res);
    }
    return parts;
  }

  /** The same figures for a partial hour [from, to), read from the conversations and minute counts themselves. */
  private async live(orgIds: string[], from: Date, to: Date): Promise<Part> {
    const orgs = orgArray(orgIds);
    const [started, resolved, done, messages] = await Promise.all([
      this.knex.raw(startedFigures('organization_id = any(?::uuid[]) and created_at >= ? and created_at < ?'), [orgs, from, to]),
      this.knex.raw(resolvedFigures('organization_id = any(?::uuid[]) and first_resolved_at >= ? and first_resolved_at < ?'), [orgs, from, to]),
      this.knex.raw('select count(*)::int as n from conversations where organization_id = any(?::uuid[]) and done_at >= ? and done_at < ?', [orgs, from, to]),
      this.knex.raw('select sender_type, sum(count)::int as n from message_rollups where organization_id = any(?::uuid[]) and bucket >= ? and bucket < ? group by 1', [orgs, from, to]),
    ]);
    const s = started.rows[0] as Record<string, unknown>;
    const r = resolved.rows[0] as Record<string, unknown>;
    const msg = (kind: string) => num((messages.rows as { sender_type: string; n: number }[]).find((m) => m.sender_type === kind)?.n);
    const dist = (n: unknown, sum: unknown, hist: unknown): Dist => ({ n: num(n), sum: num(sum), hist: ((hist as number[] | null) ?? new Array<number>(BUCKETS).fill(0)).map(num) });
    return {
      started: num(s.started), escalated: num(s.escalated), resolved: num(r.resolved), aiResolved: num(r.ai_resolved), done: num((done.rows[0] as { n: number }).n),
      fr: dist(s.fr_n, s.fr_sum, s.fr_hist), hr: dist(s.hr_n, s.hr_sum, s.hr_hist), res: dist(r.res_n, r.res_sum, r.res_hist),
      msgVisitor: msg('visitor'), msgAgent: msg('agent'), msgAi: msg('ai'), msgSystem: msg('system'),
    };
  }

  /** The partial first and last hours of the period, each with the instant it starts (for its local day). */
  private edges(range: AnalyticsRange, hours: { from: Date; to: Date }): { at: Date; from: Date; to: Date }[] {
    const edges = [];
    if (range.from < hours.from) edges.push({ at: range.from, from: range.from, to: hours.from });
    if (hours.to < range.to) edges.push({ at: hours.to, from: hours.to, to: range.to });
    return edges;
  }

  async summary(orgIds: string[], range: AnalyticsRange, hours: { from: Date; to: Date }): Promise<SummaryFigures> {
    const noFilter = { channel: null, agentId: null };
    const [parts, edges, open, tickets] = await Promise.all([
      this.hours(orgIds, hours, '1', [], 'all'),
      Promise.all(this.edges(range, hours).map((e) => this.live(orgIds, e.from, e.to))),
      this.exact.openCount(orgIds, range.to, noFilter),
      this.exact.ticketCounts(orgArray(orgIds), range, noFilter),
    ]);
    const total = emptyPart();
    for (const p of [...parts.values(), ...edges]) addPart(total, p);
    const messages = { visitor: total.msgVisitor, agent: total.msgAgent, ai: total.msgAi, system: total.msgSystem };
    return {
      conversations: { started: total.started, resolved: total.resolved, open, escalated: total.escalated, aiResolved: total.aiResolved },
      messages: { ...messages, total: messages.visitor + messages.agent + messages.ai + messages.system },
      firstResponse: durations(total.fr),
      firstHumanResponse: durations(total.hr),
      resolution: durations(total.res),
      tickets,
    };
  }

  /** Local days from whole hours: only for zones whose offset is whole hours (every hour lies in one local day). */
  async trends(orgIds: string[], range: AnalyticsRange, hours: { from: Date; to: Date }): Promise<DayFigures[]> {
    const tz = range.timezone;
    const localDate = async (at: Date) => String(((await this.knex.raw(`select to_char(?::timestamptz at time zone ?, 'YYYY-MM-DD') as d`, [at, tz])).rows[0] as { d: string }).d);
    const noFilter = { channel: null, agentId: null };
    const [days, parts, edgeParts, edgeDays, open, tickets] = await Promise.all([
      this.knex.raw(
        `select to_char(d, 'YYYY-MM-DD') as d from generate_series((?::timestamptz at time zone ?)::date, ((?::timestamptz - interval '1 microsecond') at time zone ?)::date, interval '1 day') d`,
        [range.from, tz, range.to, tz],
      ),
      this.hours(orgIds, hours, `to_char(hour at time zone ?, 'YYYY-MM-DD')`, [tz], 'firstResponse'),
      Promise.all(this.edges(range, hours).map((e) => this.live(orgIds, e.from, e.to))),
      Promise.all(this.edges(range, hours).map((e) => localDate(e.at))),
      this.exact.openCount(orgIds, range.from, noFilter),
      this.exact.ticketDays(orgArray(orgIds), range, noFilter),
    ]);
    edgeParts.forEach((p, i) => {
      const day = edgeDays[i]!;
      const into = parts.get(day) ?? emptyPart();
      addPart(into, p);
      parts.set(day, into);
    });
    let openNow = open;
    return (days.rows as { d: string }[]).map(({ d }) => {
      const p = parts.get(d) ?? emptyPart();
      openNow += p.started - p.done;
      const t = tickets.get(d);
      return {
        date: d, started: p.started, resolved: p.resolved, openAtEnd: openNow,
        messagesVisitor: p.msgVisitor, messagesAgent: p.msgAgent, messagesAi: p.msgAi,
        ticketsCreated: t?.created ?? 0, ticketsResolved: t?.resolved ?? 0,
        medianFirstResponse: fromHistogram(p.fr.hist, p.fr.n, 0.5),
      };
    });
  }
}
