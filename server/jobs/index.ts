// The one durable job queue: work that runs later or leaves the process (webhook deliveries, knowledge indexing,
// sweeps). A job row is written in the same transaction as the change that causes it, so a rolled-back change
// leaves no job and a committed one never loses it. Any instance may run it: a claim takes due rows with
// FOR UPDATE SKIP LOCKED and holds them under a lease; a job whose instance died is claimed again once the lease
// runs out. Delivery is therefore at least once: handlers must be safe to run twice.
// Under load one claim statement takes work for every free slot of a queue (one claim in flight per queue at a
// time). A slot is free as soon as its handler returns: the outcome is written afterwards, the jobs done meanwhile
// by one statement (or by the handler's own statement, when it answers JOB_FINISHED or FinishedBy). A queue may
// have its claim read, in the same statement, the rows each run needs (`claimDetail`).
import type { Knex } from 'knex';
import type { Logger } from '../logger.js';
import type { JobQueueSelection } from '../config.js';
import { ForegroundPressure } from './pressure.js';
import { tickBatch } from './tickBatch.js';

export interface Job<P> {
  id: string;
  queue: string;
  organizationId: string | null;
  payload: P;
  /** 1 on the first run. */
  attempt: number;
  /** What the queue's `claimDetail` read with the claim (null without one). */
  detail?: unknown;
}

/**
 * A handler's answer when it recorded its job done itself, in the statement that wrote its own outcome (see
 * `finishJobsSql`): the queue writes nothing more for it.
 */
export const JOB_FINISHED = Symbol('job finished by its handler');

/**
 * A handler's answer when its own statement, still running, records its job done (see `finishJobsSql`): the job's
 * slot is free at once and the queue waits for `written` only where it waits for outcomes (stop, drain). Should the
 * write fail, or the process end first, the job runs again after its lease (runs are at least once anyway).
 */
export class FinishedBy {
  constructor(readonly written: Promise<void>) {}
}

/**
 * An UPDATE marking done the claims `(id uuid, attempts int)` that `claims` (a relation in the caller's SQL) lists,
 * unless another instance took a job over after this claim's lease ran out; for a handler's own statement, as a CTE.
 */
export function finishJobsSql(claims: string): string {
  return `update jobs set status = 'done', last_error = null, locked_until = null, finished_at = now(), updated_at = now()
           where (id, attempts) in (select id, attempts from ${claims})`;
}

export interface QueueDefinition<P> {
  queue: string;
  handle(job: Job<P>): Promise<void | typeof JOB_FINISHED | FinishedBy>;
  /** Wait after failed attempt n before attempt n + 1, in seconds; its length + 1 is the number of attempts. */
  retryDelaysSeconds: number[];
  /** How long a claim holds a job before another instance may take it (default 60 s): longer than a run takes. */
  leaseSeconds?: number;
  /** Jobs of this queue running at once on one instance (default 4). */
  concurrency?: number;
  /**
   * An SQL expression read for each claimed job by the claim's own statement, handed to the handler as `job.detail`:
   * the rows a run needs come with its claim instead of a read of their own. `job` names the claimed row (`id`,
   * `organization_id`, `payload`, `attempts`); the expression must yield one value (a json object, say) or null.
   */
  claimDetail?: string;
  /**
   * Background work (webhook deliveries): while the instance serves users and runs late (see pressure.ts), at most
   * `BACKGROUND_UNDER_PRESSURE` of its jobs run at once.
   */
  background?: boolean;
}

/** Runs of a background queue at once while interactive work presses. */
export const BACKGROUND_UNDER_PRESSURE = 4;

/** Try again later: after `delaySeconds` when given (a Retry-After), else after the queue's next delay. */
export class RetryLater extends Error {
  constructor(
    message: string,
    readonly delaySeconds?: number,
  ) {
    super(message);
    this.name = 'RetryLater';
  }
}

/** A failure that another attempt cannot fix: the job is marked failed at once. */
export class GiveUp extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GiveUp';
  }
}

export interface EnqueueOptions {
  organizationId?: string | null;
  /** The transaction of the change that causes the job: the job exists exactly when the change commits. */
  trx?: Knex.Transaction;
  runAt?: Date;
  /** While a job with this key is pending or running in the queue, enqueueing it again returns that job. */
  dedupeKey?: string;
}

