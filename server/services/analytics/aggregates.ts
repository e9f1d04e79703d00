// Figures of long periods from the aggregates: the whole UTC days of the period from `analytics_daily`, the whole
// hours around them from `analytics_hourly`, its partial first and last hours from the conversations and minute
// message counts themselves, merged. Counts, sums, averages and open counts are exact; medians and p90s come from the
// log-scale histograms (see `fromHistogram` for the error).
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

const DAY_MS = 86_400_000;

/** A period's whole hours [from, to) and the whole UTC days [dayFrom, dayTo) inside them (empty when there are none). */
export interface Cover {
  from: Date;
  to: Date;
  dayFrom: Date;
  dayTo: Date;
}

export function cover(hours: { from: Date; to: Date }): Cover {
  const dayFrom = new Date(Math.ceil(hours.from.getTime() / DAY_MS) * DAY_MS);
  const dayTo = new Date(Math.floor(hours.to.getTime() / DAY_MS) * DAY_MS);
  return dayFrom < dayTo ? { ...hours, dayFrom, dayTo } : { ...hours, dayFrom: hours.from, dayTo: hours.from };
}

/**
 * How rows are grouped: everything into one group, or into the local days of a zone. A UTC day's row counts for the
 * local day holding its noon; its hours that lie in another local day are moved there (taken off the day's group,
 * added to their own), so a zone whose offset is whole hours gets exact local days from daily rows plus a few hours.
 */
type Grouping = { kind: 'total' } | { kind: 'localDay'; timezone: string };

/** Zones whose local days are UTC days all year: no hour ever moves. */
const UTC_ZONES = new Set(['UTC', 'Etc/UTC', 'Etc/UCT', 'UCT', 'Etc/GMT', 'GMT', 'Etc/Universal', 'Universal', 'Etc/Zulu', 'Zulu', 'Etc/GMT0', 'Etc/GMT+0', 'Etc/GMT-0', 'GMT0', 'Greenwich', 'Etc/Greenwich']);

const SUM_COLUMNS = ['started', 'escalated', 'resolved', 'ai_resolved', 'done', 'fr_n', 'fr_sum', 'hr_n', 'hr_sum', 'res_n', 'res_sum', 'msg_visitor', 'msg_agent', 'msg_ai', 'msg_system'];

export class AggregateQueries {
  constructor(private readonly knex: Knex, private readonly exact: AnalyticsQueries) {}

  /**
   * The rows a period's whole hours read, each with a weight (+1, or -1 for an hour moved out of its day's group) and
   * its group: daily rows for the whole UTC days, hourly rows for the hours around them. `columns` come from the rows.
   */
  private parts(orgIds: string[], c: Cover, grouping: Grouping, columns: string): { sql: string; bindings: Knex.RawBinding[] } {
    const orgs = orgArray(orgIds);
    const total = grouping.kind === 'total';
    const tz = total ? [] : [grouping.timezone];
    const dayGroup = total ? `'1'` : `to_char((day + interval '12 hours') at time zone ?, 'YYYY-MM-DD')`;
    const hourGroup = total ? `'1'` : `to_char(hour at time zone ?, 'YYYY-MM-DD')`;
    const hourDayGroup = total ? `'1'` : `to_char((date_trunc('day', hour, 'UTC') + interval '12 hours') at time zone ?, 'YYYY-MM-DD')`;
    let sql = `select ${dayGroup} as g, 1 as w, ${columns} from analytics_daily where organization_id = any(?::uuid[]) and day >= ? and day < ?
      union all
      select ${hourGroup} as g, 1 as w, ${columns} from analytics_hourly where organization_id = any(?::uuid[]) and ((hour >= ? and hour < ?) or (hour >= ? and hour < ?))`;
    const bindings: Knex.RawBinding[] = [...tz, orgs, c.dayFrom, c.dayTo, ...tz, orgs, c.from, c.dayFrom, c.dayTo, c.to];
    if (!total && !UTC_ZONES.has(grouping.timezone)) {
      // Dates, not text, to find the hours to move: formatting every hour of a year costs tens of milliseconds.
      sql += `
      union all
      select case when m.w = 1 then ${hourGroup} else ${hourDayGroup} end as g, m.w, ${columns}
      from analytics_hourly cross join (values (1), (-1)) m(w)
      where organization_id = any(?::uuid[]) and hour >= ? and hour < ?
        and (hour at time zone ?)::date <> ((date_trunc('day', hour, 'UTC') + interval '12 hours') at time zone ?)::date`;
      bindings.push(...tz, ...tz, orgs, c.dayFrom, c.dayTo, ...tz, ...tz);
    }
    return { sql, bindings };
  }

