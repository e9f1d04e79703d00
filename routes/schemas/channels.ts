// Schemas of /channels: provisioning bodies and the channel, delivery and inbound shapes the API answers with.
import type { JsonSchema } from '../registry.js';
import { dateTime, email, nullableDateTime, object, uuid } from './common.js';

export const channelName = { type: 'string', minLength: 1, maxLength: 200, pattern: '\\S', description: 'What agents call the channel' } as const;
const secret = (description: string) => ({ type: 'string', minLength: 1, maxLength: 4096, description }) as const;
export const DELIVERY_STATUSES = ['queued', 'sent', 'delivered', 'read', 'failed', 'outside_window'] as const;

export const emailChannelBody = object({
  name: channelName,
  address: { ...email, description: 'The support address customers write to (its provider forwards to the webhook or SMTP address)' },
  domain: { type: 'string', minLength: 1, maxLength: 253, pattern: '^[A-Za-z0-9.-]+$', description: 'The mail domain (default: the address\'s)' },
}, ['name', 'address']);

export const telegramChannelBody = object({ name: channelName, botToken: secret('The bot token from @BotFather') }, ['name', 'botToken']);

export const whatsappChannelBody = object({
  name: channelName,
  phoneNumberId: { type: 'string', pattern: '^[0-9]{1,32}$', description: 'The Cloud API phone number id' },
  wabaId: { type: 'string', pattern: '^[0-9]{1,32}$', description: 'The WhatsApp Business Account id' },
  accessToken: secret('A system user access token'),
  appSecret: secret('The Meta app secret (verifies X-Hub-Signature-256)'),
}, ['name', 'phoneNumberId', 'wabaId', 'accessToken', 'appSecret']);

export const channelPatchBody = {
  ...object({ name: channelName, enabled: { type: 'boolean' }, botToken: secret('Telegram: a new bot token'), accessToken: secret('WhatsApp: a new access token'), appSecret: secret('WhatsApp: a new app secret') }),
  minProperties: 1,
} as const;

export const addressesBody = object({ emails: { type: 'array', minItems: 1, maxItems: 50, items: email, description: 'Every address this channel receives mail for' } }, ['emails']);

export const ChannelView: JsonSchema = object({
  id: uuid,
  type: { type: 'string', enum: ['email', 'whatsapp', 'telegram'] },
  name: { type: 'string' },
  status: { type: 'string', enum: ['pending', 'active', 'failed', 'disabled'] },
  enabled: { type: 'boolean' },
  config: { type: 'object', description: 'Settings; `secrets` lists each credential masked (never the value)', additionalProperties: true },
  lastError: { type: ['string', 'null'] },
  createdAt: dateTime,
  updatedAt: dateTime,
}, ['id', 'type', 'name', 'status', 'enabled', 'config', 'lastError', 'createdAt', 'updatedAt']);

export const DeliveryView: JsonSchema = object({
  id: uuid, channelId: uuid, conversationId: uuid, messageId: { type: ['string', 'null'], format: 'uuid' }, recipient: { type: 'string' },
  status: { type: 'string', enum: [...DELIVERY_STATUSES] }, attempts: { type: 'integer' }, lastError: { type: ['string', 'null'] },
  sentAt: nullableDateTime, createdAt: dateTime, updatedAt: dateTime,
}, ['id', 'channelId', 'conversationId', 'messageId', 'recipient', 'status', 'attempts', 'lastError', 'sentAt', 'createdAt', 'updatedAt']);

export const EmailChannelCreated: JsonSchema = object({
  channel: ChannelView,
  inbound: object({
    webhookUrl: { type: 'string', format: 'uri' },
    secret: { type: 'string', description: 'The signing secret of X-Inbound-Signature; shown only here' },
    smtpAddress: { type: 'string', description: 'in+<token>@INBOUND_EMAIL_DOMAIN, for forwarding over SMTP' },
  }, ['webhookUrl', 'secret', 'smtpAddress']),
}, ['channel', 'inbound']);

export const WhatsAppChannelCreated: JsonSchema = object({
  channel: ChannelView,
  webhook: object({ url: { type: 'string', format: 'uri' }, verifyToken: { type: 'string', description: 'For Meta\'s webhook setup; shown only here' } }, ['url', 'verifyToken']),
}, ['channel', 'webhook']);

export const VerifyView: JsonSchema = object({
  status: { type: 'string', enum: ['pending', 'active', 'failed', 'disabled'] },
  checks: { type: 'array', items: object({ name: { type: 'string' }, ok: { type: 'boolean' }, detail: { type: 'string' } }, ['name', 'ok']) },
  channel: ChannelView,
}, ['status', 'checks', 'channel']);

export const InboundView: JsonSchema = object({ stored: { type: 'integer' }, duplicates: { type: 'integer' } }, ['stored', 'duplicates']);
