// Composition root: builds the database, Redis, mail, services and the HTTP server from one configuration.
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Router } from '@koa/router';
import { createDatabase, type Database } from '../db/index.js';
import type { RouteRegistry } from '../routes/registry.js';
import { bearerTokenReader, type RouteServices } from '../routes/services.js';
import { createApp } from './app.js';
import { answerClientError } from './clientErrors.js';
import { ActorResolver } from './auth/actor.js';
import { CallerCache } from './auth/callerCache.js';
import { createPolicies, type PolicyOverrides } from './policies/index.js';
import { OtpService } from './auth/otp.js';
import { PasswordHasher } from './auth/passwords.js';
import { hashSecret } from './auth/secrets.js';
import { SessionService } from './auth/sessions.js';
import { TokenService } from './auth/tokens.js';
import type { Config } from './config.js';
import { DomainEventBus } from './events.js';
import { createLogger, type Logger } from './logger.js';
import { JobQueue } from './jobs/index.js';
import { createStorageDriver, MessageAttachments, StorageService } from './storage/index.js';
import { defineStorageSweep } from './storage/sweep.js';
import { AssistService, KnowledgeIndexer, KnowledgeService, UnansweredQuestions } from './services/knowledge/index.js';
import { Mailer } from './mail/index.js';
import { RateLimits } from './ratelimit.js';
import { Readiness } from './readiness.js';
import { RedisLink } from './redis.js';
import { AuthService } from './services/auth.js';
import { MembershipService } from './services/memberships.js';
import { OrganizationService } from './services/organizations.js';
import { AgentService } from './services/agents.js';
import { ContactService } from './services/contacts/index.js';
import { ConversationService, listenForArrivals } from './services/conversations/index.js';
import { MessageService } from './services/messages/index.js';
import { NotificationService } from './services/notifications.js';
import { RoutingService } from './services/routing.js';
import { WidgetService } from './services/widget.js';
import { AiService } from './services/ai.js';
import { AnalyticsService } from './services/analytics/index.js';
import { ObservabilityService } from './services/observability.js';
import { TemplateService } from './services/templates.js';
import { IdempotencyKeys, TicketMailer, TicketService } from './services/tickets/index.js';
import { EmailIdentityService, EmailSendService } from './services/email/index.js';
import { ChannelService, SecretSealer } from './services/channels/index.js';
import { MemoryPresence, RedisPresence, type Presence } from './presence.js';
import { createRealtime, type Realtime } from '../sockets/index.js';
import { MembershipCheck } from '../sockets/membership.js';
import { ApiKeyService } from './services/apiKeys/index.js';
import { Metrics, type SocketKind } from './metrics.js';
import { SecretBox, WebhookDeliverer, WebhookService } from './services/webhooks/index.js';

export interface AppServer {
  config: Config;
  logger: Logger;
  db: Database;
  /** Every Redis client of this server and whether they are connected (null without REDIS_URL). */
  redis: RedisLink | null;
  readiness: Readiness;
  events: DomainEventBus;
  /** The durable job queue (webhook deliveries, indexing, sweeps); areas define their queues on it. */
  jobs: JobQueue;
  services: RouteServices;
  metrics: Metrics;
  /** The bound METRICS_PORT once started (null when /metrics has no port of its own). */
  metricsPort: number | null;
  /** The mounted /api/v1 routers (one per first path segment) and the route definitions behind them (and behind the OpenAPI document). */
  routers: Router[];
  registry: RouteRegistry;
  presence: Presence;
  http: HttpServer;
  realtime: Realtime;
  /** Applies migrations (unless turned off) and starts listening; resolves with the bound port. */
  start(): Promise<number>;
  /** Stops accepting, lets requests finish, then closes mail, Redis and the database. */
  stop(): Promise<void>;
}

