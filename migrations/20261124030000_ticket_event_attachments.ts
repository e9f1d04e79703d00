// Files on a ticket's timeline: the attachments of a customer's mail that lands on the ticket, shown on its reply
// event as a conversation's message shows them.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('ticket_event_attachments', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('event_id').notNullable().references('ticket_events.id').onDelete('CASCADE');
    // RESTRICT: a file still shown on a ticket cannot be deleted (409), like one shown in a conversation.
    t.uuid('object_id').notNullable().references('storage_objects.id').onDelete('RESTRICT');
    t.smallint('position').notNullable().defaultTo(0);
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(['event_id', 'object_id']);
  });
  await knex.raw('create index ticket_event_attachments_object_index on ticket_event_attachments (object_id)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('ticket_event_attachments');
}
