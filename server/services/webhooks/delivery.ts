// Sends one webhook delivery (a job of the shared queue): signs the body, posts it to the checked address, and
// records the outcome. 2xx within the timeout succeeds; a timeout, a network error, 429 (Retry-After honoured) or
// 5xx is retried at 1 m, 5 m, 30 m, 2 h, 6 h, 12 h, 24 h; any other answer is final. 410, or 50 failures in a
// row, disables the hook and tells the organization's admins.
// The deliveries the queue runs together share their statements: one read of their rows and hooks, one of their
// messages, one write of their successes that also finishes their jobs (a failure, rarer and with more to decide,
// is written on its own). The deliveries of one event share their body.
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import { rowFromJson } from '../../../db/statements.js';
import type { Webhook } from '../../../db/models/Webhook.js';
import type { WebhookDelivery } from '../../../db/models/WebhookDelivery.js';
import type { Message } from '../../../db/models/Message.js';
import { finishJobsSql, GiveUp, JOB_FINISHED, RetryLater, type Job, type JobQueue } from '../../jobs/index.js';
import { tickBatch } from '../../jobs/tickBatch.js';
import type { Logger } from '../../logger.js';
import type { WebhookResult } from '../../metrics.js';
import { presentMessage } from '../../presenters/conversation.js';
import { iso } from '../../presenters/time.js';
import type { NotificationService } from '../notifications.js';
import { TEST_EVENT } from './catalog.js';
import { WEBHOOK_QUEUE, type WebhookService } from './service.js';
import { signatureHeader } from './signing.js';
import { pinnedLookup, resolveTarget, UnsafeTarget, type TargetPolicy } from './ssrf.js';
import { KeyedLimit } from '../../jobs/keyedLimit.js';
import { targetOf } from './targets.js';

export const RETRY_DELAYS_SECONDS = [60, 300, 1800, 7200, 21600, 43200, 86400];
export const DISABLE_AFTER_FAILURES = 50;
/**
 * Deliveries one instance runs at once, and sends to one receiver at once. More runs than sends: a run spends most
 * of its time on database round trips (claim, read, record), which then overlap the sending.
 */
export const CONCURRENCY = 64;
export const PER_TARGET = 16;
const KEEP_RESPONSE_CHARS = 1024;

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

interface Succeeded {
  id: string;
  attempts: number;
  /** The job's claim, finished by the same statement. */
  job: { id: string; attempt: number };
  responseStatus: number;
  responseBody: string;
  durationMs: number;
}

export interface DeliveryDeps {
  models: Models;
  knex: Knex;
  jobs: JobQueue;
  webhooks: WebhookService;
  notifications: NotificationService;
  policy: TargetPolicy;
  timeoutMs: number;
  logger: Logger;
  onResult?: (result: WebhookResult) => void;
}

/** Seconds from a Retry-After header (seconds or an HTTP date), bounded to a day; undefined when absent. */
function retryAfterSeconds(value: string | string[] | undefined): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (!raw) return undefined;
  const seconds = /^\d+$/.test(raw.trim()) ? Number(raw) : (Date.parse(raw) - Date.now()) / 1000;
  return Number.isFinite(seconds) ? Math.min(Math.max(Math.ceil(seconds), 1), 86_400) : undefined;
}