export function createServer(config: Config, opts: { logger?: Logger; policies?: PolicyOverrides } = {}): AppServer {
  const logger = opts.logger ?? createLogger(config.logLevel);
  const db = createDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, preparedStatements: config.preparedStatements, logger });
  const redis = config.redisUrl ? new RedisLink(config.redisUrl, logger) : null;
  const events = new DomainEventBus(logger);
  const tokens = new TokenService(config);
  const passwords = new PasswordHasher(config.bcryptCost);
  // Codes and link tokens are stored as keyed hashes; the key derives from a server secret.
  const tokenHashKey = hashSecret(config.secrets.refresh, 'one-time-secrets');
  const otp = new OtpService(db.models, db.knex, tokenHashKey);
  const sessions = new SessionService(db.models, tokens, events, config.refreshTokenTtlSeconds);
  const mailer = new Mailer(db.models, db.knex, logger, { smtpUrl: config.smtpUrl, from: config.mailFrom, sweepSeconds: config.mailSweepSeconds });
  // Messages stored are the interactive work that background queues yield to (server/jobs/pressure.ts); read only
  // once the server starts, after `messages` exists.
  const foreground = () => messages.batchStats.appended + messages.batchStats.declined;
  const jobs = new JobQueue(db.knex, logger, { select: config.jobQueues, foreground });
  const organizations = new OrganizationService({ models: db.models, knex: db.knex, sessions, events, plans: { catalog: config.plans, defaultPlan: config.defaultPlan } });
  const auth = new AuthService({ models: db.models, knex: db.knex, passwords, otp, sessions, tokens, mailer, organizations, appUrl: config.appUrl, tokenHashKey });
  const memberships = new MembershipService({ models: db.models, knex: db.knex, passwords, sessions, organizations, mailer, events, appUrl: config.appUrl, tokenHashKey });

  const presence: Presence = redis ? new RedisPresence(redis, (err) => logger.debug({ err }, 'presence fell back to this instance')) : new MemoryPresence();
  const notifications = new NotificationService({ models: db.models, events });
  // Two batches in flight: one being written while the next fills. More only adds PostgreSQL backends contending for
  // the same cores and makes each batch smaller (more statements and commits per message).
  const storageDriver = createStorageDriver(config);
  // A knowledge source's file stays while the source does.
  const referencedBy = async (trx: typeof db.knex, objectId: string) => !!(await trx('knowledge_sources').where({ objectId }).first('id'));
  const storage = new StorageService({ models: db.models, knex: db.knex, driver: storageDriver, organizations, referencedBy });
  const attachments = new MessageAttachments({ models: db.models, driver: storageDriver });
  const storageSweep = defineStorageSweep(jobs, storage, logger);
  const indexer = new KnowledgeIndexer({ models: db.models, knex: db.knex, driver: storageDriver, events, logger, jobs, workers: config.knowledge.workers, allowPrivate: config.knowledge.fetchAllowPrivate, fetchTimeoutMs: config.knowledge.fetchTimeoutMs, notifications });
  const knowledge = new KnowledgeService({ models: db.models, knex: db.knex, statement: db.statement, storage, organizations, indexer, allowPrivate: config.knowledge.fetchAllowPrivate });
  const unanswered = new UnansweredQuestions({ models: db.models, knex: db.knex, events, knowledge });
  const assist = new AssistService({ models: db.models, knex: db.knex, statement: db.statement, logger, aiAssistUrl: config.aiAssistUrl, aiToolSecret: config.aiToolSecret });
  const messages = new MessageService({ models: db.models, knex: db.knex, statement: db.statement, events, batching: { concurrency: db.embedded ? 1 : 2, maxBatch: 200 }, attachments });
  const contacts = new ContactService({ models: db.models, knex: db.knex, events, notifications });
  const conversations = new ConversationService({ models: db.models, knex: db.knex, statement: db.statement, events, contacts });
  const routing = new RoutingService({ models: db.models, knex: db.knex, events, presence, notifications });
  const agents = new AgentService({ models: db.models, knex: db.knex, events, presence });
  const widget = new WidgetService({ models: db.models, tokens, messages, publicUrl: config.publicUrl });
  listenForArrivals({ models: db.models, events, routing, notifications, logger });
  const apiKeys = new ApiKeyService({ models: db.models, knex: db.knex, statement: db.statement, events, hashKey: hashSecret(tokenHashKey, 'api-keys'), redis: redis?.main ?? null, requestsPerMinute: config.apiKeyRateLimitPerMinute });
  const actors = new ActorResolver(db.statement, tokens, apiKeys, { models: db.models, aiToolSecret: config.aiToolSecret });
  // Behind a pooler that pools by transaction (prepared statements off) LISTEN cannot work, so nothing is cached.
  const callers = new CallerCache(actors, { events, knex: db.knex, logger, mode: db.embedded ? 'local' : config.preparedStatements ? 'listen' : 'off', databaseUrl: config.databaseUrl });
  const policies = createPolicies(opts.policies);
  const templates = new TemplateService({ models: db.models });
  const observability = new ObservabilityService({ knex: db.knex });
  const ai = new AiService({ models: db.models, knex: db.knex, events, conversations, messages, routing, notifications });
  const tickets = new TicketService({
    models: db.models, knex: db.knex, events, notifications, contacts, logger,
    mail: new TicketMailer({ models: db.models, mailer, mailFrom: config.mailFrom }),
    keys: new IdempotencyKeys({ models: db.models, knex: db.knex, onSweepError: (err) => logger.warn({ err }, 'sweeping expired idempotency keys failed') }),
  });

  const email = new EmailIdentityService({ knex: db.knex, mailFrom: config.mailFrom, sealer: new SecretSealer(config.channels.encryptionKey) });
  // Mail From a verified organization domain is signed with that organization's DKIM key.
  mailer.dkimFor = (organizationId, address) => email.dkimFor(organizationId, address);
  const emailSend = new EmailSendService({ models: db.models, knex: db.knex, mailer, otp, keys: tickets.core.deps.keys, identity: email, contacts });
  const channels = new ChannelService({
    knex: db.knex, jobs, events, logger, organizations, contacts, messages, tickets, notifications, email, storage, settings: config.channels,
    publicUrl: config.publicUrl, smtpUrl: config.smtpUrl, mailFrom: config.mailFrom, host: config.host,
  });
  const analytics = new AnalyticsService({ knex: db.knex, readOnly: (settings, fn) => db.readOnly(settings, fn), onRollupError: (err) => logger.warn({ err }, 'rolling up message counts failed') });
  // Webhook secrets must stay usable for signing: kept encrypted under a key derived from a server secret.
  const webhookPolicy = { allowPrivate: config.webhooks.allowPrivate };
  const webhooks = new WebhookService({ models: db.models, knex: db.knex, jobs, box: new SecretBox(config.secrets.refresh), policy: webhookPolicy });
  const webhookDeliverer = new WebhookDeliverer({
    models: db.models, knex: db.knex, jobs, webhooks, notifications, policy: webhookPolicy, timeoutMs: config.webhooks.timeoutMs, logger,
    onResult: (result) => metrics.webhookDelivery(result),
  });
  // The services record webhook events inside their own transactions (the outbox).
  messages.outbox = webhooks;
  conversations.outbox = webhooks;
  contacts.outbox = webhooks;
  tickets.outbox = webhooks;
  routing.outbox = webhooks;
  indexer.outbox = webhooks;
  const readiness = new Readiness(db, redis);
  const services: RouteServices = {
    config,
    actors,
    callers,
    policies,
    rateLimits: new RateLimits(redis?.main ?? null, config.rateLimits),
    auth,
    organizations,
    memberships,
    mailer,
    conversations,
    messages,
    routing,
    widget,
    notifications,
    agents,
    templates,
    contacts,
    observability,
    ai,
    tickets,
    storage,
    attachments,
    knowledge,
    unanswered,
    assist,
    analytics,
    email,
    emailSend,
    channels,
    apiKeys,
    webhooks,
    bearerToken: bearerTokenReader(config.allowQueryToken),
    readiness,
  };

  // Sockets are counted from the live namespaces at scrape time (realtime is built just below).
  const metrics = new Metrics({ knex: db.knex, sockets: () => countSockets(realtime) }, events);
  const { app, routers, registry } = createApp(services, logger, metrics);
  const http = createHttpServer(app.callback());
  http.on('clientError', answerClientError);
  // Idle keep-alive sockets must not hold a graceful stop open.
  http.keepAliveTimeout = 5_000;
  let retention: NodeJS.Timeout | null = null;
  let metricsListener: { port: number; close(): Promise<void> } | null = null;
  const membershipCheck = new MembershipCheck(db.models, events);
  const realtime = createRealtime(http, { config, logger, models: db.models, redis, events, callers, policies, presence, widget, messages, conversations, agents, membershipCheck, assist });

  return {
    config,
    logger,
    db,
    redis,
    readiness,
    events,
    jobs,
    services,
    metrics,
    get metricsPort() {
      return metricsListener?.port ?? null;
    },
    routers,
    registry,
    presence,
    realtime,
    http,
    async start() {
      jobs.checkSelection();
      if (config.migrateOnStart) {
        const applied = await db.migrate({ logger });
        if (applied.length) logger.info({ applied }, 'migrations applied');
      }
      callers.start();
      mailer.start();
      jobs.start();
      await channels.start();
      storageSweep.start();
      analytics.rollup.start();
      // Old AI-call events and the bodies of old delivered mail are pruned at start and then hourly, on every
      // instance (both are idempotent).
      const prune = () => {
        observability
          .prune(config.observabilityRetentionDays)
          .then((n) => n && logger.info({ removed: n }, 'pruned old AI call events'))
          .catch((err) => logger.warn({ err }, 'pruning AI call events failed'));
        mailer
          .clearOldBodies(config.mailRetentionDays)
          .then((n) => n && logger.info({ cleared: n }, 'cleared the bodies of old delivered mail'))
          .catch((err) => logger.warn({ err }, 'clearing old mail bodies failed'));
      };
      void prune();
      retention = setInterval(prune, 3_600_000);
      retention.unref();
      await new Promise<void>((resolve, reject) => {
        http.once('error', reject);
        http.listen(config.port, config.host, () => resolve());
      });
      const port = (http.address() as AddressInfo).port;
      if (config.metrics.port !== null) metricsListener = await metrics.listen(config.metrics.port, config.host, config.metrics.token, logger);
      const host = ['0.0.0.0', '::'].includes(config.host) ? 'localhost' : config.host.includes(':') ? `[${config.host}]` : config.host;
      logger.info({ url: `http://${host}:${port}/api/v1`, port, database: db.embedded ? 'embedded (PGlite)' : 'postgres', redis: !!redis, smtp: mailer.delivers }, 'listening');
      return port;
    },
    async stop() {
      readiness.beginShutdown();
      if (retention) clearInterval(retention);
      await metricsListener?.close();
      await analytics.rollup.stop();
      // Socket.IO closes the HTTP server too: no new connections, sockets told to go, running requests finish.
      const closing = realtime.close();
      http.closeIdleConnections();
      await closing;
      await presence.close();
      storageSweep.stop();
      await channels.stop();
      await jobs.stop();
      // After the jobs: an indexing or sweep job still running reads and deletes through the driver.
      storageDriver.close();
      webhookDeliverer.close();
      await mailer.stop();
      if (redis) await redis.close();
      await callers.stop();
      await db.close();
    },
  };
}

/** This instance's connected sockets by kind: visitors, agents, and bots (API keys). */
function countSockets(realtime: Realtime): Record<SocketKind, number> {
  const counts: Record<SocketKind, number> = { agent: 0, visitor: 0, bot: 0 };
  for (const socket of realtime.localSockets()) {
    if (socket.data?.visitor) counts.visitor += 1;
    else if (socket.data?.operator?.apiKey) counts.bot += 1;
    else if (socket.data?.operator) counts.agent += 1;
  }
  return counts;
}
