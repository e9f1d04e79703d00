// Reads the environment once into a typed, validated configuration; nothing else touches process.env.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Plan } from '../db/models/Organization.js';
import { RATE_LIMIT_RULES, type RateLimitName } from './ratelimit.js';
import { DEFAULT_PLAN, resolvePlans, type PlanCatalog } from './services/plans.js';

export type StorageDriver = 'local' | 's3';
/** How Socket.IO emits cross instances over Redis (REDIS_ADAPTER). */
export type RedisAdapterKind = 'sharded' | 'classic';

export interface Config {
  env: string;
  port: number;
  host: string;
  databaseUrl: string | null;
  dataDir: string;
  redisUrl: string | null;
  /** sharded: Redis 7 sharded pub/sub, a channel per namespace and room (cost per message flat in organizations); classic: a pattern per namespace. */
  redisAdapter: RedisAdapterKind;
  smtpUrl: string | null;
  mailFrom: string;
  /** Days after which the bodies of sent (or only logged) mail are cleared from the outbox. */
  mailRetentionDays: number;
  /** How often each instance looks for mail due (retries after their backoff, mail another instance left). */
  mailSweepSeconds: number;
  publicUrl: string;
  /** The operators' dashboard, base of invite, reset and login links in mail (default: PUBLIC_URL, the hosted pages). */
  appUrl: string;
  secrets: { access: string; refresh: string; widget: string };
  aiToolSecret: string | null;
  accessTokenTtlSeconds: number;
  refreshTokenTtlSeconds: number;
  widgetTokenTtlSeconds: number;
  bcryptCost: number;
  corsOrigins: string[];
  trustProxy: boolean;
  logLevel: string;
  migrateOnStart: boolean;
  /** Named prepared statements for the hot queries on PostgreSQL (off behind a transaction-pooling proxy). */
  preparedStatements: boolean;
  allowQueryToken: boolean;
  observabilityRetentionDays: number;
  /** Every plan an organization may be on (built in, plus PLANS_FILE), and the one new organizations get. */
  plans: PlanCatalog;
  defaultPlan: Plan;
  rateLimits: Record<RateLimitName, RateLimitRule>;
  /** Requests one API key may make per minute (API_KEY_RATE_LIMIT); with Redis, counted across instances. */
  apiKeyRateLimitPerMinute: number;
  /** GET /metrics: bearer token (null: only on a METRICS_PORT, unauthenticated) and an optional port of its own. */
  metrics: { token: string | null; port: number | null };
  /** Outbound webhooks: private targets allowed (development only) and the per-delivery timeout. */
  webhooks: { allowPrivate: boolean; timeoutMs: number };
  /**
   * Socket handshakes: how many may wait for their caller at once whatever the recent rate (SOCKET_HANDSHAKE_BACKLOG),
   * and how long one should wait at most (SOCKET_HANDSHAKE_MAX_WAIT_MS); beyond both, a handshake is refused at once
   * with `service_unavailable` and a time to come back (sockets/admission.ts).
   */
  socketAdmission: { backlog: number; maxWaitMs: number };
  /** Knowledge indexing jobs run at once per instance; URL sources may reach private addresses only when allowed (tests). */
  knowledge: { workers: number; fetchAllowPrivate: boolean; fetchTimeoutMs: number };
  /**
   * The background queues this instance works on (null: all of them). Instances that only answer requests, or
   * workers for one kind of job, share the database; every instance still writes jobs of every queue.
   */
  jobQueues: JobQueueSelection;
  /** The internal AI service's assist endpoint (POST, x-ai-tool-secret); unset: assist answers from local search only. */
  aiAssistUrl: string | null;
  /** Messaging channels: the key channel secrets are sealed with, inbound mail, and the provider APIs (test fakes). */
  channels: { encryptionKey: Buffer; inboundEmailDomain: string; smtpInPort: number | null; whatsappGraphUrl: string; telegramApiUrl: string; inboundPerMinute: number; sns: { enabled: boolean; certUrlPattern: RegExp; topicArns: string[] | null; maxAgeSeconds: number } };
  storage: {
    driver: StorageDriver;
    s3: { endpoint: string | null; region: string; bucket: string | null; accessKeyId: string | null; secretAccessKey: string | null; forcePathStyle: boolean };
  };
}

