// message.created fan-out. The statement that stores messages writes, per organization, one job carrying their ids
// (the outbox: it commits exactly with them); this queue turns it into a delivery per message and subscription,
// with their delivery jobs, so that the message path writes one row per organization and batch however many
// subscriptions there are. The subscriptions are those there when the job runs: enabled, wanting the event, and
// created no later than the message (a hook added afterwards does not get earlier messages). It runs at least once
// (a retry after a crash, a lease that ran out): the unique index on a hook's event makes a second run write
// nothing twice, and the job is finished by the same statement that writes the deliveries.
import type { Knex } from 'knex';
import { finishJobsSql, JOB_FINISHED, type Job, type JobQueue } from '../../jobs/index.js';
import { patternsFor } from './catalog.js';
import { WEBHOOK_FANOUT_QUEUE, WEBHOOK_QUEUE } from './queue.js';

export interface FanoutPayload {
  messageIds: string[];
}

const MESSAGE_CREATED = 'message.created';

// The event id is md5('message.created:<message id>') as a uuid: the same for every subscription and every run.
// Deliveries take the message's time as the event's.
const FANOUT_SQL = `
with m as (
  select id, organization_id, created_at from messages
   where id = any(array(select jsonb_array_elements_text(?::jsonb)::uuid)) and organization_id = ? and not private
),
hook as (
  select id, created_at from webhooks
   where organization_id = ? and enabled and jsonb_exists_any(events, array(select jsonb_array_elements_text(?::jsonb)))
),
delivery as (
  insert into webhook_deliveries (organization_id, webhook_id, event_id, event_type, payload, message_id, created_at)
  select m.organization_id, hook.id, md5('${MESSAGE_CREATED}:' || m.id::text)::uuid, '${MESSAGE_CREATED}', '{}'::jsonb, m.id, m.created_at
    from m join hook on hook.created_at <= m.created_at
  on conflict (webhook_id, event_id) where message_id is not null and not redelivery do nothing
  returning id, organization_id
),
queued as (
  insert into jobs (queue, payload, organization_id)
  select '${WEBHOOK_QUEUE}', jsonb_build_object('deliveryId', delivery.id), delivery.organization_id from delivery
),
finished as (
  ${finishJobsSql('(select ?::uuid as id, ?::int as attempts) as claims')}
)
select count(*)::int as written from delivery`;

/** Fan-out jobs of one instance at once (each is one statement). */
const CONCURRENCY = 4;
const RETRY_DELAYS_SECONDS = [5, 30, 120, 600, 3600];

/** Defines the fan-out queue (on the instance that sends deliveries). */
export function defineMessageFanout(jobs: JobQueue, knex: Knex): void {
  jobs.define<FanoutPayload>({
    queue: WEBHOOK_FANOUT_QUEUE,
    retryDelaysSeconds: RETRY_DELAYS_SECONDS,
    concurrency: CONCURRENCY,
    // Like the deliveries it writes, it may wait out a burst of chat.
    background: true,
    handle: async (job: Job<FanoutPayload>) => {
      // (Both writers of the job, the outbox and the batch statement, give it the array of ids.)
      const result = await knex.raw(FANOUT_SQL, [JSON.stringify(job.payload.messageIds), job.organizationId, job.organizationId, JSON.stringify(patternsFor(MESSAGE_CREATED)), job.id, job.attempt]);
      // (The statement ends in a count: one row.)
      const [{ written }] = (result.rows ?? result) as [{ written: number }];
      // Committed with their jobs: claimed now rather than at the next poll.
      if (written > 0) jobs.wake(WEBHOOK_QUEUE);
      return JOB_FINISHED;
    },
  });
}
