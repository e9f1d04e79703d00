// /webhooks: outbound webhook subscriptions of the active organization and their delivery log (admins).
import { presentWebhook, presentWebhookDelivery } from '../server/presenters/webhook.js';
import { SUBSCRIBABLE } from '../server/services/webhooks/index.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { dateTime, nullableDateTime, object, paginationQuery, params, uuid } from './schemas/common.js';

const tag = 'Webhooks';
const admin = { kind: 'org', role: 'admin', orgFrom: 'token' } as const;
const url = { type: 'string', minLength: 8, maxLength: 2000, description: 'https URL resolving to a public address (http and private targets only with WEBHOOKS_ALLOW_PRIVATE=true)' } as const;
const events = { type: 'array', minItems: 1, maxItems: 50, uniqueItems: true, items: { type: 'string', enum: SUBSCRIBABLE }, description: 'Event types, `<area>.*` or `*`' } as const;
const WebhookView = {
  type: 'object',
  properties: {
    id: uuid, url: { type: 'string' }, events: { type: 'array', items: { type: 'string' } }, enabled: { type: 'boolean' }, consecutiveFailures: { type: 'integer' },
    disabledReason: { type: ['string', 'null'] }, createdAt: dateTime, updatedAt: dateTime,
  },
};
const DeliveryView = {
  type: 'object',
  properties: {
    id: uuid, webhookId: uuid, eventId: uuid, event: { type: 'string' }, status: { type: 'string', enum: ['pending', 'succeeded', 'failed'] }, attempts: { type: 'integer' },
    responseStatus: { type: ['integer', 'null'] }, responseBody: { type: ['string', 'null'] }, lastError: { type: ['string', 'null'] }, durationMs: { type: ['integer', 'null'] },
    deliveredAt: nullableDateTime, createdAt: dateTime,
  },
};
const DELIVERY_TEXT =
  'Each delivery is a POST of `{id, type, organizationId, createdAt, data}` with `X-Webhook-Id` (the event id, the same on every retry), `X-Webhook-Timestamp` (Unix seconds) and ' +
  '`X-Webhook-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "." + rawBody)>`; for 24 hours after a rotation a second `,v1=<hex>` signed with the previous secret follows. ' +
  'A 2xx within 10 s succeeds; timeouts, 429 (Retry-After honoured) and 5xx are retried after 1 m, 5 m, 30 m, 2 h, 6 h, 12 h and 24 h; other answers are final. ' +
  '410, or 50 failures in a row, disables the webhook and notifies the admins (`webhook_disabled`). At least once, unordered. ' +
  'Knowledge events: `knowledge.indexed` (`data: {document}`, once the chunks are searchable), `knowledge.failed` (`data: {document, error, attempts}`, once indexing failed after its retries).';

