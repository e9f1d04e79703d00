// The analytics service's own choices, over HTTP: the organization's zone when the query names none (owner views count
// in UTC), the owner's list of organizations read leniently but checked strictly, the 60-second cache (a failed
// computation not kept in it), an owner view mixing read paths; and the rollup job's period and its failures' warning.
import { expect } from 'chai';
import { expectApiError, expectApiSuccess } from './helpers/auth.js';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { captureLogs } from './helpers/logs.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { withClockAhead, withClockAt } from './helpers/clock.js';
import { refuseWrites } from './helpers/refusals.js';

const get = async (who: SignedUp, path: string) => who.api.get(path, { token: who.accessToken });

describe("Analytics: the organization's zone, the owner's organizations and the cache", function () {
  this.timeout(60_000);

  it("counts days in the organization's zone when the query names none; the query's zone wins; owner views count in UTC", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    expectApiSuccess(await owner.api.patch(`/organizations/${owner.orgId}`, { settings: { timezone: 'Asia/Tokyo' } }, { token: owner.accessToken }), 200);
    // 20:00 UTC on June 1st is 05:00 on June 2nd in Tokyo.
    await server.db.knex('conversations').insert({ organization_id: owner.orgId, status: 'open', created_at: new Date('2026-06-01T20:00:00Z') });
    const day = 'from=2026-06-02&to=2026-06-02';

    const tokyo = expectApiSuccess(await get(owner, `/analytics/summary?${day}`), 200);
    expect(tokyo.range).to.deep.equal({ from: '2026-06-01T15:00:00.000Z', to: '2026-06-02T15:00:00.000Z', timezone: 'Asia/Tokyo' });
    expect(tokyo.conversations.started).to.equal(1);
    const trends = expectApiSuccess(await get(owner, `/analytics/trends?${day}`), 200);
    expect(trends.byDay.map((d: { date: string; started: number }) => [d.date, d.started])).to.deep.equal([['2026-06-02', 1]]);

    const utc = expectApiSuccess(await get(owner, `/analytics/summary?${day}&timezone=UTC`), 200);
    expect(utc.range.timezone).to.equal('UTC');
    expect(utc.conversations.started).to.equal(0);

    const agents = expectApiSuccess(await get(owner, `/analytics/agents?${day}`), 200);
    expect(agents.range.timezone).to.equal('Asia/Tokyo');

    const ownerView = expectApiSuccess(await get(owner, `/analytics/owner/summary?${day}&organizationIds=${owner.orgId}`), 200);
    expect(ownerView.range).to.deep.equal({ from: '2026-06-02T00:00:00.000Z', to: '2026-06-03T00:00:00.000Z', timezone: 'UTC' });
    expect(ownerView.totals.conversations.started).to.equal(0);
  });

  it("reads the owner's list leniently (case, spaces, repeats, a trailing comma) and in any order as one answer; more than 50 is 400", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl, { organizationName: 'First shop' });
    const second = expectApiSuccess(await owner.api.post('/organizations', { name: 'Second shop' }, { token: owner.accessToken }), 201);
    await server.db.knex('conversations').insert([
      { organization_id: owner.orgId, status: 'open', created_at: new Date('2026-06-01T10:00:00Z') },
      { organization_id: second.id, status: 'open', created_at: new Date('2026-06-01T11:00:00Z') },
      { organization_id: second.id, status: 'open', created_at: new Date('2026-06-01T12:00:00Z') },
    ]);
    const period = 'from=2026-06-01&to=2026-06-01';
    const sorted = [owner.orgId, second.id].sort();

    const messy = `${owner.orgId.toUpperCase()}, ${second.id} ,${owner.orgId},`;
    const first = expectApiSuccess(await get(owner, `/analytics/owner/summary?${period}&organizationIds=${encodeURIComponent(messy)}`), 200);
    expect(first.totals.conversations.started).to.equal(3);
    expect(first.percentiles).to.equal('exact');
    // Listed by id, with each organization's own name and figures.
    expect(first.organizations.map((o: { organizationId: string }) => o.organizationId)).to.deep.equal(sorted);
    const byId = Object.fromEntries(first.organizations.map((o: { organizationId: string; name: string; conversations: { started: number } }) => [o.organizationId, [o.name, o.conversations.started]]));
    expect(byId).to.deep.equal({ [owner.orgId]: ['First shop', 1], [second.id]: ['Second shop', 2] });

    // The same organizations in another order are the same question: the cached answer.
    const again = expectApiSuccess(await get(owner, `/analytics/owner/summary?${period}&organizationIds=${second.id},${owner.orgId}`), 200);
    expect(again.generatedAt).to.equal(first.generatedAt);
    expect(again).to.deep.equal(first);

    const many = Array.from({ length: 51 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
    expectApiError(await get(owner, `/analytics/owner/summary?organizationIds=${many.join(',')}`), 400, 'validation_failed');
    // 50 is within the limit: refused only because the caller does not own them.
    expectApiError(await get(owner, `/analytics/owner/summary?organizationIds=${many.slice(1).join(',')}`), 403, 'forbidden');
    expectApiError(await get(owner, `/analytics/owner/summary?organizationIds=${encodeURIComponent(' , ,')}`), 400, 'validation_failed');
    // One bad id spoils the list.
    const spoiled = await get(owner, `/analytics/owner/summary?organizationIds=${owner.orgId},nope`);
    expectApiError(spoiled, 400, 'validation_failed');
    expect(spoiled.body.error.details).to.deep.equal([{ field: 'organizationIds', message: 'is not a list of ids' }]);
  });

  it('says which parameter is wrong: an agentId that is not an id, an organizationIds that is not a list of ids', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await get(owner, '/analytics/summary?agentId=42');
    expectApiError(agent, 400, 'validation_failed');
    expect(agent.body.error.details).to.deep.equal([{ field: 'agentId', message: 'is not an id' }]);
    const list = await get(owner, '/analytics/owner/summary?organizationIds=nope');
    expectApiError(list, 400, 'validation_failed');
    expect(list.body.error.details).to.deep.equal([{ field: 'organizationIds', message: 'is not a list of ids' }]);
  });

  it('reads the aggregates only for what they hold: a channel or agent filter, or a zone half an hour off UTC, is read exactly', async () => {
    const { server, baseUrl } = sharedServer();
    const svc = server.services.analytics;
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent', 'Ada Agent');
    const at = (h: number) => new Date(Date.UTC(2026, 5, 1, h, 7));
    await server.db.knex('conversations').insert([10, 11, 12, 13, 14].map((h, i) => ({
      organization_id: owner.orgId, status: 'open', channel: i < 2 ? 'email' : 'widget', assigned_to: i === 4 ? agent.userId : null,
      created_at: at(h), updated_at: at(h), first_response_at: new Date(at(h).getTime() + (i + 1) * 10_000),
    })));
    await svc.rollup.recount(owner.orgId);
    // Any period with a conversation in its whole hours would be read from the aggregates.
    svc.exactRows = 0;
    try {
      const read = async (path: string) => expectApiSuccess(await get(owner, `${path}${path.includes('?') ? '&' : '?'}from=2026-06-01&to=2026-06-01`), 200);
      const all = await read('/analytics/summary?timezone=UTC');
      expect([all.percentiles, all.conversations.started]).to.deep.equal(['histogram', 5]);
      const email = await read('/analytics/summary?timezone=UTC&channel=email');
      expect([email.percentiles, email.conversations.started]).to.deep.equal(['exact', 2]);
      const mine = await read(`/analytics/summary?timezone=UTC&agentId=${agent.userId}`);
      expect([mine.percentiles, mine.conversations.started]).to.deep.equal(['exact', 1]);

      const utcDays = await read('/analytics/trends?timezone=UTC');
      expect(utcDays.percentiles).to.equal('histogram');
      const emailDays = await read('/analytics/trends?timezone=UTC&channel=email');
      expect([emailDays.percentiles, emailDays.byDay.map((d: { started: number }) => d.started)]).to.deep.equal(['exact', [2]]);
      const kolkata = await read('/analytics/trends?timezone=Asia/Kolkata');
      expect([kolkata.percentiles, kolkata.byDay.map((d: { date: string; started: number }) => [d.date, d.started])]).to.deep.equal(['exact', [['2026-06-01', 5]]]);

      const agents = await read('/analytics/agents?timezone=UTC');
      expect(agents.percentiles).to.equal('histogram');
      const emailAgents = await read('/analytics/agents?timezone=UTC&channel=email');
      expect(emailAgents.percentiles).to.equal('exact');
      expect(emailAgents.agents.find((a: { userId: string }) => a.userId === agent.userId).assigned).to.equal(0);

      // Without a whole UTC day there are no running totals to read.
      const hours = expectApiSuccess(await get(owner, '/analytics/agents?from=2026-06-01T09:00:00Z&to=2026-06-01T15:00:00Z'), 200);
      expect(hours.percentiles).to.equal('exact');
      expect(hours.agents.find((a: { userId: string }) => a.userId === agent.userId).assigned).to.equal(1);

      const ownerView = await read(`/analytics/owner/summary?organizationIds=${owner.orgId}`);
      expect([ownerView.percentiles, ownerView.totals.conversations.started]).to.deep.equal(['histogram', 5]);
    } finally {
      svc.exactRows = 10_000;
    }
  });

  it('answers the same query from its cache for 60 seconds, then computes it again', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const path = '/analytics/summary?from=2026-06-01&to=2026-06-01&timezone=UTC';
    // The answer is cached at some moment after `asked`: 59 seconds after `asked` it is still fresh, however long the
    // requests take on a busy machine (the clock stands still meanwhile).
    const asked = Date.now();
    const first = expectApiSuccess(await get(owner, path), 200);
    await server.db.knex('conversations').insert({ organization_id: owner.orgId, status: 'open', created_at: new Date('2026-06-01T10:00:00Z') });
    const cached = await withClockAt(asked + 59_000, async () => expectApiSuccess(await get(owner, path), 200));
    expect(cached.generatedAt).to.equal(first.generatedAt);
    expect(cached.conversations.started).to.equal(0);
    const fresh = await withClockAhead(61, async () => expectApiSuccess(await get(owner, path), 200));
    expect(fresh.generatedAt).to.not.equal(first.generatedAt);
    expect(fresh.conversations.started).to.equal(1);
  });

  it('an owner view over organizations read on different paths says its percentiles come from the histograms', async () => {
    const { server, baseUrl } = sharedServer();
    const svc = server.services.analytics;
    const owner = await signUp(server, baseUrl, { organizationName: 'Busy shop' });
    const quiet = expectApiSuccess(await owner.api.post('/organizations', { name: 'Quiet shop' }, { token: owner.accessToken }), 201);
    const at = (h: number) => new Date(Date.UTC(2026, 6, 1, h, 7));
    await server.db.knex('conversations').insert([
      ...[10, 11, 12].map((h) => ({ organization_id: owner.orgId, status: 'open', created_at: at(h), updated_at: at(h), first_response_at: new Date(at(h).getTime() + h * 1000) })),
      { organization_id: quiet.id, status: 'open', created_at: at(13), updated_at: at(13), first_response_at: new Date(at(13).getTime() + 5000) },
    ]);
    await svc.rollup.recount(owner.orgId);
    await svc.rollup.recount(quiet.id);
    // Above two conversations a period is read from the aggregates: the busy shop (3) and the totals (4) are, the
    // quiet shop (1) is read exactly. One histogram among the answers makes the view's percentiles approximate.
    svc.exactRows = 2;
    try {
      const view = expectApiSuccess(await get(owner, `/analytics/owner/summary?from=2026-07-01&to=2026-07-01&organizationIds=${owner.orgId},${quiet.id}`), 200);
      expect([view.percentiles, view.totals.conversations.started]).to.deep.equal(['histogram', 4]);
      const quietAlone = expectApiSuccess(await get(owner, `/analytics/owner/summary?from=2026-07-01&to=2026-07-01&organizationIds=${quiet.id}`), 200);
      expect([quietAlone.percentiles, quietAlone.totals.conversations.started]).to.deep.equal(['exact', 1]);
    } finally {
      svc.exactRows = 10_000;
    }
  });

  it('forgets a computation that failed: the same query asked again is computed again', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const path = '/analytics/summary?from=2026-06-03&to=2026-06-03&timezone=UTC';
    const db = server.db;
    const readOnly = db.readOnly;
    // The database fails the next analytics read once.
    db.readOnly = () => {
      db.readOnly = readOnly;
      return Promise.reject(new Error('connection terminated unexpectedly'));
    };
    try {
      expect((await get(owner, path)).status).to.equal(500);
    } finally {
      db.readOnly = readOnly;
    }
    const again = expectApiSuccess(await get(owner, path), 200);
    expect(again.conversations.started).to.equal(0);
  });
});

