// The message path, in the database:
// - A message's organization is its conversation's, enforced: one foreign key on (conversation_id, organization_id)
//   replaces the two separate ones. A message can no longer claim another tenant than its conversation, and each
//   insert checks one parent row (the conversation its send already holds locked) instead of two, the other being
//   the organization row that every message of the tenant would otherwise share-lock.
// - Appending a message touches no indexed column of its conversation, so the update can stay on its page (HOT):
//   the (organization_id, last_message_at) index served no query (the inbox and the inactivity sweep order and
//   filter by coalesce(last_message_at, created_at)), and pages keep room for new row versions.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table conversations add constraint conversations_id_organization_unique unique (id, organization_id)');
  await knex.raw('alter table messages drop constraint messages_organization_id_foreign');
  await knex.raw('alter table messages drop constraint messages_conversation_id_foreign');
  await knex.raw(
    `alter table messages add constraint messages_conversation_organization_foreign
       foreign key (conversation_id, organization_id) references conversations (id, organization_id) on delete cascade`,
  );
  await knex.raw('drop index if exists conversations_organization_id_last_message_at_index');
  await knex.raw('alter table conversations set (fillfactor = 85)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table conversations reset (fillfactor)');
  await knex.raw('create index if not exists conversations_organization_id_last_message_at_index on conversations (organization_id, last_message_at)');
  await knex.raw('alter table messages drop constraint messages_conversation_organization_foreign');
  await knex.raw('alter table messages add constraint messages_conversation_id_foreign foreign key (conversation_id) references conversations (id) on delete cascade');
  await knex.raw('alter table messages add constraint messages_organization_id_foreign foreign key (organization_id) references organizations (id) on delete cascade');
  await knex.raw('alter table conversations drop constraint conversations_id_organization_unique');
}
