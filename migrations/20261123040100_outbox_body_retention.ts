// The bodies of delivered mail (codes, reset and invite links) are cleared after MAIL_RETENTION_DAYS; the row stays
// as the record of what was sent to whom and when. The partial index finds the rows still to clear.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('outbox_emails', (t) => {
    t.timestamp('body_cleared_at', { useTz: true });
  });
  await knex.raw(
    `create index outbox_emails_body_retention_index on outbox_emails ((coalesce(sent_at, created_at)))
       where body_cleared_at is null and status in ('sent', 'logged')`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists outbox_emails_body_retention_index');
  await knex.schema.alterTable('outbox_emails', (t) => {
    t.dropColumn('body_cleared_at');
  });
}
