// Sends one webhook delivery (a job of the shared queue): signs the body, posts it to the checked address, and
// records the outcome. 2xx within the timeout succeeds; a timeout, a network error, 429 (Retry-After honoured) or
// 5xx is retried at 1 m, 5 m, 30 m, 2 h, 6 h, 12 h, 24 h; any other answer is final. 410, or 50 failures in a
// row, disables the hook and tells the organization's admins.
// A run makes no round trip of its own before it sends: the claim of its job reads the delivery with its hook (and
// message) in the same statement. After a success the run's slot is free at once; the successes that arrive
// meanwhile are written, and their jobs finished, by one statement (a failure, rarer and with more to decide, is
// written on its own). The deliveries of one event share their body.
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import { rowFromJson } from '../../../db/statements.js';
import type { Webhook } from '../../../db/models/Webhook.js';
import type { Message } from '../../../db/models/Message.js';
import { FinishedBy, finishJobsSql, GiveUp, RetryLater, type Job, type JobQueue } from '../../jobs/index.js';
import { tickBatch } from '../../jobs/tickBatch.js';
import type { Logger } from '../../logger.js';
import type { WebhookResult } from '../../metrics.js';
import { presentMessage } from '../../presenters/conversation.js';
import { iso } from '../../presenters/time.js';
import type { NotificationService } from '../notifications.js';
import { TEST_EVENT } from './catalog.js';
import { WEBHOOK_QUEUE, type WebhookService } from './service.js';
import { signatureHeader } from './signing.js';
import { pinnedLookup } from '../../addresses.js';
import { resolveTarget, UnsafeTarget, type TargetPolicy } from './ssrf.js';
import { KeyedLimit } from '../../jobs/keyedLimit.js';
import { targetOf } from './targets.js';
import { defineMessageFanout } from './fanout.js';

export const RETRY_DELAYS_SECONDS = [60, 300, 1800, 7200, 21600, 43200, 86400];
export const DISABLE_AFTER_FAILURES = 50;
/**
 * Deliveries one instance runs at once, and sends to one receiver at once. More runs than sends: the runs waiting
 * for their receiver's turn hold their rows, read with their claim, so a send that ends is followed at once by the
 * next while the following claim is on its way.
 */
export const CONCURRENCY = 256;
export const PER_TARGET = 16;
const KEEP_RESPONSE_CHARS = 1024;

/**
 * What the claim of a delivery's job reads with it (`claimDetail`): the delivery, its hook (only of the delivery's
 * own organization) and, for a message.created event, its message (only of that organization too). Null when the
 * delivery is gone (deleted with its hook).
 */
const CLAIM_DETAIL = `(select jsonb_build_object(
    'id', d.id, 'organizationId', d.organization_id, 'eventId', d.event_id, 'eventType', d.event_type,
    'payload', d.payload, 'messageId', d.message_id, 'status', d.status, 'attempts', d.attempts, 'createdAt', coalesce(d.event_created_at, d.created_at),
    'hook', case when w.id is null then null else jsonb_build_object(
      'id', w.id, 'organizationId', w.organization_id, 'url', w.url, 'enabled', w.enabled,
      'consecutiveFailures', w.consecutive_failures, 'secretEncrypted', w.secret_encrypted,
      'previousSecretEncrypted', w.previous_secret_encrypted, 'previousSecretExpiresAt', w.previous_secret_expires_at) end,
    'message', case when m.id is null then null else to_jsonb(m) end)
  from webhook_deliveries d
  left join webhooks w on w.id = d.webhook_id and w.organization_id = d.organization_id
  left join messages m on d.message_id is not null and m.id = d.message_id and m.organization_id = d.organization_id
  where d.id = (job.payload->>'deliveryId')::uuid)`;

/** A hook as a delivery needs it: where to send, how to sign, what to count. */
export type HookToSend = Pick<Webhook, 'id' | 'organizationId' | 'url' | 'enabled' | 'consecutiveFailures' | 'secretEncrypted' | 'previousSecretEncrypted'> & {
  previousSecretExpiresAt: Date | string | null;
};

interface ClaimedDelivery {
  id: string;
  organizationId: string;
  eventId: string;
  eventType: string;
  payload: Record<string, unknown>;
  messageId: string | null;
  status: string;
  attempts: number;
  createdAt: string;
  hook: HookToSend | null;
  /** The message's row as json (snake_case), for message.created. */
  message: Record<string, unknown> | null;
}

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
  /** The hook, when it has failures to forget. */
  resetHook: string | null;
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

