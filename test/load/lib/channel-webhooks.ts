// What the channels scenario sends: WhatsApp Cloud API webhooks, each with a message of its own (a new wamid) from
// one of a few customers, signed `X-Hub-Signature-256` with the app secret both servers know.
import { createHmac } from 'node:crypto';

export const BENCH_APP_SECRET = 'bench-whatsapp-app-secret-0123456789';
/** Customers writing in: their messages spread over this many conversations. */
export const SENDERS = 50;

export function whatsappWebhook(runId: string, n: number): string {
  const from = `49151${String(n % SENDERS).padStart(7, '0')}`;
  return JSON.stringify({
    object: 'whatsapp_business_account',
    entry: [{ id: 'WABA', changes: [{ field: 'messages', value: {
      messaging_product: 'whatsapp', metadata: { display_phone_number: '4930000000', phone_number_id: 'bench' },
      contacts: [{ wa_id: from, profile: { name: `Customer ${n % SENDERS}` } }],
      messages: [{ id: `wamid.${runId}.${n}`, from, timestamp: String(Math.floor(Date.now() / 1000)), type: 'text', text: { body: `Hello, this is message ${n} about my order` } }],
    } }] }],
  });
}

export const hubSignature = (body: string): string => `sha256=${createHmac('sha256', BENCH_APP_SECRET).update(body).digest('hex')}`;
