// Analytics of long periods from the hourly aggregates: counts, averages and open conversations equal what the
// conversations hold, medians and p90s within the histogram's stated 9.1%, partial first and last hours read from the
// conversations themselves, local days in a zone west of UTC, and the rollup job keeping hours current after a change.
import { expect } from 'chai';
import { expectApiSuccess } from './helpers/auth.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { bucketValue, fromHistogram, histogramText } from '../server/services/analytics/aggregates.js';

const BASE = Date.parse('2026-03-10T00:00:00Z');
const N = 240;

interface Row {
  created: number;
  firstResponse: number | null;
  escalated: number | null;
  humanReply: number | null;
  resolved: number | null;
  closed: number | null;
}

/** Conversation i: created every 17 minutes from BASE; durations spread over seconds to a day. */
function script(i: number): Row {
  const created = BASE + i * 17 * 60_000;
  const escalated = i % 3 === 0 ? created + 90_000 : null;
  return {
    created,
    firstResponse: i % 7 === 6 ? null : created + (2 + ((i * 37) % 900)) * 1000,
    escalated,
    humanReply: i % 4 === 0 ? (escalated ?? created) + (20 + ((i * 53) % 2400)) * 1000 : null,
    resolved: i % 5 < 3 ? created + (300 + ((i * 977) % 80_000)) * 1000 : null,
    closed: i % 5 === 3 ? created + 3_600_000 : null,
  };
}

