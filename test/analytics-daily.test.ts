// The daily and per-agent aggregates answer what the conversations themselves answer: a scripted tenant of three
// agents over five days, every route read once exactly (sorting the conversations) and once from the aggregates
// (daily rows, hours at the edges, agents' running totals), in UTC and in zones west and east of it; then the rollup
// job keeps the agents' totals right after a reassignment, a resolution and a late first reply.
import { expect } from 'chai';
import { expectApiSuccess } from './helpers/auth.js';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';

// Seven minutes past midnight: no conversation starts on a bound, so a bound a millisecond later reads the same ones.
const BASE = Date.parse('2026-04-05T00:07:00Z');
const N = 300;

/** Within the documented bound: 9.1% of the exact value, plus rounding to whole seconds. */
function expectNear(actual: number | null, exact: number | null, what: string): void {
  if (exact === null) return void expect(actual, what).to.equal(null);
  expect(actual, what).to.be.a('number');
  expect(Math.abs(actual! - exact), `${what}: ${actual} vs ${exact}`).to.be.at.most(exact * 0.091 + 1);
}

/**
 * The value the histogram answer stands in for: the sample at rank floor(p * (n - 1)), whose bucket it names (exact
 * medians interpolate towards the next sample, which between sparse samples can be farther than a bucket away).
 */
function lowerRank(values: number[], p: number): number | null {
  if (!values.length) return null;
  return [...values].sort((a, b) => a - b)[Math.floor(p * (values.length - 1))]!;
}

/** The same instant one millisecond later (a different cache entry over the same conversations). */
const plus1ms = (iso: string) => new Date(Date.parse(iso) + 1).toISOString();

