// Reads the environment once into a typed, validated configuration; nothing else touches process.env.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export type StorageDriver = 'local' | 's3';

export interface Config {
  env: string;
  port: number;
  host: string;
  databaseUrl: string | null;
  dataDir: string;
  redisUrl: string | null;
  smtpUrl: string | null;
  mailFrom: string;
  publicUrl: string;
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
  storage: {
    driver: StorageDriver;
    s3: { endpoint: string | null; region: string; bucket: string | null; accessKeyId: string | null; secretAccessKey: string | null; forcePathStyle: boolean };
  };
}

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
  const logLevel = (str('LOG_LEVEL') ?? 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);

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

  const config: Config = {
    env: nodeEnv,
    port,
    host,
    databaseUrl: url('DATABASE_URL', ['postgres:', 'postgresql:']),
    dataDir,
    redisUrl: url('REDIS_URL', ['redis:', 'rediss:']),
    smtpUrl: url('SMTP_URL', ['smtp:', 'smtps:']),
    mailFrom: str('MAIL_FROM') ?? 'Support Platform <no-reply@localhost>',
    publicUrl,
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
    storage: { driver, s3 },
  };

  if (problems.length > 0) throw new ConfigError(problems);

  const missing = (Object.keys(given) as (keyof typeof given)[]).filter((k) => given[k] === null);
  const generated = missing.length > 0 ? loadGeneratedSecrets(dataDir) : null;
  for (const kind of Object.keys(given) as (keyof typeof given)[]) {
    config.secrets[kind] = given[kind] ?? generated![kind];
  }
  return config;
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
