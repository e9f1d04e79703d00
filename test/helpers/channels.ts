// Channel test helpers: signed inbound calls and the rows behind them.
import type { AppServer } from '../../server/server.js';
import { signInbound } from '../../server/services/channels/index.js';
import type { Api, ApiResponse } from './http.js';

/** A fixed key, so servers sharing one PostgreSQL database open each other's sealed channel secrets. */
export const TEST_ENCRYPTION_KEY = '0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0';

export function mime(m: { from: string; to?: string; subject: string; text: string; messageId: string; inReplyTo?: string; references?: string }): string {
  return [
    `From: ${m.from}`, `To: ${m.to ?? 'support@acme.test'}`, `Subject: ${m.subject}`, `Message-ID: ${m.messageId}`,
    ...(m.inReplyTo ? [`In-Reply-To: ${m.inReplyTo}`] : []), ...(m.references ? [`References: ${m.references}`] : []),
    'Date: Mon, 23 Nov 2026 10:00:00 +0000', 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8', '', m.text, '',
  ].join('\r\n');
}

export function postSignedMail(api: Api, channelId: string, secret: string, raw: string, opts: { t?: number; contentType?: string; signature?: string } = {}): Promise<ApiResponse> {
  return api.request('POST', `/channels/email/inbound/${channelId}`, {
    rawBody: raw,
    headers: { 'content-type': opts.contentType ?? 'message/rfc822', 'x-inbound-signature': opts.signature ?? signInbound(secret, raw, opts.t) },
  });
}

export async function inboundEvents(server: AppServer, channelId: string): Promise<{ id: string; status: string; providerId: string; conversationId: string | null; ticketId: string | null }[]> {
  return server.db.knex('inbound_events').where({ channelId }).orderBy('createdAt');
}

/**
 * Runs due jobs until none of `organizations` is due or running: drain() alone returns while a job the poller claimed
 * right after a commit is still running. Only this server's queues and the named organizations' jobs count: the test
 * database is shared with other files' servers, whose leftovers (deliveries to fake providers long closed, retried with
 * backoff, or a job a stopped server still held, which stays running until its lease ends) are not this test's business.
 */
export async function quiesce(server: AppServer, organizations: string | string[]): Promise<void> {
  const { knex } = server.db;
  const queues = server.jobs.names();
  const busy = () =>
    knex('jobs')
      .whereIn('queue', queues)
      .whereIn('organization_id', ([] as string[]).concat(organizations))
      .where((q) => q.where('status', 'running').orWhere((p) => p.where('status', 'pending').where('run_at', '<=', knex.fn.now())))
      .select('id', 'queue', 'status', 'attempts', 'run_at', 'locked_until')
      .limit(5);
  for (let i = 0; i < 200; i++) {
    await server.jobs.drain();
    if ((await busy()).length === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`jobs did not settle: ${JSON.stringify(await busy())}`);
}