describe('Analytics from the daily and per-agent aggregates', function () {
  this.timeout(120_000);
  let owner: SignedUp;
  let agents: Member[];
  let ids: string[];
  let rows: { assigned_to: string | null; first_human_reply_by: string | null; created_at: Date; first_response_at: Date | null; escalated_at: Date | null; first_human_reply_at: Date | null; first_resolved_at: Date | null }[];
  const svc = () => sharedServer().server.services.analytics;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    agents = [await addMember(server, owner, 'agent', 'Ana'), await addMember(server, owner, 'agent', 'Ben'), await addMember(server, owner, 'agent', 'Cy')];
    const who = (i: number) => agents[i % 3]!.userId;
    // Conversation i: every 23 minutes from BASE (about 4.8 days); assigned round the robin (every 7th unassigned),
    // a quarter escalated, first human reply mostly by the assignee (every 5th by the next agent), most resolved.
    rows = Array.from({ length: N }, (_, i) => {
      const created = BASE + i * 23 * 60_000;
      const escalated = i % 4 === 0 ? created + 120_000 : null;
      const assigned = i % 7 === 3 ? null : who(i);
      const human = i % 3 === 2 ? null : (escalated ?? created) + (15 + ((i * 61) % 3000)) * 1000;
      const resolved = i % 6 < 4 ? created + (400 + ((i * 733) % 90_000)) * 1000 : null;
      const closed = i % 6 === 4 ? created + 7_200_000 : null;
      const d = (ms: number | null) => (ms === null ? null : new Date(ms));
      return {
        organization_id: owner.orgId, channel: i % 5 === 0 ? 'email' : 'widget', status: resolved ? 'resolved' : closed ? 'closed' : 'open',
        assigned_to: assigned, created_at: new Date(created), updated_at: new Date(created), first_response_at: d(i % 9 === 8 ? null : created + (3 + ((i * 41) % 800)) * 1000),
        escalated_at: d(escalated), first_human_reply_at: d(human), first_human_reply_by: human === null ? null : i % 5 === 1 ? who(i + 1) : (assigned ?? who(i)),
        first_resolved_at: d(resolved), resolved_at: d(resolved), first_resolved_by_ai: resolved !== null && assigned === null, closed_at: d(closed),
      };
    });
    // Al joins last (sorting first by name, last by id) and is only in the partial last day of the first period: no
    // running totals before it, so Al's row and histograms come from that day's conversations alone. All resolved, so
    // Al's open count ties with the owner's.
    const al = await addMember(server, owner, 'agent', 'Al');
    rows.push(...Array.from({ length: 4 }, (_, k) => {
      const created = Date.parse('2026-04-09T01:00:00Z') + k * 7_200_000;
      return {
        organization_id: owner.orgId, channel: 'widget', status: 'resolved', assigned_to: al.userId, created_at: new Date(created), updated_at: new Date(created),
        first_response_at: new Date(created + 10_000), escalated_at: null, first_human_reply_at: new Date(created + (k + 1) * 100_000), first_human_reply_by: al.userId,
        first_resolved_at: new Date(created + (k + 1) * 3_000_000), resolved_at: new Date(created + (k + 1) * 3_000_000), first_resolved_by_ai: false, closed_at: null,
      };
    }));
    ids = (await server.db.knex('conversations').insert(rows).returning('id')).map((r: { id: string }) => r.id);
    const scripted = rows;
    // Two messages each (visitor, then agent or AI), and a third in every fourth (a system notice or an AI note; one
    // such note falls in the first period's partial last hour), for the message counts.
    await server.db.knex('messages').insert(scripted.flatMap((r, i) => [
      { organization_id: owner.orgId, conversation_id: ids[i], seq: 1, sender_type: 'visitor', content: 'Hello', created_at: r.created_at },
      { organization_id: owner.orgId, conversation_id: ids[i], seq: 2, sender_type: r.assigned_to ? 'agent' : 'ai', sender_id: r.assigned_to, content: 'Hi', created_at: new Date(r.created_at.getTime() + 60_000) },
      ...(i % 4 === 1 ? [{ organization_id: owner.orgId, conversation_id: ids[i], seq: 3, sender_type: i % 8 === 1 ? 'system' : 'ai', content: 'Noted', created_at: new Date(r.created_at.getTime() + 90_000) }] : []),
    ]));
    // Tickets every 9 hours, every third resolved 5 hours later: their counts come from the tickets either way.
    await server.db.knex('tickets').insert(Array.from({ length: 12 }, (_, i) => ({
      organization_id: owner.orgId, number: i + 1, title: `Ticket ${i + 1}`, source: 'agent', status: i % 3 === 0 ? 'resolved' : 'open',
      created_at: new Date(BASE + i * 9 * 3_600_000), resolved_at: i % 3 === 0 ? new Date(BASE + i * 9 * 3_600_000 + 5 * 3_600_000) : null,
    })));
    // Back-dated rows, behind the job's watermark.
    await svc().rollup.recount(owner.orgId);
  });
  after(() => {
    svc().exactRows = 10_000;
  });

  /** The route's answer computed exactly, and from the aggregates (a millisecond later, so not from the cache). */
  async function both(route: string, from: string, to: string, rest = '', as: { api: SignedUp['api']; accessToken: string } = owner) {
    const get = async (f: string) => expectApiSuccess(await as.api.get(`${route}?from=${encodeURIComponent(f)}&to=${encodeURIComponent(to)}${rest}`, { token: as.accessToken }), 200);
    svc().exactRows = Number.MAX_SAFE_INTEGER;
    const exact = await get(from);
    svc().exactRows = 0;
    const aggregated = await get(plus1ms(from));
    return { exact, aggregated };
  }

  const periods = [
    // Partial first and last UTC days and hours around three whole days.
    ['2026-04-05T07:20:00Z', '2026-04-09T16:40:00Z'],
    // Local midnights west and east of UTC.
    ['2026-04-05T00:00:00-04:00', '2026-04-09T00:00:00-04:00'],
    ['2026-04-06T00:00:00+09:00', '2026-04-09T00:00:00+09:00'],
  ] as const;

  it('summary: counts, averages, open and messages equal the exact answer; medians and p90s within 9.1%', async () => {
    for (const [from, to] of periods) {
      const { exact, aggregated } = await both('/analytics/summary', from, to);
      expect(exact.percentiles, from).to.equal('exact');
      expect(aggregated.percentiles, from).to.equal('histogram');
      expect(exact.conversations.started, from).to.be.greaterThan(150);
      expect(aggregated.conversations, from).to.deep.equal(exact.conversations);
      expect(exact.messages.system, from).to.be.greaterThan(20);
      expect(aggregated.messages, from).to.deep.equal(exact.messages);
      expect(exact.tickets.created, from).to.be.greaterThan(0);
      expect(aggregated.tickets, from).to.deep.equal(exact.tickets);
      for (const field of ['firstResponse', 'firstHumanResponse', 'resolution'] as const) {
        expect(aggregated[field].count, `${from} ${field} count`).to.equal(exact[field].count);
        expect(Math.abs(aggregated[field].avg - exact[field].avg), `${from} ${field} avg`).to.be.at.most(1);
        expectNear(aggregated[field].median, exact[field].median, `${from} ${field} median`);
        expectNear(aggregated[field].p90, exact[field].p90, `${from} ${field} p90`);
      }
    }
  });

  it('trends: every local day equals the exact answer in UTC, New York and Tokyo (days that straddle UTC midnight)', async () => {
    const local = [['UTC', '+00:00'], ['America/New_York', '-04:00'], ['Asia/Tokyo', '+09:00']] as const;
    for (const [timezone, offset] of local) {
      const [from, to] = [`2026-04-05T00:00:00${offset}`, `2026-04-10T00:00:00${offset}`];
      const { exact, aggregated } = await both('/analytics/trends', from, to, `&timezone=${timezone}`);
      expect(aggregated.percentiles, timezone).to.equal('histogram');
      expect(aggregated.byDay.map((d: { date: string }) => d.date), timezone).to.deep.equal(exact.byDay.map((d: { date: string }) => d.date));
      for (const [i, day] of exact.byDay.entries()) {
        const { medianFirstResponse, ...counts } = day;
        const got = aggregated.byDay[i];
        expect(counts.started, `${timezone} ${day.date}`).to.be.greaterThan(0);
        expect(got, `${timezone} ${day.date}`).to.include(counts);
        expect(got.medianFirstResponse === null, `${timezone} ${day.date}`).to.equal(medianFirstResponse === null);
        const start = Date.parse(`${day.date}T00:00:00${offset}`);
        const created = rows.filter((r) => r.created_at.getTime() >= start && r.created_at.getTime() < start + 86_400_000);
        const scripted = lowerRank(created.filter((r) => r.first_response_at).map((r) => (r.first_response_at!.getTime() - r.created_at.getTime()) / 1000), 0.5);
        expectNear(got.medianFirstResponse, scripted, `${timezone} ${day.date} median first response`);
      }
      expect(exact.byDay.filter((d: { ticketsCreated: number; ticketsResolved: number }) => d.ticketsCreated > 0 && d.ticketsResolved > 0).length, timezone).to.be.greaterThan(1);
    }
  });

  /** An agent's scripted medians over [from, to), at the rank the histogram answers (see lowerRank). */
  function scriptedMedians(userId: string, from: string, to: string) {
    const inPeriod = rows.filter((r) => r.created_at.getTime() >= Date.parse(from) && r.created_at.getTime() < Date.parse(to));
    const secs = (a: Date | null, b: Date) => (a === null ? null : (a.getTime() - b.getTime()) / 1000);
    const values = (list: (number | null)[]) => list.filter((v): v is number => v !== null);
    return {
      firstResponse: lowerRank(values(inPeriod.filter((r) => r.first_human_reply_by === userId).map((r) => secs(r.first_human_reply_at, r.escalated_at ?? r.created_at))), 0.5),
      resolution: lowerRank(values(inPeriod.filter((r) => r.assigned_to === userId).map((r) => secs(r.first_resolved_at, r.created_at))), 0.5),
    };
  }

  /** Rows of the agents' table by member, exact and aggregated, compared. */
  async function expectAgentsAgree(from: string, to: string, what: string): Promise<void> {
    const { exact, aggregated } = await both('/analytics/agents', from, to, '&limit=100');
    expect([exact.percentiles, aggregated.percentiles], what).to.deep.equal(['exact', 'histogram']);
    expect(aggregated.agents.map((a: { userId: string }) => a.userId).sort(), what).to.deep.equal(exact.agents.map((a: { userId: string }) => a.userId).sort());
    for (const row of exact.agents) {
      const got = aggregated.agents.find((a: { userId: string }) => a.userId === row.userId);
      const { medianFirstResponse: _fr, medianResolution: _res, ...counts } = row;
      expect(got, `${what} ${row.name}`).to.include(counts);
      const scripted = scriptedMedians(row.userId, from, to);
      expectNear(got.medianFirstResponse, scripted.firstResponse, `${what} ${row.name} median first response`);
      expectNear(got.medianResolution, scripted.resolution, `${what} ${row.name} median resolution`);
    }
    expect(exact.agents.filter((a: { assigned: number }) => a.assigned > 20).length, what).to.equal(3);
  }

  it("agents: every member's counts equal the exact answer, medians within 9.1%; an agent's own row likewise", async () => {
    for (const [from, to] of periods) await expectAgentsAgree(from, to, from);
    const [from, to] = periods[0];
    const { exact, aggregated } = await both('/analytics/agent/stats', from, to, '', agents[1]!);
    expect(aggregated.percentiles).to.equal('histogram');
    const got = aggregated;
    const counts = { userId: exact.userId, assigned: exact.assigned, resolved: exact.resolved, open: exact.open, firstHumanResponses: exact.firstHumanResponses };
    expect(got).to.include(counts);
    expect(counts.assigned).to.be.greaterThan(20);
    const scripted = scriptedMedians(agents[1]!.userId, from, to);
    expectNear(got.medianFirstResponse, scripted.firstResponse, 'own median first response');
    expectNear(got.medianResolution, scripted.resolution, 'own median resolution');
  });

  it('agents from the totals: every sort and page is the documented order of the whole table', async () => {
    const [from, to] = periods[0];
    type Row = { userId: string; assigned: number; resolved: number; open: number; medianFirstResponse: number | null; medianResolution: number | null };
    let bump = 0;
    /** One page of the table, read exactly or from the totals; each read a millisecond later than any before (not cached). */
    const read = async (exactly: boolean, rest: string) => {
      svc().exactRows = exactly ? Number.MAX_SAFE_INTEGER : 0;
      const res = await owner.api.get(`/analytics/agents?from=${encodeURIComponent(new Date(Date.parse(from) + 100 + ++bump).toISOString())}&to=${encodeURIComponent(to)}${rest}`, { token: owner.accessToken });
      const data = expectApiSuccess(res, 200);
      expect(data.percentiles).to.equal(exactly ? 'exact' : 'histogram');
      return { ids: (data.agents as Row[]).map((a) => a.userId), rows: data.agents as Row[], total: (res.body as { pagination: { total: number } }).pagination.total };
    };
    const all = (await read(false, '&limit=100')).rows;
    expect(all.length).to.equal(5);
    // Al, with no totals yet: counts and medians from the partial last day alone.
    expect(all.find((a) => a.assigned === 4 && a.open === 0)?.medianResolution).to.be.within(6_000 / 1.091, 6_000 * 1.091);
    const byId = (a: Row, b: Row) => (a.userId < b.userId ? -1 : a.userId > b.userId ? 1 : 0);
    const desc = (k: 'assigned' | 'resolved' | 'open') => (a: Row, b: Row) => b[k] - a[k] || byId(a, b);
    const asc = (k: 'medianFirstResponse' | 'medianResolution') => (a: Row, b: Row) => (a[k] === b[k] ? 0 : a[k] === null ? 1 : b[k] === null ? -1 : a[k]! - b[k]!) || byId(a, b);
    const expected: Record<string, string[]> = {
      assigned: [...all].sort(desc('assigned')).map((a) => a.userId),
      resolved: [...all].sort(desc('resolved')).map((a) => a.userId),
      open: [...all].sort(desc('open')).map((a) => a.userId),
      medianFirstResponse: [...all].sort(asc('medianFirstResponse')).map((a) => a.userId),
      medianResolution: [...all].sort(asc('medianResolution')).map((a) => a.userId),
      // Names sort in the database's collation on both paths.
      name: (await read(true, '&limit=100&sort=name')).ids,
    };
    // The owner handled nothing: no median, sorted last.
    expect(all.find((a) => a.userId === expected.medianResolution!.at(-1))!.medianResolution).to.equal(null);
    for (const [sort, ids] of Object.entries(expected)) {
      const whole = await read(false, `&limit=100&sort=${sort}`);
      expect(whole.ids, sort).to.deep.equal(ids);
      // Counts are exact on both paths, so their orders agree.
      if (['assigned', 'resolved', 'open'].includes(sort)) expect((await read(true, `&limit=100&sort=${sort}`)).ids, `${sort}, exactly`).to.deep.equal(ids);
      const page = await read(false, `&limit=2&offset=1&sort=${sort}`);
      expect(page.ids, `${sort} page`).to.deep.equal(ids.slice(1, 3));
      // A page's rows are the whole table's, medians included.
      expect(page.rows, `${sort} page rows`).to.deep.equal(whole.rows.slice(1, 3));
      expect(page.total, `${sort} total`).to.equal(5);
    }
    const past = await read(false, '&limit=2&offset=10');
    expect(past.ids).to.deep.equal([]);
    expect(past.total).to.equal(5);
  });

  it("agents from the totals: a conversation just after the period, changed since the job's last run, counts for nobody", async () => {
    const { server } = sharedServer();
    const [from, to] = periods[0];
    // The period ends at 16:40: the rest of that UTC day is the shorter side, taken off the day's totals. One of its
    // conversations changes hands, and the job has not run since: the totals still credit the old assignee.
    const x = rows.findIndex((r) => r.assigned_to !== null && r.created_at.getTime() >= Date.parse(to) && r.created_at.getTime() < Date.parse('2026-04-10T00:00:00Z'));
    expect(x).to.be.at.least(0);
    const other = agents.find((m) => m.userId !== rows[x]!.assigned_to)!.userId;
    await server.db.knex('conversations').where('id', ids[x]!).update({ assigned_to: other, updated_at: new Date() });
    rows[x]!.assigned_to = other;
    await expectAgentsAgree(new Date(Date.parse(from) + 20).toISOString(), to, 'a change after the period');
  });

  it("keeps the agents' totals current: a reassignment, a resolution and a late first reply count after the next rollup run", async () => {
    const { server } = sharedServer();
    const knex = server.db.knex;
    // By script index: the fourth open assigned conversation changes hands, a late one is resolved, and the first
    // one nobody answered gets its first human reply.
    const openAssigned = rows.map((r, i) => ({ r, i })).filter(({ r, i }) => r.assigned_to !== null && r.first_resolved_at === null && i % 6 !== 4);
    const a = openAssigned[3]!.i;
    const b = openAssigned[openAssigned.length - 4]!.i;
    const c = rows.findIndex((r) => r.first_human_reply_at === null);
    const other = agents.find((m) => m.userId !== rows[a]!.assigned_to)!.userId;
    await knex('conversations').where('id', ids[a]!).update({ assigned_to: other, updated_at: new Date() });
    rows[a]!.assigned_to = other;
    const resolvedAt = new Date(rows[b]!.created_at.getTime() + 5_000_000);
    await knex('conversations').where('id', ids[b]!).update({ status: 'resolved', first_resolved_at: resolvedAt, resolved_at: resolvedAt, updated_at: new Date() });
    rows[b]!.first_resolved_at = resolvedAt;
    const repliedAt = new Date(rows[c]!.created_at.getTime() + 77_000);
    await knex('conversations').where('id', ids[c]!).update({ first_human_reply_at: repliedAt, first_human_reply_by: agents[2]!.userId, updated_at: new Date() });
    Object.assign(rows[c]!, { first_human_reply_at: repliedAt, first_human_reply_by: agents[2]!.userId });
    await svc().rollup.run({ wait: true });
    // Ten milliseconds later: answers not cached before the changes.
    for (const [from, to] of periods) await expectAgentsAgree(new Date(Date.parse(from) + 10).toISOString(), to, `after the changes, ${from}`);
  });

  it("keeps the whole days' totals current: the same changes in a day every period reads from the totals", async () => {
    const knex = sharedServer().server.db.knex;
    // April 7th (UTC) is a whole day of every period: its figures come from the daily rows and the agents' totals.
    const inDay = rows.map((r, i) => ({ r, i })).filter(({ r }) => r.created_at.toISOString().startsWith('2026-04-07'));
    const a = inDay.find(({ r }) => r.assigned_to !== null)!.i;
    const b = inDay.find(({ r, i }) => i !== a && r.assigned_to !== null && r.first_resolved_at === null && i % 6 !== 4)!.i;
    const c = inDay.find(({ r, i }) => i !== a && i !== b && r.first_human_reply_at === null)!.i;
    const other = agents.find((m) => m.userId !== rows[a]!.assigned_to)!.userId;
    await knex('conversations').where('id', ids[a]!).update({ assigned_to: other, updated_at: new Date() });
    rows[a]!.assigned_to = other;
    const resolvedAt = new Date(rows[b]!.created_at.getTime() + 4_000_000);
    await knex('conversations').where('id', ids[b]!).update({ status: 'resolved', first_resolved_at: resolvedAt, resolved_at: resolvedAt, updated_at: new Date() });
    rows[b]!.first_resolved_at = resolvedAt;
    const repliedAt = new Date(rows[c]!.created_at.getTime() + 55_000);
    await knex('conversations').where('id', ids[c]!).update({ first_human_reply_at: repliedAt, first_human_reply_by: agents[0]!.userId, updated_at: new Date() });
    Object.assign(rows[c]!, { first_human_reply_at: repliedAt, first_human_reply_by: agents[0]!.userId });
    await svc().rollup.run({ wait: true });
    for (const [from, to] of periods) {
      // Thirty milliseconds later: answers not cached before the changes.
      const later = new Date(Date.parse(from) + 30).toISOString();
      await expectAgentsAgree(later, to, `after changes in a whole day, ${from}`);
      const { exact, aggregated } = await both('/analytics/summary', later, to);
      expect(aggregated.conversations, from).to.deep.equal(exact.conversations);
      expect(aggregated.resolution.count, from).to.equal(exact.resolution.count);
      expect(aggregated.firstHumanResponse.count, from).to.equal(exact.firstHumanResponse.count);
    }
  });
});
