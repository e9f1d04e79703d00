// The database: embedded PGlite in DATA_DIR when DATABASE_URL is unset, PostgreSQL through pg otherwise.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import knexModule, { type Knex } from 'knex';
import ClientPgLite from 'knex-pglite';
import objection from 'objection';
import { lockDataDir } from './dataDirLock.js';
import { migrateLatest, type MigrateOptions } from './migrate.js';
import { SourceNamedMigrations } from './migrationSource.js';
import type { Logger } from '../server/logger.js';
import { readOnlySession, statement, type ReadSession, type StatementFactory } from './statements.js';
import type { TenantModel } from './BaseModel.js';
import { AgentRun } from './models/AgentRun.js';
import { AuthSession } from './models/AuthSession.js';
import { Contact } from './models/Contact.js';
import { ContactAttributeDefinition } from './models/ContactAttributeDefinition.js';
import { ContactConflict } from './models/ContactConflict.js';
import { ContactIdentity } from './models/ContactIdentity.js';
import { ContactMerge } from './models/ContactMerge.js';
import { ContactNote } from './models/ContactNote.js';
import { Conversation } from './models/Conversation.js';
import { Message } from './models/Message.js';
import { Notification } from './models/Notification.js';
import { QrScan } from './models/QrScan.js';
import { VisitorSession } from './models/VisitorSession.js';
import { Widget } from './models/Widget.js';
import { Membership } from './models/Membership.js';
import { Organization } from './models/Organization.js';
import { OtpChallenge } from './models/OtpChallenge.js';
import { OutboxEmail } from './models/OutboxEmail.js';
import { PasswordReset } from './models/PasswordReset.js';
import { Template } from './models/Template.js';
import { Ticket } from './models/Ticket.js';
import { TicketEvent } from './models/TicketEvent.js';
import { TicketMail } from './models/TicketMail.js';
import { IdempotencyKey } from './models/IdempotencyKey.js';
import { User } from './models/User.js';
import { ApiKey } from './models/ApiKey.js';
import { Webhook } from './models/Webhook.js';
import { WebhookDelivery } from './models/WebhookDelivery.js';
import { StorageObject } from './models/StorageObject.js';
import { KnowledgeSource } from './models/KnowledgeSource.js';
import { UnansweredQuestion } from './models/UnansweredQuestion.js';

/**
 * knex-pglite turns knex's method name into the SQL command it reports, and knex names a delete `del`: deletes
 * answered the driver's raw result instead of their row count (so `deleted === 0` never held on the embedded
 * database). Naming the method as knex's PostgreSQL client expects gives deletes their count back.
 */
class EmbeddedClient extends (ClientPgLite as unknown as new (config: Knex.Config) => { processResponse(obj: { method?: string }, runner: unknown): unknown }) {
  override processResponse(obj: { method?: string }, runner: unknown): unknown {
    return super.processResponse(obj.method === 'del' ? { ...obj, method: 'delete' } : obj, runner);
  }
}

const knexFactory = (knexModule as unknown as { knex: typeof knexModule }).knex ?? knexModule;
const { knexSnakeCaseMappers } = objection;

export const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'migrations');

const MODELS = { User, Organization, Membership, AuthSession, OtpChallenge, PasswordReset, OutboxEmail, Contact, Widget, VisitorSession, QrScan, Conversation, Message, Notification, Template, AgentRun, Ticket, TicketEvent, TicketMail, IdempotencyKey, ContactIdentity, ContactNote, ContactAttributeDefinition, ContactConflict, ContactMerge, StorageObject, KnowledgeSource, UnansweredQuestion, ApiKey, Webhook, WebhookDelivery };
/**
 * A tenant model as services see it: no bare `query()` (nor `relatedQuery()`), only `forOrg(organizationId)` and the
 * explicit `acrossOrgs()`. Rows loaded through either keep their instance methods (`$query()`), which are bound to
 * a row whose organization is already known.
 */
