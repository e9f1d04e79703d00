// Starting the servers under test: the app (test/load/serve.ts), the bare Socket.IO relay and the bare HTTP+DB
// handler, each a child process pinned to a server core (BENCH_SERVER_CORES; instance i of a scenario on the i-th
// listed core); the generator pins itself to the cores left.
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Options, RedisAdapterKind, ScenarioName } from './options.js';
import type { Row } from './report.js';
import { spawnChild, type Child } from './proc.js';

export const AI_SECRET = 'bench-ai-tool-secret-0123456789abcdef';

export interface RunContext {
  options: Options;
  /** Prefix of this run's rows on a shared database. */
  runId: string;
  /** Cores the servers are pinned to (instance i on the i-th, round robin), or null when not pinning. */
  serverCores: number[] | null;
  log: (line: string) => void;
}

/** The core of a scenario's `instance`-th server (0: the first listed), or null when not pinning. */
export const coreOf = (ctx: RunContext, instance = 0): number | null => (ctx.serverCores ? ctx.serverCores[instance % ctx.serverCores.length]! : null);

const BENCH_SECRETS = {
  JWT_ACCESS_SECRET: `bench-access-${randomBytes(24).toString('hex')}`,
  JWT_REFRESH_SECRET: `bench-refresh-${randomBytes(24).toString('hex')}`,
  WIDGET_JWT_SECRET: `bench-widget-${randomBytes(24).toString('hex')}`,
};

export interface AppInstance {
  child: Child;
  url: string;
  /** The embedded database directory (null on PostgreSQL). */
  dataDir: string | null;
  /** Stops the process; an embedded data directory is kept when `keepData` (a baseline reads it next). */
  stop(keepData?: boolean): Promise<void>;
}

export interface AppSettings {
  /** Use DATABASE_URL (when set); otherwise, or when false, a fresh embedded PGlite directory. */
  postgres: boolean;
  /** Use REDIS_URL (rate limits, Socket.IO adapter, presence). */
  redis: boolean;
  /** Reuse an embedded directory (rare; every scenario starts fresh by default). */
  dataDir?: string;
  /** Which server of the scenario this is (0, 1, ...): picks its core from BENCH_SERVER_CORES. */
  instance?: number;
  /** REDIS_ADAPTER of the instance (with `redis`); unset: the app's default. */
  adapter?: RedisAdapterKind;
  /** Listen on this port (a restarted instance keeps its address); default: any free one. */
  port?: number;
}

let template: Promise<string> | null = null;

/**
 * A migrated, empty embedded database, made once per run: a fresh PGlite directory costs seconds of initdb and
 * migrations, a copy of a cleanly stopped one a fraction of that.
 */
async function embeddedDir(ctx: RunContext): Promise<string> {
  template ??= (async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'support-bench-template-'));
    ctx.log('  (creating the embedded database template: initdb and migrations, once per run)');
    const child = await spawnChild('template', 'serve.ts', appEnv(ctx, dir, false, false), coreOf(ctx));
    await child.stop();
    return dir;
  })();
  const source = await template;
  const dir = mkdtempSync(path.join(tmpdir(), 'support-bench-'));
  cpSync(path.join(source, 'pgdata'), path.join(dir, 'pgdata'), { recursive: true });
  return dir;
}

/** Removes the embedded template (end of the run). */
export async function removeTemplate(): Promise<void> {
  if (!template) return;
  const dir = await template.catch(() => null);
  if (dir) rmSync(dir, { recursive: true, force: true });
  template = null;
}

