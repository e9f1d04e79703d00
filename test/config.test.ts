// loadConfig: the defaults of CONTRACT section 5, errors that name every bad variable, and secrets kept in DATA_DIR.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { expect } from 'chai';
import { ConfigError, loadConfig } from '../server/config.js';
import { RATE_LIMIT_RULES } from '../server/ratelimit.js';
import { BUILT_IN_PLANS } from '../server/services/plans.js';

const SECRETS = {
  JWT_ACCESS_SECRET: 'config-test-access-secret-0123456789abcdef',
  JWT_REFRESH_SECRET: 'config-test-refresh-secret-0123456789abcdef',
  WIDGET_JWT_SECRET: 'config-test-widget-secret-0123456789abcdef',
  ENCRYPTION_KEY: '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff',
};
/** Production also needs a mail transport. */
const SMTP = { SMTP_URL: 'smtp://mailer:secret@mail.internal:587' };

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
      expect(config.redisAdapter).to.equal('sharded');
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
      expect(config.knowledge).to.deep.equal({ workers: 2, fetchAllowPrivate: false, fetchTimeoutMs: 15_000 });
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
        KNOWLEDGE_FETCH_TIMEOUT_MS: '30000',
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
      expect(config.knowledge.fetchTimeoutMs).to.equal(30_000);
      expect(loadConfig({ ...SECRETS, DATA_DIR: dir }).preparedStatements).to.equal(true);
      expect(existsSync(path.join(dir, 'secrets.json')), 'no secrets generated when all are given').to.equal(false);
    });

    it('.env.example shows the defaults: loading it changes nothing', () => {
      const example = parseEnv(readFileSync(path.resolve('.env.example'), 'utf8'));
      expect(loadConfig({ ...example, ...SECRETS })).to.deep.equal(loadConfig({ ...SECRETS }));
    });

    it('reads JOB_QUEUES as all, none, a list of queues, or all but some', () => {
      const of = (value: string | undefined) => loadConfig({ ...SECRETS, DATA_DIR: dir, JOB_QUEUES: value }).jobQueues;
      expect(of(undefined)).to.deep.equal({ only: null, except: [] });
      expect(of('ALL')).to.deep.equal({ only: null, except: [] });
      expect(of('none')).to.deep.equal({ only: [], except: [] });
      expect(of(' channel-inbound, channel-delivery ,channel-inbound')).to.deep.equal({ only: ['channel-inbound', 'channel-delivery'], except: [] });
      expect(of('-webhook-delivery,-knowledge-index')).to.deep.equal({ only: null, except: ['webhook-delivery', 'knowledge-index'] });
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
      ['REDIS_ADAPTER', ['shard', 'pattern', 'CLASSIC']],
      ['BCRYPT_COST', ['twelve', '3', '16', '12.5']],
      ['LOG_LEVEL', ['loud', 'verbose']],
      ['JOB_QUEUES', ['mail,-knowledge-index', '-a,b']],
      ['KNOWLEDGE_FETCH_TIMEOUT_MS', ['99', '120001', 'soon']],
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
      const err = configError({ NODE_ENV: 'production', DATA_DIR: dir, ...SMTP });
      for (const name of ['JWT_ACCESS_SECRET', 'JWT_REFRESH_SECRET', 'WIDGET_JWT_SECRET']) expect(err.message).to.include(name);
      expect(existsSync(path.join(dir, 'secrets.json')), 'production never generates secrets').to.equal(false);

      const oneMissing = configError({ NODE_ENV: 'production', DATA_DIR: dir, ...SMTP, JWT_ACCESS_SECRET: SECRETS.JWT_ACCESS_SECRET, WIDGET_JWT_SECRET: SECRETS.WIDGET_JWT_SECRET, ENCRYPTION_KEY: SECRETS.ENCRYPTION_KEY });
      expect(oneMissing.problems).to.have.length(1);
      expect(oneMissing.message).to.include('JWT_REFRESH_SECRET').and.not.include('JWT_ACCESS_SECRET').and.not.include('WIDGET_JWT_SECRET');
    });

    it('refuses production secrets that are short or equal', () => {
      const short = configError({ NODE_ENV: 'production', DATA_DIR: dir, ...SMTP, ...SECRETS, WIDGET_JWT_SECRET: 'too-short' });
      expect(short.message).to.include('WIDGET_JWT_SECRET');
      const same = configError({ NODE_ENV: 'production', DATA_DIR: dir, ...SMTP, ...SECRETS, JWT_REFRESH_SECRET: SECRETS.JWT_ACCESS_SECRET });
      expect(same.message).to.include('JWT_REFRESH_SECRET');
    });

    it('accepts production with all three secrets and uses them', () => {
      const config = loadConfig({ NODE_ENV: 'production', DATA_DIR: dir, ...SMTP, ...SECRETS });
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

  describe('mail', () => {
    it('refuses production without SMTP_URL, naming it, since codes and links would be written to the log', () => {
      const err = configError({ NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS });
      expect(err.problems).to.have.length(1);
      expect(err.problems[0]).to.include('SMTP_URL').and.include('ALLOW_MAIL_TO_LOG_IN_PRODUCTION');
      expect(configError({ NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS, SMTP_URL: '  ' }).message).to.include('SMTP_URL');
      expect(configError({ NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS, ALLOW_MAIL_TO_LOG_IN_PRODUCTION: 'false' }).message).to.include('SMTP_URL');
    });

    it('accepts production without SMTP_URL only when ALLOW_MAIL_TO_LOG_IN_PRODUCTION=true, and production with SMTP_URL', () => {
      expect(loadConfig({ NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS, ALLOW_MAIL_TO_LOG_IN_PRODUCTION: 'true' }).smtpUrl).to.equal(null);
      expect(loadConfig({ NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS, ...SMTP }).smtpUrl).to.equal(SMTP.SMTP_URL);
      expect(configError({ NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS, ALLOW_MAIL_TO_LOG_IN_PRODUCTION: 'maybe' }).message).to.include('ALLOW_MAIL_TO_LOG_IN_PRODUCTION');
    });

    it('refuses SES through SNS in production without SNS_TOPIC_ARNS, and topic lists that are not ARNs', () => {
      const production = { NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS, ...SMTP, EMAIL_INBOUND_SNS: 'true' };
      expect(configError(production).problems).to.deep.equal(["SNS_TOPIC_ARNS is required with EMAIL_INBOUND_SNS=true when NODE_ENV=production (otherwise any AWS account's topic could post mail)"]);
      const topics = 'arn:aws:sns:eu-west-1:123456789012:ses-inbound, arn:aws:sns:us-east-1:123456789012:more.fifo';
      expect(loadConfig({ ...production, SNS_TOPIC_ARNS: topics }).channels.sns).to.include({ enabled: true, maxAgeSeconds: 300 });
      expect(loadConfig({ ...production, SNS_TOPIC_ARNS: topics }).channels.sns.topicArns).to.deep.equal(['arn:aws:sns:eu-west-1:123456789012:ses-inbound', 'arn:aws:sns:us-east-1:123456789012:more.fifo']);
      expect(loadConfig({ NODE_ENV: 'production', DATA_DIR: dir, ...SECRETS, ...SMTP }).channels.sns.topicArns).to.equal(null);
      expect(loadConfig({ ...SECRETS, DATA_DIR: dir, EMAIL_INBOUND_SNS: 'true' }).channels.sns.topicArns, 'outside production: any topic').to.equal(null);
      for (const bad of ['ses-inbound', 'arn:aws:sqs:eu-west-1:123456789012:q', 'arn:aws:sns:eu-west-1:1234:t']) {
        expect(configError({ ...SECRETS, DATA_DIR: dir, SNS_TOPIC_ARNS: bad }).problems[0], bad).to.include('SNS_TOPIC_ARNS');
      }
      expect(loadConfig({ ...SECRETS, DATA_DIR: dir, SNS_MAX_AGE_SECONDS: '900' }).channels.sns.maxAgeSeconds).to.equal(900);
      expect(configError({ ...SECRETS, DATA_DIR: dir, SNS_MAX_AGE_SECONDS: '10' }).problems[0]).to.include('SNS_MAX_AGE_SECONDS');
    });

    it('outside production, no SMTP_URL is fine: mail goes to the log', () => {
      for (const NODE_ENV of [undefined, 'development', 'test']) expect(loadConfig({ NODE_ENV, DATA_DIR: dir, ...SECRETS }).smtpUrl).to.equal(null);
    });

    it('keeps delivered mail bodies MAIL_RETENTION_DAYS days (default 7)', () => {
      expect(loadConfig({ ...SECRETS }).mailRetentionDays).to.equal(7);
      expect(loadConfig({ ...SECRETS, MAIL_RETENTION_DAYS: '30' }).mailRetentionDays).to.equal(30);
      for (const bad of ['0', 'week', '1.5']) expect(configError({ ...SECRETS, MAIL_RETENTION_DAYS: bad }).message).to.include('MAIL_RETENTION_DAYS');
    });

    it('looks for mail due every MAIL_SWEEP_SECONDS seconds (default 5)', () => {
      expect(loadConfig({ ...SECRETS }).mailSweepSeconds).to.equal(5);
      expect(loadConfig({ ...SECRETS, MAIL_SWEEP_SECONDS: '60' }).mailSweepSeconds).to.equal(60);
      for (const bad of ['0', 'often', '0.5', '3601']) expect(configError({ ...SECRETS, MAIL_SWEEP_SECONDS: bad }).message).to.include('MAIL_SWEEP_SECONDS');
    });
  });

  describe('plans', () => {
    const plansFile = (content: unknown) => {
      const file = path.join(dir, 'plans.json');
      writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
      return file;
    };

    it('new organizations are on the unlimited plan unless DEFAULT_PLAN names another', () => {
      const config = loadConfig({ ...SECRETS });
      expect(config.defaultPlan).to.equal('unlimited');
      expect(config.plans.unlimited!.limits).to.deep.equal({ humanAgents: null, aiCallsPerMonth: null, knowledgeSources: null, widgets: null, channels: null, storageMb: null });
      expect(config.plans).to.deep.equal(BUILT_IN_PLANS);
      expect(loadConfig({ ...SECRETS, DEFAULT_PLAN: 'free' }).defaultPlan).to.equal('free');
      const err = configError({ ...SECRETS, DEFAULT_PLAN: 'gold' });
      expect(err.problems).to.have.length(1);
      expect(err.problems[0]).to.include('DEFAULT_PLAN').and.include('gold');
    });

    it('PLANS_FILE changes built-in plans limit by limit, and adds plans DEFAULT_PLAN may name', () => {
      const file = plansFile({ free: { limits: { humanAgents: 10, widgets: null } }, team: { limits: { humanAgents: 50 }, features: ['live_chat', 'widget'] } });
      const config = loadConfig({ ...SECRETS, PLANS_FILE: file, DEFAULT_PLAN: 'team' });
      expect(config.plans.free).to.deep.equal({ limits: { ...BUILT_IN_PLANS.free!.limits, humanAgents: 10, widgets: null }, features: BUILT_IN_PLANS.free!.features });
      expect(config.plans.team).to.deep.equal({
        limits: { humanAgents: 50, aiCallsPerMonth: null, knowledgeSources: null, widgets: null, channels: null, storageMb: null },
        features: ['live_chat', 'widget'],
      });
      expect(config.plans.pro).to.deep.equal(BUILT_IN_PLANS.pro);
      expect(config.defaultPlan).to.equal('team');
      expect(BUILT_IN_PLANS.free!.limits.humanAgents, 'the built-in definitions are not changed').to.equal(3);
    });

    it('refuses a PLANS_FILE that is missing, not JSON or not a plan catalog, naming the file and the fault', () => {
      const bad: [unknown, string][] = [
        ['{"free": ', 'not valid JSON'],
        [[1, 2], 'JSON object'],
        [{ free: { limits: { humanAgents: -1 } } }, 'humanAgents'],
        [{ free: { limits: { humanAgents: '10' } } }, 'humanAgents'],
        [{ free: { limits: { seats: 10 } } }, 'unknown limit "seats"'],
        [{ free: { limit: { humanAgents: 10 } } }, 'unknown key "limit"'],
        [{ free: { features: 'live_chat' } }, 'features'],
        [{ 'Gold Plan': {} }, 'plan name'],
        [{ gold: 5 }, 'plan "gold"'],
      ];
      for (const [content, fault] of bad) {
        const file = plansFile(content);
        const err = configError({ ...SECRETS, PLANS_FILE: file });
        expect(err.message, JSON.stringify(content)).to.include('PLANS_FILE').and.include(file).and.include(fault);
      }
      const missing = path.join(dir, 'nope.json');
      expect(configError({ ...SECRETS, PLANS_FILE: missing }).message).to.include('PLANS_FILE').and.include(missing).and.include('ENOENT');
    });
  });

  describe('rate limits', () => {
    it('defaults to the rules of server/ratelimit.ts', () => {
      expect(loadConfig({ ...SECRETS }).rateLimits).to.deep.equal(RATE_LIMIT_RULES);
    });

    it('RATE_LIMIT_<RULE> changes what it names and keeps the rest', () => {
      const config = loadConfig({ ...SECRETS, RATE_LIMIT_WIDGET_TOKEN: 'ip=600', RATE_LIMIT_LOGIN: 'ip=100, email=20, window=30m' });
      expect(config.rateLimits['widget-token']).to.deep.equal({ ...RATE_LIMIT_RULES['widget-token'], perIp: 600 });
      expect(config.rateLimits.login).to.deep.equal({ perIp: 100, perEmail: 20, windowSeconds: 1800 });
      expect(config.rateLimits['qr-scan']).to.deep.equal(RATE_LIMIT_RULES['qr-scan']);
      expect(RATE_LIMIT_RULES['widget-token'].perIp, 'the defaults are not changed').to.equal(120);
    });

    it('refuses malformed values and unknown rules, naming the variable', () => {
      for (const bad of ['600', 'ip=0', 'ip=abc', 'window=soon', 'ip=5,speed=2', 'ip=1.5']) {
        const err = configError({ ...SECRETS, RATE_LIMIT_WIDGET_TOKEN: bad });
        expect(err.problems, bad).to.have.length(1);
        expect(err.problems[0], bad).to.include('RATE_LIMIT_WIDGET_TOKEN');
      }
      const unknown = configError({ ...SECRETS, RATE_LIMIT_WIDGET_TOKENS: 'ip=5' });
      expect(unknown.message).to.include('RATE_LIMIT_WIDGET_TOKENS').and.include('RATE_LIMIT_WIDGET_TOKEN,');
    });
  });
});