interface ClaimedRow {
  id: string;
  organizationId: string | null;
  queue: string;
  payload: unknown;
  attempts: number;
  detail: unknown;
}

const POLL_MS = 1_000;
const PRUNE_MS = 3_600_000;
/** How long a stop waits for running jobs (the graceful stop as a whole must end within 15 s). */
const STOP_WAIT_MS = 8_000;
/** Finished jobs are kept this long, for inspection, then deleted. */
const KEEP_FINISHED_DAYS = 7;

export class JobQueue {
  private readonly queues = new Map<string, Required<QueueDefinition<unknown>>>();
  private readonly inFlight = new Map<string, Set<Promise<void>>>();
  /** Outcomes of ended runs still being written. */
  private readonly settling = new Set<Promise<void>>();
  private poller: NodeJS.Timeout | null = null;
  private pruner: NodeJS.Timeout | null = null;
  private stopped = true;
  /** Queues with a claim in flight, and those asked to poll meanwhile (they claim again once it returns). */
  private readonly claiming = new Set<string>();
  private readonly pollAgain = new Set<string>();
  /** Queues whose claim is already planned for a burst of inserts. */
  private readonly wakeTimers = new Map<string, NodeJS.Timeout>();
  // One write in flight: the runs that end meanwhile go together in the next one.
  private readonly markDone = tickBatch((rows: ClaimedRow[]) => this.finishDone(rows), { inFlight: 1 });

  constructor(
    private readonly knex: Knex,
    private readonly logger: Logger,
    private readonly options: {
      pollMs?: number;
      /** The queues this instance works on (JOB_QUEUES); default all. */
      select?: JobQueueSelection;
      /** Interactive work done so far (a counter): background queues yield to it while the instance runs late. */
      foreground?: () => number;
    } = {},
  ) {
    this.pressure = options.foreground ? new ForegroundPressure(options.foreground, () => this.poll()) : null;
  }

  private readonly pressure: ForegroundPressure | null;

  /** Whether background queues are held to a trickle right now (interactive work presses). */
  get pressed(): boolean {
    return this.pressure?.active ?? false;
  }

  /** Whether this instance claims and runs jobs of `queue` (it writes jobs of every defined queue). */
  private runs(queue: string): boolean {
    const select = this.options.select;
    return this.queues.has(queue) && (!select || ((!select.only || select.only.includes(queue)) && !select.except.includes(queue)));
  }

  define<P>(definition: QueueDefinition<P>): void {
    if (this.queues.has(definition.queue)) throw new Error(`queue ${definition.queue} is defined twice`);
    this.queues.set(definition.queue, { leaseSeconds: 60, concurrency: 4, claimDetail: 'null', background: false, ...definition } as Required<QueueDefinition<unknown>>);
    this.inFlight.set(definition.queue, new Set());
  }

  /** The queues this instance runs (a database shared by several deployments may hold others). */
  names(): string[] {
    return [...this.queues.keys()].filter((name) => this.runs(name));
  }

  async enqueue<P>(queue: string, payload: P, options: EnqueueOptions = {}): Promise<{ id: string }> {
    if (!this.queues.has(queue)) throw new Error(`queue ${queue} is not defined`);
    const db = options.trx ?? this.knex;
    const row = { queue, payload: JSON.stringify(payload ?? {}), organization_id: options.organizationId ?? null, run_at: options.runAt ?? new Date(), dedupe_key: options.dedupeKey ?? null };
    const inserted = options.dedupeKey
      ? await db('jobs').insert(row).onConflict(db.raw(`(queue, dedupe_key) where dedupe_key is not null and status in ('pending', 'running')`)).ignore().returning('id')
      : await db('jobs').insert(row).returning('id');
    let id = (inserted[0] as { id: string } | undefined)?.id;
    if (!id) {
      const existing = await db('jobs').select('id').where({ queue, dedupe_key: options.dedupeKey }).whereIn('status', ['pending', 'running']).first();
      id = (existing as { id: string }).id;
    }
    this.wakeAfterCommit(queue, options.trx);
    return { id };
  }

