// Outbound webhooks: subscriptions (signing secret kept encrypted, it must sign) and the delivery log. Each
// delivery row and its job are written in the transaction of the change that causes them.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhooks', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.string('url', 2000).notNullable();
    t.jsonb('events').notNullable().defaultTo('[]');
    t.boolean('enabled').notNullable().defaultTo(true);
    t.text('secret_encrypted').notNullable();
    // After a rotation the old secret also signs until this time.
    t.text('previous_secret_encrypted');
    t.timestamp('previous_secret_expires_at', { useTz: true });
    t.integer('consecutive_failures').notNullable().defaultTo(0);
    t.string('disabled_reason', 200);
    t.uuid('created_by').references('users.id').onDelete('SET NULL');
    t.timestamps(true, true);
  });
  await knex.raw('create index webhooks_organization_index on webhooks (organization_id, created_at)');

  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('webhook_id').notNullable().references('webhooks.id').onDelete('CASCADE');
    // The event's id: X-Webhook-Id and the body's `id`, the same on every attempt and redelivery.
    t.uuid('event_id').notNullable();
    t.string('event_type', 60).notNullable();
    // The event's `data`; message.created stores the message id instead and presents the message at send time
    // (messages do not change), which lets the batched message path write this row in its single statement.
    t.jsonb('payload').notNullable();
    t.uuid('message_id');
    t.text('status').notNullable().defaultTo('pending');
    t.integer('attempts').notNullable().defaultTo(0);
    t.integer('response_status');
    t.text('response_body');
    t.text('last_error');
    t.integer('duration_ms');
    t.timestamp('delivered_at', { useTz: true });
    t.timestamps(true, true);
  });
  await knex.raw(`alter table webhook_deliveries add constraint webhook_deliveries_status_check check (status in ('pending', 'succeeded', 'failed'))`);
  await knex.raw('create index webhook_deliveries_webhook_index on webhook_deliveries (webhook_id, created_at desc)');
  await knex.raw('create index webhook_deliveries_organization_index on webhook_deliveries (organization_id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('webhook_deliveries');
  await knex.schema.dropTableIfExists('webhooks');
}