export class WebhookDeliverer {
  // Keep-alive per instance: a receiver taking many deliveries is not handshaken with each time.
  private readonly httpAgent = new HttpAgent({ keepAlive: true, maxSockets: PER_TARGET });
  private readonly httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: PER_TARGET });

  private readonly load = tickBatch((ids: string[]) => this.loadDeliveries(ids));
  private readonly loadMessage = tickBatch((keys: { id: string; organizationId: string }[]) => this.loadMessages(keys));
  // Two writes in flight at most: under load the successes that arrive meanwhile share the next one.
  private readonly recordSuccess = tickBatch((rows: Succeeded[]) => this.recordSuccesses(rows), { inFlight: 2 });
  /** Bodies of the events being sent now, by event: one serialization for all of an event's subscriptions. */
  private readonly bodies = new Map<string, Promise<string | null>>();

  private readonly targets = new KeyedLimit(PER_TARGET);

  constructor(private readonly deps: DeliveryDeps) {
    deps.jobs.define<{ deliveryId: string }>({
      queue: WEBHOOK_QUEUE,
      retryDelaysSeconds: RETRY_DELAYS_SECONDS,
      // A run may wait for its receiver's turn behind the others' sends, each within the timeout.
      leaseSeconds: Math.ceil((deps.timeoutMs / 1000) * Math.ceil(CONCURRENCY / PER_TARGET)) + 30,
      concurrency: CONCURRENCY,
      handle: (job) => this.deliver(job),
    });
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private async deliver(job: Job<{ deliveryId: string }>): Promise<void | typeof JOB_FINISHED> {
    const { models } = this.deps;
    const { delivery, hook } = await this.load(job.payload.deliveryId);
    // Gone with its hook, or already settled by an earlier run of this job (runs are at least once).
    if (!delivery || delivery.status !== 'pending') return;
    if (!hook) return;
    if (!hook.enabled && delivery.eventType !== TEST_EVENT) {
      await this.settle(delivery, { status: 'failed', lastError: 'The webhook is disabled' });
      return;
    }
    const body = await this.bodyOf(delivery);
    if (body === null) {
      await this.settle(delivery, { status: 'failed', lastError: 'The message no longer exists' });
      return;
    }
    const last = job.attempt > RETRY_DELAYS_SECONDS.length;
    let started = Date.now();
    let answer: Answer;
    try {
      answer = await this.targets.run(targetOf(hook.url), async () => {
        started = Date.now();
        // Checked again at every send (the name may point elsewhere now), before anything is signed.
        const target = await resolveTarget(hook.url, this.deps.policy);
        let signature: string;
        const timestamp = String(Math.floor(Date.now() / 1000));
        try {
          signature = signatureHeader(this.deps.webhooks.signingSecrets(hook), timestamp, body);
        } catch {
          throw new UnsafeTarget('The signing secret cannot be read (was the server secret changed?)');
        }
        const headers = {
          'content-type': 'application/json',
          'user-agent': 'SupportPlatform-Webhooks/1',
          'x-webhook-id': delivery.eventId,
          'x-webhook-timestamp': timestamp,
          'x-webhook-signature': signature,
        };
        return this.post(target.url, target.address, target.family, headers, body);
      });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      // A target that turned private (or an unreadable secret) is no network hiccup: retrying will not fix it.
      const final = err instanceof UnsafeTarget || last;
      await this.failed(hook, delivery, { lastError: message, durationMs: Date.now() - started, final });
      if (final) throw new GiveUp(message);
      throw new RetryLater(message);
    }
    const durationMs = Date.now() - started;
    // PostgreSQL text cannot hold NUL.
    const recorded = { responseStatus: answer.status, responseBody: answer.body.slice(0, KEEP_RESPONSE_CHARS).replace(/\0/g, ''), durationMs };
    if (answer.status >= 200 && answer.status < 300) {
      await this.recordSuccess({ id: delivery.id, attempts: delivery.attempts + 1, job: { id: job.id, attempt: job.attempt }, ...recorded });
      // Most hooks have no failures to forget: no write for them.
      if (hook.consecutiveFailures > 0) await models.Webhook.forOrg(hook.organizationId).patch({ consecutiveFailures: 0 }).where('id', hook.id);
      this.deps.onResult?.('succeeded');
      return JOB_FINISHED;
    }
    const retryable = answer.status === 429 || answer.status >= 500;
    const final = !retryable || last;
    await this.failed(hook, delivery, { lastError: `HTTP ${answer.status}`, ...recorded, final, gone: answer.status === 410 });
    if (final) throw new GiveUp(`HTTP ${answer.status}`);
    throw new RetryLater(`HTTP ${answer.status}`, answer.status === 429 ? retryAfterSeconds(answer.headers['retry-after']) : undefined);
  }

  /**
   * The JSON body: `{id, type, organizationId, createdAt, data}`; null when its message is gone. An event's
   * deliveries loaded together (one per subscription) share one, kept until the turn after they were read.
   */
  private bodyOf(delivery: WebhookDelivery): Promise<string | null> {
    const key = `${delivery.organizationId} ${delivery.eventId} ${new Date(delivery.createdAt).getTime()}`;
    let body = this.bodies.get(key);
    if (!body) {
      body = this.buildBody(delivery);
      this.bodies.set(key, body);
      setImmediate(() => this.bodies.delete(key));
    }
    return body;
  }

  private async buildBody(delivery: WebhookDelivery): Promise<string | null> {
    let data = delivery.payload;
    if (delivery.messageId) {
      const message = await this.loadMessage({ id: delivery.messageId, organizationId: delivery.organizationId });
      if (!message) return null;
      data = { ...data, conversationId: message.conversationId, message: presentMessage(message) };
    }
    return JSON.stringify({ id: delivery.eventId, type: delivery.eventType, organizationId: delivery.organizationId, createdAt: iso(delivery.createdAt), data });
  }

  /** Deliveries by id with their hooks (a hook only of the delivery's own organization). */
  private async loadDeliveries(ids: string[]): Promise<{ delivery?: WebhookDelivery; hook?: Webhook }[]> {
    const { models, knex } = this.deps;
    const result = await knex.raw(
      `select to_jsonb(d) as delivery, to_jsonb(w) as hook
         from webhook_deliveries d left join webhooks w on w.id = d.webhook_id and w.organization_id = d.organization_id
        where d.id in (select (jsonb_array_elements_text(?::jsonb))::uuid)`,
      [JSON.stringify([...new Set(ids)])],
    );
    const rows = (result.rows ?? result) as { delivery: Record<string, unknown>; hook: Record<string, unknown> | null }[];
    const byId = new Map(rows.map((r) => [r.delivery.id as string, r]));
    return ids.map((id) => {
      const row = byId.get(id);
      if (!row) return {};
      return {
        delivery: models.WebhookDelivery.fromDatabaseJson(rowFromJson(row.delivery)),
        hook: row.hook ? models.Webhook.fromDatabaseJson(rowFromJson(row.hook)) : undefined,
      };
    });
  }

  private async loadMessages(keys: { id: string; organizationId: string }[]): Promise<(Message | undefined)[]> {
    // One read for deliveries of several organizations; each message is matched back to its own organization below.
    const messages = await this.deps.models.Message.acrossOrgs().findByIds([...new Set(keys.map((k) => k.id))]);
    const byId = new Map(messages.map((m) => [m.id, m]));
    return keys.map((k) => {
      const message = byId.get(k.id);
      return message && message.organizationId === k.organizationId ? message : undefined;
    });
  }

  /** Successful deliveries and their jobs' finish, recorded by one statement. */
  private async recordSuccesses(rows: Succeeded[]): Promise<void[]> {
    await this.deps.knex.raw(
      `with s as (
         select * from jsonb_to_recordset(?::jsonb) as s(id uuid, status int, body text, ms int, attempts int, job uuid, claim int)
       ), recorded as (
         update webhook_deliveries as d
            set status = 'succeeded', delivered_at = now(), last_error = null, response_status = s.status,
                response_body = s.body, duration_ms = s.ms, attempts = s.attempts, updated_at = now()
           from s where d.id = s.id
       ), finished as (
         ${finishJobsSql('(select job as id, claim as attempts from s) as claims')}
       )
       select 1`,
      [JSON.stringify(rows.map((r) => ({ id: r.id, status: r.responseStatus, body: r.responseBody, ms: r.durationMs, attempts: r.attempts, job: r.job.id, claim: r.job.attempt })))],
    );
    return rows.map(() => undefined);
  }

  private post(url: URL, address: string, family: 4 | 6, headers: Record<string, string>, body: string): Promise<Answer> {
    const https = url.protocol === 'https:';
    return new Promise((resolve, reject) => {
      const req = (https ? httpsRequest : httpRequest)(url, {
        method: 'POST',
        headers: { ...headers, 'content-length': Buffer.byteLength(body) },
        lookup: pinnedLookup(address, family),
        agent: https ? this.httpsAgent : this.httpAgent,
      });
      // The whole exchange, answer included, must fit in the timeout.
      const timer = setTimeout(() => req.destroy(new Error(`No answer within ${this.deps.timeoutMs} ms`)), this.deps.timeoutMs);
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (text.length < KEEP_RESPONSE_CHARS) text += chunk;
        });
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text });
        });
        res.on('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
      });
      req.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      req.end(body);
    });
  }

  private async settle(delivery: WebhookDelivery, patch: Partial<WebhookDelivery>): Promise<void> {
    await this.deps.models.WebhookDelivery.forOrg(delivery.organizationId).patch({ ...patch, attempts: delivery.attempts + 1 }).where('id', delivery.id);
    if (patch.status === 'failed') this.deps.onResult?.('failed');
  }

  /** Records a failed attempt, counts it against the hook, and disables the hook on 410 or too many failures. */
  private async failed(hook: Webhook, delivery: WebhookDelivery, f: { lastError: string; responseStatus?: number; responseBody?: string; durationMs: number; final: boolean; gone?: boolean }): Promise<void> {
    const { final, gone, ...recorded } = f;
    await this.deps.models.WebhookDelivery.forOrg(delivery.organizationId).patch({ ...recorded, status: final ? 'failed' : 'pending', attempts: delivery.attempts + 1 }).where('id', delivery.id);
    this.deps.onResult?.(final ? 'failed' : 'retry');
    const [counted] = (await this.deps.knex('webhooks').where('id', hook.id).increment('consecutive_failures', 1).returning(['consecutive_failures'])) as { consecutiveFailures: number }[];
    const reason = gone ? 'The receiver answered 410 Gone' : (counted?.consecutiveFailures ?? 0) >= DISABLE_AFTER_FAILURES ? `${DISABLE_AFTER_FAILURES} deliveries failed in a row` : null;
    if (reason) await this.disable(hook, reason);
  }

  private async disable(hook: Webhook, reason: string): Promise<void> {
    // Only the run that turns it off tells the admins, however many deliveries fail at once.
    const turnedOff = await this.deps.models.Webhook.forOrg(hook.organizationId).patch({ enabled: false, disabledReason: reason }).where('id', hook.id).where('enabled', true);
    if (!turnedOff) return;
    this.deps.webhooks.forget(hook.organizationId);
    this.deps.logger.warn({ webhookId: hook.id, organizationId: hook.organizationId, reason }, 'webhook disabled');
    const admins = await this.deps.models.Membership.forOrg(hook.organizationId).whereIn('role', ['admin', 'owner']).where('status', 'accepted').whereNotNull('userId').select('userId');
    await this.deps.notifications.notify(hook.organizationId, admins.map((m) => m.userId!), {
      type: 'webhook_disabled',
      title: 'A webhook was disabled',
      body: `${hook.url}: ${reason}. Fix the receiver, then enable the webhook again.`,
      data: { webhookId: hook.id, url: hook.url, reason },
    });
  }
}