/** A request lost with the kept-alive connection it was sent on, before any answer (see `post`). */
class StaleConnection extends Error {
  constructor(readonly lost: Error) {
    super(lost.message);
  }
}

export class WebhookDeliverer {
  // Keep-alive per instance: a receiver taking many deliveries is not handshaken with each time.
  private readonly httpAgent = new HttpAgent({ keepAlive: true, maxSockets: PER_TARGET });
  private readonly httpsAgent = new HttpsAgent({ keepAlive: true, maxSockets: PER_TARGET });

  // Two writes in flight at most: under load the successes that arrive meanwhile share the next one.
  private readonly recordSuccess = tickBatch((rows: Succeeded[]) => this.recordSuccesses(rows), { inFlight: 2 });
  /** Bodies of the events being sent now, by event: one serialization for all of an event's subscriptions. */
  private readonly bodies = new Map<string, string | null>();

  private readonly targets = new KeyedLimit(PER_TARGET);

  constructor(private readonly deps: DeliveryDeps) {
    deps.jobs.define<{ deliveryId: string }>({
      queue: WEBHOOK_QUEUE,
      retryDelaysSeconds: RETRY_DELAYS_SECONDS,
      // A run may wait for its receiver's turn behind the others' sends, each within the timeout.
      leaseSeconds: Math.ceil((deps.timeoutMs / 1000) * Math.ceil(CONCURRENCY / PER_TARGET)) + 30,
      concurrency: CONCURRENCY,
      claimDetail: CLAIM_DETAIL,
      // Deliveries may wait out a burst of chat: they are asynchronous by contract, the chat is not.
      background: true,
      handle: (job) => this.deliver(job),
    });
    defineMessageFanout(deps.jobs, deps.knex);
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  private async deliver(job: Job<{ deliveryId: string }>): Promise<void | FinishedBy> {
    const delivery = job.detail as ClaimedDelivery | null;
    // Gone with its hook, or already settled by an earlier run of this job (runs are at least once).
    if (!delivery || delivery.status !== 'pending') return;
    const hook = delivery.hook;
    if (!hook) return;
    if (!hook.enabled && delivery.eventType !== TEST_EVENT) {
      await this.failUnsent(delivery, 'The webhook is disabled');
      return;
    }
    const body = this.bodyOf(delivery);
    if (body === null) {
      await this.failUnsent(delivery, 'The message no longer exists');
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
          'content-length': String(Buffer.byteLength(body)),
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
      this.deps.onResult?.('succeeded');
      // Most hooks have no failures to forget: the shared write resets only those that have.
      return new FinishedBy(
        this.recordSuccess({ id: delivery.id, attempts: delivery.attempts + 1, job: { id: job.id, attempt: job.attempt }, resetHook: hook.consecutiveFailures > 0 ? hook.id : null, ...recorded }),
      );
    }
    const retryable = answer.status === 429 || answer.status >= 500;
    const final = !retryable || last;
    await this.failed(hook, delivery, { lastError: `HTTP ${answer.status}`, ...recorded, final, gone: answer.status === 410 });
    if (final) throw new GiveUp(`HTTP ${answer.status}`);
    throw new RetryLater(`HTTP ${answer.status}`, answer.status === 429 ? retryAfterSeconds(answer.headers['retry-after']) : undefined);
  }

  /**
   * The JSON body: `{id, type, organizationId, createdAt, data}`; null when its message is gone. An event's
   * deliveries claimed together (one per subscription) share one, kept until the turn after it was built.
   */
  private bodyOf(delivery: ClaimedDelivery): string | null {
    const key = `${delivery.organizationId} ${delivery.eventId} ${delivery.createdAt}`;
    let body = this.bodies.get(key);
    if (body === undefined) {
      body = this.buildBody(delivery);
      if (this.bodies.size === 0) setImmediate(() => this.bodies.clear());
      this.bodies.set(key, body);
    }
    return body;
  }

  private buildBody(delivery: ClaimedDelivery): string | null {
    let data = delivery.payload;
    if (delivery.messageId) {
      if (!delivery.message) return null;
      const message = rowFromJson<Message>(delivery.message);
      data = { ...data, conversationId: message.conversationId, message: presentMessage(message) };
    }
    return JSON.stringify({ id: delivery.eventId, type: delivery.eventType, organizationId: delivery.organizationId, createdAt: iso(delivery.createdAt), data });
  }

  /** Successful deliveries, their hooks' failure counts and their jobs' finish, recorded by one statement. */
  private async recordSuccesses(rows: Succeeded[]): Promise<void[]> {
    await this.deps.knex.raw(
      `with s as (
         select * from jsonb_to_recordset(?::jsonb) as s(id uuid, status int, body text, ms int, attempts int, job uuid, claim int, hook uuid)
       ), recorded as (
         update webhook_deliveries as d
            set status = 'succeeded', delivered_at = now(), last_error = null, response_status = s.status,
                response_body = s.body, duration_ms = s.ms, attempts = s.attempts, updated_at = now()
           from s where d.id = s.id
       ), reset as (
         update webhooks set consecutive_failures = 0 where id in (select hook from s where hook is not null)
       ), finished as (
         ${finishJobsSql('(select job as id, claim as attempts from s) as claims')}
       )
       select 1`,
      [JSON.stringify(rows.map((r) => ({ id: r.id, status: r.responseStatus, body: r.responseBody, ms: r.durationMs, attempts: r.attempts, job: r.job.id, claim: r.job.attempt, hook: r.resetHook })))],
    );
    return rows.map(() => undefined);
  }

  private async post(url: URL, address: string, family: 4 | 6, headers: Record<string, string>, body: string): Promise<Answer> {
    try {
      return await this.exchange(url, address, family, headers, body);
    } catch (err) {
      // A kept-alive connection the receiver closed while idle, just as this request went out on it: the receiver
      // read nothing, so the request is sent again at once on a new connection (Node's own advice for reused
      // sockets) instead of counting a failed attempt and waiting for the retry.
      if (!(err instanceof StaleConnection)) throw err;
      return this.exchange(url, address, family, headers, body);
    }
  }

  private exchange(url: URL, address: string, family: 4 | 6, headers: Record<string, string>, body: string): Promise<Answer> {
    const https = url.protocol === 'https:';
    return new Promise((resolve, reject) => {
      const req = (https ? httpsRequest : httpRequest)(url, {
        method: 'POST',
        headers,
        lookup: pinnedLookup(address, family),
        agent: https ? this.httpsAgent : this.httpAgent,
      });
      // The whole exchange, answer included, must fit in the timeout.
      const timer = setTimeout(() => req.destroy(new Error(`No answer within ${this.deps.timeoutMs} ms`)), this.deps.timeoutMs);
      let answered = false;
      req.on('response', (res) => {
        answered = true;
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
      req.on('error', (err: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        const closedUnderUs = req.reusedSocket && !answered && (err.code === 'ECONNRESET' || err.code === 'EPIPE');
        reject(closedUnderUs ? new StaleConnection(err) : err);
      });
      req.end(body);
    });
  }

  /** Fails a delivery for good without sending it (its hook disabled, its message gone): no failure of the hook's. */
  private async failUnsent(delivery: ClaimedDelivery, lastError: string): Promise<void> {
    await this.deps.models.WebhookDelivery.forOrg(delivery.organizationId).patch({ status: 'failed', lastError, attempts: delivery.attempts + 1 }).where('id', delivery.id);
    this.deps.onResult?.('failed');
  }

  /** Records a failed attempt, counts it against the hook, and disables the hook on 410 or too many failures. */
  private async failed(hook: HookToSend, delivery: ClaimedDelivery, f: { lastError: string; responseStatus?: number; responseBody?: string; durationMs: number; final: boolean; gone?: boolean }): Promise<void> {
    const { final, gone, ...recorded } = f;
    await this.deps.models.WebhookDelivery.forOrg(delivery.organizationId).patch({ ...recorded, status: final ? 'failed' : 'pending', attempts: delivery.attempts + 1 }).where('id', delivery.id);
    this.deps.onResult?.(final ? 'failed' : 'retry');
    const [counted] = (await this.deps.knex('webhooks').where('id', hook.id).increment('consecutive_failures', 1).returning(['consecutive_failures'])) as { consecutiveFailures: number }[];
    const reason = gone ? 'The receiver answered 410 Gone' : (counted?.consecutiveFailures ?? 0) >= DISABLE_AFTER_FAILURES ? `${DISABLE_AFTER_FAILURES} deliveries failed in a row` : null;
    if (reason) await this.disable(hook, reason);
  }

  private async disable(hook: HookToSend, reason: string): Promise<void> {
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
