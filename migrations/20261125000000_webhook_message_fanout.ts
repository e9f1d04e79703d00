// message.created deliveries are written by a fan-out job after the message's statement, not by that statement:
// a fan-out job that runs twice (after a crash, or a lease that ran out) must not write a subscription's delivery of
// one message twice. A redelivery is a second row of the same event on purpose, so it is marked and left out.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table webhook_deliveries add column redelivery boolean not null default false');
  // Rows written before this column: every row after the first of its event and hook was a redelivery.
  await knex.raw(`
    update webhook_deliveries d set redelivery = true
     where d.message_id is not null and exists (
       select 1 from webhook_deliveries e
        where e.webhook_id = d.webhook_id and e.event_id = d.event_id and e.message_id is not null
          and (e.created_at, e.id) < (d.created_at, d.id))`);
  await knex.raw(`create unique index webhook_deliveries_message_event_unique on webhook_deliveries (webhook_id, event_id)
                  where message_id is not null and not redelivery`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists webhook_deliveries_message_event_unique');
  await knex.raw('alter table webhook_deliveries drop column redelivery');
}
