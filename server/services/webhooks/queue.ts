/** The job queue webhook deliveries run on. */
export const WEBHOOK_QUEUE = 'webhook-delivery';
