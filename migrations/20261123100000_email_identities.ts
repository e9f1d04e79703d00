// The sender identity an organization's mail goes out with (From, Reply-To, signature) and the per-organization
// token its domain publishes in DNS to prove it may send as that domain.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('email_identities', (t) => {
    t.uuid('organization_id').primary().references('organizations.id').onDelete('CASCADE');
    t.string('from_name', 200);
    t.string('from_address', 320);
    t.string('reply_to', 320);
    t.text('signature');
    t.string('verification_token', 64).notNullable();
    /** Set when the verification TXT record was found for the current from address's domain. */
    t.string('verified_domain', 255);
    t.timestamp('domain_verified_at', { useTz: true });
    t.timestamps(true, true);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('email_identities');
}
