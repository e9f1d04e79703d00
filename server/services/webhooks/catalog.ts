// The events a webhook can subscribe to, and the patterns (`conversation.*`, `*`) a subscription may use.
export const WEBHOOK_EVENTS = [
  'conversation.created', 'conversation.updated', 'conversation.resolved', 'conversation.assigned',
  'message.created',
  'contact.created', 'contact.updated', 'contact.merged',
  'ticket.created', 'ticket.updated', 'ticket.status_changed', 'ticket.merged', 'ticket.reply_sent',
  'knowledge.indexed', 'knowledge.failed', 'channel.status_changed',
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];
/** What POST …/test sends; never subscribable. */
export const TEST_EVENT = 'webhook.test';

/** Every value a subscription's `events[]` may hold: an event type, `<area>.*`, or `*`. */
export const SUBSCRIBABLE = ['*', ...new Set(WEBHOOK_EVENTS.map((e) => `${e.split('.')[0]}.*`)), ...WEBHOOK_EVENTS];

/** The subscription patterns that select `type` (what the batched message path matches in SQL). */
export function patternsFor(type: string): string[] {
  return ['*', `${type.split('.')[0]}.*`, type];
}

export function subscribes(events: readonly string[], type: string): boolean {
  return patternsFor(type).some((p) => events.includes(p));
}

