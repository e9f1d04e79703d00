// Templates, AI-call observability events, conversation memory and agent runs of the internal AI service.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('templates', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.string('title', 200).notNullable();
    t.text('content').notNullable();
    t.string('shortcut', 50);
    t.string('category', 100);
    t.uuid('created_by').references('users.id').onDelete('SET NULL');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['organization_id', 'category']);
  });
  // Shortcuts are typed by agents (e.g. "/refund"): one per organization, case-insensitive.
  await knex.raw(`create unique index templates_org_shortcut_unique on templates (organization_id, lower(shortcut)) where shortcut is not null`);

  await knex.schema.createTable('ai_call_events', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('conversation_id');
    t.timestamp('occurred_at', { useTz: true }).notNullable();
    t.string('provider', 100).notNullable();
    t.string('model_id', 200).notNullable();
    t.string('call_type', 20).notNullable().defaultTo('llm');
    t.integer('latency_ms').notNullable();
    t.boolean('success').notNullable();
    t.integer('input_tokens').notNullable().defaultTo(0);
    t.integer('output_tokens').notNullable().defaultTo(0);
    t.integer('total_tokens').notNullable().defaultTo(0);
    t.decimal('estimated_cost_usd', 14, 6).notNullable().defaultTo(0);
    t.text('error');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  // Summaries read one organization over a time range; retention deletes by time alone.
  await knex.raw('create index ai_call_events_org_time on ai_call_events (organization_id, occurred_at)');
  await knex.raw('create index ai_call_events_time on ai_call_events (occurred_at)');

  await knex.schema.createTable('conversation_memories', (t) => {
    t.uuid('conversation_id').primary().references('conversations.id').onDelete('CASCADE');
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.jsonb('facts').notNullable().defaultTo('{}');
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('agent_runs', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('organization_id').notNullable().references('organizations.id').onDelete('CASCADE');
    t.uuid('conversation_id').notNullable().references('conversations.id').onDelete('CASCADE');
    t.string('status', 20).notNullable();
    t.string('model_id', 200);
    t.text('input');
    t.text('output');
    t.jsonb('steps').notNullable().defaultTo('[]');
    t.integer('latency_ms');
    t.integer('total_tokens');
    t.text('error');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['conversation_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['agent_runs', 'conversation_memories', 'ai_call_events', 'templates']) await knex.schema.dropTableIfExists(table);
}
