// Messaging channels (email, WhatsApp, Telegram): their sealed credentials, the inbound events providers deliver
// (stored once per provider message id, processed through the job queue) and outbound deliveries of agent messages.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('channels', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.string('type', 20).notNullable();
    t.string('name', 200).notNullable();
    t.string('status', 20).notNullable().defaultTo('pending');
    t.boolean('enabled').notNullable().defaultTo(true);
    /** Settings a client may see (addresses, phone number id, bot name); never a secret. */
    t.jsonb('config').notNullable().defaultTo('{}');
    /** The credentials, AES-256-GCM sealed under ENCRYPTION_KEY (server/services/channels/crypto.ts). */
    t.text('secrets').notNullable();
    /** The address part of in+<token>@INBOUND_EMAIL_DOMAIN, for mail arriving over SMTP. */
    t.string('inbound_token', 64).notNullable().unique();
    t.text('last_error');
    t.timestamps(true, true);
    t.index(['organization_id', 'created_at']);
  });
  await knex.raw(`alter table channels add constraint channels_type_check check (type in ('email', 'whatsapp', 'telegram'))`);
  await knex.raw(`alter table channels add constraint channels_status_check check (status in ('pending', 'active', 'failed', 'disabled'))`);

  // A channel conversation remembers its channel and the customer's address there: replies go back the same way.
  await knex.schema.alterTable('conversations', (t) => {
    t.uuid('channel_id').references('channels.id').onDelete('SET NULL');
    t.string('channel_address', 320);
  });
  await knex.raw('create index conversations_channel_contact_index on conversations (channel_id, contact_id) where channel_id is not null');

  await knex.schema.createTable('inbound_events', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('channel_id').notNullable().references('channels.id').onDelete('CASCADE');
    /** Message-ID, update_id or wamid: a provider delivering the same event twice stores it once. */
    t.string('provider_id', 998).notNullable();
    t.string('kind', 20).notNullable().defaultTo('message');
    t.jsonb('payload').notNullable();
    t.string('status', 20).notNullable().defaultTo('pending');
    t.text('error');
    t.uuid('conversation_id').references('conversations.id').onDelete('SET NULL');
    t.uuid('ticket_id').references('tickets.id').onDelete('SET NULL');
    t.timestamp('processed_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['channel_id', 'provider_id']);
  });

  await knex.schema.createTable('channel_deliveries', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('channel_id').notNullable().references('channels.id').onDelete('CASCADE');
    t.uuid('conversation_id').notNullable().references('conversations.id').onDelete('CASCADE');
    t.uuid('message_id').references('messages.id').onDelete('CASCADE');
    t.string('recipient', 320).notNullable();
    t.string('status', 20).notNullable().defaultTo('queued');
    t.integer('attempts').notNullable().defaultTo(0);
    /** The provider's id of what was sent: the mail's Message-ID (threading replies), the wamid, the Telegram message id. */
    t.string('provider_message_id', 998);
    t.text('last_error');
    t.timestamp('sent_at', { useTz: true });
    t.timestamps(true, true);
    t.index(['channel_id', 'created_at']);
    t.index(['organization_id', 'provider_message_id']);
  });
  await knex.raw(`alter table channel_deliveries add constraint channel_deliveries_status_check check (status in ('queued', 'sent', 'delivered', 'read', 'failed', 'outside_window'))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('channel_deliveries');
  await knex.schema.dropTableIfExists('inbound_events');
  await knex.schema.alterTable('conversations', (t) => {
    t.dropColumn('channel_id');
    t.dropColumn('channel_address');
  });
  await knex.schema.dropTableIfExists('channels');
}
