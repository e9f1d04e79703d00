export { WebhookService, WEBHOOK_QUEUE, MAX_WEBHOOKS_PER_ORG, ROTATION_OVERLAP_MS, type WebhookInput } from './service.js';
export { WebhookDeliverer, RETRY_DELAYS_SECONDS, DISABLE_AFTER_FAILURES } from './delivery.js';
export { SecretBox, signatureHeader, signPayload } from './signing.js';
export { WEBHOOK_EVENTS, SUBSCRIBABLE, TEST_EVENT, patternsFor, subscribes, type WebhookEventType } from './catalog.js';
export { resolveTarget, urlProblem, UnsafeTarget } from './ssrf.js';
export type { EventData, Outbox } from './outbox.js';