/** Requests allowed per IP and per email within the window (server/ratelimit.ts holds the defaults). */
export type RateLimitRule = (typeof RATE_LIMIT_RULES)[RateLimitName];

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const DURATION = /^(\d+)\s*(s|m|h|d)?$/;
const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** Parses and validates configuration; throws ConfigError naming every bad variable at once. */
/** arn:<partition>:sns:<region>:<account>:<topic> */
const SNS_TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$/;

/** The URLs SNS may name for its certificate and subscription: AWS's own by default. */
export const SNS_URL_DEFAULT = /^https:\/\/sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?\//;
function snsPattern(raw: string | null): RegExp {
  if (!raw) return SNS_URL_DEFAULT;
  try {
    return new RegExp(raw);
  } catch {
    throw new Error('SNS_CERT_URL_PATTERN must be a regular expression');
  }
}

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const str = (name: string): string | null => {
    const value = env[name];
    return value === undefined || value.trim() === '' ? null : value.trim();
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = str(name);
    if (raw === null) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${name} must be an integer between ${min} and ${max} (got "${raw}")`);
      return fallback;
    }
    return n;
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = str(name);
    if (raw === null) return fallback;
    if (['true', '1', 'yes'].includes(raw.toLowerCase())) return true;
    if (['false', '0', 'no'].includes(raw.toLowerCase())) return false;
    problems.push(`${name} must be true or false (got "${raw}")`);
    return fallback;
  };
  const duration = (name: string, fallbackSeconds: number): number => {
    const raw = str(name);
    if (raw === null) return fallbackSeconds;
    const m = DURATION.exec(raw);
    if (!m || Number(m[1]) <= 0) {
      problems.push(`${name} must be a positive duration in seconds or with a unit, like 900 or 15m (got "${raw}")`);
      return fallbackSeconds;
    }
    return Number(m[1]) * UNIT_SECONDS[m[2] ?? 's']!;
  };
  const url = (name: string, protocols: string[]): string | null => {
    const raw = str(name);
    if (raw === null) return null;
    try {
      const parsed = new URL(raw);
      if (!protocols.includes(parsed.protocol)) {
        problems.push(`${name} must be a ${protocols.map((p) => p.replace(':', '://')).join(' or ')} URL`);
        return null;
      }
      return raw;
    } catch {
      problems.push(`${name} is not a valid URL`);
      return null;
    }
  };

  const nodeEnv = str('NODE_ENV') ?? 'development';
  const port = int('PORT', 3000, 0, 65535);
  const host = str('HOST') ?? '0.0.0.0';
  const dataDir = path.resolve(str('DATA_DIR') ?? './data');
  const publicUrl = (url('PUBLIC_URL', ['http:', 'https:']) ?? `http://localhost:${port}`).replace(/\/+$/, '');
  const appUrl = (url('APP_URL', ['http:', 'https:']) ?? publicUrl).replace(/\/+$/, '');
  const logLevel = (str('LOG_LEVEL') ?? 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);

  const redisAdapter = (str('REDIS_ADAPTER') ?? 'sharded') as RedisAdapterKind;
  if (redisAdapter !== 'sharded' && redisAdapter !== 'classic') problems.push('REDIS_ADAPTER must be sharded or classic');

  const corsOrigins = (str('CORS_ORIGINS') ?? '')
    .split(',')
    .map((o) => o.trim().replace(/\/+$/, ''))
    .filter(Boolean);
  for (const origin of corsOrigins) {
    if (origin === '*') continue;
    try {
      new URL(origin);
    } catch {
      problems.push(`CORS_ORIGINS contains "${origin}", which is not an origin like https://app.example.com`);
    }
  }

  const driver = (str('STORAGE_DRIVER') ?? 'local') as StorageDriver;
  if (driver !== 'local' && driver !== 's3') problems.push('STORAGE_DRIVER must be local or s3');
  const s3 = {
    endpoint: url('S3_ENDPOINT', ['http:', 'https:']),
    region: str('S3_REGION') ?? 'us-east-1',
    bucket: str('S3_BUCKET'),
    accessKeyId: str('S3_ACCESS_KEY_ID'),
    secretAccessKey: str('S3_SECRET_ACCESS_KEY'),
    forcePathStyle: bool('S3_FORCE_PATH_STYLE', true),
  };
  if (driver === 's3' && !s3.bucket) problems.push('S3_BUCKET is required when STORAGE_DRIVER=s3');

  const secretNames = { access: 'JWT_ACCESS_SECRET', refresh: 'JWT_REFRESH_SECRET', widget: 'WIDGET_JWT_SECRET' } as const;
  const given = { access: str(secretNames.access), refresh: str(secretNames.refresh), widget: str(secretNames.widget) };
  for (const [kind, name] of Object.entries(secretNames)) {
    const value = given[kind as keyof typeof given];
    if (value !== null && value.length < 32) problems.push(`${name} must be at least 32 characters`);
    if (value === null && nodeEnv === 'production') {
      problems.push(`${name} is required when NODE_ENV=production (secrets are generated into DATA_DIR only outside production)`);
    }
  }
  if (new Set(Object.values(given).filter(Boolean)).size < Object.values(given).filter(Boolean).length) {
    problems.push('JWT_ACCESS_SECRET, JWT_REFRESH_SECRET and WIDGET_JWT_SECRET must differ from one another');
  }

  // Channel credentials are sealed under ENCRYPTION_KEY: 32 bytes as 64 hex characters or base64.
  const encryptionKeyText = str('ENCRYPTION_KEY');
  const encryptionKey = encryptionKeyText === null ? null : /^[0-9a-fA-F]{64}$/.test(encryptionKeyText) ? Buffer.from(encryptionKeyText, 'hex') : Buffer.from(encryptionKeyText, 'base64');
  if (encryptionKey !== null && encryptionKey.length !== 32) problems.push('ENCRYPTION_KEY must be 32 bytes, written as 64 hex characters or base64');
  if (encryptionKeyText === null && nodeEnv === 'production') problems.push('ENCRYPTION_KEY is required when NODE_ENV=production (it is generated into DATA_DIR only outside production)');
  const channelUrl = (name: string, fallback: string) => (url(name, ['http:', 'https:']) ?? fallback).replace(/\/+$/, '');
  // The SNS topics whose mail is taken: anyone can have AWS sign messages of a topic of their own, so in production
  // the list is required with EMAIL_INBOUND_SNS; outside production, unset takes any topic.
  const snsEnabled = bool('EMAIL_INBOUND_SNS', false);
  const topicArns = str('SNS_TOPIC_ARNS')?.split(',').map((t) => t.trim()).filter(Boolean) ?? null;
  for (const arn of topicArns ?? []) if (!SNS_TOPIC_ARN.test(arn)) problems.push(`SNS_TOPIC_ARNS contains "${arn}", which is not a topic ARN like arn:aws:sns:eu-west-1:123456789012:ses-inbound`);
  if (snsEnabled && !topicArns?.length && nodeEnv === 'production') problems.push('SNS_TOPIC_ARNS is required with EMAIL_INBOUND_SNS=true when NODE_ENV=production (otherwise any AWS account\'s topic could post mail)');

  // Without a transport, codes and links are written to the log: fine on a laptop, a leak in production.
  const smtpUrl = url('SMTP_URL', ['smtp:', 'smtps:']);
  if (nodeEnv === 'production' && str('SMTP_URL') === null && !bool('ALLOW_MAIL_TO_LOG_IN_PRODUCTION', false)) {
    problems.push('SMTP_URL is required when NODE_ENV=production (without it, sign-up codes, reset and invite links are written to the log); set ALLOW_MAIL_TO_LOG_IN_PRODUCTION=true to accept that');
  }

  const plans = readPlans(str('PLANS_FILE'), problems);
  const defaultPlan = str('DEFAULT_PLAN') ?? DEFAULT_PLAN;
  if (!Object.hasOwn(plans, defaultPlan)) problems.push(`DEFAULT_PLAN names no plan: "${defaultPlan}" (plans: ${Object.keys(plans).join(', ')})`);

  const config: Config = {
    env: nodeEnv,
    port,
    host,
    databaseUrl: url('DATABASE_URL', ['postgres:', 'postgresql:']),
    dataDir,
    redisUrl: url('REDIS_URL', ['redis:', 'rediss:']),
    redisAdapter,
    smtpUrl,
    mailFrom: str('MAIL_FROM') ?? 'Support Platform <no-reply@localhost>',
    mailRetentionDays: int('MAIL_RETENTION_DAYS', 7, 1, 3650),
    mailSweepSeconds: int('MAIL_SWEEP_SECONDS', 5, 1, 3600),
    publicUrl,
    appUrl,
    secrets: { access: '', refresh: '', widget: '' },
    aiToolSecret: str('AI_TOOL_SECRET'),
    accessTokenTtlSeconds: duration('ACCESS_TOKEN_TTL', 15 * 60),
    refreshTokenTtlSeconds: duration('REFRESH_TOKEN_TTL', 30 * 86400),
    widgetTokenTtlSeconds: duration('WIDGET_TOKEN_TTL', 24 * 3600),
    bcryptCost: int('BCRYPT_COST', 12, 4, 15),
    corsOrigins,
    trustProxy: bool('TRUST_PROXY', false),
    logLevel,
    migrateOnStart: bool('MIGRATE_ON_START', true),
    preparedStatements: bool('DATABASE_PREPARED_STATEMENTS', true),
    allowQueryToken: bool('ALLOW_QUERY_TOKEN', false),
    observabilityRetentionDays: int('OBSERVABILITY_RETENTION_DAYS', 90, 1, 3650),
    plans,
    defaultPlan,
    rateLimits: readRateLimits(env, str, problems),
    storage: { driver, s3 },
    channels: {
      encryptionKey: encryptionKey ?? Buffer.alloc(0),
      inboundEmailDomain: (str('INBOUND_EMAIL_DOMAIN') ?? new URL(publicUrl).hostname).toLowerCase(),
      smtpInPort: str('SMTP_IN_PORT') === null ? null : int('SMTP_IN_PORT', 0, 0, 65535),
      whatsappGraphUrl: channelUrl('WHATSAPP_GRAPH_URL', 'https://graph.facebook.com/v21.0'),
      telegramApiUrl: channelUrl('TELEGRAM_API_URL', 'https://api.telegram.org'),
      inboundPerMinute: int('CHANNEL_INBOUND_RATE_LIMIT', 600, 1, 10_000_000),
      // SES inbound mail through SNS; the signing certificate (and the subscription URL) only from AWS's SNS hosts
      // over https, unless SNS_CERT_URL_PATTERN says otherwise (tests point it at a local fake).
      // Messages older than SNS_MAX_AGE_SECONDS (by their signed Timestamp) are refused like stale signed webhooks.
      sns: { enabled: snsEnabled, certUrlPattern: snsPattern(str('SNS_CERT_URL_PATTERN')), topicArns: topicArns?.length ? topicArns : null, maxAgeSeconds: int('SNS_MAX_AGE_SECONDS', 300, 60, 86_400) },
    },
    apiKeyRateLimitPerMinute: int('API_KEY_RATE_LIMIT', 600, 1, 1_000_000),
    metrics: { token: str('METRICS_TOKEN'), port: str('METRICS_PORT') === null ? null : int('METRICS_PORT', 0, 0, 65535) },
    webhooks: { allowPrivate: bool('WEBHOOKS_ALLOW_PRIVATE', false), timeoutMs: int('WEBHOOK_TIMEOUT_MS', 10_000, 50, 60_000) },
    // The default backlog is what the caller lookup has in flight (two statements of 200 callers, auth/actor.ts).
    socketAdmission: { backlog: int('SOCKET_HANDSHAKE_BACKLOG', 400, 1, 1_000_000), maxWaitMs: int('SOCKET_HANDSHAKE_MAX_WAIT_MS', 2_000, 100, 600_000) },
    knowledge: { workers: int('KNOWLEDGE_WORKERS', 2, 1, 32), fetchAllowPrivate: bool('KNOWLEDGE_FETCH_ALLOW_PRIVATE', false), fetchTimeoutMs: int('KNOWLEDGE_FETCH_TIMEOUT_MS', 15_000, 100, 120_000) },
    aiAssistUrl: url('AI_ASSIST_URL', ['http:', 'https:']),
    jobQueues: jobQueuesOf(str('JOB_QUEUES'), problems),
  };
  const metricsToken = config.metrics.token;
  if (metricsToken !== null && metricsToken.length < 16) problems.push('METRICS_TOKEN must be at least 16 characters');
  if (config.knowledge.fetchAllowPrivate && nodeEnv === 'production') problems.push('KNOWLEDGE_FETCH_ALLOW_PRIVATE=true is refused when NODE_ENV=production (it lets URL sources reach internal addresses)');

  if (problems.length > 0) throw new ConfigError(problems);

  const missing = (Object.keys(given) as (keyof typeof given)[]).filter((k) => given[k] === null);
  const generated = missing.length > 0 ? loadGeneratedSecrets(dataDir) : null;
  for (const kind of Object.keys(given) as (keyof typeof given)[]) {
    config.secrets[kind] = given[kind] ?? generated![kind];
  }
  if (config.channels.encryptionKey.length === 0) config.channels.encryptionKey = loadGeneratedEncryptionKey(dataDir);
  return config;
}

