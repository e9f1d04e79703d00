// loadConfig: the defaults of CONTRACT section 5, errors that name every bad variable, and secrets kept in DATA_DIR.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../server/config.js';

const SECRETS = {
  JWT_ACCESS_SECRET: 'config-test-access-secret-0123456789abcdef',
  JWT_REFRESH_SECRET: 'config-test-refresh-secret-0123456789abcdef',
  WIDGET_JWT_SECRET: 'config-test-widget-secret-0123456789abcdef',
};

/** Runs loadConfig expecting a ConfigError, and returns it. */
function configError(env: Record<string, string | undefined>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).to.be.instanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('config', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'support-config-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  describe('defaults (CONTRACT section 5)', () => {
    it('runs on an empty environment with the documented defaults', () => {
      // Secrets given, so nothing is written into ./data by this test.
      const config = loadConfig({ ...SECRETS });
      expect(config.port).to.equal(3000);
      expect(config.host).to.equal('0.0.0.0');
      expect(config.databaseUrl).to.equal(null);
      expect(config.dataDir).to.equal(path.resolve('./data'));
      expect(config.redisUrl).to.equal(null);
      expect(config.smtpUrl).to.equal(null);
      expect(config.mailFrom).to.be.a('string').and.not.equal('');
      expect(config.publicUrl).to.equal('http://localhost:3000');
      expect(config.aiToolSecret).to.equal(null);
      expect(config.bcryptCost).to.equal(12);
      expect(config.corsOrigins).to.deep.equal([]);
      expect(config.trustProxy).to.equal(false);
      expect(config.logLevel).to.equal('info');
      expect(config.storage.driver).to.equal('local');
      expect(config.migrateOnStart).to.equal(true);
      expect(config.allowQueryToken).to.equal(false);
      expect(config.accessTokenTtlSeconds).to.equal(15 * 60);
      expect(config.refreshTokenTtlSeconds).to.equal(30 * 24 * 3600);
      expect(config.widgetTokenTtlSeconds).to.equal(24 * 3600);
      expect(config.secrets).to.deep.equal({ access: SECRETS.JWT_ACCESS_SECRET, refresh: SECRETS.JWT_REFRESH_SECRET, widget: SECRETS.WIDGET_JWT_SECRET });
    });

    it('derives PUBLIC_URL from PORT, and reads every documented variable', () => {
      expect(loadConfig({ ...SECRETS, PORT: '8080' }).publicUrl).to.equal('http://localhost:8080');
      const config = loadConfig({
        ...SECRETS,
        PORT: '4000',
        HOST: '127.0.0.1',
        DATA_DIR: dir,
        DATABASE_URL: 'postgres://u:p@db.internal:5432/support',
        REDIS_URL: 'redis://cache.internal:6379',
        SMTP_URL: 'smtp://user:pass@mail.internal:587',
        MAIL_FROM: 'Help <help@example.test>',
        PUBLIC_URL: 'https://support.example.test/',
        AI_TOOL_SECRET: 'ai-secret',
        BCRYPT_COST: '10',
        CORS_ORIGINS: 'https://a.example.test, https://b.example.test/',
        TRUST_PROXY: 'true',
        LOG_LEVEL: 'WARN',
        ACCESS_TOKEN_TTL: '5m',
        MIGRATE_ON_START: 'false',
        DATABASE_PREPARED_STATEMENTS: 'false',
      });
      expect(config.port).to.equal(4000);
      expect(config.host).to.equal('127.0.0.1');
      expect(config.dataDir).to.equal(dir);
      expect(config.databaseUrl).to.equal('postgres://u:p@db.internal:5432/support');
      expect(config.redisUrl).to.equal('redis://cache.internal:6379');
      expect(config.smtpUrl).to.equal('smtp://user:pass@mail.internal:587');
      expect(config.mailFrom).to.equal('Help <help@example.test>');
      expect(config.publicUrl).to.equal('https://support.example.test');
      expect(config.aiToolSecret).to.equal('ai-secret');
      expect(config.bcryptCost).to.equal(10);
      expect(config.corsOrigins).to.deep.equal(['https://a.example.test', 'https://b.example.test']);
      expect(config.trustProxy).to.equal(true);
      expect(config.logLevel).to.equal('warn');
      expect(config.accessTokenTtlSeconds).to.equal(300);
      expect(config.migrateOnStart).to.equal(false);
      expect(config.preparedStatements).to.equal(false);
      expect(loadConfig({ ...SECRETS, DATA_DIR: dir }).preparedStatements).to.equal(true);
      expect(existsSync(path.join(dir, 'secrets.json')), 'no secrets generated when all are given').to.equal(false);
    });

    it('treats empty values as unset', () => {
      const config = loadConfig({ ...SECRETS, DATA_DIR: dir, PORT: '', DATABASE_URL: '  ', REDIS_URL: '', LOG_LEVEL: '' });
      expect(config.port).to.equal(3000);
      expect(config.databaseUrl).to.equal(null);
      expect(config.redisUrl).to.equal(null);
      expect(config.logLevel).to.equal('info');
    });
  });

  describe('invalid values', () => {
    const cases: [string, string[]][] = [
      ['PORT', ['abc', '-1', '65536', '80.5']],
      ['DATABASE_URL', ['not a url', 'mysql://u:p@host/db', 'http://db.internal']],
      ['REDIS_URL', ['localhost:6379', 'http://cache.internal']],
      ['BCRYPT_COST', ['twelve', '3', '16', '12.5']],
      ['LOG_LEVEL', ['loud', 'verbose']],
    ];
    for (const [name, values] of cases) {
      it(`refuses a bad ${name}, naming it`, () => {
        for (const value of values) {
          const err = configError({ ...SECRETS, DATA_DIR: dir, [name]: value });
          expect(err.message, `${name}=${value}`).to.include(name);
          expect(err.problems, `${name}=${value}`).to.have.length(1);
          expect(err.problems[0]).to.include(name);
        }
      });
    }

    it('names every bad variable at once, and writes nothing', () => {
      const err = configError({ DATA_DIR: dir, PORT: 'abc', DATABASE_URL: 'mysql://x', REDIS_URL: 'nope', BCRYPT_COST: '99', LOG_LEVEL: 'loud' });
      for (const name of ['PORT', 'DATABASE_URL', 'REDIS_URL', 'BCRYPT_COST', 'LOG_LEVEL']) {
        expect(err.message).to.include(name);
        expect(err.problems.filter((p) => p.includes(name)), name).to.have.length(1);
      }
      expect(err.problems).to.have.length(5);
      expect(err.name).to.equal('ConfigError');
      expect(existsSync(path.join(dir, 'secrets.json')), 'no secrets generated for a refused configuration').to.equal(false);
    });

    it('does not echo secret values or URL passwords in its message', () => {
      const err = configError({ DATA_DIR: dir, ...SECRETS, JWT_ACCESS_SECRET: 'short-secret-value', PORT: 'abc', DATABASE_URL: 'mysql://app:hunter2@db.internal/support', SMTP_URL: 'http://mailer:letmein@mail.internal' });
      expect(err.message).to.include('JWT_ACCESS_SECRET').and.include('PORT').and.include('DATABASE_URL').and.include('SMTP_URL');
      for (const secret of ['short-secret-value', 'hunter2', 'letmein']) expect(err.message).not.to.include(secret);
    });
  });

  describe('secrets', () => {
    it('refuses production without the JWT secrets, naming each one', () => {
      const err = configError({ NODE_ENV: 'production', DATA_DIR: dir });
      for (const name of ['JWT_ACCESS_SECRET', 'JWT_REFRESH_SECRET', 'WIDGET_JWT_SECRET']) expect(err.message).to.include(name);
      expect(existsSync(path.join(dir, 'secrets.json')), 'production never generates secrets').to.equal(false);

      const oneMissing = configError({ NODE_ENV: 'production', DATA_DIR: dir, JWT_ACCESS_SECRET: SECRETS.JWT_ACCESS_SECRET, WIDGET_JWT_SECRET: SECRETS.WIDGET_JWT_SECRET });
      expect(oneMissing.problems).to.have.length(1);
      expect(oneMissing.message).to.include('JWT_REFRESH_SECRET').and.not.include('JWT_ACCESS_SECRET').and.not.include('WIDGET_JWT_SECRET');
    });

    it('refuses production secrets that are short or equal', () => {
      const short = configError({ NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS, WIDGET_JWT_SECRET: 'too-short' });
      expect(short.message).to.include('WIDGET_JWT_SECRET');
      const same = configError({ NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS, JWT_REFRESH_SECRET: SECRETS.JWT_ACCESS_SECRET });
      expect(same.message).to.include('JWT_REFRESH_SECRET');
    });

    it('accepts production with all three secrets and uses them', () => {
      const config = loadConfig({ NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS });
      expect(config.env).to.equal('production');
      expect(config.secrets).to.deep.equal({ access: SECRETS.JWT_ACCESS_SECRET, refresh: SECRETS.JWT_REFRESH_SECRET, widget: SECRETS.WIDGET_JWT_SECRET });
      expect(existsSync(path.join(dir, 'secrets.json'))).to.equal(false);
    });

    it('outside production generates them once into DATA_DIR/secrets.json and loads the same ones again', () => {
      const file = path.join(dir, 'secrets.json');
      const first = loadConfig({ NODE_ENV: 'development', DATA_DIR: dir });
      expect(existsSync(file)).to.equal(true);
      if (process.platform !== 'win32') expect(statSync(file).mode & 0o777, 'owner-only file').to.equal(0o600);
      const { access, refresh, widget } = first.secrets;
      for (const s of [access, refresh, widget]) expect(s).to.be.a('string').with.length.of.at.least(32);
      expect(new Set([access, refresh, widget]).size, 'three different secrets').to.equal(3);
      expect(JSON.parse(readFileSync(file, 'utf8'))).to.deep.equal(first.secrets);

      const second = loadConfig({ NODE_ENV: 'test', DATA_DIR: dir });
      expect(second.secrets).to.deep.equal(first.secrets);

      const elsewhere = mkdtempSync(path.join(tmpdir(), 'support-config-'));
      try {
        const other = loadConfig({ DATA_DIR: elsewhere });
        expect(other.secrets.access).not.to.equal(access);
      } finally {
        rmSync(elsewhere, { recursive: true, force: true });
      }
    });

    it('uses a secret from the environment over the generated one, and keeps the rest generated', () => {
      const generated = loadConfig({ DATA_DIR: dir }).secrets;
      const mixed = loadConfig({ DATA_DIR: dir, JWT_ACCESS_SECRET: SECRETS.JWT_ACCESS_SECRET });
      expect(mixed.secrets).to.deep.equal({ access: SECRETS.JWT_ACCESS_SECRET, refresh: generated.refresh, widget: generated.widget });
    });

    it('refuses a corrupt secrets.json with a ConfigError naming it, and leaves the file alone', () => {
      const file = path.join(dir, 'secrets.json');
      writeFileSync(file, '{"access": "trunc');
      const err = configError({ DATA_DIR: dir });
      expect(err.message).to.include(file);
      expect(readFileSync(file, 'utf8')).to.equal('{"access": "trunc');
    });

    it('creates DATA_DIR when it does not exist yet', () => {
      const nested = path.join(dir, 'a', 'b');
      const config = loadConfig({ DATA_DIR: nested });
      expect(JSON.parse(readFileSync(path.join(nested, 'secrets.json'), 'utf8'))).to.deep.equal(config.secrets);
    });
  });
});
