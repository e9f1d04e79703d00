// Starting up beside another instance: migrations on one PostgreSQL database serialize and survive a stale knex
// lock; an embedded data directory admits one process, and its lock outlives no one.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import pg from 'pg';
import { DATA_DIR_LOCK_FILE, DataDirLockedError } from '../db/dataDirLock.js';
import { createDatabase, MIGRATIONS_DIR } from '../db/index.js';
import { MIGRATION_LOCK_KEY, MigrationLockTimeout } from '../db/migrate.js';
import { loadConfig } from '../server/config.js';
import { createServer } from '../server/server.js';
import { startTestServer, TEST_SECRETS } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The same URL naming another database on the same server. */
function onDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function rowsOf<T>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

describe('instances starting together on one PostgreSQL database', function () {
  this.timeout(120_000);
  let admin: pg.Client | null = null;
  let name = '';
  let url = '';
  const lockRows = () => rowsOf<{ is_locked: number }>(url, 'select is_locked from knex_migrations_lock');

  before(async function () {
    if (!process.env.DATABASE_URL) this.skip();
    // A database of its own, empty, as a first deployment finds it.
    name = `support_startup_${process.pid}_${Date.now()}`;
    admin = new pg.Client({ connectionString: onDatabase(process.env.DATABASE_URL, 'postgres') });
    await admin.connect();
    await admin.query(`create database ${name}`);
    url = onDatabase(process.env.DATABASE_URL, name);
  });

  after(async () => {
    if (!admin) return;
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.end();
  });

  it('starts both on an empty database, applying each migration once', async () => {
    const started = await Promise.allSettled([startTestServer({ DATABASE_URL: url }), startTestServer({ DATABASE_URL: url })]);
    await Promise.all(started.map((s) => s.status === 'fulfilled' && s.value.stop()));
    expect(started.map((s) => (s.status === 'fulfilled' ? 'started' : String(s.reason)))).to.deep.equal(['started', 'started']);

    const expected = readdirSync(MIGRATIONS_DIR).filter((f) => /\.(ts|js)$/.test(f) && !f.endsWith('.d.ts')).map((f) => f.replace(/\.js$/, '.ts')).sort();
    const applied = await rowsOf<{ name: string; batch: number }>(url, 'select name, batch from knex_migrations order by id');
    expect(applied.map((m) => m.name)).to.deep.equal(expected);
    expect(new Set(applied.map((m) => m.batch)).size, 'one batch: the second instance found nothing to do').to.equal(1);
    expect(await lockRows()).to.deep.equal([{ is_locked: 0 }]);
  });

  const staleLocks = [
    ['a lock row left taken by an instance that died while migrating', 'delete from knex_migrations_lock; insert into knex_migrations_lock (is_locked) values (1)'],
    ['two lock rows, as two first starts racing to create the table leave them', 'delete from knex_migrations_lock; insert into knex_migrations_lock (is_locked) values (0), (0)'],
  ] as const;
  for (const [what, sql] of staleLocks) {
    it(`still starts after ${what}, and repairs it`, async () => {
      await rowsOf(url, sql);
      const server = await startTestServer({ DATABASE_URL: url });
      await server.stop();
      expect(await lockRows()).to.deep.equal([{ is_locked: 0 }]);
    });
  }

  it('waits for an instance that is migrating, says so, and gives up after a bound', async () => {
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    const dataDir = mkdtempSync(path.join(tmpdir(), 'support-startup-'));
    const db = createDatabase({ databaseUrl: url, dataDir });
    const said: string[] = [];
    const logger = { info: (_: object, msg: string) => said.push(msg), warn: (_: object, msg: string) => said.push(msg) };
    try {
      await other.query('select pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
      const gaveUp = await db.migrate({ logger, lockWaitMs: 300 }).then(
        () => null,
        (err: unknown) => err,
      );
      expect(gaveUp).to.be.instanceOf(MigrationLockTimeout);
      expect(said.filter((m) => /waiting/.test(m))).to.have.length(1);

      // Released while this one waits: it goes on, and finds nothing left to apply.
      const waiting = db.migrate({ logger, lockWaitMs: 60_000 });
      await waitFor(() => said.filter((m) => /waiting/.test(m)).length === 2, { what: 'the second wait' });
      await other.query('select pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
      expect(await waiting).to.deep.equal([]);
    } finally {
      await other.end();
      await db.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

/** A server process as `npm start` runs it, on the embedded database in `dataDir`. */
function startProcess(dataDir: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, ...TEST_SECRETS, NODE_ENV: 'test', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '', LOG_LEVEL: 'info' };
  const child = spawn(process.execPath, ['--import', 'tsx', 'server/index.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return {
    child,
    exited,
    /** Resolves 'listening' once the server listens, or with the exit code if it stops first. */
    outcome: Promise.race([exited, waitFor(() => stdout.includes('"msg":"listening"'), { timeoutMs: 90_000, what: 'the server to listen' }).then(() => 'listening' as const)]),
    output: () => ({ stdout, stderr }),
    stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

describe('one process per embedded data directory', function () {
  this.timeout(180_000);
  let dir: string;
  const lockFile = () => path.join(dir, DATA_DIR_LOCK_FILE);
  const embedded = () =>
    loadConfig({ NODE_ENV: 'test', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, DATABASE_URL: '', REDIS_URL: '', BCRYPT_COST: '4', LOG_LEVEL: 'silent', ...TEST_SECRETS });

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'support-datadir-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a second `npm start` on the same DATA_DIR with exit code 1 and one line naming it', async () => {
    const first = startProcess(dir);
    try {
      expect(await first.outcome, first.output().stderr).to.equal('listening');
      const second = startProcess(dir);
      try {
        expect(await second.outcome).to.equal(1);
        const lines = second.output().stderr.trim().split('\n');
        expect(lines, second.output().stderr).to.have.length(1);
        expect(lines[0]).to.include('DATA_DIR').and.include(dir).and.include(`pid ${first.child.pid}`);
        expect(second.output().stdout).to.equal('');
      } finally {
        await second.stop();
      }
      expect(existsSync(lockFile()), 'the refused start leaves the lock alone').to.equal(true);
    } finally {
      expect(await first.stop()).to.equal(0);
    }
    expect(existsSync(lockFile()), 'a graceful stop releases the lock').to.equal(false);
  });

  it('takes over the lock of a process that was killed', async () => {
    const killed = startProcess(dir);
    try {
      expect(await killed.outcome, killed.output().stderr).to.equal('listening');
    } finally {
      killed.child.kill('SIGKILL');
      await killed.exited;
    }
    expect(JSON.parse(readFileSync(lockFile(), 'utf8')).pid).to.equal(killed.child.pid);
    const server = createServer(embedded());
    try {
      await server.start();
      expect(JSON.parse(readFileSync(lockFile(), 'utf8')).pid).to.equal(process.pid);
    } finally {
      await server.stop();
    }
  });

  it('refuses a second server in the same process, and admits one once the first has stopped', async () => {
    const first = createServer(embedded());
    await first.start();
    try {
      expect(() => createServer(embedded())).to.throw(DataDirLockedError, dir);
    } finally {
      await first.stop();
    }
    expect(existsSync(lockFile())).to.equal(false);
    const again = createServer(embedded());
    await again.start();
    await again.stop();
  });

  it('takes over a lock bearing its own pid that it does not hold (a restarted container runs as the same pid)', async () => {
    writeFileSync(lockFile(), JSON.stringify({ pid: process.pid, hostname: hostname(), since: new Date(0).toISOString(), id: 'earlier-run' }));
    const server = createServer(embedded());
    try {
      await server.start();
      expect(JSON.parse(readFileSync(lockFile(), 'utf8')).id).to.not.equal('earlier-run');
    } finally {
      await server.stop();
    }
  });

  it('refuses a lock held from another host, whose process it cannot check', () => {
    writeFileSync(lockFile(), JSON.stringify({ pid: 1, hostname: `not-${hostname()}`, since: new Date(0).toISOString(), id: 'elsewhere' }));
    expect(() => createServer(embedded())).to.throw(DataDirLockedError, `not-${hostname()}`);
  });
});
