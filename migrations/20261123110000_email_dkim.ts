// Each organization's DKIM key: generated with its sender identity, kept sealed under ENCRYPTION_KEY like channel
// secrets, published by the organization as `<selector>._domainkey.<domain>` and used once its domain is verified.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('email_identities', (t) => {
    t.string('dkim_selector', 63);
    t.text('dkim_private_key');
    t.text('dkim_public_key');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('email_identities', (t) => {
    t.dropColumn('dkim_selector');
    t.dropColumn('dkim_private_key');
    t.dropColumn('dkim_public_key');
  });
}
