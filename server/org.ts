// `npm run org -- plan <organization id | owner email> <plan>`: an operator moves organizations to another plan.
import { DataDirLockedError } from '../db/dataDirLock.js';
import { createDatabase, type Database } from '../db/index.js';
import type { Organization } from '../db/models/Organization.js';
import { SessionService } from './auth/sessions.js';
import { TokenService } from './auth/tokens.js';
import { ConfigError, loadConfig, loadEnvFileIfPresent, type Config } from './config.js';
import { DomainEventBus } from './events.js';
import { createLogger } from './logger.js';
import { OrganizationService } from './services/organizations.js';

const USAGE = `usage: npm run org -- plan <organization id | owner email> <plan>
  Moves the organization (or every organization the user with that email owns) to the plan.
  With the embedded database, stop the server first: one process at a time opens DATA_DIR.`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A refusal the operator can act on: printed as is, exit code 1. */
class Refused extends Error {}

async function changePlan(config: Config, db: Database, target: string, plan: string): Promise<string[]> {
  if (!Object.hasOwn(config.plans, plan)) throw new Refused(`Unknown plan "${plan}"; the plans are ${Object.keys(config.plans).join(', ')} (PLANS_FILE adds more)`);
  const [, pending] = (await db.knex.migrate.list()) as [unknown[], unknown[]];
  if (pending.length > 0) throw new Refused(`The database has ${pending.length} pending migration(s): start the server once, or run npm run migrate, first`);

  const logger = createLogger('silent');
  const events = new DomainEventBus(logger);
  const sessions = new SessionService(db.models, new TokenService(config), events, config.refreshTokenTtlSeconds);
  const organizations = new OrganizationService({ models: db.models, knex: db.knex, sessions, events, plans: { catalog: config.plans, defaultPlan: config.defaultPlan } });

  let targets: Organization[];
  if (target.includes('@')) {
    targets = await organizations.ownedBy(target);
    if (targets.length === 0) throw new Refused(`No organization is owned by ${target}`);
  } else {
    const found = UUID.test(target) ? await db.models.Organization.query().findById(target) : undefined;
    if (!found) throw new Refused(`No organization has the id ${target}`);
    targets = [found];
  }
  const lines: string[] = [];
  for (const organization of targets) {
    const { previous } = await organizations.changePlan(organization.id, plan);
    const what = `${organization.name} (${organization.id})`;
    lines.push(previous === plan ? `${what}: already on plan ${plan}, unchanged` : `${what}: plan ${previous} -> ${plan}`);
  }
  return lines;
}

async function main(args: string[]): Promise<number> {
  const [command, target, plan, ...rest] = args;
  if (command !== 'plan' || !target || !plan || rest.length > 0) {
    console.error(USAGE);
    return 2;
  }
  let config: Config;
  try {
    loadEnvFileIfPresent();
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      return 1;
    }
    throw err;
  }
  let db: Database;
  try {
    db = createDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, preparedStatements: false });
  } catch (err) {
    if (!(err instanceof DataDirLockedError)) throw err;
    console.error(err.message);
    return 1;
  }
  try {
    for (const line of await changePlan(config, db, target, plan)) console.log(line);
    return 0;
  } catch (err) {
    if (!(err instanceof Refused)) throw err;
    console.error(err.message);
    return 1;
  } finally {
    await db.close();
  }
}

process.exitCode = await main(process.argv.slice(2));