  /** Conversations the period's figures would read (created or first resolved in its whole hours). */
  async rowsIn(orgIds: string[], c: Cover): Promise<number> {
    const p = this.parts(orgIds, c, { kind: 'total' }, 'started, resolved');
    const row = (await this.knex.raw(`select coalesce(sum(w * (started + resolved)), 0)::bigint as n from (${p.sql}) p`, p.bindings)).rows[0] as { n: string };
    return num(row.n);
  }

  /**
   * Conversations open at `at`: all those ever started before it less those done before it, from the daily and hourly
   * rows up to its hour, and the conversations themselves after that.
   */
  async openAt(orgIds: string[], at: Date): Promise<number> {
    const orgs = orgArray(orgIds);
    const hour = new Date(Math.floor(at.getTime() / HOUR_MS) * HOUR_MS);
    const day = new Date(Math.floor(at.getTime() / DAY_MS) * DAY_MS);
    const row = (await this.knex.raw(
      `select (select coalesce(sum(started - done), 0) from analytics_daily where organization_id = any(?::uuid[]) and day < ?)
        + (select coalesce(sum(started - done), 0) from analytics_hourly where organization_id = any(?::uuid[]) and hour >= ? and hour < ?)
        + (select count(*) from conversations where organization_id = any(?::uuid[]) and created_at >= ? and created_at < ?)
        - (select count(*) from conversations where organization_id = any(?::uuid[]) and done_at >= ? and done_at < ?) as n`,
      [orgs, day, orgs, day, hour, orgs, hour, at, orgs, hour, at],
    )).rows[0] as { n: string };
    return num(row.n);
  }

  /** Sums of the period's whole hours, by group. */
  private async hours(orgIds: string[], c: Cover, grouping: Grouping, histograms: 'all' | 'firstResponse'): Promise<Map<string, Part>> {
    const kinds = histograms === 'all' ? (['fr', 'hr', 'res'] as const) : (['fr'] as const);
    const rows = this.parts(orgIds, c, grouping, [...SUM_COLUMNS, ...kinds.map((k) => `${k}_hist`)].join(', '));
    // One sum per bucket: subscripts cost a fifth of unnesting every histogram into rows; only the histograms the
    // answer uses.
    const bucketSums = kinds.flatMap((k) => Array.from({ length: BUCKETS }, (_, i) => `sum(w * ${k}_hist[${i + 1}]) as ${k}_${i}`));
    const result = await this.knex.raw(`select g, ${[...SUM_COLUMNS.map((col) => `sum(w * ${col}) as ${col}`), ...bucketSums].join(', ')} from (${rows.sql}) p group by 1`, rows.bindings);
    const parts = new Map<string, Part>();
    const partOf = (g: unknown) => {
      const key = String(g);
      let p = parts.get(key);
      if (!p) parts.set(key, (p = emptyPart()));
      return p;
    };
    for (const r of result.rows as Record<string, unknown>[]) {
      const p = partOf(r.g);
      Object.assign(p, { started: num(r.started), escalated: num(r.escalated), resolved: num(r.resolved), aiResolved: num(r.ai_resolved), done: num(r.done) });
      Object.assign(p, { msgVisitor: num(r.msg_visitor), msgAgent: num(r.msg_agent), msgAi: num(r.msg_ai), msgSystem: num(r.msg_system) });
      p.fr.n = num(r.fr_n); p.fr.sum = num(r.fr_sum);
      p.hr.n = num(r.hr_n); p.hr.sum = num(r.hr_sum);
      p.res.n = num(r.res_n); p.res.sum = num(r.res_sum);
      for (const k of kinds) for (let i = 0; i < BUCKETS; i++) p[k].hist[i] = num(r[`${k}_${i}`]);
    }
    return parts;
  }

