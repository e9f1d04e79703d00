// Users, organizations, memberships, sessions, one-time codes, password resets and the mail outbox.
import type { Knex } from 'knex';

const timestamps = (knex: Knex, t: Knex.CreateTableBuilder) => {
  t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
};

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('users', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('email', 320).notNullable().unique();
    t.string('name', 200).notNullable();
    t.string('password_hash', 100).notNullable();
    t.string('avatar_url', 2048);
    t.timestamp('email_verified_at', { useTz: true });
    t.timestamp('password_changed_at', { useTz: true });
    timestamps(knex, t);
  });

  await knex.schema.createTable('organizations', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('name', 200).notNullable();
    t.string('slug', 80).notNullable().unique();
    t.string('domain', 253);
    t.string('logo_url', 2048);
    t.string('plan', 20).notNullable().defaultTo('free');
    t.jsonb('settings').notNullable().defaultTo('{}');
    timestamps(knex, t);
  });
  await knex.raw(`alter table organizations add constraint organizations_plan_check check (plan in ('free', 'pro', 'enterprise'))`);
  // The organization a user last worked in, chosen again at the next login.
  await knex.schema.alterTable('users', (t) => {
    t.uuid('last_organization_id').references('organizations.id').onDelete('SET NULL');
  });

  await knex.schema.createTable('memberships', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('user_id').references('users.id').onDelete('CASCADE');
    t.string('email', 320).notNullable();
    t.string('name', 200);
    t.string('role', 20).notNullable();
    t.string('status', 20).notNullable();
    t.uuid('invited_by').references('users.id').onDelete('SET NULL');
    t.string('invite_token_hash', 64).unique();
    t.timestamp('invite_expires_at', { useTz: true });
    t.timestamp('invited_at', { useTz: true });
    t.timestamp('activated_at', { useTz: true });
    timestamps(knex, t);
    t.unique(['organization_id', 'email']);
    t.index(['user_id']);
  });
  await knex.raw(`alter table memberships add constraint memberships_role_check check (role in ('owner', 'admin', 'agent'))`);
  await knex.raw(`alter table memberships add constraint memberships_status_check check (status in ('pending', 'accepted', 'suspended'))`);
  // A user appears at most once per organization, whatever email the invitation used.
  await knex.raw(`create unique index memberships_org_user_unique on memberships (organization_id, user_id) where user_id is not null`);

  await knex.schema.createTable('auth_sessions', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.uuid('organization_id').references('organizations.id').onDelete('SET NULL');
    t.string('refresh_jti', 64).notNullable();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('revoked_at', { useTz: true });
    t.string('revoked_reason', 40);
    t.string('user_agent', 512);
    t.string('ip', 64);
    t.timestamp('last_refreshed_at', { useTz: true });
    timestamps(knex, t);
    t.index(['user_id']);
  });

  await knex.schema.createTable('otp_challenges', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('email', 320).notNullable();
    t.string('type', 40).notNullable();
    t.string('code_hash', 64).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('verified_at', { useTz: true });
    t.timestamp('consumed_at', { useTz: true });
    t.jsonb('payload').notNullable().defaultTo('{}');
    timestamps(knex, t);
    // One live challenge per email and purpose: a new code replaces the old one.
    t.unique(['email', 'type']);
  });

  await knex.schema.createTable('password_resets', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
    t.string('token_hash', 64).notNullable().unique();
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('used_at', { useTz: true });
    timestamps(knex, t);
    t.index(['user_id']);
  });

  await knex.schema.createTable('outbox_emails', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('kind', 40).notNullable();
    t.string('to_address', 320).notNullable();
    t.string('subject', 300).notNullable();
    t.text('text_body').notNullable();
    t.text('html_body');
    t.string('status', 20).notNullable();
    t.integer('attempts').notNullable().defaultTo(0);
    t.text('last_error');
    t.timestamp('next_attempt_at', { useTz: true });
    t.timestamp('sent_at', { useTz: true });
    timestamps(knex, t);
    t.index(['status', 'next_attempt_at']);
    t.index(['to_address', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['outbox_emails', 'password_resets', 'otp_challenges', 'auth_sessions', 'memberships', 'organizations', 'users']) {
    await knex.schema.dropTableIfExists(table);
  }
}
