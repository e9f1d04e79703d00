// Indexes for the contact and ticket lists, found with EXPLAIN ANALYZE on an organization of 100,000 contacts and
// 50,000 tickets (`npm run bench -- --scenarios=crm`):
// - An agent's open tickets (`status=open&assignedTo=`): the count and the page read one index range (the count
//   without touching the table) instead of scanning every ticket of the organization.
// - Contact search (`q`, an ILIKE '%text%' on name, email, company and phone) scanned every contact of the
//   organization (about 230 ms at 100,000). Trigram indexes on the four columns turn it into a bitmap OR of index
//   scans (under a millisecond). pg_trgm exists on PostgreSQL only (not on the embedded database) and needs a user
//   allowed to create it; without it the search keeps working, as a scan.
import type { Knex } from 'knex';

const TRIGRAM_COLUMNS = ['name', 'email', 'company', 'phone'] as const;

export async function up(knex: Knex): Promise<void> {
  await knex.raw('create index tickets_org_assignee_status_number on tickets (organization_id, assigned_to, status, number desc)');

  const available = await knex.raw(`select 1 from pg_available_extensions where name = 'pg_trgm'`);
  if (available.rows.length === 0) return;
  // Inside a block with an exception handler (its own subtransaction): a user who may not create the extension
  // leaves the migration to go on without the trigram indexes.
  await knex.raw(`do $$
begin
  create extension if not exists pg_trgm;
  ${TRIGRAM_COLUMNS.map((c) => `create index if not exists contacts_${c}_trgm on contacts using gin (${c} gin_trgm_ops);`).join('\n  ')}
exception when insufficient_privilege then
  raise notice 'pg_trgm is not available to this user: contact search stays a scan';
end
$$`);
}

export async function down(knex: Knex): Promise<void> {
  for (const c of TRIGRAM_COLUMNS) await knex.raw(`drop index if exists contacts_${c}_trgm`);
  await knex.raw('drop index if exists tickets_org_assignee_status_number');
}
