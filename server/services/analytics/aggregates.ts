// Figures of long periods from the aggregates: the whole UTC days of the period from `analytics_daily`, the whole
// hours around them from `analytics_hourly`, its partial first and last hours from the conversations and minute
// message counts themselves, merged. Counts, sums, averages and open counts are exact; medians and p90s come from the
// log-scale histograms (see `fromHistogram` for the error).
import type { ReadSession } from '../../../db/statements.js';
import { resolvedFigures, startedFigures } from './hourly.js';
import type { AnalyticsQueries, DayFigures, Durations, Filters, SummaryFigures } from './queries.js';
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
/**
 * A histogram sent as text (`array_to_string(hist, ',', '0')`): the driver's array parser reads it a character at a
 * time, which for the agents' table or a year of days cost more than the statement itself.
 */
export function histogramText(value: unknown): number[] {
  if (typeof value !== 'string' || value === '') return [];
  // Digit by digit: a third of the time of split(',').map(Number), which for the agents' table (800 histograms) counts.
  const out: number[] = [];
  let n = 0;
  let negative = false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 44) {
      out.push(negative ? -n : n);
      n = 0;
      negative = false;
    } else if (c === 45) negative = true;
    else n = n * 10 + (c - 48);
  }
  out.push(negative ? -n : n);
  return out;
}

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
  constructor(private readonly db: ReadSession, private readonly exact: AnalyticsQueries) {}

  /**
   * The rows a period's whole hours read, each with a weight (+1, or -1 for an hour moved out of its day's group) and
   * its group: daily rows for the whole UTC days, hourly rows for the hours around them. `columns` come from the rows.
   */
  private parts(orgIds: string[], c: Cover, grouping: Grouping, columns: string): { sql: string; bindings: unknown[] } {
    const orgs = orgArray(orgIds);
    const total = grouping.kind === 'total';
    const tz = total ? [] : [grouping.timezone];
    const dayGroup = total ? `'1'` : `to_char((day + interval '12 hours') at time zone ?::text, 'YYYY-MM-DD')`;
    const hourGroup = total ? `'1'` : `to_char(hour at time zone ?::text, 'YYYY-MM-DD')`;
    let sql = `select ${dayGroup} as g, 1 as w, ${columns} from analytics_daily where organization_id = any(?::uuid[]) and day >= ?::timestamptz and day < ?::timestamptz
      union all
      select ${hourGroup} as g, 1 as w, ${columns} from analytics_hourly where organization_id = any(?::uuid[])
        and ((hour >= ?::timestamptz and hour < ?::timestamptz) or (hour >= ?::timestamptz and hour < ?::timestamptz))`;
    const bindings: unknown[] = [...tz, orgs, c.dayFrom, c.dayTo, ...tz, orgs, c.from, c.dayFrom, c.dayTo, c.to];
    if (!total && !UTC_ZONES.has(grouping.timezone)) {
      // Dates, not text, to find the hours to move: formatting every hour of a year costs tens of milliseconds.
      const hourDayGroup = `to_char((date_trunc('day', hour, 'UTC') + interval '12 hours') at time zone ?::text, 'YYYY-MM-DD')`;
      sql += `
      union all
      select case when m.w = 1 then ${hourGroup} else ${hourDayGroup} end as g, m.w, ${columns}
      from analytics_hourly cross join (values (1), (-1)) m(w)
      where organization_id = any(?::uuid[]) and hour >= ?::timestamptz and hour < ?::timestamptz
        and (hour at time zone ?::text)::date <> ((date_trunc('day', hour, 'UTC') + interval '12 hours') at time zone ?::text)::date`;
      bindings.push(...tz, ...tz, orgs, c.dayFrom, c.dayTo, ...tz, ...tz);
    }
    return { sql, bindings };
  }

  /** One row, `n`: the conversations the period's whole hours hold (created or first resolved in them). */
  conversationsSql(orgIds: string[], c: Cover): { sql: string; bindings: unknown[] } {
    const p = this.parts(orgIds, c, { kind: 'total' }, 'started, resolved');
    return { sql: `select coalesce(sum(w * (started + resolved)), 0)::bigint as n from (${p.sql}) p`, bindings: p.bindings };
  }

  /**
   * Sums of the period's whole hours, by group, and the conversations they hold (created or first resolved in them),
   * which decides whether the period is long enough to be answered from them. One group (the summary) is summed in
   * SQL; local days (trends) are summed here from the rows themselves: a year is some 400 rows, mostly one per day,
   * and grouping them in SQL (a hash aggregate of a hundred sums per day) cost ten times parsing them.
   */
  private async hours(orgIds: string[], c: Cover, grouping: Grouping, histograms: 'all' | 'firstResponse', edges: { sql: string; bindings: unknown[] }): Promise<{ parts: Map<string, Part>; rows: number; edges: Edges }> {
    const kinds = histograms === 'all' ? (['fr', 'hr', 'res'] as const) : (['fr'] as const);
    const rows = this.parts(orgIds, c, grouping, [...SUM_COLUMNS, ...kinds.map((k) => `${k}_hist`)].join(', '));
    // Histograms sent as text (see histogramText) and the sums as float8 (bigint would arrive as text too, column by
    // column). In SQL, one sum per bucket: subscripts cost a fifth of unnesting every histogram into rows.
    const bucketSums = kinds.map((k) => `array_to_string(array[${Array.from({ length: BUCKETS }, (_, i) => `sum(w * ${k}_hist[${i + 1}])`).join(', ')}], ',', '0') as ${k}_hist`);
    const inSql = grouping.kind === 'total';
    const whole = inSql
      ? `select g, 1 as w, ${[...SUM_COLUMNS.map((col) => `sum(w * ${col})::float8 as ${col}`), ...bucketSums].join(', ')}, null::json as edges from (${rows.sql}) p group by 1`
      : `select g, w, ${[...SUM_COLUMNS.map((col) => `${col}::float8 as ${col}`), ...kinds.map((k) => `array_to_string(${k}_hist, ',', '0') as ${k}_hist`)].join(', ')}, null::json as edges from (${rows.sql}) p`;
    // The edges ride along as one more row: one round trip for the answer, which on a busy machine costs as much as a
    // statement (when the whole hours turn out to hold too few conversations, the edges were read for nothing, cheaply).
    const result = await this.db.raw(
      `${whole} union all select null, 0, ${[...SUM_COLUMNS.map(() => 'null::float8'), ...kinds.map(() => 'null::text')].join(', ')}, (${edges.sql})`,
      [...rows.bindings, ...edges.bindings],
    );
    const parts = new Map<string, Part>();
    let conversations = 0;
    let edgeRow: Record<string, unknown> | null = null;
    for (const r of result.rows) {
      if (r.edges !== null) {
        edgeRow = r.edges as Record<string, unknown>;
        continue;
      }
      const g = String(r.g);
      let p = parts.get(g);
      if (!p) parts.set(g, (p = emptyPart()));
      const w = num(r.w);
      p.started += w * num(r.started); p.escalated += w * num(r.escalated); p.resolved += w * num(r.resolved);
      p.aiResolved += w * num(r.ai_resolved); p.done += w * num(r.done);
      p.msgVisitor += w * num(r.msg_visitor); p.msgAgent += w * num(r.msg_agent); p.msgAi += w * num(r.msg_ai); p.msgSystem += w * num(r.msg_system);
      p.fr.n += w * num(r.fr_n); p.fr.sum += w * num(r.fr_sum);
      p.hr.n += w * num(r.hr_n); p.hr.sum += w * num(r.hr_sum);
      p.res.n += w * num(r.res_n); p.res.sum += w * num(r.res_sum);
      for (const k of kinds) {
        // BUCKETS counts, or none for hours that only ever counted messages.
        const into = p[k].hist;
        histogramText(r[`${k}_hist`]).forEach((v, i) => (into[i]! += w * v));
      }
      // Hours moved between groups count -1 in one and +1 in the other: the groups' sum is the period's.
      conversations += w * (num(r.started) + num(r.resolved));
    }
    return { parts, rows: conversations, edges: readEdges(edgeRow!) };
  }

  /**
   * One json value: the figures of the partial first and last hours of the period (`edges`, two rows, `i` 1 and 2; an
   * empty window gives zeros), read from the conversations and minute counts themselves, the conversations open at
   * `openAt` (`open`) and `tickets` (one row of columns the caller names).
   */
  private edgesSql(orgIds: string[], windows: [Window, Window], openAt: Date, tickets: { sql: string; bindings: unknown[] }): { sql: string; bindings: unknown[] } {
    const orgs = orgArray(orgIds);
    const kinds = ['visitor', 'agent', 'ai', 'system'];
    const open = this.openAtSql(orgs, openAt);
    return {
      sql: `select json_build_object('edges', (
         select json_agg(e order by e.i) from (
           select w.i, s.*, r.*, d.done, ${kinds.map((k) => `m.msg_${k}`).join(', ')}
           from (values (1, ?::timestamptz, ?::timestamptz), (2, ?::timestamptz, ?::timestamptz)) w(i, f, t)
             cross join lateral (${startedFigures('organization_id = any(?::uuid[]) and created_at >= w.f and created_at < w.t', true)}) s
             cross join lateral (${resolvedFigures('organization_id = any(?::uuid[]) and first_resolved_at >= w.f and first_resolved_at < w.t', true)}) r
             cross join lateral (select count(*)::int as done from conversations where organization_id = any(?::uuid[]) and done_at >= w.f and done_at < w.t) d
             cross join lateral (select ${kinds.map((k) => `coalesce(sum(count) filter (where sender_type = '${k}'), 0)::int as msg_${k}`).join(', ')}
               from message_rollups where organization_id = any(?::uuid[]) and bucket >= w.f and bucket < w.t) m
         ) e), 'open', (${open.sql}), 'tickets', (select row_to_json(t) from (${tickets.sql}) t))`,
      bindings: [windows[0].from, windows[0].to, windows[1].from, windows[1].to, orgs, orgs, orgs, orgs, ...open.bindings, ...tickets.bindings],
    };
  }

  /**
   * Conversations open at `at`: all those ever started before it less those done before it, from the daily and hourly
   * rows up to its hour, and the conversations themselves after that.
   */
  private openAtSql(orgs: string, at: Date): { sql: string; bindings: unknown[] } {
    const hour = new Date(Math.floor(at.getTime() / HOUR_MS) * HOUR_MS);
    const day = new Date(Math.floor(at.getTime() / DAY_MS) * DAY_MS);
    return {
      sql: `select ((select coalesce(sum(started - done), 0) from analytics_daily where organization_id = any(?::uuid[]) and day < ?::timestamptz)
        + (select coalesce(sum(started - done), 0) from analytics_hourly where organization_id = any(?::uuid[]) and hour >= ?::timestamptz and hour < ?::timestamptz)
        + (select count(*) from conversations where organization_id = any(?::uuid[]) and created_at >= ?::timestamptz and created_at < ?::timestamptz)
        - (select count(*) from conversations where organization_id = any(?::uuid[]) and done_at >= ?::timestamptz and done_at < ?::timestamptz))::bigint as open`,
      bindings: [orgs, day, orgs, day, hour, orgs, hour, at, orgs, hour, at],
    };
  }

  /** The partial first and last hours of the period, each with the instant it starts (for its local day); empty ones start and end together. */
  private windows(range: AnalyticsRange, hours: { from: Date; to: Date }): [Window, Window] {
    return [{ from: range.from, to: hours.from }, { from: hours.to, to: range.to }];
  }

  /** The period's summary, or null when its whole hours hold at most `exactRows` conversations (cheap to read exactly). */
  async summary(orgIds: string[], range: AnalyticsRange, hours: Cover, exactRows: number): Promise<SummaryFigures | null> {
    const noFilter: Filters = { channel: null, agentId: null };
    const edges = this.edgesSql(orgIds, this.windows(range, hours), range.to, this.exact.ticketCountsSql(orgArray(orgIds), range, noFilter));
    const whole = await this.hours(orgIds, hours, { kind: 'total' }, 'all', edges);
    if (whole.rows <= exactRows) return null;
    const more = whole.edges;
    const total = emptyPart();
    for (const p of [...whole.parts.values(), ...more.edges]) addPart(total, p);
    const messages = { visitor: total.msgVisitor, agent: total.msgAgent, ai: total.msgAi, system: total.msgSystem };
    return {
      conversations: { started: total.started, resolved: total.resolved, open: more.open, escalated: total.escalated, aiResolved: total.aiResolved },
      messages: { ...messages, total: messages.visitor + messages.agent + messages.ai + messages.system },
      firstResponse: durations(total.fr),
      firstHumanResponse: durations(total.hr),
      resolution: durations(total.res),
      tickets: { created: num(more.tickets.tickets_created), resolved: num(more.tickets.tickets_resolved) },
    };
  }

  /**
   * Local days from whole hours: only for zones whose offset is whole hours (every hour lies in one local day).
   * Null when the whole hours hold at most `exactRows` conversations.
   */
  async trends(orgIds: string[], range: AnalyticsRange, hours: Cover, exactRows: number): Promise<DayFigures[] | null> {
    const tz = range.timezone;
    const windows = this.windows(range, hours);
    const edges = this.edgesSql(orgIds, windows, range.from, this.exact.ticketDaysSql(orgArray(orgIds), range));
    const whole = await this.hours(orgIds, hours, { kind: 'localDay', timezone: tz }, 'firstResponse', edges);
    if (whole.rows <= exactRows) return null;
    const more = whole.edges;
    // Local dates in the process, not in SQL: three round trips fewer.
    const localDate = (at: Date) => dateFormat(tz).format(at);
    const days: string[] = [];
    for (let d = new Date(`${localDate(range.from)}T00:00:00Z`), last = localDate(new Date(range.to.getTime() - 1)); ; d = new Date(d.getTime() + DAY_MS)) {
      const day = d.toISOString().slice(0, 10);
      if (day > last) break;
      days.push(day);
    }
    const parts = whole.parts;
    // An empty window's figures are zeros: adding them changes nothing.
    windows.forEach((w, i) => {
      const day = localDate(w.from);
      const into = parts.get(day) ?? emptyPart();
      addPart(into, more.edges[i]!);
      parts.set(day, into);
    });
    const tickets = new Map((more.tickets.ticket_days as { date: string; created: number; resolved: number }[]).map((t) => [t.date, t]));
    let openNow = more.open;
    return days.map((d) => {
      const p = parts.get(d) ?? emptyPart();
      openNow += p.started - p.done;
      const t = tickets.get(d);
      return {
        date: d, started: p.started, resolved: p.resolved, openAtEnd: openNow,
        messagesVisitor: p.msgVisitor, messagesAgent: p.msgAgent, messagesAi: p.msgAi,
        ticketsCreated: num(t?.created), ticketsResolved: num(t?.resolved),
        medianFirstResponse: fromHistogram(p.fr.hist, p.fr.n, 0.5),
      };
    });
  }
}

