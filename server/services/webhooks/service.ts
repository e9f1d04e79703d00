// Outbound webhook subscriptions of an organization, their delivery log, and the outbox hook services call inside
// their transactions (`record`): a delivery row and its job exist exactly when the change commits.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import type { Webhook } from '../../../db/models/Webhook.js';
import type { WebhookDelivery, WebhookDeliveryStatus } from '../../../db/models/WebhookDelivery.js';
import { Conflict, NotFound, ValidationFailed } from '../../errors.js';
import type { JobQueue } from '../../jobs/index.js';
import { subscribes, TEST_EVENT } from './catalog.js';
import { generateWebhookSecret, type SecretBox } from './signing.js';
import { resolveTarget, UnsafeTarget, type TargetPolicy } from './ssrf.js';
import type { EventData } from './outbox.js';

export { WEBHOOK_QUEUE, WEBHOOK_FANOUT_QUEUE } from './queue.js';
import { WEBHOOK_FANOUT_QUEUE, WEBHOOK_QUEUE } from './queue.js';
export const MAX_WEBHOOKS_PER_ORG = 20;
/** After a rotation the previous secret also signs for this long. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;
/** How long one instance trusts its view of an organization's subscriptions (edits here clear it at once). */
const CACHE_MS = 2_000;
/** Fan-out jobs of batched messages are claimed this much later at most, with the others written meanwhile. */
const FANOUT_WAKE_WITHIN_MS = 20;

export interface WebhookInput {
  url?: string;
  events?: string[];
  enabled?: boolean;
}

interface Subscription {
  id: string;
  events: string[];
}

export class WebhookService {
  private readonly cache = new Map<string, { at: number; hooks: Promise<Subscription[]> }>();
  private readonly opened = new Map<string, string>();

  constructor(
    private readonly deps: { models: Models; knex: Knex; jobs: JobQueue; box: SecretBox; policy: TargetPolicy },
  ) {}

  private get models() {
    return this.deps.models;
  }

  // ---- the outbox -------------------------------------------------------------------------------------------

  /** Enabled subscriptions of an organization, cached briefly: an organization without webhooks costs no query. */
  private subscriptions(orgId: string, db: Knex | Knex.Transaction): Promise<Subscription[]> {
    const now = Date.now();
    const cached = this.cache.get(orgId);
    if (cached && now - cached.at <= CACHE_MS) return cached.hooks;
    // Promise.resolve runs the query once: a knex builder would run again on every await.
    const hooks = Promise.resolve(db('webhooks').select('id', 'events').where({ organization_id: orgId, enabled: true })) as Promise<Subscription[]>;
    this.cache.set(orgId, { at: now, hooks });
    hooks.catch(() => this.cache.delete(orgId));
    if (this.cache.size > 20_000) this.cache.clear();
    return hooks;
  }

  /** Drops this instance's view of an organization's subscriptions (after any change to them). */
  forget(orgId: string): void {
    this.cache.delete(orgId);
  }

  /** Records an event for every enabled subscription of the organization that wants it, inside the caller's transaction. */
  async record(trx: Knex.Transaction, orgId: string, type: string, eventData: EventData): Promise<void> {
    const hooks = (await this.subscriptions(orgId, trx)).filter((h) => subscribes(h.events, type));
    if (hooks.length === 0) return;
    const data = typeof eventData === 'function' ? await eventData() : eventData;
    // One id for the event, whichever subscriptions want it (a message's is derived by the fan-out).
    const eventId = randomUUID();
    const rows = (await trx('webhook_deliveries')
      .insert(hooks.map((h) => ({ organization_id: orgId, webhook_id: h.id, event_id: eventId, event_type: type, payload: JSON.stringify(data) })))
      .returning('id')) as { id: string }[];
    await this.deps.jobs.enqueueMany(WEBHOOK_QUEUE, rows.map((row) => ({ deliveryId: row.id })), { trx, organizationId: orgId });
  }

  /**
   * A public message's message.created, inside the caller's transaction: one fan-out job, which writes the
   * deliveries from the subscriptions there then (see fanout.ts), presenting the message at send time.
   */
  async recordMessage(trx: Knex.Transaction, orgId: string, messageId: string): Promise<void> {
    if (!(await this.wants(orgId, 'message.created', trx))) return;
    await this.deps.jobs.enqueue(WEBHOOK_FANOUT_QUEUE, { messageIds: [messageId] }, { trx, organizationId: orgId });
  }