export function webhookRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/webhooks', operationId: 'listWebhooks', tag, auth: admin,
      summary: 'Webhooks of the active organization (at most 20)',
      response: { status: 200, description: 'Webhooks', data: { type: 'array', items: WebhookView } },
      handler: async ({ orgId }) => ({ message: 'Webhooks', data: (await s.webhooks.list(orgId)).map(presentWebhook) }),
    }),
    defineRoute({
      method: 'post', path: '/webhooks', operationId: 'createWebhook', tag, auth: admin,
      summary: 'Subscribes a URL to events; the signing `secret` is shown only in this answer',
      description: DELIVERY_TEXT,
      body: object({ url, events, enabled: { type: 'boolean', default: true } }, ['url', 'events']),
      response: { status: 201, description: 'The webhook and its secret (shown once)', data: { type: 'object', properties: { webhook: WebhookView, secret: { type: 'string' } } } },
      errors: [409],
      handler: async ({ orgId, actor, body }) => {
        const { webhook, secret } = await s.webhooks.create(orgId, actor.userId, body);
        return { message: 'Webhook created; store the secret now, it is not shown again', data: { webhook: presentWebhook(webhook), secret } };
      },
    }),
    defineRoute({
      method: 'get', path: '/webhooks/:webhookId', operationId: 'getWebhook', tag, auth: admin,
      summary: 'One webhook', params: params('webhookId'),
      response: { status: 200, description: 'Webhook', data: WebhookView },
      handler: async ({ orgId, params: p }) => ({ message: 'Webhook', data: presentWebhook(await s.webhooks.get(orgId, p.webhookId)) }),
    }),
    defineRoute({
      method: 'patch', path: '/webhooks/:webhookId', operationId: 'updateWebhook', tag, auth: admin,
      summary: 'Changes the URL, the events or `enabled` (enabling again resets the failure count)', params: params('webhookId'),
      body: { ...object({ url, events, enabled: { type: 'boolean' } }), minProperties: 1 },
      response: { status: 200, description: 'Webhook', data: WebhookView },
      handler: async ({ orgId, params: p, body }) => ({ message: 'Webhook updated', data: presentWebhook(await s.webhooks.update(orgId, p.webhookId, body)) }),
    }),
    defineRoute({
      method: 'delete', path: '/webhooks/:webhookId', operationId: 'deleteWebhook', tag, auth: admin,
      summary: 'Deletes a webhook and its delivery log', params: params('webhookId'),
      response: { status: 200, description: 'Deleted' },
      handler: async ({ orgId, params: p }) => {
        await s.webhooks.remove(orgId, p.webhookId);
        return { message: 'Webhook deleted' };
      },
    }),
    defineRoute({
      method: 'post', path: '/webhooks/:webhookId/rotate-secret', operationId: 'rotateWebhookSecret', tag, auth: admin,
      summary: 'A new signing secret (shown once); the previous one also signs for 24 hours (a second `v1=` in X-Webhook-Signature)', params: params('webhookId'),
      response: { status: 200, description: 'The new secret', data: { type: 'object', properties: { webhook: WebhookView, secret: { type: 'string' }, previousSecretExpiresAt: dateTime } } },
      handler: async ({ orgId, params: p }) => {
        const { webhook, secret, previousSecretExpiresAt } = await s.webhooks.rotateSecret(orgId, p.webhookId);
        return { message: 'Secret rotated', data: { webhook: presentWebhook(webhook), secret, previousSecretExpiresAt: previousSecretExpiresAt.toISOString() } };
      },
    }),
    defineRoute({
      method: 'post', path: '/webhooks/:webhookId/test', operationId: 'testWebhook', tag, auth: admin,
      summary: 'Queues a `webhook.test` delivery (also to a disabled webhook)', params: params('webhookId'),
      response: { status: 202, description: 'The queued delivery', data: DeliveryView },
      handler: async ({ orgId, params: p }) => ({ message: 'Test delivery queued', data: presentWebhookDelivery(await s.webhooks.test(orgId, p.webhookId)) }),
    }),
    defineRoute({
      method: 'get', path: '/webhooks/:webhookId/deliveries', operationId: 'listWebhookDeliveries', tag, auth: admin,
      summary: 'The delivery log of a webhook, newest first', params: params('webhookId'),
      query: object({ ...paginationQuery, status: { type: 'string', enum: ['pending', 'succeeded', 'failed'] }, event: { type: 'string', maxLength: 60 } }),
      response: { status: 200, description: 'Deliveries', data: { type: 'array', items: DeliveryView }, paginated: true },
      handler: async ({ orgId, params: p, query }) => {
        const { deliveries, total } = await s.webhooks.deliveries(orgId, p.webhookId, query);
        return { message: 'Deliveries', data: deliveries.map(presentWebhookDelivery), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'get', path: '/webhooks/:webhookId/deliveries/:deliveryId', operationId: 'getWebhookDelivery', tag, auth: admin,
      summary: 'One delivery', params: params('webhookId', 'deliveryId'),
      response: { status: 200, description: 'Delivery', data: DeliveryView },
      handler: async ({ orgId, params: p }) => ({ message: 'Delivery', data: presentWebhookDelivery(await s.webhooks.delivery(orgId, p.webhookId, p.deliveryId)) }),
    }),
    defineRoute({
      method: 'post', path: '/webhooks/:webhookId/deliveries/:deliveryId/redeliver', operationId: 'redeliverWebhookDelivery', tag, auth: admin,
      summary: 'Sends the same event again (same X-Webhook-Id and body) as a new delivery', params: params('webhookId', 'deliveryId'),
      response: { status: 202, description: 'The new delivery', data: DeliveryView },
      handler: async ({ orgId, params: p }) => ({ message: 'Redelivery queued', data: presentWebhookDelivery(await s.webhooks.redeliver(orgId, p.webhookId, p.deliveryId)) }),
    }),
  ];
}