/** Loads `.env` from the working directory when there is one (Node's own parser); the real environment wins. */
export function loadEnvFileIfPresent(file = '.env'): string | null {
  if (!existsSync(file)) return null;
  process.loadEnvFile(file);
  return path.resolve(file);
}

/** The built-in plans with PLANS_FILE's overrides applied; problems name the file. */
function readPlans(file: string | null, problems: string[]): PlanCatalog {
  const where = `PLANS_FILE (${file})`;
  let overrides: unknown = {};
  if (file !== null) {
    try {
      overrides = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      const reason = err instanceof SyntaxError ? `is not valid JSON: ${err.message}` : `cannot be read: ${(err as NodeJS.ErrnoException).code ?? String(err)}`;
      problems.push(`${where} ${reason}`);
      overrides = {};
    }
  }
  const resolved = resolvePlans(overrides, where);
  problems.push(...resolved.problems);
  return resolved.plans;
}

const RATE_LIMIT_PREFIX = 'RATE_LIMIT_';
const rateLimitVariable = (name: RateLimitName) => RATE_LIMIT_PREFIX + name.toUpperCase().replace(/-/g, '_');

/**
 * Each rule of server/ratelimit.ts can be changed by `RATE_LIMIT_<RULE>=ip=<n>,email=<n>,window=<duration>`
 * (any subset, e.g. RATE_LIMIT_WIDGET_TOKEN=ip=600); what is left out keeps its default.
 */
