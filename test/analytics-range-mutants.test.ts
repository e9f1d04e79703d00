// The period of an analytics answer, read without a server: the default window, the zone chosen, date-only bounds as
// whole local days (days that start in a DST change too), date-times with a zone only, and the bounds' checks.
import { expect } from 'chai';
import { ValidationFailed } from '../server/errors.js';
import { DEFAULT_RANGE_DAYS, MAX_RANGE_DAYS, offsetMs, resolveRange, startOfLocalDay, wholeHourZone, type RangeQuery } from '../server/services/analytics/range.js';

const DAY = 86_400_000;
const NOW = new Date('2026-06-10T12:00:30.500Z');
const iso = (d: Date) => d.toISOString();

/** The refusal's field, or null when the query is accepted. */
function refusal(query: RangeQuery, zone: string | null = null): string | null {
  try {
    resolveRange(query, zone, NOW);
    return null;
  } catch (err) {
    expect(err).to.be.instanceOf(ValidationFailed);
    return (err as ValidationFailed).details[0]!.field ?? null;
  }
}

describe('Analytics: the period asked for', () => {
  it('defaults to the last 30 days up to the next whole minute, in UTC', () => {
    const r = resolveRange({}, null, NOW);
    expect(DEFAULT_RANGE_DAYS).to.equal(30);
    expect(iso(r.to)).to.equal('2026-06-10T12:01:00.000Z');
    expect(r.to.getTime() - r.from.getTime()).to.equal(30 * DAY);
    expect(r.timezone).to.equal('UTC');
    // On a whole minute, that minute.
    expect(iso(resolveRange({}, null, new Date('2026-06-10T12:00:00.000Z')).to)).to.equal('2026-06-10T12:00:00.000Z');
    // A `from` alone ends the period now; a `to` alone starts it 30 days before.
    expect(iso(resolveRange({ from: '2026-06-01' }, null, NOW).to)).to.equal('2026-06-10T12:01:00.000Z');
    expect(iso(resolveRange({ to: '2026-06-01T00:00:00Z' }, null, NOW).from)).to.equal('2026-05-02T00:00:00.000Z');
  });

  it("takes the query's zone, else the organization's when it is a zone, else UTC", () => {
    expect(resolveRange({}, 'Europe/Paris', NOW).timezone).to.equal('Europe/Paris');
    expect(resolveRange({ timezone: 'Asia/Tokyo' }, 'Europe/Paris', NOW).timezone).to.equal('Asia/Tokyo');
    expect(resolveRange({}, 'Mars/Olympus', NOW).timezone).to.equal('UTC');
    expect(resolveRange({}, '', NOW).timezone).to.equal('UTC');
    expect(resolveRange({}, undefined, NOW).timezone).to.equal('UTC');
    // A bad zone in the query is refused, not replaced.
    expect(refusal({ timezone: 'Mars/Olympus' }, 'Europe/Paris')).to.equal('timezone');
    expect(refusal({ timezone: '' }, 'Europe/Paris')).to.equal('timezone');
  });

  it('reads date-only bounds as whole local days of the zone: `to` includes its day', () => {
    const utc = resolveRange({ from: '2026-06-01', to: '2026-06-01' }, null, NOW);
    expect([iso(utc.from), iso(utc.to)]).to.deep.equal(['2026-06-01T00:00:00.000Z', '2026-06-02T00:00:00.000Z']);
    const ny = resolveRange({ from: '2026-06-01', to: '2026-06-03', timezone: 'America/New_York' }, null, NOW);
    expect([iso(ny.from), iso(ny.to)]).to.deep.equal(['2026-06-01T04:00:00.000Z', '2026-06-04T04:00:00.000Z']);
    // The organization's zone when the query names none.
    const tokyo = resolveRange({ from: '2026-06-01', to: '2026-06-01' }, 'Asia/Tokyo', NOW);
    expect([iso(tokyo.from), iso(tokyo.to)]).to.deep.equal(['2026-05-31T15:00:00.000Z', '2026-06-01T15:00:00.000Z']);
    // The last day of a month, and of a year, run into the next.
    expect(iso(resolveRange({ from: '2026-05-01', to: '2026-05-31' }, null, NOW).to)).to.equal('2026-06-01T00:00:00.000Z');
    expect(iso(resolveRange({ from: '2025-12-01', to: '2025-12-31' }, null, NOW).to)).to.equal('2026-01-01T00:00:00.000Z');
  });

  it('refuses dates that are not on the calendar, and takes the ones that are', () => {
    for (const bad of ['2026-02-29', '2026-02-30', '2026-04-31', '2026-13-01', '2026-00-10', '2026-06-00', '2026-06-32']) expect(refusal({ to: bad }), bad).to.equal('to');
    expect(refusal({ from: '2026-02-30', to: '2026-03-02' }), 'from').to.equal('from');
    expect(refusal({ from: '2028-02-01', to: '2028-02-29' })).to.equal(null);
    expect(refusal({ from: '2026-01-31', to: '2026-12-31' })).to.equal(null);
  });

  it('takes a date-time only with its zone (Z or an offset), in the whole ISO form and nothing around it', () => {
    const at = (value: string) => iso(resolveRange({ from: value, to: '2026-06-02' }, null, NOW).from);
    expect(at('2026-06-01T10:00:00Z')).to.equal('2026-06-01T10:00:00.000Z');
    expect(at('2026-06-01T10:00Z')).to.equal('2026-06-01T10:00:00.000Z');
    expect(at('2026-06-01T10:00:00.123456789Z')).to.equal('2026-06-01T10:00:00.123Z');
    expect(at('2026-06-01T10:00:00+02:00')).to.equal('2026-06-01T08:00:00.000Z');
    expect(at('2026-06-01T10:00-0530')).to.equal('2026-06-01T15:30:00.000Z');
    expect(at('2026-06-01t10:00:00z')).to.equal('2026-06-01T10:00:00.000Z');
    // A date-time bound is an instant: the zone asked for does not move it.
    expect(iso(resolveRange({ from: '2026-06-01T10:00:00Z', to: '2026-06-02', timezone: 'Asia/Tokyo' }, null, NOW).from)).to.equal('2026-06-01T10:00:00.000Z');
    for (const bad of [
      '2026-06-01T10:00:00', // no zone: it would be read in the server's zone
      '2026-06-01T10:00',
      '2026-06-01 10:00:00Z',
      '2026-06-01T10:00:00.1234567891Z',
      '2026-06-01T10:00:00Zjunk',
      'x2026-06-01T10:00:00Z',
      '+002026-06-01T10:00:00Z', // an expanded year: Date.parse takes it, the API's form does not
      '2026-06-01T10:00:00+2',
      '2026-06-01x',
      'x2026-06-01',
      '2026-6-1',
      '20260601',
      'yesterday',
      '',
    ]) expect(refusal({ from: bad, to: '2026-06-02' }), JSON.stringify(bad)).to.equal('from');
  });

  it('refuses a period that ends before it starts or spans more than 366 days; an empty one and 366 days are fine', () => {
    expect(refusal({ from: '2026-06-03', to: '2026-06-01' })).to.equal('from');
    expect(refusal({ from: '2026-06-01T10:00:00.001Z', to: '2026-06-01T10:00:00Z' })).to.equal('from');
    const empty = resolveRange({ from: '2026-06-01T10:00:00Z', to: '2026-06-01T10:00:00Z' }, null, NOW);
    expect(empty.to.getTime() - empty.from.getTime()).to.equal(0);
    expect(MAX_RANGE_DAYS).to.equal(366);
    expect(refusal({ from: '2025-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' })).to.equal(null);
    expect(refusal({ from: '2025-01-01T00:00:00Z', to: '2026-01-02T00:00:00.001Z' })).to.equal('to');
    expect(refusal({ from: '2025-01-01', to: '2026-01-01' })).to.equal(null);
    expect(refusal({ from: '2025-01-01', to: '2026-01-02' })).to.equal('to');
  });

  it('says what is wrong with a refused period, in the words the API answers', () => {
    const words = (query: RangeQuery) => {
      try {
        resolveRange(query, null, NOW);
        return null;
      } catch (err) {
        return (err as ValidationFailed).message;
      }
    };
    expect(words({ to: '2026-02-30' })).to.equal('to is not a calendar date');
    expect(words({ timezone: 'Mars/Olympus' })).to.equal('timezone is not an IANA time zone');
    expect(words({ from: '2026-06-03', to: '2026-06-01' })).to.equal('from must not be after to');
    expect(words({ from: '2025-01-01', to: '2026-01-02' })).to.equal('to must be at most 366 days after from');
    expect(words({ from: 'yesterday' })).to.equal('from must be an ISO date (YYYY-MM-DD) or date-time with a zone');
    expect(words({ from: '0050-01-01', to: '2026-06-01' })).to.equal('from must be in the year 1000 or later');
    expect(words({ from: '0999-12-31T23:59:59Z', to: '1000-01-01T00:00:00Z' })).to.equal('from must be in the year 1000 or later');
  });

  it('takes the year 1000 itself, as a date and as a date-time', () => {
    expect(refusal({ from: '1000-01-01', to: '1000-01-02' })).to.equal(null);
    expect(refusal({ from: '1000-01-01T00:00:00Z', to: '1000-01-02T00:00:00Z' })).to.equal(null);
  });

  it("knows a zone's offset at an instant, whatever its milliseconds", () => {
    expect(offsetMs('UTC', Date.parse('2026-06-01T10:00:00.999Z'))).to.equal(0);
    expect(offsetMs('Asia/Tokyo', 1_999)).to.equal(9 * 3_600_000);
    expect(offsetMs('Asia/Kolkata', Date.parse('2026-06-01T10:00:00.500Z'))).to.equal(330 * 60_000);
    expect(offsetMs('America/New_York', Date.parse('2026-01-15T12:00:00.999Z'))).to.equal(-5 * 3_600_000);
    expect(offsetMs('America/New_York', Date.parse('2026-07-15T12:00:00Z'))).to.equal(-4 * 3_600_000);
    // Across a month and a year end (the parts are read back as a date).
    expect(offsetMs('Pacific/Auckland', Date.parse('2025-12-31T12:30:00Z'))).to.equal(13 * 3_600_000);
    expect(offsetMs('America/Los_Angeles', Date.parse('2026-01-01T03:00:00Z'))).to.equal(-8 * 3_600_000);
  });

  it('starts a local day where the zone says, DST days included, as PostgreSQL reads local midnight', () => {
    const start = (y: number, m: number, d: number, zone: string) => iso(startOfLocalDay(y, m, d, zone));
    // Paris changes at 02:00/03:00 local: the days around start at midnight of the right offset.
    expect(start(2026, 3, 29, 'Europe/Paris')).to.equal('2026-03-28T23:00:00.000Z');
    expect(start(2026, 3, 30, 'Europe/Paris')).to.equal('2026-03-29T22:00:00.000Z');
    expect(start(2026, 10, 25, 'Europe/Paris')).to.equal('2026-10-24T22:00:00.000Z');
    expect(start(2026, 10, 26, 'Europe/Paris')).to.equal('2026-10-25T23:00:00.000Z');
    // Chile changes at local midnight. Clocks going back: midnight comes once the hour is repeated.
    expect(start(2026, 4, 5, 'America/Santiago')).to.equal('2026-04-05T04:00:00.000Z');
    // Clocks going forward: there is no 00:00, the day starts at the change (01:00 local), not an hour before it
    // (which is still the previous day).
    expect(start(2026, 9, 6, 'America/Santiago')).to.equal('2026-09-06T04:00:00.000Z');
    expect(start(2018, 11, 4, 'America/Sao_Paulo')).to.equal('2018-11-04T03:00:00.000Z');
    expect(start(2019, 2, 17, 'America/Sao_Paulo')).to.equal('2019-02-17T03:00:00.000Z');
    // East of UTC the same: Beirut went forward at midnight (22:00 UTC the evening before).
    expect(start(2016, 3, 27, 'Asia/Beirut')).to.equal('2016-03-26T22:00:00.000Z');
    expect(start(2016, 3, 28, 'Asia/Beirut')).to.equal('2016-03-27T21:00:00.000Z');
    // Whatever the day, its start is local midnight or the first instant of the day.
    for (const zone of ['America/Santiago', 'America/Sao_Paulo', 'Asia/Beirut', 'America/Havana', 'Europe/Paris', 'Australia/Lord_Howe', 'Asia/Kolkata']) {
      for (let at = Date.UTC(2016, 0, 1); at < Date.UTC(2027, 0, 1); at += 5 * DAY) {
        const d = new Date(at);
        const begin = startOfLocalDay(d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), zone).getTime();
        const localDay = (t: number) => new Date(t + offsetMs(zone, t)).toISOString().slice(0, 10);
        const day = d.toISOString().slice(0, 10);
        expect(localDay(begin), `${zone} ${day}`).to.equal(day);
        expect(localDay(begin - 1), `${zone} ${day}`).to.not.equal(day);
      }
    }
  });

  it('a date-only `from` on a day that starts with a DST change counts nothing of the day before', () => {
    const r = resolveRange({ from: '2026-09-06', to: '2026-09-06', timezone: 'America/Santiago' }, null, NOW);
    expect([iso(r.from), iso(r.to)]).to.deep.equal(['2026-09-06T04:00:00.000Z', '2026-09-07T03:00:00.000Z']);
  });

  it('tells whether every local day of the period starts on a UTC hour', () => {
    const range = (from: string, to: string, timezone: string) => ({ from: new Date(from), to: new Date(to), timezone });
    expect(wholeHourZone(range('2026-06-01T00:00:00Z', '2026-06-02T00:00:00Z', 'UTC'))).to.equal(true);
    expect(wholeHourZone(range('2026-01-01T00:00:00Z', '2026-07-01T00:00:00Z', 'America/New_York'))).to.equal(true);
    expect(wholeHourZone(range('2026-06-01T00:00:00Z', '2026-06-02T00:00:00Z', 'Asia/Kolkata'))).to.equal(false);
    // Lord Howe Island is +11 in summer and +10:30 in winter, changing on 2026-04-04 at 15:00 UTC.
    expect(wholeHourZone(range('2026-04-01T00:00:00Z', '2026-04-04T15:00:00Z', 'Australia/Lord_Howe'))).to.equal(true);
    expect(wholeHourZone(range('2026-04-01T00:00:00Z', '2026-04-04T15:00:00.001Z', 'Australia/Lord_Howe'))).to.equal(false);
    expect(wholeHourZone(range('2026-04-04T15:00:00Z', '2026-04-10T00:00:00Z', 'Australia/Lord_Howe'))).to.equal(false);
    expect(wholeHourZone(range('2026-04-04T14:59:59.999Z', '2026-04-04T15:00:00Z', 'Australia/Lord_Howe'))).to.equal(true);
  });
});
