// Prometheus metrics of this instance (prom-client): HTTP traffic by route template, sockets, messages, queues,
// webhook deliveries, the database pool, event-loop delay and the default process metrics.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Knex } from 'knex';
import type { Context, Next } from 'koa';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { safeEqual } from './auth/secrets.js';
import type { DomainEventBus } from './events.js';
import type { Logger } from './logger.js';

export type SocketKind = 'agent' | 'visitor' | 'bot';
export type WebhookResult = 'succeeded' | 'retry' | 'failed';

interface Sources {
  /** Connected sockets of this instance by kind. */
  sockets(): Record<SocketKind, number>;
  knex: Knex;
}

interface PoolLike {
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
  max: number;
}

export class Metrics {
  /** One registry per server, so several servers in one process (tests) keep their own counts. */
  readonly registry = new Registry();
  private readonly httpRequests = new Counter({ name: 'http_requests_total', help: 'HTTP requests by method, route template and status', labelNames: ['method', 'route', 'status'] as const, registers: [this.registry] });
  private readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds', help: 'HTTP request latency by method, route template and status', labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [this.registry],
  });
  private readonly messages = new Counter({ name: 'messages_sent_total', help: 'Messages stored, by sender type', labelNames: ['sender'] as const, registers: [this.registry] });
  private readonly webhookDeliveries = new Counter({ name: 'webhook_deliveries_total', help: 'Webhook delivery attempts by result', labelNames: ['result'] as const, registers: [this.registry] });

  constructor(private readonly sources: Sources, events: DomainEventBus) {
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 20 });
    events.on('message.created', ({ message }) => this.messages.inc({ sender: message.senderType }));
    const { sockets } = sources;
    new Gauge({
      name: 'sockets_connected', help: 'Connected Socket.IO clients of this instance by kind', labelNames: ['kind'] as const, registers: [this.registry],
      collect() {
        const counts = sockets();
        for (const kind of Object.keys(counts) as SocketKind[]) this.set({ kind }, counts[kind]);
      },
    });
    const pool = () => (sources.knex.client as { pool?: PoolLike }).pool;
    new Gauge({
      name: 'db_pool_connections', help: 'Database pool connections by state (used, free, pending acquires, max)', labelNames: ['state'] as const, registers: [this.registry],
      collect() {
        const p = pool();
        if (!p) return;
        this.set({ state: 'used' }, p.numUsed());
        this.set({ state: 'free' }, p.numFree());
        this.set({ state: 'pending' }, p.numPendingAcquires());
        this.set({ state: 'max' }, p.max);
      },
    });
    const knex = sources.knex;
    const depth = new Gauge({ name: 'queue_due_items', help: 'Items due now and not yet done, by queue (mail outbox and each job queue)', labelNames: ['queue'] as const, registers: [this.registry] });
    new Gauge({
      name: 'queue_oldest_due_age_seconds', help: 'Age of the oldest item due now, by queue', labelNames: ['queue'] as const, registers: [this.registry],
      // Both gauges come from one pair of queries per scrape.
      async collect() {
        depth.reset();
        this.reset();
        const [jobs, mail] = await Promise.all([
          knex.raw(`select queue, count(*)::int as n, coalesce(extract(epoch from now() - min(run_at)), 0)::float as age from jobs where status = 'pending' and run_at <= now() group by queue`),
          knex.raw(`select count(*)::int as n, coalesce(extract(epoch from now() - min(coalesce(next_attempt_at, created_at))), 0)::float as age from outbox_emails where status = 'pending' and (next_attempt_at is null or next_attempt_at <= now())`),
        ]);
        const rows = [...(jobs.rows as { queue: string; n: number; age: number }[]), { queue: 'mail', ...(mail.rows[0] as { n: number; age: number }) }];
        for (const row of rows) {
          depth.set({ queue: row.queue }, Number(row.n));
          this.set({ queue: row.queue }, Number(row.age));
        }
      },
    });
  }

  webhookDelivery(result: WebhookResult): void {
    this.webhookDeliveries.inc({ result });
  }

  /**
   * Records finished requests (called once per request with the time it started), labelled with the route template,
   * never the raw path. The series of each route, method and status is looked up once: prom-client hashes a label
   * object on every lookup, and these maps of plain keys build no string per request.
   */
  requestRecorder(): (ctx: Context, startedAt: number) => void {
    type Series = { duration: { observe(v: number): void }; requests: { inc(): void } };
    const byRoute = new Map<string, Map<string, Map<number, Series>>>();
    return (ctx, startedAt) => {
      const route = (ctx as Context & { _matchedRoute?: unknown })._matchedRoute;
      const routeKey = typeof route === 'string' ? route : route === undefined || route === null ? 'unmatched' : String(route);
      const { method, status } = ctx;
      let byMethod = byRoute.get(routeKey);
      if (!byMethod) byRoute.set(routeKey, (byMethod = new Map()));
      let byStatus = byMethod.get(method);
      if (!byStatus) byMethod.set(method, (byStatus = new Map()));
      let s = byStatus.get(status);
      if (!s) {
        const labels = { method, route: routeKey, status: String(status) };
        byStatus.set(status, (s = { duration: this.httpDuration.labels(labels), requests: this.httpRequests.labels(labels) }));
      }
      s.duration.observe((performance.now() - startedAt) / 1000);
      s.requests.inc();
    };
  }

  /** Whether a request may read /metrics: with METRICS_TOKEN, only with `Authorization: Bearer <token>`. */
  authorized(authorization: string | undefined, token: string | null): boolean {
    if (token === null) return true;
    const match = /^Bearer\s+(\S+)$/i.exec(authorization ?? '');
    return !!match && safeEqual(match[1]!, token);
  }

  /** GET /metrics on the public port: only when METRICS_TOKEN is set and METRICS_PORT is not (else 404 there). */
  publicRoute(token: string | null, ownPort: boolean) {
    return async (ctx: Context, next: Next) => {
      if (ctx.path !== '/metrics' || ctx.method !== 'GET' || token === null || ownPort) return next();
      if (!this.authorized(ctx.get('authorization') || undefined, token)) {
        ctx.status = 401;
        ctx.set('WWW-Authenticate', 'Bearer');
        ctx.body = { success: false, message: 'A valid metrics token is required', error: { code: 'unauthorized', details: [] }, requestId: ctx.state.requestId ?? null };
        return;
      }
      ctx.type = this.registry.contentType;
      ctx.body = await this.registry.metrics();
    };
  }

  /** A listener of its own for METRICS_PORT (on HOST): /metrics only, still behind METRICS_TOKEN when set. */
  async listen(port: number, host: string, token: string | null, logger: Logger): Promise<{ port: number; close(): Promise<void> }> {
    const server: Server = createServer((req, res) => {
      if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
        res.writeHead(404).end();
        return;
      }
      if (!this.authorized(req.headers.authorization, token)) {
        res.writeHead(401, { 'WWW-Authenticate': 'Bearer' }).end();
        return;
      }
      this.registry
        .metrics()
        .then((body) => res.writeHead(200, { 'Content-Type': this.registry.contentType }).end(body))
        .catch((err) => {
          logger.error({ err }, 'collecting metrics failed');
          res.writeHead(500).end();
        });
    });
    server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    return {
      port: (server.address() as AddressInfo).port,
      close: () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    };
  }
}
