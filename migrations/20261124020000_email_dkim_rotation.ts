// A DKIM key rotation: the next key waits here, published by the organization under its own selector, while the
// current key keeps signing; once the next record is found in DNS it becomes the key and the old one is retired.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('email_identities', (t) => {
    t.string('dkim_next_selector', 63);
    t.text('dkim_next_private_key');
    t.text('dkim_next_public_key');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('email_identities', (t) => {
    t.dropColumn('dkim_next_selector');
    t.dropColumn('dkim_next_private_key');
    t.dropColumn('dkim_next_public_key');
  });
}