export type TenantEntry<M extends typeof TenantModel> = Omit<M, 'query' | 'relatedQuery' | 'forOrg' | 'acrossOrgs' | 'fromDatabaseJson'> & {
  forOrg(organizationId: string, trx?: objection.TransactionOrKnex): objection.QueryBuilderType<InstanceType<M>>;
  acrossOrgs(trx?: objection.TransactionOrKnex): objection.QueryBuilderType<InstanceType<M>>;
  /** A row read by raw SQL, as a model instance. */
  fromDatabaseJson(json: object): InstanceType<M>;
};
type AllModels = typeof MODELS;
export type Models = { [K in keyof AllModels]: AllModels[K] extends typeof TenantModel ? TenantEntry<AllModels[K]> : AllModels[K] };

export interface DatabaseOptions {
  databaseUrl: string | null;
  dataDir: string;
  /** Named prepared statements on PostgreSQL (default true); PGlite never uses them. */
  preparedStatements?: boolean;
  /** Where knex's own warnings go (a cut connection, a deprecation); without one, knex writes to the console. */
  logger?: Pick<Logger, 'warn' | 'error' | 'debug'>;
}

export interface Database {
  knex: Knex;
  /** Fixed SQL for hot paths; prepared statements on PostgreSQL. */
  statement: StatementFactory;
  /** Reads run on one connection in one read-only transaction with `set local` settings; prepared on PostgreSQL. */
  readOnly<T>(settings: readonly string[], fn: (session: ReadSession) => Promise<T>): Promise<T>;
  models: Models;
  embedded: boolean;
  /** Applies pending migrations, one instance at a time (db/migrate.ts); returns the names applied. */
  migrate(options?: MigrateOptions): Promise<string[]>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** knex's log hooks as structured lines: a pooled connection the server cut becomes one warning, not console text. */
function knexLog(logger: NonNullable<DatabaseOptions['logger']>): Knex.Config['log'] {
  return {
    warn: (message: unknown) => logger.warn({ knex: String(message) }, 'database driver warning'),
    error: (message: unknown) => logger.error({ knex: String(message) }, 'database driver error'),
    deprecate: (method: string, alternative: string) => logger.debug({ method, alternative }, 'knex deprecation'),
    debug: (message: unknown) => logger.debug({ knex: message }, 'knex debug'),
  };
}

export function knexConfig(options: DatabaseOptions): Knex.Config {
  const common: Knex.Config = {
    ...knexSnakeCaseMappers(),
    // Loadable from the source and from the build alike (db/migrationSource.ts).
    migrations: { migrationSource: new SourceNamedMigrations(MIGRATIONS_DIR), tableName: 'knex_migrations' },
    ...(options.logger ? { log: knexLog(options.logger) } : {}),
  };
  if (options.databaseUrl) {
    return { ...common, client: 'pg', connection: options.databaseUrl, pool: { min: 0, max: 10 } };
  }
  const dir = path.join(options.dataDir, 'pgdata');
  mkdirSync(dir, { recursive: true });
  // PGlite serves one connection; knex-pglite fixes the pool at one, so transactions serialize.
  return { ...common, client: EmbeddedClient as unknown as typeof Knex.Client, dialect: 'postgres', connection: { filename: dir } } as Knex.Config;
}

export function createDatabase(options: DatabaseOptions): Database {
  // The embedded database's directory is taken first: PGlite starts opening it as soon as knex is built.
  const dataDirLock = options.databaseUrl ? null : lockDataDir(options.dataDir);
  let knex: Knex;
  try {
    knex = knexFactory(knexConfig(options));
  } catch (err) {
    dataDirLock?.release();
    throw err;
  }
  // bindKnex gives each database its own model classes, so two servers in one process never share a pool.
  const models = Object.fromEntries(Object.entries(MODELS).map(([name, model]) => [name, model.bindKnex(knex)])) as unknown as Models;
  return {
    knex,
    statement: (name, text) => statement(knex, name, text, !!options.databaseUrl && options.preparedStatements !== false),
    readOnly: (settings, fn) => readOnlySession(knex, !!options.databaseUrl && options.preparedStatements !== false, settings, fn),
    models,
    embedded: !options.databaseUrl,
    migrate(migrateOptions) {
      return migrateLatest(knex, !options.databaseUrl, migrateOptions);
    },
    async ping() {
      await knex.raw('select 1');
    },
    async close() {
      await knex.destroy();
      // Only once PGlite has closed its files may another process open the directory.
      dataDirLock?.release();
    },
  };
}