function appEnv(ctx: RunContext, dataDir: string, postgres: boolean, redis: boolean): Record<string, string> {
  return {
    NODE_ENV: 'production',
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    DATABASE_URL: postgres ? ctx.options.databaseUrl! : '',
    REDIS_URL: redis && ctx.options.redisUrl ? ctx.options.redisUrl : '',
    SMTP_URL: '',
    // Production mode refuses to start without SMTP unless told that mail may go to the (quiet) log.
    ALLOW_MAIL_TO_LOG_IN_PRODUCTION: 'true',
    // Setup hashes agents' passwords at the minimum cost; the login measure seeds its own hash at --login-cost.
    BCRYPT_COST: '4',
    LOG_LEVEL: 'warn',
    TRUST_PROXY: 'true',
    AI_TOOL_SECRET: AI_SECRET,
    // Sockets are disconnected when their token expires; no run may outlive them.
    ACCESS_TOKEN_TTL: '6h',
    MIGRATE_ON_START: 'true',
    // The webhooks scenario's receiver listens on loopback.
    WEBHOOKS_ALLOW_PRIVATE: 'true',
    // The channels scenario posts thousands of webhooks a second at one channel.
    CHANNEL_INBOUND_RATE_LIMIT: '10000000',
    // Production mode needs the key that encrypts channel and webhook secrets; a fixed one suits a benchmark.
    ENCRYPTION_KEY: '0123456789abcdef'.repeat(4),
    ...BENCH_SECRETS,
  };
}

/** The app as `npm start` runs it in production mode, quiet, with fast setup hashing (BCRYPT_COST=4). */
export async function startApp(ctx: RunContext, name: string, settings: AppSettings): Promise<AppInstance> {
  const postgres = settings.postgres && !!ctx.options.databaseUrl;
  const dataDir = postgres ? null : (settings.dataDir ?? (await embeddedDir(ctx)));
  // On PostgreSQL DATA_DIR holds nothing (the secrets are given); it still has to be a directory of its own.
  const env = appEnv(ctx, dataDir ?? mkdtempSync(path.join(tmpdir(), 'support-bench-unused-')), postgres, settings.redis);
  if (settings.adapter) env.REDIS_ADAPTER = settings.adapter;
  if (settings.port) env.PORT = String(settings.port);
  const child = await spawnChild(name, 'serve.ts', env, coreOf(ctx, settings.instance));
  return {
    child,
    url: `http://127.0.0.1:${child.port}`,
    dataDir,
    async stop(keepData = false) {
      await child.stop();
      if (dataDir && !keepData) rmSync(dataDir, { recursive: true, force: true });
      if (!dataDir) rmSync(env.DATA_DIR, { recursive: true, force: true });
    },
  };
}

/**
 * The bare Socket.IO relay (no auth, no database), with the Redis adapter when `redis` (`adapter`: which one);
 * `instance` picks its core like the app's, `port` keeps its address across a restart (0: any free one).
 */
export async function startRelay(
  ctx: RunContext,
  name: string,
  redis: boolean,
  { instance = 0, adapter = 'classic', port = 0 }: { instance?: number; adapter?: RedisAdapterKind; port?: number } = {},
): Promise<{ child: Child; url: string }> {
  const child = await spawnChild(name, 'baselines/relay.ts', { REDIS_URL: redis ? (ctx.options.redisUrl ?? '') : '', REDIS_ADAPTER: adapter, PORT: String(port) }, coreOf(ctx, instance));
  return { child, url: `http://127.0.0.1:${child.port}` };
}

/** The bare node:http handler over pg (DATABASE_URL) or over the app's stopped PGlite directory. */
export async function startHttpDb(ctx: RunContext, dataDir: string | null): Promise<{ child: Child; url: string; database: string }> {
  const env = {
    DATABASE_URL: dataDir ? '' : (ctx.options.databaseUrl ?? ''),
    PGLITE_DIR: dataDir ? path.join(dataDir, 'pgdata') : '',
    BENCH_LOGIN_COST: String(ctx.options.loginCost),
  };
  const child = await spawnChild('http-db baseline', 'baselines/http-db.ts', env, coreOf(ctx));
  return { child, url: `http://127.0.0.1:${child.port}`, database: dataDir ? 'PGlite' : 'PostgreSQL (pg)' };
}

/** A port free right now on loopback, for a server that must come back on the same address after a restart. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createNetServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** Stops every child even when one stop fails. */
export async function stopAll(...stops: (() => Promise<unknown>)[]): Promise<void> {
  await Promise.allSettled(stops.map((s) => s()));
}

export interface ScenarioOutput {
  rows: Row[];
  details: Record<string, unknown>;
}

export interface Scenario {
  name: ScenarioName;
  /** One line for --help and the report. */
  summary: string;
  /** Why the scenario cannot run in this environment (reported as skipped), or null. */
  skip(ctx: RunContext): string | null;
  run(ctx: RunContext): Promise<ScenarioOutput>;
}
