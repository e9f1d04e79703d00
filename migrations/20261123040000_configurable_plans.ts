// Plans are configuration (built in, or from PLANS_FILE), so the database checks a plan name's form, not a fixed list;
// and new organizations get the configured DEFAULT_PLAN from the application, so the column has no default of its own.
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table organizations drop constraint organizations_plan_check');
  await knex.raw(`alter table organizations add constraint organizations_plan_name_check check (plan ~ '^[a-z][a-z0-9_-]{0,19}$')`);
  await knex.raw('alter table organizations alter column plan drop default');
}

export async function down(knex: Knex): Promise<void> {
  // The old schema knows three plans: any other becomes enterprise, the one without limits, so nobody is locked out.
  await knex.raw(`update organizations set plan = 'enterprise' where plan not in ('free', 'pro', 'enterprise')`);
  await knex.raw(`alter table organizations alter column plan set default 'free'`);
  await knex.raw('alter table organizations drop constraint organizations_plan_name_check');
  await knex.raw(`alter table organizations add constraint organizations_plan_check check (plan in ('free', 'pro', 'enterprise'))`);
}
