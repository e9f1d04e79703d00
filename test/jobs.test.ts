// The durable job queue: transactional enqueue, retries and giving up, leases after a crash, one run per job across
// instances, and jobs surviving a restart.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { BACKGROUND_UNDER_PRESSURE, FinishedBy, finishJobsSql, GiveUp, JOB_FINISHED, JobQueue, RetryLater } from '../server/jobs/index.js';
import { sharedServer } from './helpers/hooks.js';
import { startTestServer } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

/** Each test gets its own queue name, so queues defined on the shared server never collide. */
const queueName = () => `test-${randomUUID().slice(0, 8)}`;

async function jobRow(id: string) {
  return sharedServer().server.db.knex('jobs').where({ id }).first();
}

/** Drains (the server's own poller may get there first) until the job's row satisfies `done`. */
async function settle(queue: string, id: string, done: (row: any) => boolean, what: string) {
  const { jobs } = sharedServer().server;
  return waitFor(async () => {
    await jobs.drain(queue);
    const row = await jobRow(id);
    return done(row) ? row : null;
  }, { what });
}

describe('jobs: the durable queue', function () {
  this.timeout(60_000);

  it('exists only when the enqueueing transaction commits, and runs once', async () => {
    const { jobs, db } = sharedServer().server;
    const queue = queueName();
    const seen: string[] = [];
    jobs.define<{ n: number }>({ queue, retryDelaysSeconds: [], handle: async (job) => void seen.push(`${job.payload.n}:${job.attempt}`) });
    await db.knex
      .transaction(async (trx) => {
        await jobs.enqueue(queue, { n: 1 }, { trx });
        throw new Error('roll back');
      })
      .catch(() => undefined);
    const committed = await db.knex.transaction((trx) => jobs.enqueue(queue, { n: 2 }, { trx }));
    await waitFor(async () => (await jobRow(committed.id))?.status === 'done', { what: 'the committed job to run' });
    expect(await jobs.drain(queue)).to.equal(0);
    expect(seen).to.deep.equal(['2:1']);
    expect(Number((await db.knex('jobs').where({ queue }).count<{ count: string }[]>('* as count'))[0]!.count)).to.equal(1);
  });

  it('retries with the queue\'s delays, honours a requested delay, and fails for good when attempts run out', async () => {
    const { jobs, db } = sharedServer().server;
    const queue = queueName();
    let calls = 0;
    jobs.define({ queue, retryDelaysSeconds: [0, 3600], handle: async () => {
      calls++;
      throw new Error(`boom ${calls}`);
    } });
    const { id } = await jobs.enqueue(queue, {});
    // Attempt 1 failed (retry at once), attempt 2 failed (retry in an hour): pending, not yet due.
    let row = await settle(queue, id, (r) => r.attempts === 2 && r.status === 'pending', 'two failed attempts');
    expect(row.lastError).to.equal('boom 2');
    expect(new Date(row.runAt).getTime()).to.be.greaterThan(Date.now() + 3_500_000);
    expect(await jobs.drain(queue)).to.equal(0);
    await db.knex('jobs').where({ id }).update({ run_at: new Date() });
    row = await settle(queue, id, (r) => r.status === 'failed', 'the last attempt');
    expect(row.attempts).to.equal(3);
    expect(calls).to.equal(3);

    const later = queueName();
    jobs.define({ queue: later, retryDelaysSeconds: [1], handle: async () => {
      throw new RetryLater('busy', 120);
    } });
    const retried = await jobs.enqueue(later, {});
    const delayed = await settle(later, retried.id, (r) => r.attempts === 1 && r.status === 'pending', 'a first attempt');
    expect(new Date(delayed.runAt).getTime()).to.be.within(Date.now() + 100_000, Date.now() + 130_000);
  });

  it('marks a job failed at once on GiveUp', async () => {
    const { jobs } = sharedServer().server;
    const queue = queueName();
    jobs.define({ queue, retryDelaysSeconds: [0, 0, 0], handle: async () => {
      throw new GiveUp('no such target');
    } });
    const { id } = await jobs.enqueue(queue, {});
    const row = await settle(queue, id, (r) => r.status !== 'pending' && r.status !== 'running', 'the job to end');
    expect([row.status, row.attempts, row.lastError]).to.deep.equal(['failed', 1, 'no such target']);
  });

  it('takes over a job whose instance died once its lease ran out, and not before', async () => {
    const { jobs, db } = sharedServer().server;
    const queue = queueName();
    const runs: number[] = [];
    jobs.define({ queue, retryDelaysSeconds: [], handle: async (job) => void runs.push(job.attempt) });
    const { id } = await jobs.enqueue(queue, {}, { runAt: new Date(Date.now() + 3_600_000) });
    // As a crashed instance leaves it: claimed, running, lease still valid.
    await db.knex('jobs').where({ id }).update({ status: 'running', attempts: 1, locked_until: new Date(Date.now() + 60_000) });
    expect(await jobs.drain(queue)).to.equal(0);
    await db.knex('jobs').where({ id }).update({ locked_until: new Date(Date.now() - 1_000) });
    await settle(queue, id, (r) => r.status === 'done', 'the job taken over');
    expect(runs).to.deep.equal([2]);
  });

  it('keeps one job per dedupe key while it is unfinished', async () => {
    const { jobs } = sharedServer().server;
    const queue = queueName();
    let runs = 0;
    jobs.define({ queue, retryDelaysSeconds: [], handle: async () => void runs++ });
    const later = new Date(Date.now() + 3_600_000);
    const first = await jobs.enqueue(queue, { v: 1 }, { dedupeKey: 'reindex:doc-1', runAt: later });
    const second = await jobs.enqueue(queue, { v: 2 }, { dedupeKey: 'reindex:doc-1', runAt: later });
    expect(second.id).to.equal(first.id);
    await sharedServer().server.db.knex('jobs').where({ id: first.id }).update({ run_at: new Date() });
    await settle(queue, first.id, (r) => r.status === 'done', 'the deduplicated job');
    const third = await jobs.enqueue(queue, { v: 3 }, { dedupeKey: 'reindex:doc-1', runAt: later });
    expect(third.id).to.not.equal(first.id);
    expect(runs).to.equal(1);
  });

  it('runs each job exactly once when two instances claim at the same time', async function () {
    const { db, logger } = sharedServer().server;
    const queue = queueName();
    const ran = new Map<number, number>();
    const handle = async (job: { payload: { n: number } }) => {
      await new Promise((r) => setTimeout(r, 2));
      ran.set(job.payload.n, (ran.get(job.payload.n) ?? 0) + 1);
    };
    // Two queues over the same table stand for two instances.
    const one = new JobQueue(db.knex, logger);
    const two = new JobQueue(db.knex, logger);
    for (const q of [one, two]) q.define<{ n: number }>({ queue, retryDelaysSeconds: [], handle });
    await db.knex.transaction(async (trx) => {
      for (let n = 0; n < 60; n++) await one.enqueue(queue, { n }, { trx });
    });
    const [a, b] = await Promise.all([one.drain(queue), two.drain(queue)]);
    expect(a + b).to.equal(60);
    expect([...ran.values()].every((count) => count === 1)).to.equal(true);
    expect(ran.size).to.equal(60);
  });

  it('enqueues many jobs in one statement that exist only when the transaction commits', async () => {
    const { jobs, db } = sharedServer().server;
    const queue = queueName();
    const seen: number[] = [];
    jobs.define<{ n: number }>({ queue, retryDelaysSeconds: [], handle: async (job) => void seen.push(job.payload.n) });
    await db.knex
      .transaction(async (trx) => {
        await jobs.enqueueMany(queue, [{ n: -1 }, { n: -2 }], { trx });
        throw new Error('roll back');
      })
      .catch(() => undefined);
    const ids = await db.knex.transaction((trx) => jobs.enqueueMany(queue, [{ n: 1 }, { n: 2 }, { n: 3 }], { trx }));
    expect(await jobs.enqueueMany(queue, [])).to.deep.equal([]);
    const rows = await db.knex('jobs').whereIn('id', ids.map((i) => i.id));
    expect(ids.map((i) => rows.find((r: { id: string }) => r.id === i.id)!.payload.n)).to.deep.equal([1, 2, 3]);
    await waitFor(async () => (await db.knex('jobs').where({ queue, status: 'done' })).length === 3, { what: 'the three jobs to run' });
    expect(seen.sort()).to.deep.equal([1, 2, 3]);
    expect(await db.knex('jobs').where({ queue })).to.have.length(3);
  });

  it('claims in bulk on two running instances, never one job twice nor past the concurrency', async () => {
    const { db, logger } = sharedServer().server;
    const queue = queueName();
    const ran = new Map<number, number>();
    const make = () => {
      const q = new JobQueue(db.knex, logger, { pollMs: 50 });
      let running = 0;
      let most = 0;
      q.define<{ n: number }>({ queue, retryDelaysSeconds: [], concurrency: 6, handle: async (job) => {
        most = Math.max(most, ++running);
        await new Promise((r) => setTimeout(r, 3));
        ran.set(job.payload.n, (ran.get(job.payload.n) ?? 0) + 1);
        running--;
      } });
      return { q, most: () => most };
    };
    const one = make();
    const two = make();
    await db.knex.transaction((trx) => one.q.enqueueMany(queue, Array.from({ length: 150 }, (_, n) => ({ n })), { trx }));
    one.q.start();
    two.q.start();
    try {
      await waitFor(async () => (await db.knex('jobs').where({ queue, status: 'done' })).length === 150, { what: 'every job to run', timeoutMs: 30_000 });
    } finally {
      await Promise.all([one.q.stop(), two.q.stop()]);
    }
    expect(ran.size).to.equal(150);
    expect([...ran.values()].every((count) => count === 1)).to.equal(true);
    // Both took part, several at a time, and neither ran more than its concurrency at once.
    expect(one.most()).to.be.within(2, 6);
    expect(two.most()).to.be.within(1, 6);
    const attempts = await db.knex('jobs').where({ queue }).distinct('attempts');
    expect(attempts.map((a: { attempts: number }) => a.attempts)).to.deep.equal([1]);
  });

  it('does not record a run as done once another instance took its job over', async () => {
    const { db, logger } = sharedServer().server;
    const queue = queueName();
    // Not started: only this test's drain claims.
    const q = new JobQueue(db.knex, logger);
    q.define<{ n: number }>({ queue, retryDelaysSeconds: [], handle: async (job) => {
      // Job 1's lease ran out while it ran and another instance claimed it again (attempt 2).
      await db.knex('jobs').where({ id: job.id }).update(job.payload.n === 1 ? { attempts: 2, locked_until: new Date(Date.now() + 60_000) } : { updated_at: new Date() });
    } });
    const [first, second] = await q.enqueueMany(queue, [{ n: 0 }, { n: 1 }]);
    expect(await q.drain(queue)).to.equal(2);
    expect((await jobRow(first!.id)).status).to.equal('done');
    const taken = await jobRow(second!.id);
    expect([taken.status, taken.attempts, taken.finishedAt]).to.deep.equal(['running', 2, null]);
    // A running row would keep other tests waiting for the queue to settle.
    await db.knex('jobs').where({ queue }).delete();
  });

  it('leaves a job whose handler answers JOB_FINISHED to that handler\'s own statement', async () => {
    const { db, logger } = sharedServer().server;
    const queue = queueName();
    // Not started: only this test's drain claims.
    const q = new JobQueue(db.knex, logger);
    q.define<{ n: number; own: boolean }>({ queue, retryDelaysSeconds: [], handle: async (job) => {
      if (!job.payload.own) return;
      // Finished by the handler's statement only when n is even; an odd one answers JOB_FINISHED without it.
      if (job.payload.n % 2 === 0) {
        await db.knex.raw(`with claims as (select ?::uuid as id, ?::int as attempts) ${finishJobsSql('claims')}`, [job.id, job.attempt]);
      }
      return JOB_FINISHED;
    } });
    const ids = await q.enqueueMany(queue, [0, 1, 2].map((n) => ({ n, own: true })).concat([{ n: 3, own: false }]));
    expect(await q.drain(queue)).to.equal(4);
    const rows = await Promise.all(ids.map((i) => jobRow(i.id)));
    // The queue wrote nothing for the JOB_FINISHED answers: only the handler's statement made them done.
    expect(rows.map((r) => r.status)).to.deep.equal(['done', 'running', 'done', 'done']);
    expect(rows[0].finishedAt).to.not.equal(null);
    await db.knex('jobs').where({ queue }).delete();
  });

  it('hands each run what its queue\'s claimDetail read with the claim', async () => {
    const { db, logger } = sharedServer().server;
    const queue = queueName();
    const q = new JobQueue(db.knex, logger);
    const seen: unknown[] = [];
    q.define<{ n: number }>({
      queue,
      retryDelaysSeconds: [],
      claimDetail: `jsonb_build_object('twice', (job.payload->>'n')::int * 2, 'attempts', job.attempts)`,
      handle: async (job) => void seen.push([job.payload.n, job.detail]),
    });
    await q.enqueueMany(queue, [{ n: 1 }, { n: 5 }]);
    expect(await q.drain(queue)).to.equal(2);
    expect(seen.sort()).to.deep.equal([[1, { twice: 2, attempts: 1 }], [5, { twice: 10, attempts: 1 }]]);
    // A queue without one gets null.
    const plain = queueName();
    q.define({ queue: plain, retryDelaysSeconds: [], handle: async (job) => void seen.push(job.detail) });
    await q.enqueue(plain, {});
    await q.drain(plain);
    expect(seen[2]).to.equal(null);
    await db.knex('jobs').whereIn('queue', [queue, plain]).delete();
  });

  it('frees a FinishedBy run\'s slot before its write ends, and waits for the write at stop', async () => {
    const { db, logger } = sharedServer().server;
    const queue = queueName();
    const q = new JobQueue(db.knex, logger, { pollMs: 50 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let handled = 0;
    // One slot: the second job runs only once the first one's slot is free.
    q.define({ queue, retryDelaysSeconds: [], concurrency: 1, handle: async (job) => {
      handled++;
      // The write waits for the gate; the queue must not write the job done itself meanwhile.
      return new FinishedBy(gate.then(() => db.knex.raw(`with claims as (select ?::uuid as id, ?::int as attempts) ${finishJobsSql('claims')}`, [job.id, job.attempt])).then(() => undefined));
    } });
    const ids = await q.enqueueMany(queue, [{}, {}]);
    q.start();
    try {
      await waitFor(async () => handled === 2, { what: 'the second run while the first one\'s write waits' });
      expect((await Promise.all(ids.map((i) => jobRow(i.id)))).map((r) => r.status)).to.deep.equal(['running', 'running']);
      let stopped = false;
      const stopping = q.stop().then(() => (stopped = true));
      await new Promise((r) => setTimeout(r, 100));
      expect(stopped, 'stop waits for the writes').to.equal(false);
      release();
      await stopping;
      expect((await Promise.all(ids.map((i) => jobRow(i.id)))).map((r) => r.status)).to.deep.equal(['done', 'done']);
    } finally {
      release();
      await q.stop();
      await db.knex('jobs').where({ queue }).delete();
    }
  });

  it('still runs a job enqueued before a stop, after the next start', async () => {
    // Own data directory (or the shared PostgreSQL), so the second server opens what the first one left.
    const dataDir = mkdtempSync(path.join(tmpdir(), 'support-jobs-'));
    const queue = queueName();
    let ran = 0;
    try {
      const first = await startTestServer({ DATA_DIR: dataDir });
      first.server.jobs.define({ queue, retryDelaysSeconds: [], handle: async () => void ran++ });
      await first.server.jobs.stop();
      const { id } = await first.server.jobs.enqueue(queue, {});
      await first.server.stop();
      expect(ran).to.equal(0);

      const second = await startTestServer({ DATA_DIR: dataDir });
      try {
        second.server.jobs.define({ queue, retryDelaysSeconds: [], handle: async () => void ran++ });
        await waitFor(async () => (await second.server.jobs.drain(queue), ran === 1), { what: 'the job after the restart' });
        await new Promise((r) => setTimeout(r, 200));
        expect(ran).to.equal(1);
        expect((await second.server.db.knex('jobs').where({ id }).first()).status).to.equal('done');
      } finally {
        await second.server.stop();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('works only on the queues JOB_QUEUES selects, and refuses to start on a queue it does not know', async () => {
    const listed = await startTestServer({ JOB_QUEUES: 'storage-sweep,knowledge-index' });
    const allBut = await startTestServer({ JOB_QUEUES: '-webhook-delivery' });
    try {
      expect(listed.server.jobs.names()).to.have.members(['storage-sweep', 'knowledge-index']);
      expect(allBut.server.jobs.names()).to.include.members(['channel-inbound', 'knowledge-index']).and.not.include('webhook-delivery');
      // A queue outside the selection is written to but never claimed here: another instance runs it.
      const queue = queueName();
      let ran = 0;
      listed.server.jobs.define({ queue, retryDelaysSeconds: [], handle: async () => void ran++ });
      const { id } = await listed.server.jobs.enqueue(queue, {});
      listed.server.jobs.wake(queue);
      expect(await listed.server.jobs.drain(queue)).to.equal(0);
      await new Promise((r) => setTimeout(r, 1_500));
      expect(ran).to.equal(0);
      expect((await listed.server.db.knex('jobs').where({ id }).first()).status).to.equal('pending');
      await listed.server.db.knex('jobs').where({ id }).delete();
    } finally {
      await Promise.all([listed.stop(), allBut.stop()]);
    }
    let refused: unknown = null;
    await startTestServer({ JOB_QUEUES: 'knowledge-index,knowlege-index' }).then((t) => t.stop(), (err: unknown) => void (refused = err));
    expect(String(refused)).to.include('JOB_QUEUES names unknown queues: knowlege-index');
  });

  it('runs a background queue at a trickle while users are served and the loop runs late, at full speed after', async function () {
    // On a machine busy with other work the loop can stay late for a while after the burst (the pressure then rightly
    // holds on): the release is awaited for up to 30 s.
    this.timeout(60_000);
    const { db, logger } = sharedServer().server;
    let served = 0;
    // Users are served only while the burst below runs: once it stops, the count stands still and the pressure ends.
    const queues = new JobQueue(db.knex, logger, { foreground: () => served, pollMs: 100 });
    const queue = queueName();
    let running = 0;
    let most = 0;
    const finish: (() => void)[] = [];
    queues.define({ queue, background: true, concurrency: 24, retryDelaysSeconds: [], handle: async () => {
      running++;
      most = Math.max(most, running);
      await new Promise<void>((r) => finish.push(r));
      running--;
    } });
    // Messages being served while the loop is blocked 40 ms of every 50: the instance is busy with users.
    const busy = setInterval(() => {
      served++;
      const until = Date.now() + 40;
      while (Date.now() < until);
    }, 50);
    try {
      queues.start();
      await waitFor(() => queues.pressed, { what: 'the pressure to be seen' });
      await queues.enqueueMany(queue, Array.from({ length: 40 }, (_, n) => ({ n })));
      await waitFor(() => running > 0, { what: 'a first run under pressure' });
      // Polls and ending runs would claim more within this time if the queue were not held back.
      await new Promise((r) => setTimeout(r, 1_000));
      expect(queues.pressed).to.equal(true);
      expect(most).to.be.within(1, BACKGROUND_UNDER_PRESSURE);
    } finally {
      clearInterval(busy);
    }
    // The burst is over: the queue takes its full concurrency without waiting for the jobs it holds to end.
    await waitFor(() => running === 24, { what: 'the full concurrency once the pressure is gone', timeoutMs: 30_000 });
    while (finish.length > 0 || running > 0) {
      finish.splice(0).forEach((f) => f());
      await new Promise((r) => setTimeout(r, 20));
    }
    await queues.stop();
    await db.knex('jobs').where({ queue }).delete();
  });
});
