// What an admin sees of a webhook (never its secret, which create and rotate-secret return once) and of a delivery.
import type { Webhook } from '../../db/models/Webhook.js';
import type { WebhookDelivery } from '../../db/models/WebhookDelivery.js';
import { iso } from './time.js';

export function presentWebhook(w: Webhook) {
  return {
    id: w.id,
    url: w.url,
    events: w.events,
    enabled: w.enabled,
    consecutiveFailures: w.consecutiveFailures,
    disabledReason: w.disabledReason ?? null,
    createdAt: iso(w.createdAt),
    updatedAt: iso(w.updatedAt),
  };
}

export function presentWebhookDelivery(d: WebhookDelivery) {
  return {
    id: d.id,
    webhookId: d.webhookId,
    eventId: d.eventId,
    event: d.eventType,
    status: d.status,
    attempts: d.attempts,
    responseStatus: d.responseStatus ?? null,
    responseBody: d.responseBody ?? null,
    lastError: d.lastError ?? null,
    durationMs: d.durationMs ?? null,
    deliveredAt: iso(d.deliveredAt),
    createdAt: iso(d.createdAt),
  };
}
