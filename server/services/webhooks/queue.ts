/** The job queue webhook deliveries run on. */
export const WEBHOOK_QUEUE = 'webhook-delivery';
/**
 * The queue that turns stored messages into their message.created deliveries: the message's own statement writes
 * one job per organization carrying the message ids, and this queue writes a delivery per subscription later.
 */
export const WEBHOOK_FANOUT_QUEUE = 'webhook-fanout';