function readRateLimits(env: Env, str: (name: string) => string | null, problems: string[]): Record<RateLimitName, RateLimitRule> {
  const names = Object.keys(RATE_LIMIT_RULES) as RateLimitName[];
  const known = new Set(names.map(rateLimitVariable));
  for (const variable of Object.keys(env)) {
    if (variable.startsWith(RATE_LIMIT_PREFIX) && !known.has(variable) && str(variable) !== null) {
      problems.push(`${variable} is not a rate limit; the rate limits are ${[...known].join(', ')}`);
    }
  }
  const rules = {} as Record<RateLimitName, RateLimitRule>;
  for (const name of names) {
    const variable = rateLimitVariable(name);
    const rule: RateLimitRule = { ...RATE_LIMIT_RULES[name] };
    rules[name] = rule;
    const raw = str(variable);
    if (raw === null) continue;
    for (const part of raw.split(',')) {
      const [key, value = ''] = part.split('=').map((p) => p.trim());
      const count = Number(value);
      const window = DURATION.exec(value);
      if ((key === 'ip' || key === 'email') && Number.isInteger(count) && count >= 1 && count <= 1_000_000) {
        rule[key === 'ip' ? 'perIp' : 'perEmail'] = count;
      } else if (key === 'window' && window && Number(window[1]) > 0) {
        rule.windowSeconds = Number(window[1]) * UNIT_SECONDS[window[2] ?? 's']!;
      } else {
        problems.push(`${variable} must look like ip=<n>,email=<n>,window=<duration> (any of them; n from 1 to 1000000, window like 60 or 15m), got "${raw}"`);
        break;
      }
    }
  }
  return rules;
}

