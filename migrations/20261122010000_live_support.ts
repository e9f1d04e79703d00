// Live support: agent availability on memberships, contacts, widgets and visitor sessions, conversations,
// messages (gap-free seq per conversation), recently viewed conversations and notifications.
import type { Knex } from 'knex';

const timestamps = (knex: Knex, t: Knex.CreateTableBuilder) => {
  t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
};

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('memberships', (t) => {
    t.string('availability', 20).notNullable().defaultTo('online');
    t.string('signature', 1000);
    t.integer('max_open_conversations').notNullable().defaultTo(20);
    t.timestamp('last_assigned_at', { useTz: true });
  });
  await knex.raw(`alter table memberships add constraint memberships_availability_check check (availability in ('online', 'away', 'busy', 'offline'))`);

  await knex.schema.createTable('contacts', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.string('name', 200);
    t.string('email', 320);
    t.string('phone', 50);
    t.string('company', 200);
    t.jsonb('attributes').notNullable().defaultTo('{}');
    timestamps(knex, t);
    t.index(['organization_id', 'created_at']);
  });
  // Find-or-create by email relies on one contact per email in an organization.
  await knex.raw(`create unique index contacts_org_email_unique on contacts (organization_id, lower(email)) where email is not null`);

  await knex.schema.createTable('widgets', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().unique().references('organizations.id').onDelete('CASCADE');
    t.string('public_key', 64).notNullable().unique();
    t.string('display_name', 200).notNullable();
    t.jsonb('appearance').notNullable().defaultTo('{}');
    t.jsonb('behavior').notNullable().defaultTo('{}');
    t.jsonb('allowed_origins').notNullable().defaultTo('[]');
    t.jsonb('ai').notNullable().defaultTo('{}');
    t.jsonb('collect_user_info').notNullable().defaultTo('{}');
    timestamps(knex, t);
  });

  await knex.schema.createTable('visitor_sessions', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('widget_id').notNullable().references('widgets.id').onDelete('CASCADE');
    t.string('name', 200);
    t.string('email', 320);
    t.string('origin', 2048);
    t.timestamp('last_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    timestamps(knex, t);
    t.index(['organization_id']);
  });

  await knex.schema.createTable('qr_scans', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('widget_id').notNullable().references('widgets.id').onDelete('CASCADE');
    t.string('user_agent', 512);
    t.string('referrer', 2048);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['organization_id', 'created_at']);
  });

  await knex.schema.createTable('conversations', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.string('status', 20).notNullable().defaultTo('open');
    t.string('priority', 20).notNullable().defaultTo('medium');
    t.string('subject', 300);
    t.string('channel', 30).notNullable().defaultTo('widget');
    t.string('source', 30);
    t.uuid('assigned_to').references('users.id').onDelete('SET NULL');
    t.uuid('contact_id').references('contacts.id').onDelete('SET NULL');
    t.uuid('visitor_session_id').references('visitor_sessions.id').onDelete('SET NULL');
    t.string('visitor_name', 200);
    t.string('visitor_email', 320);
    t.jsonb('tags').notNullable().defaultTo('[]');
    t.integer('unread_count').notNullable().defaultTo(0);
    t.integer('last_seq').notNullable().defaultTo(0);
    t.timestamp('escalated_at', { useTz: true });
    t.timestamp('human_joined_at', { useTz: true });
    t.timestamp('first_reply_at', { useTz: true });
    t.timestamp('last_message_at', { useTz: true });
    t.timestamp('resolved_at', { useTz: true });
    t.timestamp('closed_at', { useTz: true });
    timestamps(knex, t);
    t.index(['organization_id', 'last_message_at']);
    t.index(['organization_id', 'status']);
    t.index(['organization_id', 'assigned_to', 'status']);
    t.index(['visitor_session_id']);
  });
  await knex.raw(`alter table conversations add constraint conversations_status_check check (status in ('open', 'pending', 'resolved', 'closed'))`);
  await knex.raw(`alter table conversations add constraint conversations_priority_check check (priority in ('low', 'medium', 'high', 'urgent'))`);

  await knex.schema.createTable('messages', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('conversation_id').notNullable().references('conversations.id').onDelete('CASCADE');
    t.integer('seq').notNullable();
    t.string('sender_type', 20).notNullable();
    t.uuid('sender_id');
    t.text('content').notNullable();
    t.string('type', 20).notNullable().defaultTo('text');
    t.boolean('private').notNullable().defaultTo(false);
    t.jsonb('metadata').notNullable().defaultTo('{}');
    t.string('client_message_id', 100);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['conversation_id', 'seq']);
  });
  await knex.raw(`create unique index messages_client_message_id_unique on messages (conversation_id, client_message_id) where client_message_id is not null`);
  await knex.raw(`alter table messages add constraint messages_sender_type_check check (sender_type in ('visitor', 'agent', 'ai', 'system'))`);
  await knex.raw(`alter table messages add constraint messages_type_check check (type in ('text', 'image', 'file', 'system'))`);

  await knex.schema.createTable('conversation_views', (t) => {
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.uuid('conversation_id').notNullable().references('conversations.id').onDelete('CASCADE');
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.timestamp('viewed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.primary(['user_id', 'conversation_id']);
    t.index(['user_id', 'organization_id', 'viewed_at']);
  });

  await knex.schema.createTable('notifications', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.string('type', 50).notNullable();
    t.string('title', 300).notNullable();
    t.text('body');
    t.jsonb('data').notNullable().defaultTo('{}');
    t.timestamp('read_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['user_id', 'organization_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['notifications', 'conversation_views', 'messages', 'conversations', 'qr_scans', 'visitor_sessions', 'widgets', 'contacts']) {
    await knex.schema.dropTableIfExists(table);
  }
  await knex.raw('alter table memberships drop constraint if exists memberships_availability_check');
  await knex.schema.alterTable('memberships', (t) => {
    t.dropColumn('availability');
    t.dropColumn('signature');
    t.dropColumn('max_open_conversations');
    t.dropColumn('last_assigned_at');
  });
}