  /** The same figures for a partial hour [from, to), read from the conversations and minute counts themselves. */
  private async live(orgIds: string[], from: Date, to: Date): Promise<Part> {
    const orgs = orgArray(orgIds);
    // One statement: on a busy server every round trip costs about as much as one of these small reads.
    const kinds = ['visitor', 'agent', 'ai', 'system'];
    const row = (await this.knex.raw(
      `select s.*, r.*, d.done, ${kinds.map((k) => `m.msg_${k}`).join(', ')}
       from (${startedFigures('organization_id = any(?::uuid[]) and created_at >= ? and created_at < ?', true)}) s,
         (${resolvedFigures('organization_id = any(?::uuid[]) and first_resolved_at >= ? and first_resolved_at < ?', true)}) r,
         (select count(*)::int as done from conversations where organization_id = any(?::uuid[]) and done_at >= ? and done_at < ?) d,
         (select ${kinds.map((k) => `coalesce(sum(count) filter (where sender_type = '${k}'), 0)::int as msg_${k}`).join(', ')}
          from message_rollups where organization_id = any(?::uuid[]) and bucket >= ? and bucket < ?) m`,
      [orgs, from, to, orgs, from, to, orgs, from, to, orgs, from, to],
    )).rows[0] as Record<string, unknown>;
    const msg = (kind: string) => num(row[`msg_${kind}`]);
    const dist = (n: unknown, sum: unknown, buckets: unknown): Dist => {
      const hist = new Array<number>(BUCKETS).fill(0);
      for (const b of (buckets as number[] | null) ?? []) hist[num(b)]! += 1;
      return { n: num(n), sum: num(sum), hist };
    };
    return {
      started: num(row.started), escalated: num(row.escalated), resolved: num(row.resolved), aiResolved: num(row.ai_resolved), done: num(row.done),
      fr: dist(row.fr_n, row.fr_sum, row.fr_hist), hr: dist(row.hr_n, row.hr_sum, row.hr_hist), res: dist(row.res_n, row.res_sum, row.res_hist),
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

  async summary(orgIds: string[], range: AnalyticsRange, hours: Cover): Promise<SummaryFigures> {
    const noFilter = { channel: null, agentId: null };
    const [parts, edges, open, tickets] = await Promise.all([
      this.hours(orgIds, hours, { kind: 'total' }, 'all'),
      Promise.all(this.edges(range, hours).map((e) => this.live(orgIds, e.from, e.to))),
      this.openAt(orgIds, range.to),
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
  async trends(orgIds: string[], range: AnalyticsRange, hours: Cover): Promise<DayFigures[]> {
    const tz = range.timezone;
    // Local dates in the process, not in SQL: three round trips fewer.
    const format = new Intl.DateTimeFormat('en-CA', { timeZone: tz, year: 'numeric', month: '2-digit', day: '2-digit' });
    const localDate = (at: Date) => format.format(at);
    const days: string[] = [];
    for (let d = new Date(`${localDate(range.from)}T00:00:00Z`), last = localDate(new Date(range.to.getTime() - 1)); ; d = new Date(d.getTime() + DAY_MS)) {
      const day = d.toISOString().slice(0, 10);
      if (day > last) break;
      days.push(day);
    }
    const noFilter = { channel: null, agentId: null };
    const [parts, edgeParts, open, tickets] = await Promise.all([
      this.hours(orgIds, hours, { kind: 'localDay', timezone: tz }, 'firstResponse'),
      Promise.all(this.edges(range, hours).map((e) => this.live(orgIds, e.from, e.to))),
      this.openAt(orgIds, range.from),
      this.exact.ticketDays(orgArray(orgIds), range, noFilter),
    ]);
    const edgeDays = this.edges(range, hours).map((e) => localDate(e.at));
    edgeParts.forEach((p, i) => {
      const day = edgeDays[i]!;
      const into = parts.get(day) ?? emptyPart();
      addPart(into, p);
      parts.set(day, into);
    });
    let openNow = open;
    return days.map((d) => {
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
