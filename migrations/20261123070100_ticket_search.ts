// Ticket search (`q`, an ILIKE '%text%' on title and description) read every ticket of the organization; trigram
// indexes turn it into index scans on PostgreSQL where pg_trgm can be created (as for contacts). Without it, and on
// the embedded database, the search keeps working as a scan.
import type { Knex } from 'knex';

const COLUMNS = ['title', 'description'] as const;

export async function up(knex: Knex): Promise<void> {
  const available = await knex.raw(`select 1 from pg_available_extensions where name = 'pg_trgm'`);
  if (available.rows.length === 0) return;
  await knex.raw(`do $$
begin
  create extension if not exists pg_trgm;
  ${COLUMNS.map((c) => `create index if not exists tickets_${c}_trgm on tickets using gin (${c} gin_trgm_ops);`).join('\n  ')}
exception when insufficient_privilege then
  raise notice 'pg_trgm is not available to this user: ticket search stays a scan';
end
$$`);
}

export async function down(knex: Knex): Promise<void> {
  for (const c of COLUMNS) await knex.raw(`drop index if exists tickets_${c}_trgm`);
}
