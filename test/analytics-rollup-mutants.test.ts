// The rollup job's own rules: a tick while a run is under way joins it (runs never pile up behind a slow one), a
// finished run is never answered again, a tick skips a watermark another instance holds while a run that waits
// queues behind it, and the job keeps one timer, which stop() clears.
import { expect } from 'chai';
import type { Knex } from 'knex';
import { MessageRollup } from '../server/services/analytics/index.js';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp } from './helpers/factories.js';
import { expectApiSuccess } from './helpers/auth.js';

describe('Analytics: the rollup job\'s runs and timer', function () {
  this.timeout(30_000);
  let holder: Knex.Transaction | null = null;
  const rollup = (intervalMs = 60_000) => new MessageRollup({ knex: sharedServer().server.db.knex, intervalMs, onError: () => undefined });

  afterEach(async () => {
    // Released even when a test failed while holding the watermark row.
    await holder?.rollback().catch(() => undefined);
    holder = null;
  });

  it('joins a run under way, queues a run that waits behind it, and runs again once it is over', async () => {
    const r = rollup();
    const a = r.run();
    expect(r.run(), 'a tick during a run').to.equal(a);
    const waiting = r.run({ wait: true });
    expect(waiting).to.not.equal(a);
    await a;
    // The run that waits is under way now: a tick joins it, not the finished one, and starts nothing of its own.
    expect(r.run()).to.equal(waiting);
    await waiting;
    const next = r.run();
    expect(next, 'a tick after the runs').to.not.equal(waiting);
    await next;
  });

  it('skips the watermark another instance holds, unless told to wait for it', async function () {
    const { server } = sharedServer();
    // One connection only: a second transaction would wait on the first.
    if (server.db.embedded) this.skip();
    const knex = server.db.knex;
    holder = await knex.transaction();
    // Should this test die holding the row, the database lets go of it.
    await holder.raw(`set local idle_in_transaction_session_timeout = '60s'`);
    await holder.raw('select 1 from message_rollup_state where id = 1 for update');
    const r = rollup();
    expect(await r.run()).to.deep.equal({ skipped: true });

    const waiting = r.run({ wait: true });
    // It waits on the row (seen by the database), and runs once the holder lets go.
    let blocked = 0;
    for (let i = 0; i < 200 && !blocked; i++) {
      blocked = Number((await knex.raw(`select count(*) as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%from message_rollup_state where id = 1 for update'`)).rows[0].n);
      if (!blocked) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(blocked, 'a run waiting on the watermark').to.be.at.least(1);
    await holder.commit();
    holder = null;
    expect(await waiting).to.deep.equal({ skipped: false });
  });

  it('keeps one timer however often started, at its interval, and stop() clears it', async () => {
    const r = rollup(45_000);
    const [realSet, realClear] = [globalThis.setInterval, globalThis.clearInterval];
    const set: { ms: number | undefined; handle: NodeJS.Timeout }[] = [];
    const cleared: unknown[] = [];
    globalThis.setInterval = ((tick: () => void, ms?: number) => {
      const handle = realSet(tick, ms);
      set.push({ ms, handle });
      return handle;
    }) as typeof setInterval;
    globalThis.clearInterval = ((handle: NodeJS.Timeout) => {
      cleared.push(handle);
      realClear(handle);
    }) as typeof clearInterval;
    try {
      r.start();
      r.start();
      expect(set.map((s) => s.ms)).to.deep.equal([45_000]);
      await r.stop();
      expect(cleared).to.deep.equal([set[0]!.handle]);
    } finally {
      globalThis.setInterval = realSet;
      globalThis.clearInterval = realClear;
      await r.stop();
    }
  });

  it('builds every hour, day and agent total on its first run (no watermark yet)', async () => {
    const { server, baseUrl } = sharedServer();
    const svc = server.services.analytics;
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent', 'Fay First');
    // Back-dated conversations, never rolled up: only a first run (or a recount) reads them.
    const at = (day: number, h: number) => new Date(Date.UTC(2026, 5, day, h, 7));
    await server.db.knex('conversations').insert([10, 11, 11, 12].map((day, i) => ({
      organization_id: owner.orgId, status: i < 2 ? 'resolved' : 'open', assigned_to: agent.userId, created_at: at(day, 9 + i), updated_at: at(day, 9 + i),
      first_response_at: new Date(at(day, 9 + i).getTime() + 30_000), first_human_reply_at: new Date(at(day, 9 + i).getTime() + 60_000), first_human_reply_by: agent.userId,
      first_resolved_at: i < 2 ? new Date(at(day, 9 + i).getTime() + 3_600_000) : null, resolved_at: i < 2 ? new Date(at(day, 9 + i).getTime() + 3_600_000) : null,
    })));
    await server.db.knex('message_rollup_state').where({ id: 1 }).update({ rolled_until: null });
    expect(await svc.rollup.run({ wait: true })).to.deep.equal({ skipped: false });
    const before = svc.exactRows;
    /** Read from the aggregates, or exactly (a millisecond later: not the cached answer). */
    const read = async (path: string, exactly: boolean) => {
      svc.exactRows = exactly ? Number.MAX_SAFE_INTEGER : 0;
      const from = exactly ? '2026-06-09T00:00:00.001Z' : '2026-06-09T00:00:00.000Z';
      return expectApiSuccess(await owner.api.get(`${path}?from=${from}&to=2026-06-13T00:00:00.000Z&timezone=UTC`, { token: owner.accessToken }), 200);
    };
    try {
      const [summary, exactSummary] = [await read('/analytics/summary', false), await read('/analytics/summary', true)];
      expect([summary.percentiles, exactSummary.percentiles]).to.deep.equal(['histogram', 'exact']);
      expect(summary.conversations).to.deep.equal({ ...exactSummary.conversations, started: 4, resolved: 2 });
      const [agents, exactAgents] = [await read('/analytics/agents', false), await read('/analytics/agents', true)];
      const fay = (a: { agents: { userId: string }[] }) => a.agents.find((x) => x.userId === agent.userId) as Record<string, unknown>;
      expect(agents.percentiles).to.equal('histogram');
      expect(fay(agents)).to.include({ assigned: 4, resolved: 2, open: 2, firstHumanResponses: 4 });
      expect(fay(agents)).to.include({ assigned: fay(exactAgents).assigned, firstHumanResponses: fay(exactAgents).firstHumanResponses });
    } finally {
      svc.exactRows = before;
    }
  });
});
