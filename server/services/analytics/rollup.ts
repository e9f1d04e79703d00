// The analytics rollup: a periodic in-process job counts messages by organization, minute, sender kind and channel,
// then refreshes the hourly, daily and per-agent aggregates of the hours and days whose conversations or messages
// changed, so analytics never reads the messages table, long periods read days and hours rather than conversations,
// and the send path writes nothing extra.
import type { Knex } from 'knex';
import { rebuild, refreshSince } from './hourly.js';

export interface RollupResult {
  /** Another instance held the watermark row: nothing was done. */
  skipped: boolean;
}

/**
 * Conversations carry times from the application's clock, so their changes are looked for this far before the
 * watermark; a figure is replaced, never added to, which makes a run idempotent. It is also how far back messages are
 * recounted when the horizon below cannot be known.
 */
export const RECOUNT_WINDOW = '5 minutes';
const RECOUNT_WINDOW_MS = 5 * 60_000;

/**
 * A message's created_at is the start of the transaction that wrote it, so a send that commits late lands in a minute
 * already counted. Every message older than the start of the oldest transaction running now is committed: that
 * instant (or now, when none runs) is the horizon, and the next run recounts whole buckets from it. Read before the
 * count, whose snapshot comes later (read committed): a transaction still running then was running here too, or
 * started after this one. Another role's sessions hide their start: then the horizon falls back to the fixed window.
 */
const HORIZON_SQL = `
  select least(now(), min(a.xact_start), max(case when a.query = '<insufficient privilege>' then now() - interval '${RECOUNT_WINDOW}' end)) as horizon
  from (select null::timestamptz as xact_start, null::text as query
        union all
        select xact_start, query from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()) a`;

export class MessageRollup {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<RollupResult> | null = null;

  constructor(private readonly deps: { knex: Knex; intervalMs: number; onError: (err: unknown) => void }) {}

  /**
   * Counts the messages written since the watermark. With `wait` it queues behind a run of another instance
   * (tests use it to see every message counted); otherwise a locked watermark means someone else is at it.
   */
  run(opts: { wait?: boolean } = {}): Promise<RollupResult> {
    if (this.running && !opts.wait) return this.running;
    const run = (this.running ?? Promise.resolve()).catch(() => undefined).then(() => this.runOnce(!!opts.wait));
    this.running = run;
    void run.finally(() => {
      if (this.running === run) this.running = null;
    }).catch(() => undefined);
    return run;
  }

  private runOnce(wait: boolean): Promise<RollupResult> {
    return this.deps.knex.transaction(async (trx) => {
      const state = (await trx.raw(`select rolled_until, messages_counted_until from message_rollup_state where id = 1 for update${wait ? '' : ' skip locked'}`))
        .rows as { rolled_until: Date | null; messages_counted_until: Date | null }[];
      if (!state.length) return { skipped: true };
      const since = state[0]!.rolled_until;
      // Conversations are looked for from the window before the watermark, messages from the horizon the last run
      // noted (a state written before the horizon was kept: the window, as then).
      const windowStart = since ? new Date(since.getTime() - RECOUNT_WINDOW_MS) : null;
      const countFrom = state[0]!.messages_counted_until ?? windowStart;
      const { horizon } = (await trx.raw(HORIZON_SQL)).rows[0] as { horizon: Date };
      // A busy minute holds hundreds of thousands of messages: sorted or hashed in memory, not on disk.
      await trx.raw(`set local work_mem = '64MB'`);
      await trx.raw(
        `with per_conversation as (
           select m.organization_id, m.conversation_id, date_trunc('minute', m.created_at) as bucket, m.sender_type, count(*)::int as count
           from messages m
           where m.created_at >= coalesce(date_trunc('minute', ?::timestamptz), '-infinity'::timestamptz)
           group by 1, 2, 3, 4
         ), counted as (
           select p.organization_id, p.bucket, p.sender_type, c.channel, sum(p.count)::int as count
           from per_conversation p join conversations c on c.id = p.conversation_id
           group by 1, 2, 3, 4
         )
         insert into message_rollups (organization_id, bucket, sender_type, channel, count)
         select * from counted
         on conflict (organization_id, bucket, sender_type, channel) do update set count = excluded.count
         where message_rollups.count <> excluded.count`,
        [countFrom],
      );
      // The hours of every bucket just recounted too (a transaction that ran long can put the horizon before the window).
      await refreshSince(trx, windowStart && countFrom && countFrom < windowStart ? countFrom : windowStart);
      // The watermark is this transaction's start, before the count's snapshot.
      await trx.raw('update message_rollup_state set rolled_until = now(), messages_counted_until = ? where id = 1', [horizon]);
      return { skipped: false };
    });
  }

  /**
   * Recounts every bucket of one organization from its messages, and rebuilds its aggregates: after
   * conversations or messages were imported or back-dated, which the watermark window never looks at again.
   */
  recount(organizationId: string): Promise<void> {
    return this.deps.knex.transaction(async (trx) => {
      // Waits for a running rollup, so the two never write the same rows at once.
      await trx.raw('select 1 from message_rollup_state where id = 1 for update');
      await trx.raw('delete from message_rollups where organization_id = ?', [organizationId]);
      await trx.raw(
        `insert into message_rollups (organization_id, bucket, sender_type, channel, count)
         select m.organization_id, date_trunc('minute', m.created_at), m.sender_type, c.channel, count(*)::int
         from messages m join conversations c on c.id = m.conversation_id
         where m.organization_id = ? group by 1, 2, 3, 4`,
        [organizationId],
      );
      await rebuild(trx, organizationId);
    });
  }

  start(): void {
    if (this.timer) return;
    const tick = () => void this.run().catch((err) => this.deps.onError(err));
    tick();
    this.timer = setInterval(tick, this.deps.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
  }
}