  /** Many jobs of one queue in one statement (no dedupe keys): ids in the order of `payloads`. */
  async enqueueMany<P>(queue: string, payloads: P[], options: Omit<EnqueueOptions, 'dedupeKey'> = {}): Promise<{ id: string }[]> {
    if (!this.queues.has(queue)) throw new Error(`queue ${queue} is not defined`);
    if (payloads.length === 0) return [];
    const db = options.trx ?? this.knex;
    const runAt = options.runAt ?? new Date();
    const rows = payloads.map((payload) => ({ queue, payload: JSON.stringify(payload ?? {}), organization_id: options.organizationId ?? null, run_at: runAt }));
    const inserted = (await db('jobs').insert(rows).returning('id')) as { id: string }[];
    this.wakeAfterCommit(queue, options.trx);
    return inserted;
  }

  /**
   * Inserts `rows` into `table` (a row that conflicts on `conflict` is skipped) and, in the same statement, one job of
   * `queue` per organization for the rows actually inserted, its payload `{ [idsKey]: ids }` (the rows stored
   * together are processed together): rows and jobs commit together in one round trip, for callers that answer only
   * after both are stored (provider webhooks). Answers the inserted ids. With `wakeWithinMs` the jobs are claimed
   * that much later at most, together with whatever else was inserted meanwhile (one claim for a burst).
   */
  async insertWithJobs(table: string, rows: Record<string, unknown>[], conflict: string[], queue: string, idsKey: string, wakeWithinMs = 0): Promise<string[]> {
    if (!this.queues.has(queue)) throw new Error(`queue ${queue} is not defined`);
    if (rows.length === 0) return [];
    const insert = this.knex(table).insert(rows).onConflict(conflict).ignore().returning(['id', 'organizationId']).toSQL();
    const result = await this.knex.raw(
      `with inserted as (${insert.sql}), queued as (
         insert into jobs (queue, payload, organization_id)
         select ?, jsonb_build_object(?::text, jsonb_agg(inserted.id)), inserted.organization_id from inserted group by inserted.organization_id
       )
       select id from inserted`,
      [...insert.bindings, queue, idsKey],
    );
    const ids = ((result.rows ?? result) as { id: string }[]).map((r) => r.id);
    if (ids.length && wakeWithinMs > 0) this.wakeWithin(queue, wakeWithinMs);
    else if (ids.length) this.poll(queue);
    return ids;
  }

  private wakeWithin(queue: string, ms: number): void {
    if (this.wakeTimers.has(queue)) return;
    const timer = setTimeout(() => {
      this.wakeTimers.delete(queue);
      this.poll(queue);
    }, ms);
    timer.unref();
    this.wakeTimers.set(queue, timer);
  }

  /**
   * Jobs of `queue` were written by a statement of their own (committed): claim them now, not at the next poll, or
   * within `withinMs` at most, together with whatever else is written meanwhile (one claim for a burst).
   */
  wake(queue: string, withinMs = 0): void {
    if (!this.runs(queue)) return;
    if (withinMs > 0) this.wakeWithin(queue, withinMs);
    else this.poll(queue);
  }

  /** Picked up at once after the commit rather than at the next poll. */
  private wakeAfterCommit(queue: string, trx: Knex.Transaction | undefined): void {
    const committed = trx ? trx.executionPromise : Promise.resolve();
    committed.then(() => this.poll(queue), () => undefined);
  }

  /** Throws when JOB_QUEUES names a queue that is not defined (a typo would leave its jobs waiting forever). */
  checkSelection(): void {
    const named = [...(this.options.select?.only ?? []), ...(this.options.select?.except ?? [])];
    const unknown = named.filter((name) => !this.queues.has(name));
    if (unknown.length > 0) throw new Error(`JOB_QUEUES names unknown queues: ${unknown.join(', ')} (known: ${[...this.queues.keys()].join(', ')})`);
  }

  start(): void {
    if (!this.stopped) return;
    this.checkSelection();
    this.stopped = false;
    this.poller = setInterval(() => this.poll(), this.options.pollMs ?? POLL_MS);
    this.poller.unref();
    this.pressure?.start();
    const prune = () => void this.prune().catch((err) => this.logger.warn({ err }, 'pruning finished jobs failed'));
    this.pruner = setInterval(prune, PRUNE_MS);
    this.pruner.unref();
    prune();
    this.poll();
  }

