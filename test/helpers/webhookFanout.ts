// Waits until the messages stored so far have their message.created deliveries: the fan-out jobs of an organization
// are run here, or by the server's own poller (drain skips a job the poller holds, so this waits for it too).
import { WEBHOOK_FANOUT_QUEUE } from '../../server/services/webhooks/queue.js';
import type { AppServer } from '../../server/server.js';

export async function fannedOut(server: AppServer, orgId: string, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    await server.jobs.drain(WEBHOOK_FANOUT_QUEUE);
    const open = await server.db.knex('jobs').where({ queue: WEBHOOK_FANOUT_QUEUE, organization_id: orgId }).whereIn('status', ['pending', 'running']).first('id', 'status', 'last_error');
    if (!open) return;
    if (Date.now() > end) throw new Error(`fan-out still open: ${JSON.stringify(open)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
