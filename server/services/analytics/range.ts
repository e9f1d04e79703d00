// The period an analytics answer covers: `from`/`to` (ISO date or date-time) read in a time zone, checked and bounded.
import { ValidationFailed } from '../../errors.js';
import { isTimeZone } from '../../timezone.js';

export interface RangeQuery {
  from?: string;
  to?: string;
  timezone?: string;
}

/** A half-open period [from, to) and the IANA zone its days are counted in. */
export interface AnalyticsRange {
  from: Date;
  to: Date;
  timezone: string;
}

export const MAX_RANGE_DAYS = 366;
export const DEFAULT_RANGE_DAYS = 30;
const DAY_MS = 86_400_000;
/** The earliest year a bound may name (zone offsets and calendar days are computed through Date.UTC). */
const MIN_YEAR = 1000;
const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
// An ISO 8601 date-time with a zone (a zoneless one would be read in the server's zone, which means nothing here).
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/i;

/** Formatters by zone: building one costs about a millisecond, more than the rest of reading a period. */
const formats = new Map<string, Intl.DateTimeFormat>();

/** How far `zone` is ahead of UTC at the instant `at` (ms). */
export function offsetMs(zone: string, at: number): number {
  let format = formats.get(zone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
    });
    // Only valid zones get here (checked first), a few hundred names at most.
    formats.set(zone, format);
  }
  const parts = format.formatToParts(at);
  const get = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  const local = Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'), get('second'));
  return local - Math.floor(at / 1000) * 1000;
}

/**
 * The instant a local calendar day starts in `zone`: the earliest local midnight under the offsets the zone has around
 * that day. A day whose midnight does not exist (clocks go forward at 00:00, as in Chile) starts at the change, as
 * PostgreSQL reads that midnight (with the offset before it), not an hour earlier, which is still the day before.
 */
export function startOfLocalDay(year: number, month: number, day: number, zone: string): Date {
  const guess = Date.UTC(year, month - 1, day);
  // A zone changes its offset at most once within a day or so, so these hold the offsets before and after midnight.
  const candidates = [guess - DAY_MS, guess, guess + DAY_MS].map((at) => guess - offsetMs(zone, at));
  const midnights = candidates.filter((at) => offsetMs(zone, at) === guess - at);
  return new Date(midnights.length > 0 ? Math.min(...midnights) : Math.max(...candidates));
}

function parseBound(value: string, field: 'from' | 'to', zone: string): Date {
  const date = DATE_ONLY.exec(value);
  if (date) {
    const [y, m, d] = [Number(date[1]), Number(date[2]), Number(date[3])];
    // Date.UTC reads the years 0..99 as 1900..1999: a period of year 0050 would silently be one of 1950.
    if (y < MIN_YEAR) throw invalid(field, `must be in the year ${MIN_YEAR} or later`);
    const check = new Date(Date.UTC(y, m - 1, d));
    if (check.getUTCMonth() !== m - 1 || check.getUTCDate() !== d) throw invalid(field, 'is not a calendar date');
    // A date-only `to` includes that whole day.
    return field === 'from' ? startOfLocalDay(y, m, d, zone) : startOfLocalDay(y, m, d + 1, zone);
  }
  const at = DATE_TIME.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(at)) throw invalid(field, 'must be an ISO date (YYYY-MM-DD) or date-time with a zone');
  if (new Date(at).getUTCFullYear() < MIN_YEAR) throw invalid(field, `must be in the year ${MIN_YEAR} or later`);
  return new Date(at);
}

function invalid(field: string, message: string): ValidationFailed {
  return new ValidationFailed(`${field} ${message}`, [{ field, message }]);
}

/**
 * Reads the query's period. Without bounds: the last 30 days up to the next whole minute (so repeated requests share
 * a cache entry). The zone is the query's, else the organization's setting when it is a valid zone, else UTC.
 */
export function resolveRange(query: RangeQuery, organizationZone: string | null | undefined, now = new Date()): AnalyticsRange {
  if (query.timezone !== undefined && !isTimeZone(query.timezone)) throw invalid('timezone', 'is not an IANA time zone');
  const timezone = query.timezone ?? (organizationZone && isTimeZone(organizationZone) ? organizationZone : 'UTC');
  const to = query.to !== undefined ? parseBound(query.to, 'to', timezone) : new Date(Math.ceil(now.getTime() / 60_000) * 60_000);
  const from = query.from !== undefined ? parseBound(query.from, 'from', timezone) : new Date(to.getTime() - DEFAULT_RANGE_DAYS * DAY_MS);
  if (from.getTime() > to.getTime()) throw invalid('from', 'must not be after to');
  if (to.getTime() - from.getTime() > MAX_RANGE_DAYS * DAY_MS) throw invalid('to', `must be at most ${MAX_RANGE_DAYS} days after from`);
  return { from, to, timezone };
}

/** Whether every local day of the period starts on a UTC hour (the zone's offset is whole hours at both ends). */
export function wholeHourZone(range: AnalyticsRange): boolean {
  return [range.from.getTime(), range.to.getTime() - 1].every((at) => offsetMs(range.timezone, at) % 3_600_000 === 0);
}