  /** The batched message path committed fan-out jobs: claimed within a few ms, one claim for a burst of batches. */
  written(): void {
    this.deps.jobs.wake(WEBHOOK_FANOUT_QUEUE, FANOUT_WAKE_WITHIN_MS);
  }

  /** For the batched message path: which of these organizations want `type` (message.created, conversation.updated). */
  async wantedBy(orgIds: string[], type: string): Promise<Set<string>> {
    const wanting = new Set<string>();
    for (const orgId of new Set(orgIds)) {
      if (await this.wants(orgId, type, this.deps.knex)) wanting.add(orgId);
    }
    return wanting;
  }

  private async wants(orgId: string, type: string, db: Knex | Knex.Transaction): Promise<boolean> {
    return (await this.subscriptions(orgId, db)).some((h) => subscribes(h.events, type));
  }

  // ---- subscriptions ----------------------------------------------------------------------------------------

  async list(orgId: string): Promise<Webhook[]> {
    return this.models.Webhook.forOrg(orgId).orderBy('createdAt', 'asc').orderBy('id');
  }

  async get(orgId: string, id: string): Promise<Webhook> {
    const hook = await this.models.Webhook.forOrg(orgId).findById(id);
    if (!hook) throw new NotFound('Webhook');
    return hook;
  }

  private async checkUrl(url: string): Promise<void> {
    try {
      await resolveTarget(url, this.deps.policy);
    } catch (err) {
      if (err instanceof UnsafeTarget) throw new ValidationFailed(err.message, [{ field: 'url', message: err.message }]);
      throw err;
    }
  }

  /** Creates a subscription; the secret is returned here only. */
  async create(orgId: string, userId: string, input: Required<Pick<WebhookInput, 'url' | 'events'>> & WebhookInput): Promise<{ webhook: Webhook; secret: string }> {
    await this.checkUrl(input.url);
    const secret = generateWebhookSecret();
    const webhook = await this.deps.knex.transaction(async (trx) => {
      // Counted under a lock on the organization's row, so two concurrent creates cannot pass 20 together.
      await trx('organizations').where('id', orgId).forUpdate().first('id');
      const count = await this.models.Webhook.forOrg(orgId, trx).resultSize();
      if (count >= MAX_WEBHOOKS_PER_ORG) throw new Conflict(`An organization has at most ${MAX_WEBHOOKS_PER_ORG} webhooks`);
      return this.models.Webhook.forOrg(orgId, trx).insertAndFetch({
        organizationId: orgId, url: input.url, events: [...new Set(input.events)], enabled: input.enabled ?? true, secretEncrypted: this.deps.box.seal(secret), createdBy: userId,
      });
    });
    this.forget(orgId);
    return { webhook, secret };
  }

  async update(orgId: string, id: string, input: WebhookInput): Promise<Webhook> {
    await this.get(orgId, id);
    if (input.url !== undefined) await this.checkUrl(input.url);
    const patch: Partial<Webhook> = {};
    if (input.url !== undefined) patch.url = input.url;
    if (input.events !== undefined) patch.events = [...new Set(input.events)];
    if (input.enabled !== undefined) {
      patch.enabled = input.enabled;
      // Turning a hook back on starts its failure count afresh.
      if (input.enabled) Object.assign(patch, { consecutiveFailures: 0, disabledReason: null });
    }
    const updated = await this.models.Webhook.forOrg(orgId).patchAndFetchById(id, patch);
    this.forget(orgId);
    return updated;
  }

  async remove(orgId: string, id: string): Promise<void> {
    await this.get(orgId, id);
    await this.models.Webhook.forOrg(orgId).deleteById(id);
    this.forget(orgId);
  }