describe('Analytics: the message rollup job of a running server', function () {
  this.timeout(120_000);
  let app: TestServer;
  const logs = captureLogs('info');

  before(async () => {
    app = await startTestServer({}, { logger: logs.logger });
  });
  after(async () => {
    await app?.stop();
  });

  it('runs every 15 seconds, and logs a run that failed as a warning', async () => {
    const { rollup } = app.server.services.analytics;
    const knex = app.server.db.knex;
    // The job's clock: the period it asks for, and its tick, run by hand below.
    const realSetInterval = globalThis.setInterval;
    const scheduled: { tick: () => void; ms: number | undefined }[] = [];
    await rollup.stop();
    globalThis.setInterval = ((tick: () => void, ms?: number) => {
      scheduled.push({ tick, ms });
      return realSetInterval(tick, ms);
    }) as typeof setInterval;
    try {
      rollup.start();
    } finally {
      globalThis.setInterval = realSetInterval;
    }
    expect(scheduled.map((s) => s.ms)).to.deep.equal([15_000]);
    // A run that fails (the database refuses to move the watermark) is logged, and the job goes on.
    const refusal = await refuseWrites(knex, { table: 'message_rollup_state', on: 'update', message: 'rollup state is read-only' });
    try {
      for (let i = 0; i < 100 && !logs.matching(40, 'rolling up message counts failed').length; i++) {
        scheduled[0]!.tick();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      await refusal.lift();
    }
    const [warned] = logs.matching(40, 'rolling up message counts failed');
    expect((warned?.err as { message?: string } | undefined)?.message).to.match(/rollup state is read-only/);
    expect((await rollup.run({ wait: true })).skipped).to.equal(false);
  });
});

