// Composition root: builds the database, Redis, mail, services and the HTTP server from one configuration.
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import { createDatabase, type Database } from '../db/index.js';
import { aiSecretChecker, bearerTokenReader, type RouteServices } from '../routes/services.js';
import { createApp } from './app.js';
import { ActorResolver } from './auth/actor.js';
import { OtpService } from './auth/otp.js';
import { PasswordHasher } from './auth/passwords.js';
import { hashSecret } from './auth/secrets.js';
import { SessionService } from './auth/sessions.js';
import { TokenService } from './auth/tokens.js';
import type { Config } from './config.js';
import { DomainEventBus } from './events.js';
import { createLogger, type Logger } from './logger.js';
import { Mailer } from './mail/index.js';
import { RateLimits } from './ratelimit.js';
import { createRedis } from './redis.js';
import { AuthService } from './services/auth.js';
import { MembershipService } from './services/memberships.js';
import { OrganizationService } from './services/organizations.js';

export interface AppServer {
  config: Config;
  logger: Logger;
  db: Database;
  redis: Redis | null;
  events: DomainEventBus;
  services: RouteServices;
  http: HttpServer;
  /** Applies migrations (unless turned off) and starts listening; resolves with the bound port. */
  start(): Promise<number>;
  /** Stops accepting, lets requests finish, then closes mail, Redis and the database. */
  stop(): Promise<void>;
}

export function createServer(config: Config, opts: { logger?: Logger } = {}): AppServer {
  const logger = opts.logger ?? createLogger(config.logLevel);
  const db = createDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  const redis = config.redisUrl ? createRedis(config.redisUrl, logger, 'main') : null;
  const events = new DomainEventBus(logger);
  const tokens = new TokenService(config);
  const passwords = new PasswordHasher(config.bcryptCost);
  // Codes and link tokens are stored as keyed hashes; the key derives from a server secret.
  const tokenHashKey = hashSecret(config.secrets.refresh, 'one-time-secrets');
  const otp = new OtpService(db.models, db.knex, tokenHashKey);
  const sessions = new SessionService(db.models, tokens, events, config.refreshTokenTtlSeconds);
  const mailer = new Mailer(db.models, db.knex, logger, { smtpUrl: config.smtpUrl, from: config.mailFrom });
  const organizations = new OrganizationService({ models: db.models, knex: db.knex, sessions, events });
  const auth = new AuthService({ models: db.models, knex: db.knex, passwords, otp, sessions, tokens, mailer, organizations, publicUrl: config.publicUrl, tokenHashKey });
  const memberships = new MembershipService({ models: db.models, knex: db.knex, passwords, sessions, organizations, mailer, events, publicUrl: config.publicUrl, tokenHashKey });

  const services: RouteServices = {
    config,
    actors: new ActorResolver(db.knex, tokens),
    rateLimits: new RateLimits(redis),
    auth,
    organizations,
    memberships,
    mailer,
    bearerToken: bearerTokenReader(config.allowQueryToken),
    checkAiSecret: aiSecretChecker(config.aiToolSecret),
    ready: async () => {
      await db.ping();
      if (redis) await redis.ping();
    },
  };

  const { app } = createApp(services, logger);
  const http = createHttpServer(app.callback());
  // Idle keep-alive sockets must not hold a graceful stop open.
  http.keepAliveTimeout = 5_000;

  return {
    config,
    logger,
    db,
    redis,
    events,
    services,
    http,
    async start() {
      if (config.migrateOnStart) {
        const applied = await db.migrate();
        if (applied.length) logger.info({ applied }, 'migrations applied');
      }
      mailer.start();
      await new Promise<void>((resolve, reject) => {
        http.once('error', reject);
        http.listen(config.port, config.host, () => resolve());
      });
      const port = (http.address() as AddressInfo).port;
      logger.info({ port, database: db.embedded ? 'embedded (PGlite)' : 'postgres', redis: !!redis, smtp: mailer.delivers }, 'listening');
      return port;
    },
    async stop() {
      await new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeIdleConnections();
      });
      await mailer.stop();
      if (redis) await redis.quit().catch(() => undefined);
      await db.close();
    },
  };
}