  /** A new secret; the previous one keeps signing (a second `v1=`) for 24 hours. */
  async rotateSecret(orgId: string, id: string): Promise<{ webhook: Webhook; secret: string; previousSecretExpiresAt: Date }> {
    const hook = await this.get(orgId, id);
    const secret = generateWebhookSecret();
    const previousSecretExpiresAt = new Date(Date.now() + ROTATION_OVERLAP_MS);
    const webhook = await this.models.Webhook.forOrg(orgId).patchAndFetchById(id, {
      secretEncrypted: this.deps.box.seal(secret), previousSecretEncrypted: hook.secretEncrypted, previousSecretExpiresAt,
    });
    return { webhook, secret, previousSecretExpiresAt };
  }

  /** The secrets that sign now: the current one, then the previous one during a rotation's overlap. */
  signingSecrets(hook: Pick<Webhook, 'secretEncrypted' | 'previousSecretEncrypted'> & { previousSecretExpiresAt: Date | string | null }, now = Date.now()): string[] {
    const secrets = [this.open(hook.secretEncrypted)];
    if (hook.previousSecretEncrypted && hook.previousSecretExpiresAt && new Date(hook.previousSecretExpiresAt).getTime() > now) {
      secrets.push(this.open(hook.previousSecretEncrypted));
    }
    return secrets;
  }

  /** Decrypts a sealed secret once per instance: a sealed value never changes meaning (rotation seals a new one). */
  private open(sealed: string): string {
    let plain = this.opened.get(sealed);
    if (plain === undefined) {
      plain = this.deps.box.open(sealed);
      if (this.opened.size >= 10_000) this.opened.clear();
      this.opened.set(sealed, plain);
    }
    return plain;
  }

  /** Queues a `webhook.test` delivery to this hook (even a disabled one: that is how an admin checks a fix). */
  async test(orgId: string, id: string): Promise<WebhookDelivery> {
    const hook = await this.get(orgId, id);
    return this.enqueueDelivery(orgId, hook.id, { eventId: randomUUID(), eventType: TEST_EVENT, payload: { webhookId: hook.id, message: 'This is a test delivery' }, messageId: null, redelivery: false });
  }

  // ---- deliveries -------------------------------------------------------------------------------------------

  async deliveries(orgId: string, webhookId: string, opts: { status?: WebhookDeliveryStatus; event?: string; limit: number; offset: number }): Promise<{ deliveries: WebhookDelivery[]; total: number }> {
    await this.get(orgId, webhookId);
    const base = this.models.WebhookDelivery.forOrg(orgId).where('webhookId', webhookId);
    if (opts.status) base.where('status', opts.status);
    if (opts.event) base.where('eventType', opts.event);
    const [total, deliveries] = await Promise.all([base.clone().resultSize(), base.clone().orderBy('createdAt', 'desc').orderBy('id').limit(opts.limit).offset(opts.offset)]);
    return { deliveries, total };
  }

  async delivery(orgId: string, webhookId: string, id: string): Promise<WebhookDelivery> {
    const delivery = await this.models.WebhookDelivery.forOrg(orgId).where('webhookId', webhookId).findById(id);
    if (!delivery) throw new NotFound('Delivery');
    return delivery;
  }

  /** Sends the same event again (same X-Webhook-Id and body) as a new entry of the log. */
  async redeliver(orgId: string, webhookId: string, id: string): Promise<WebhookDelivery> {
    const original = await this.delivery(orgId, webhookId, id);
    // The event's time too, so the body is the one sent first (the row's own time places it in the log).
    const eventCreatedAt = original.eventCreatedAt ?? original.createdAt;
    return this.enqueueDelivery(orgId, webhookId, { eventId: original.eventId, eventType: original.eventType, payload: original.payload, messageId: original.messageId, redelivery: true, eventCreatedAt });
  }

  private enqueueDelivery(orgId: string, webhookId: string, e: { eventId: string; eventType: string; payload: Record<string, unknown>; messageId: string | null; redelivery: boolean; eventCreatedAt?: Date | string }): Promise<WebhookDelivery> {
    return this.deps.knex.transaction(async (trx) => {
      const delivery = await this.models.WebhookDelivery.forOrg(orgId, trx).insertAndFetch({ organizationId: orgId, webhookId, ...e, status: 'pending', attempts: 0 });
      await this.deps.jobs.enqueue(WEBHOOK_QUEUE, { deliveryId: delivery.id }, { trx, organizationId: orgId });
      return delivery;
    });
  }
}
