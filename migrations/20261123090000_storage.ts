// Stored files (uploads to the local disk or S3) and the files attached to messages.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('storage_objects', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.text('key').notNullable().unique();
    t.text('purpose').notNullable();
    t.text('file_name').notNullable();
    t.text('mime_type').notNullable();
    t.integer('size_bytes').notNullable();
    t.text('status').notNullable().defaultTo('pending');
    t.uuid('created_by').references('users.id').onDelete('SET NULL');
    // A widget visitor's upload: only that visitor (and the organization's agents) may use it.
    t.uuid('visitor_session_id').references('visitor_sessions.id').onDelete('SET NULL');
    t.timestamp('uploaded_at', { useTz: true });
    t.timestamps(true, true);
  });
  await knex.raw(`alter table storage_objects add constraint storage_objects_purpose_check check (purpose in ('knowledge', 'attachment', 'avatar', 'logo', 'channel_media'))`);
  await knex.raw(`alter table storage_objects add constraint storage_objects_status_check check (status in ('pending', 'uploaded'))`);
  await knex.raw(`create index storage_objects_org_index on storage_objects (organization_id, purpose, created_at desc)`);
  // What the sweep of abandoned uploads reads.
  await knex.raw(`create index storage_objects_pending_index on storage_objects (created_at) where status = 'pending'`);

  await knex.schema.createTable('message_attachments', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('message_id').notNullable().references('messages.id').onDelete('CASCADE');
    // RESTRICT: a file still shown in a conversation cannot be deleted (409).
    t.uuid('object_id').notNullable().references('storage_objects.id').onDelete('RESTRICT');
    t.smallint('position').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['message_id', 'object_id']);
  });
  await knex.raw(`create index message_attachments_object_index on message_attachments (object_id)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('message_attachments');
  await knex.schema.dropTableIfExists('storage_objects');
}