/** percentile_cont, as the exact path computes it. */
function percentile(values: number[], p: number): number | null {
  if (!values.length) return null;
  const s = [...values].sort((a, b) => a - b);
  const rank = p * (s.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return s[lo]! + (s[hi]! - s[lo]!) * (rank - lo);
}

/** Within the documented bound: 9.1% of the exact value, plus rounding to whole seconds. */
function expectNear(actual: number | null, exact: number | null, what: string): void {
  if (exact === null) return void expect(actual, what).to.equal(null);
  expect(actual, what).to.be.a('number');
  expect(Math.abs(actual! - exact), `${what}: ${actual} vs ${exact}`).to.be.at.most(exact * 0.091 + 1);
}

const secs = (later: number | null, earlier: number) => (later === null ? null : (later - earlier) / 1000);

describe('Analytics from the hourly aggregates', function () {
  this.timeout(60_000);
  let owner: SignedUp;
  let ids: string[];
  let rows: Row[];
  const tok = () => ({ token: owner.accessToken });

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    rows = Array.from({ length: N }, (_, i) => script(i));
    const date = (ms: number | null) => (ms === null ? null : new Date(ms));
    const inserted = await server.db.knex('conversations').insert(rows.map((r) => ({
      organization_id: owner.orgId, status: r.resolved !== null ? 'resolved' : r.closed !== null ? 'closed' : 'open', channel: 'widget',
      created_at: date(r.created), updated_at: date(r.created), first_response_at: date(r.firstResponse), escalated_at: date(r.escalated),
      first_human_reply_at: date(r.humanReply), first_resolved_at: date(r.resolved), resolved_at: date(r.resolved), closed_at: date(r.closed),
    }))).returning('id');
    ids = inserted.map((r: { id: string }) => r.id);
    // Back-dated rows, behind the job's watermark.
    await server.services.analytics.rollup.recount(owner.orgId);
    server.services.analytics.exactRows = 0;
  });
  after(() => {
    sharedServer().server.services.analytics.exactRows = 10_000;
  });

  /** The exact figures over [from, to), computed here from the script. */
  function exact(from: number, to: number) {
    const started = rows.filter((r) => r.created >= from && r.created < to);
    const resolved = rows.filter((r) => r.resolved !== null && r.resolved >= from && r.resolved < to);
    const done = (r: Row) => Math.min(r.resolved ?? Infinity, r.closed ?? Infinity);
    const dist = (values: (number | null)[]) => {
      const v = values.filter((x): x is number => x !== null);
      return { count: v.length, avg: v.length ? Math.round(v.reduce((a, b) => a + b, 0) / v.length) : null, median: percentile(v, 0.5), p90: percentile(v, 0.9) };
    };
    return {
      started: started.length,
      escalated: started.filter((r) => r.escalated !== null).length,
      resolved: resolved.length,
      open: rows.filter((r) => r.created < to && done(r) >= to).length,
      done: rows.filter((r) => done(r) >= from && done(r) < to).length,
      fr: dist(started.map((r) => secs(r.firstResponse, r.created))),
      hr: dist(started.map((r) => secs(r.humanReply, r.escalated ?? r.created))),
      res: dist(resolved.map((r) => secs(r.resolved, r.created))),
    };
  }

  it('summarizes a period with partial first and last hours: exact counts and averages, medians within 9.1%', async () => {
    const from = '2026-03-10T05:20:00Z';
    const to = '2026-03-12T09:40:00Z';
    const data = expectApiSuccess(await owner.api.get(`/analytics/summary?from=${from}&to=${to}`, tok()), 200);
    expect(data.percentiles).to.equal('histogram');
    const e = exact(Date.parse(from), Date.parse(to));
    expect(e.started).to.be.greaterThan(100);
    expect(data.conversations).to.include({ started: e.started, escalated: e.escalated, resolved: e.resolved, open: e.open });
    for (const [field, d] of [['firstResponse', e.fr], ['firstHumanResponse', e.hr], ['resolution', e.res]] as const) {
      expect(data[field].count, `${field} count`).to.equal(d.count);
      expect(Math.abs(data[field].avg - d.avg!), `${field} avg`).to.be.at.most(1);
      expectNear(data[field].median, d.median, `${field} median`);
      expectNear(data[field].p90, d.p90, `${field} p90`);
    }
  });

  it('counts local days west of UTC from whole hours, with open conversations carried from day to day', async () => {
    const data = expectApiSuccess(await owner.api.get('/analytics/trends?from=2026-03-10&to=2026-03-12&timezone=America/New_York', tok()), 200);
    expect(data.percentiles).to.equal('histogram');
    expect(data.byDay.map((d: { date: string }) => d.date)).to.deep.equal(['2026-03-10', '2026-03-11', '2026-03-12']);
    // New York is UTC-4 on these days (summer time began 2026-03-08).
    for (const day of data.byDay) {
      const start = Date.parse(`${day.date}T04:00:00Z`);
      const e = exact(start, start + 86_400_000);
      expect(day, day.date).to.include({ started: e.started, resolved: e.resolved, openAtEnd: e.open });
      expectNear(day.medianFirstResponse, e.fr.median, `${day.date} median first response`);
    }
  });

  it('answers a period of whole hours but no whole UTC day from the hours alone, within a day and across midnight', async () => {
    for (const [from, to] of [['2026-03-11T02:20:00Z', '2026-03-11T21:40:00Z'], ['2026-03-10T15:20:00Z', '2026-03-11T09:40:00Z']] as const) {
      const data = expectApiSuccess(await owner.api.get(`/analytics/summary?from=${from}&to=${to}`, tok()), 200);
      expect(data.percentiles, from).to.equal('histogram');
      const e = exact(Date.parse(from), Date.parse(to));
      expect(e.started, from).to.be.greaterThan(40);
      expect(data.conversations, from).to.include({ started: e.started, escalated: e.escalated, resolved: e.resolved, open: e.open });
      expect(data.resolution.count, from).to.equal(e.res.count);
      expectNear(data.firstResponse.median, e.fr.median, `${from} median first response`);
    }
    // The same across midnight as local days of a zone east of UTC (Tokyo's midnight is 15:00 UTC): one partial day each side.
    const data = expectApiSuccess(await owner.api.get('/analytics/trends?from=2026-03-10T16:20:00Z&to=2026-03-11T10:40:00Z&timezone=Asia/Tokyo', tok()), 200);
    expect(data.percentiles).to.equal('histogram');
    expect(data.byDay.map((d: { date: string }) => d.date)).to.deep.equal(['2026-03-11']);
    const e = exact(Date.parse('2026-03-10T16:20:00Z'), Date.parse('2026-03-11T10:40:00Z'));
    expect(data.byDay[0]).to.include({ started: e.started, resolved: e.resolved, openAtEnd: e.open });
  });

  it('reads exactly while the whole hours hold at most the set number of conversations, from the aggregates past it', async () => {
    const svc = sharedServer().server.services.analytics;
    // Conversations created or first resolved in the whole hours: what decides the path.
    const held = (from: string, to: string) => {
      const e = exact(Date.parse(from), Date.parse(to));
      return e.started + e.resolved;
    };
    const cases = [
      ['/analytics/summary', '2026-03-10T05:20:00Z', '2026-03-12T09:40:00Z', '', held('2026-03-10T06:00:00Z', '2026-03-12T09:00:00Z')],
      ['/analytics/trends', '2026-03-10T04:20:00Z', '2026-03-13T03:40:00Z', '&timezone=America/New_York', held('2026-03-10T05:00:00Z', '2026-03-13T03:00:00Z')],
    ] as const;
    try {
      for (const [route, from, to, rest, n] of cases) {
        expect(n, route).to.be.greaterThan(100);
        let bump = 0;
        const path = async (atMost: number) => {
          svc.exactRows = atMost;
          // A millisecond later each time: not the cached answer (the whole hours are the same).
          const f = new Date(Date.parse(from) + ++bump).toISOString();
          return expectApiSuccess(await owner.api.get(`${route}?from=${f}&to=${to}${rest}`, tok()), 200).percentiles;
        };
        expect(await path(n), `${route} at ${n}`).to.equal('exact');
        expect(await path(n - 1), `${route} at ${n - 1}`).to.equal('histogram');
      }
    } finally {
      svc.exactRows = 0;
    }
  });

  it('keeps the hours current: a conversation resolved later is counted after the next rollup run', async () => {
    const { server } = sharedServer();
    const period = 'from=2026-03-10T00:00:00Z&to=2026-03-13T00:00:00Z';
    const before = expectApiSuccess(await owner.api.get(`/analytics/summary?${period}`, tok()), 200);
    const open = rows.findIndex((r) => r.resolved === null && r.closed === null);
    const resolvedAt = rows[open]!.created + 3_000_000;
    await server.db.knex('conversations').where('id', ids[open]!).update({ status: 'resolved', first_resolved_at: new Date(resolvedAt), resolved_at: new Date(resolvedAt), updated_at: new Date() });
    rows[open] = { ...rows[open]!, resolved: resolvedAt };
    await server.services.analytics.rollup.run({ wait: true });
    // Half a minute longer (a new cache entry, nothing in it): the same whole hours.
    const after = expectApiSuccess(await owner.api.get(`/analytics/summary?${period.replace('13T00:00:00Z', '13T00:00:30Z')}`, tok()), 200);
    expect(after.conversations.resolved).to.equal(before.conversations.resolved + 1);
    expect(after.conversations.open).to.equal(before.conversations.open - 1);
    expect(after.resolution.count).to.equal(exact(Date.parse('2026-03-10T00:00:00Z'), Date.parse('2026-03-13T00:00:00Z')).res.count);
  });
});

describe('Analytics histograms as the aggregates read them', () => {
  it('answers 0 for durations under a second, a bucket\'s middle otherwise', () => {
    expect(bucketValue(0)).to.equal(0);
    expect(fromHistogram([3], 3, 0.5)).to.equal(0);
    expect(fromHistogram([1, 0, 0, 0, 2], 3, 0.5)).to.equal(Math.round(2 ** (3.5 / 4)));
    expect(fromHistogram([], 0, 0.5)).to.equal(null);
  });

  it('reads a histogram sent as text, differences below zero included, and nothing from an empty text', () => {
    expect(histogramText('3,0,12')).to.deep.equal([3, 0, 12]);
    expect(histogramText('-3,2,-10')).to.deep.equal([-3, 2, -10]);
    expect(histogramText('')).to.deep.equal([]);
    expect(histogramText(null)).to.deep.equal([]);
  });
});
