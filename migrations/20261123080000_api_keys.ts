// Organization API keys: a key acts as a bot user of its organization, limited by its scopes; only a keyed hash
// of its secret is stored.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('api_keys', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    // The bot user the key acts as: what it writes (notes, tickets, messages) names this user.
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.string('name', 100).notNullable();
    t.jsonb('scopes').notNullable().defaultTo('[]');
    t.string('secret_hash', 64).notNullable();
    /** The last characters of the key, so an admin can tell keys apart without the secret. */
    t.string('last_four', 4).notNullable();
    t.uuid('created_by').references('users.id').onDelete('SET NULL');
    t.timestamp('expires_at', { useTz: true });
    t.timestamp('last_used_at', { useTz: true });
    t.timestamp('revoked_at', { useTz: true });
    t.timestamps(true, true);
  });
  await knex.raw('create index api_keys_organization_index on api_keys (organization_id, created_at desc)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('api_keys');
}