/** Formatters by zone: building one costs about a millisecond, more than formatting a year of dates. */
const dateFormats = new Map<string, Intl.DateTimeFormat>();
function dateFormat(timeZone: string): Intl.DateTimeFormat {
  let format = dateFormats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
    // Zones are a few hundred names; validated before they get here.
    dateFormats.set(timeZone, format);
  }
  return format;
}

/** The partial first and last hours, the open count and the ticket columns (see edgesSql). */
interface Edges { edges: [Part, Part]; open: number; tickets: Record<string, unknown> }

function readEdges(value: Record<string, unknown>): Edges {
  const dist = (n: unknown, sum: unknown, buckets: unknown): Dist => {
    const hist = new Array<number>(BUCKETS).fill(0);
    for (const b of (buckets as number[] | null) ?? []) hist[num(b)]! += 1;
    return { n: num(n), sum: num(sum), hist };
  };
  const part = (row: Record<string, unknown>): Part => ({
    started: num(row.started), escalated: num(row.escalated), resolved: num(row.resolved), aiResolved: num(row.ai_resolved), done: num(row.done),
    fr: dist(row.fr_n, row.fr_sum, row.fr_hist), hr: dist(row.hr_n, row.hr_sum, row.hr_hist), res: dist(row.res_n, row.res_sum, row.res_hist),
    msgVisitor: num(row.msg_visitor), msgAgent: num(row.msg_agent), msgAi: num(row.msg_ai), msgSystem: num(row.msg_system),
  });
  const [first, last] = value.edges as [Record<string, unknown>, Record<string, unknown>];
  return { edges: [part(first), part(last)], open: num(value.open), tickets: value.tickets as Record<string, unknown> };
}

/** A partial hour at an end of the period: [from, to), empty when they are equal. */
interface Window { from: Date; to: Date }
