// Provider webhooks of channels: authenticated by their signature over the raw bytes (checked before parsing), so
// these routes read the body themselves. A stored event answers 200 after commit; processing follows in a job.
import type { Context } from 'koa';
import { PayloadTooLarge } from '../server/errors.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { object, params } from './schemas/common.js';
import { InboundView } from './schemas/channels.js';

const tag = 'Channel webhooks';
const provider = { kind: 'public' } as const;
const MAIL_LIMIT = 25 * 1024 * 1024;
const JSON_LIMIT = 1024 * 1024;
/** SES puts at most 150 KB of mail into an SNS notification; JSON escaping and Base64 make it larger. */
const SNS_LIMIT = 1024 * 1024;

/** The request's bytes, refused with 413 past `limit` (announced or actual). */
async function readRaw(ctx: Context, limit: number): Promise<Buffer> {
  const declared = Number(ctx.get('content-length') || 0);
  if (declared > limit) throw new PayloadTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new PayloadTooLarge();
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

export function channelInboundRoutes(s: RouteServices): AnyRoute[] {
  const inbound = s.channels.inbound;
  const stored = { status: 200, description: 'Stored (or already stored: a redelivery changes nothing)', data: InboundView };
  return [
    defineRoute({
      method: 'post', path: '/channels/email/inbound/:channelId', operationId: 'receiveInboundEmail', tag, auth: provider, rawBody: true, scope: null,
      summary: 'Inbound mail, signed: `X-Inbound-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t + "." + raw body)>`',
      description: 'The body is the MIME message (message/rfc822 or text/plain), or JSON `{from, to, subject, text, html, messageId, inReplyTo, references, attachments: [{fileName, mimeType, content (base64)}]}`; at most 25 MiB. Attachments are stored as `channel_media` files and shown on the message. A signature that is wrong or more than 5 minutes off answers 401 and stores nothing; an unknown or disabled channel 404; too many calls for one channel 429.',
      params: params('channelId'),
      response: stored,
      errors: [400, 401, 404, 413, 429],
      handler: async ({ params: a, ctx }) => ({ message: 'Received', data: await inbound.email(a.channelId, ctx.get('x-inbound-signature'), await readRaw(ctx, MAIL_LIMIT), ctx.get('content-type')) }),
    }),
    defineRoute({
      method: 'post', path: '/channels/inbound', operationId: 'receiveSesInbound', tag, auth: provider, rawBody: true, scope: null,
      summary: 'Amazon SES inbound mail through SNS (only with `EMAIL_INBOUND_SNS=true`; otherwise 404)',
      description: 'The SNS message\'s signature (SignatureVersion 1 or 2) is checked with its signing certificate, fetched only from `https://sns.<region>.amazonaws.com/` (`SNS_CERT_URL_PATTERN` changes that); a wrong or unverifiable signature is 401 and stores nothing. A SubscriptionConfirmation is confirmed by calling its SubscribeURL (same rule; a SubscribeURL that answers an error, redirects or cannot be reached is 400 and confirms nothing). A Notification carrying SES\'s `Received` mail content (SNS action, UTF-8 or Base64) is stored on the email channel its recipient names (`in+<token>@INBOUND_EMAIL_DOMAIN`, or one of the channel\'s addresses when its organization has verified that address\'s domain), once per Message-ID; mail for no channel is acknowledged and dropped.',
      response: { status: 200, description: 'Stored, confirmed or acknowledged', data: InboundView },
      errors: [400, 401, 404, 413],
      handler: async ({ ctx }) => {
        const received = await s.channels.sns.receive(await readRaw(ctx, SNS_LIMIT));
        return { message: received.confirmed ? 'Subscription confirmed' : 'Received', data: { stored: received.stored, duplicates: received.duplicates } };
      },
    }),
    defineRoute({
      method: 'post', path: '/channels/telegram/inbound/:channelId', operationId: 'receiveTelegramUpdate', tag, auth: provider, rawBody: true, scope: null,
      summary: 'A Telegram Update, authenticated by `X-Telegram-Bot-Api-Secret-Token`; deduplicated by update_id',
      params: params('channelId'),
      response: stored,
      errors: [400, 401, 404, 413, 429],
      handler: async ({ params: a, ctx }) => ({ message: 'Received', data: await inbound.telegram(a.channelId, ctx.get('x-telegram-bot-api-secret-token'), await readRaw(ctx, JSON_LIMIT)) }),
    }),
    defineRoute({
      method: 'get', path: '/channels/whatsapp/inbound/:channelId', operationId: 'verifyWhatsAppWebhook', tag, auth: provider, scope: null,
      summary: 'Meta\'s webhook handshake: echoes `hub.challenge` as text when `hub.verify_token` is the channel\'s (the channel becomes active)',
      params: params('channelId'),
      query: object({ 'hub.mode': { type: 'string', maxLength: 50 }, 'hub.verify_token': { type: 'string', maxLength: 200 }, 'hub.challenge': { type: 'string', maxLength: 200 } }),
      response: { status: 200, description: 'The challenge, as text/plain' },
      errors: [403, 404],
      handler: async ({ params: a, query }) => ({ message: 'Verified', raw: { contentType: 'text/plain', body: await inbound.whatsappHandshake(a.channelId, query['hub.mode'], query['hub.verify_token'], query['hub.challenge']) } }),
    }),
    defineRoute({
      method: 'post', path: '/channels/whatsapp/inbound/:channelId', operationId: 'receiveWhatsAppWebhook', tag, auth: provider, rawBody: true, scope: null,
      summary: 'WhatsApp messages and statuses, signed `X-Hub-Signature-256: sha256=<HMAC-SHA256(appSecret, raw body)>`; messages deduplicated by wamid',
      params: params('channelId'),
      response: stored,
      errors: [400, 401, 404, 413, 429],
      handler: async ({ params: a, ctx }) => ({ message: 'Received', data: await inbound.whatsapp(a.channelId, ctx.get('x-hub-signature-256'), await readRaw(ctx, JSON_LIMIT)) }),
    }),
  ];
}