/** The channel-secret key generated on first start outside production and kept in DATA_DIR: sealed secrets stay readable. */
function loadGeneratedEncryptionKey(dataDir: string): Buffer {
  const file = path.join(dataDir, 'encryption.key');
  if (existsSync(file)) {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
    // Never replaced silently: every stored channel credential is sealed under it.
    if (key.length !== 32) throw new ConfigError([`${file} does not hold a 32-byte hex key; restore it, or delete it (stored channel credentials become unreadable)`]);
    return key;
  }
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, key.toString('hex'), { mode: 0o600 });
  chmodSync(file, 0o600);
  return key;
}

/** Secrets generated on first start and kept in DATA_DIR, so tokens survive restarts of a local install. */
function loadGeneratedSecrets(dataDir: string): Config['secrets'] {
  const file = path.join(dataDir, 'secrets.json');
  if (existsSync(file)) {
    let stored: Partial<Config['secrets']> | null;
    try {
      stored = JSON.parse(readFileSync(file, 'utf8')) as Partial<Config['secrets']> | null;
    } catch {
      // Never overwrite it silently: every token and stored one-time code hash depends on these secrets.
      throw new ConfigError([`${file} is not valid JSON; repair it, or delete it to generate new secrets (signing everyone out)`]);
    }
    if (stored?.access && stored.refresh && stored.widget) return stored as Config['secrets'];
  }
  mkdirSync(dataDir, { recursive: true });
  const fresh = {
    access: randomBytes(48).toString('base64url'),
    refresh: randomBytes(48).toString('base64url'),
    widget: randomBytes(48).toString('base64url'),
  };
  writeFileSync(file, JSON.stringify(fresh, null, 2), { mode: 0o600 });
  chmodSync(file, 0o600);
  return fresh;
}

/** The queues an instance works on: `only` these (null: all defined), never those in `except`. */
export interface JobQueueSelection {
  only: string[] | null;
  except: string[];
}

/**
 * `JOB_QUEUES`: unset or `all` for every queue, `none` for an instance that runs no background jobs, a list of
 * queues (`channel-inbound,channel-delivery`), or all but some (`-webhook-fanout,-webhook-delivery,-knowledge-index`).
 */
function jobQueuesOf(text: string | null, problems: string[]): JobQueueSelection {
  const value = text?.trim().toLowerCase() ?? 'all';
  if (value === '' || value === 'all') return { only: null, except: [] };
  if (value === 'none') return { only: [], except: [] };
  const names = [...new Set(value.split(',').map((name) => name.trim()).filter(Boolean))];
  const except = names.filter((name) => name.startsWith('-')).map((name) => name.slice(1));
  if (except.length > 0 && except.length < names.length) problems.push('JOB_QUEUES lists queues to run or (each with a leading -) queues not to run, not both');
  return except.length > 0 ? { only: null, except } : { only: names, except: [] };
}