  /**
   * Stops claiming and waits for the jobs this instance is running, for at most `waitMs`: a job still running then
   * keeps its row, and another instance (or this one after a restart) takes it again once its lease runs out.
   */
  async stop(waitMs = STOP_WAIT_MS): Promise<void> {
    this.stopped = true;
    this.pressure?.stop();
    if (this.poller) clearInterval(this.poller);
    if (this.pruner) clearInterval(this.pruner);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), waitMs)));
    const running = Promise.allSettled([...this.inFlight.values()].flatMap((set) => [...set])).then(() => this.settled());
    if ((await Promise.race([running, deadline])) === 'late') this.logger.warn({ waitMs }, 'jobs still running at stop are left to their leases');
    clearTimeout(timer);
  }

  /**
   * Runs every job of `queue` (or of all queues) that is due now, until none is left; returns how many ran. Over all
   * queues it goes round until a round runs nothing, since a job may write jobs of another queue (a fan-out).
   */
  async drain(queue?: string): Promise<number> {
    let ran = 0;
    for (let round = -1; round !== 0; ) {
      round = 0;
      for (const name of queue ? [queue].filter((q) => this.runs(q)) : this.names()) {
        for (;;) {
          const claimed = await this.claim(name, 50);
          if (claimed.length === 0) break;
          await Promise.all(claimed.map((row) => this.run(name, row)));
          round += claimed.length;
        }
      }
      await this.settled();
      ran += round;
      if (queue) break;
    }
    return ran;
  }

  /** Until the outcomes of the runs that ended so far are written. */
  private async settled(): Promise<void> {
    while (this.settling.size > 0) await Promise.allSettled([...this.settling]);
  }

  /** Claims what each queue has room for and runs it; never throws (a failed pass is retried at the next poll). */
  private poll(only?: string): void {
    if (this.stopped) return;
    for (const name of this.names()) if (!only || name === only) this.pollQueue(name);
  }

  private pollQueue(name: string): void {
    if (this.stopped) return;
    // One claim at a time per queue: a poll asked for meanwhile runs when it returns, for all the room there is then.
    if (this.claiming.has(name)) {
      this.pollAgain.add(name);
      return;
    }
    const definition = this.queues.get(name)!;
    const running = this.inFlight.get(name)!;
    const concurrency = definition.background && this.pressure?.active ? Math.min(definition.concurrency, BACKGROUND_UNDER_PRESSURE) : definition.concurrency;
    const room = concurrency - running.size;
    // A busy queue waits for a quarter of its slots before claiming: runs that end a few at a time would otherwise
    // keep being claimed, read and recorded a few rows per statement. (Every ending run polls again, so it is not
    // left waiting.)
    if (room <= 0 || (running.size > 0 && room < Math.ceil(concurrency / 4))) return;
    this.claiming.add(name);
    this.claim(name, room)
      .then((rows) => {
        for (const row of rows) {
          const run = this.run(name, row).finally(() => {
            running.delete(run);
            // A queue with more waiting keeps going without waiting for the next poll.
            this.pollQueue(name);
          });
          running.add(run);
        }
      })
      .catch((err) => this.logger.warn({ err, queue: name }, 'claiming jobs failed'))
      .finally(() => {
        this.claiming.delete(name);
        if (this.pollAgain.delete(name)) this.pollQueue(name);
      });
  }

  private async claim(queue: string, limit: number): Promise<ClaimedRow[]> {
    const { leaseSeconds, claimDetail } = this.queues.get(queue)!;
    // Each kind of claimable row is read through its own partial index in due order, so a long backlog costs a
    // claim a few index entries rather than a scan and sort of everything pending.
    const result = await this.knex.raw(
      `with due as (
         select id, run_at from jobs where queue = ? and status = 'pending' and run_at <= now()
          order by run_at limit ? for update skip locked
       ), expired as (
         select id, run_at from jobs where queue = ? and status = 'running' and locked_until < now()
          order by locked_until limit ? for update skip locked
       ), claimed as (
         update jobs set status = 'running', attempts = attempts + 1, locked_until = now() + make_interval(secs => ?), updated_at = now()
          where id in (select id from (select * from due union all select * from expired) claimable order by run_at limit ?)
          returning id, organization_id, queue, payload, attempts
       )
       select job.id, job.organization_id as "organizationId", job.queue, job.payload, job.attempts, ${claimDetail} as detail from claimed job`,
      [queue, limit, queue, limit, leaseSeconds, limit],
    );
    return (result.rows ?? result) as ClaimedRow[];
  }

  /** Runs the handler; resolves when it returns, its outcome then written in the background (see `settled`). */
  private async run(queue: string, row: ClaimedRow): Promise<void> {
    const definition = this.queues.get(queue)!;
    const payload = typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload;
    let outcome: Promise<void>;
    try {
      const answer = await definition.handle({ id: row.id, queue, organizationId: row.organizationId, payload, attempt: row.attempts, detail: row.detail ?? null });
      outcome = answer === JOB_FINISHED ? Promise.resolve() : answer instanceof FinishedBy ? answer.written : this.markDone(row);
    } catch (err) {
      outcome = this.failed(definition, row, err);
    }
    const written = outcome
      .catch((err: unknown) => this.logger.error({ err, jobId: row.id }, 'could not record a job\'s outcome (it runs again after its lease)'))
      .finally(() => this.settling.delete(written));
    this.settling.add(written);
  }

  /** Gives up on the job or schedules its next attempt. */
  private async failed(definition: Required<QueueDefinition<unknown>>, row: ClaimedRow, err: unknown): Promise<void> {
    const { queue } = definition;
    const message = err instanceof Error ? err.message.slice(0, 1000) : 'job failed';
    const retriesLeft = row.attempts <= definition.retryDelaysSeconds.length;
    if (err instanceof GiveUp || !retriesLeft) {
      this.logger.warn({ jobId: row.id, queue, attempts: row.attempts, err: message }, 'job failed for good');
      await this.finish(row, { status: 'failed', last_error: message });
      return;
    }
    const delay = err instanceof RetryLater && err.delaySeconds !== undefined ? err.delaySeconds : definition.retryDelaysSeconds[row.attempts - 1]!;
    this.logger.info({ jobId: row.id, queue, attempts: row.attempts, retryInSeconds: delay, err: message }, 'job will be retried');
    await this.knex('jobs')
      .where({ id: row.id, attempts: row.attempts })
      .update({ status: 'pending', locked_until: null, last_error: message, run_at: this.knex.raw('now() + make_interval(secs => ?)', [delay]), updated_at: this.knex.fn.now() })
      .catch((e: unknown) => this.logger.error({ err: e, jobId: row.id }, 'could not reschedule a job (it runs again after its lease)'));
  }

  /** Records the outcome, unless another instance took the job over after this claim's lease ran out. */
  private async finish(row: ClaimedRow, outcome: { status: 'done' | 'failed'; last_error: string | null }): Promise<void> {
    await this.knex('jobs')
      .where({ id: row.id, attempts: row.attempts })
      .update({ ...outcome, locked_until: null, finished_at: this.knex.fn.now(), updated_at: this.knex.fn.now() })
      .catch((err: unknown) => this.logger.error({ err, jobId: row.id }, 'could not record a finished job (it runs again after its lease)'));
  }

  /** `finish` for the jobs that succeeded while the previous such write ran, in one statement. */
  private async finishDone(rows: ClaimedRow[]): Promise<void[]> {
    const claims = JSON.stringify(rows.map((r) => ({ id: r.id, attempts: r.attempts })));
    await this.knex
      .raw(finishJobsSql('jsonb_to_recordset(?::jsonb) as c(id uuid, attempts int)'), [claims])
      .catch((err: unknown) => this.logger.error({ err, jobIds: rows.map((r) => r.id) }, 'could not record finished jobs (they run again after their leases)'));
    return rows.map(() => undefined);
  }

  private async prune(): Promise<number> {
    return this.knex('jobs').where('finished_at', '<', this.knex.raw(`now() - interval '${KEEP_FINISHED_DAYS} days'`)).delete();
  }
}
