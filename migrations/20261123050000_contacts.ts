// Contacts grow into customer records: E.164 phones unique per organization, lowercase tags, typed custom
// attributes (admin-defined), channel identities, notes, conflicts opened by automatic sources, and merge records.
import type { Knex } from 'knex';

const timestamps = (knex: Knex, t: Knex.CreateTableBuilder) => {
  t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
};
const id = (knex: Knex, t: Knex.CreateTableBuilder) => t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
const org = (t: Knex.CreateTableBuilder) => t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('contacts', (t) => {
    t.jsonb('tags').notNullable().defaultTo('[]');
    t.timestamp('email_verified_at', { useTz: true });
    t.timestamp('last_activity_at', { useTz: true });
  });
  // Sorting by name, newest activity and recent changes stays an index scan inside one organization.
  await knex.raw(`create index contacts_org_name_idx on contacts (organization_id, lower(name), id)`);
  await knex.raw(`create index contacts_org_activity_idx on contacts (organization_id, last_activity_at desc nulls last, id)`);
  await knex.raw(`create index contacts_org_updated_idx on contacts (organization_id, updated_at, id)`);
  // The default list order (newest first) with its tie-breaker, so a page is read from the index without a sort.
  await knex.raw(`create index contacts_org_created_idx on contacts (organization_id, created_at, id)`);
  // `tag=` and tag filters use jsonb containment (tags @> '["vip"]').
  await knex.raw(`create index contacts_tags_idx on contacts using gin (tags jsonb_path_ops)`);
  await knex.raw(`alter table contacts add constraint contacts_tags_array check (jsonb_typeof(tags) = 'array')`);
  await knex.raw(`alter table contacts add constraint contacts_attributes_object check (jsonb_typeof(attributes) = 'object')`);

  await knex.schema.createTable('contact_attribute_definitions', (t) => {
    id(knex, t);
    org(t);
    t.string('key', 64).notNullable();
    t.string('label', 200).notNullable();
    t.string('type', 20).notNullable();
    t.jsonb('options').notNullable().defaultTo('[]');
    t.string('description', 1000);
    timestamps(knex, t);
    t.unique(['organization_id', 'key']);
  });
  await knex.raw(`alter table contact_attribute_definitions add constraint contact_attribute_definitions_type_check check (type in ('text', 'number', 'date', 'boolean', 'list', 'link'))`);

  await knex.schema.createTable('contact_identities', (t) => {
    id(knex, t);
    org(t);
    t.uuid('contact_id').notNullable().references('contacts.id').onDelete('CASCADE');
    t.string('channel', 30).notNullable();
    t.string('external_id', 320).notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // One person per address on a channel: inbound messages resolve to exactly one contact.
    t.unique(['organization_id', 'channel', 'external_id']);
    t.index(['contact_id']);
  });

  await knex.schema.createTable('contact_notes', (t) => {
    id(knex, t);
    org(t);
    t.uuid('contact_id').notNullable().references('contacts.id').onDelete('CASCADE');
    t.uuid('author_id').references('users.id').onDelete('SET NULL');
    t.string('source', 20).notNullable().defaultTo('agent');
    t.uuid('conversation_id').references('conversations.id').onDelete('SET NULL');
    t.text('content').notNullable();
    timestamps(knex, t);
    t.index(['contact_id', 'created_at']);
  });
  await knex.raw(`alter table contact_notes add constraint contact_notes_content_length check (char_length(content) between 1 and 5000)`);
  await knex.raw(`alter table contact_notes add constraint contact_notes_source_check check (source in ('agent', 'ai', 'channel'))`);

  await knex.schema.createTable('contact_conflicts', (t) => {
    id(knex, t);
    org(t);
    t.string('kind', 20).notNullable();
    t.uuid('contact_id').notNullable().references('contacts.id').onDelete('CASCADE');
    t.uuid('other_contact_id').references('contacts.id').onDelete('CASCADE');
    t.string('field', 100);
    t.jsonb('current_value');
    t.jsonb('proposed_value');
    t.string('status', 20).notNullable().defaultTo('open');
    t.string('source', 20).notNullable();
    t.uuid('conversation_id').references('conversations.id').onDelete('SET NULL');
    t.uuid('resolved_by').references('users.id').onDelete('SET NULL');
    t.timestamp('resolved_at', { useTz: true });
    timestamps(knex, t);
    t.index(['organization_id', 'status', 'created_at']);
    t.index(['contact_id']);
    t.index(['other_contact_id']);
  });
  await knex.raw(`alter table contact_conflicts add constraint contact_conflicts_kind_check check (kind in ('field', 'duplicate'))`);
  await knex.raw(`alter table contact_conflicts add constraint contact_conflicts_status_check check (status in ('open', 'applied', 'dismissed'))`);

  await knex.schema.createTable('contact_merges', (t) => {
    id(knex, t);
    org(t);
    t.uuid('survivor_contact_id').notNullable().references('contacts.id').onDelete('CASCADE');
    // The merged contact no longer exists; its id and its last state are kept for the record.
    t.uuid('source_contact_id').notNullable();
    t.jsonb('source_snapshot').notNullable();
    t.jsonb('moved').notNullable().defaultTo('{}');
    t.uuid('merged_by').references('users.id').onDelete('SET NULL');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['survivor_contact_id', 'created_at']);
    t.index(['organization_id', 'source_contact_id']);
  });

  // Phones written before this migration may repeat inside an organization: the newer holders give theirs up, and
  // each gets an open duplicate conflict naming the older contact and the phone, so nothing is lost.
  const duplicates = `select c.id, c.organization_id, c.phone, first_value(c.id) over w as keeper, row_number() over w as n
    from contacts c where c.phone is not null
    window w as (partition by c.organization_id, c.phone order by c.created_at, c.id)`;
  await knex.raw(`insert into contact_conflicts (organization_id, kind, contact_id, other_contact_id, field, current_value, proposed_value, source)
    select organization_id, 'duplicate', id, keeper, 'phone', 'null'::jsonb, to_jsonb(phone), 'migration' from (${duplicates}) d where n > 1`);
  await knex.raw(`update contacts set phone = null where id in (select id from (${duplicates}) d where n > 1)`);
  await knex.raw(`create unique index contacts_org_phone_unique on contacts (organization_id, phone) where phone is not null`);
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['contact_merges', 'contact_conflicts', 'contact_notes', 'contact_identities', 'contact_attribute_definitions']) {
    await knex.schema.dropTableIfExists(table);
  }
  await knex.raw('drop index if exists contacts_org_phone_unique');
  await knex.raw('drop index if exists contacts_org_name_idx');
  await knex.raw('drop index if exists contacts_org_activity_idx');
  await knex.raw('drop index if exists contacts_org_updated_idx');
  await knex.raw('drop index if exists contacts_org_created_idx');
  await knex.raw('drop index if exists contacts_tags_idx');
  await knex.raw('alter table contacts drop constraint if exists contacts_tags_array');
  await knex.raw('alter table contacts drop constraint if exists contacts_attributes_object');
  await knex.schema.alterTable('contacts', (t) => {
    t.dropColumn('tags');
    t.dropColumn('email_verified_at');
    t.dropColumn('last_activity_at');
  });
}
