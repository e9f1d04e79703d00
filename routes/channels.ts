// /channels: an organization's email, WhatsApp and Telegram channels (agents read, admins change) and their deliveries.
import { presentChannel, presentDelivery } from '../server/presenters/channel.js';
import type { ChannelRow, ChannelSecrets } from '../server/services/channels/index.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { object, paginationQuery, params } from './schemas/common.js';
import {
  addressesBody, ChannelView, channelPatchBody, DELIVERY_STATUSES, DeliveryView, EmailChannelCreated, emailChannelBody, telegramChannelBody, VerifyView, WhatsAppChannelCreated, whatsappChannelBody,
} from './schemas/channels.js';

const tag = 'Channels';
const agent = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;
const admin = { kind: 'org', role: 'admin', orgFrom: 'token' } as const;
type Id = { channelId: string };

export function channelRoutes(s: RouteServices): AnyRoute[] {
  const p = s.channels.provisioning;
  const present = (row: ChannelRow) => {
    let secrets: ChannelSecrets | null = null;
    try {
      secrets = p.secretsOf(row);
    } catch {
      secrets = null;
    }
    return presentChannel(row, secrets, row.type === 'email' ? { webhookUrl: p.inboundUrl(row), smtpAddress: p.smtpAddress(row) } : { webhookUrl: p.inboundUrl(row) });
  };
  const load = ({ orgId, params: a }: { orgId: string; params: Id }) => p.get(orgId, a.channelId);
  return [
    defineRoute({
      method: 'get', path: '/channels', operationId: 'listChannels', tag, auth: agent,
      summary: 'The organization\'s channels, newest first (secrets masked)',
      query: object({ ...paginationQuery }),
      response: { status: 200, description: 'Channels', data: { type: 'array', items: ChannelView }, paginated: true },
      handler: async ({ orgId, query }) => {
        const { channels, total } = await p.list(orgId, query);
        return { message: 'Channels', data: channels.map(present), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'post', path: '/channels/email', operationId: 'createEmailChannel', tag, auth: admin,
      summary: 'Add an email channel: its signed webhook URL, the signing secret (shown only here) and its SMTP address',
      description: 'The plan\'s `channels` limit answers 403 `plan_limit_reached`.',
      body: emailChannelBody,
      response: { status: 201, description: 'The channel and how mail reaches it', data: EmailChannelCreated },
      handler: async ({ orgId, body }) => {
        const { channel, secrets } = await p.createEmail(orgId, body);
        return { message: 'Email channel created', data: { channel: present(channel), inbound: { webhookUrl: p.inboundUrl(channel), secret: secrets.signingSecret, smtpAddress: p.smtpAddress(channel) } } };
      },
    }),
    defineRoute({
      method: 'post', path: '/channels/telegram', operationId: 'createTelegramChannel', tag, auth: admin,
      summary: 'Add a Telegram bot: checked with getMe, then its webhook is set with a secret token',
      description: 'A token Telegram refuses (getMe or setWebhook) answers 400; Telegram unreachable, timing out, busy (429) or failing (5xx) answers 503 `service_unavailable`, nothing created.',
      body: telegramChannelBody,
      response: { status: 201, description: 'The channel', data: ChannelView },
      errors: [503],
      handler: async ({ orgId, body }) => ({ message: 'Telegram channel created', data: present(await p.createTelegram(orgId, body)) }),
    }),
    defineRoute({
      method: 'post', path: '/channels/whatsapp', operationId: 'createWhatsAppChannel', tag, auth: admin,
      summary: 'Add a WhatsApp Cloud API number: pending until Meta calls the webhook handshake with the verify token',
      body: whatsappChannelBody,
      response: { status: 201, description: 'The channel and its webhook settings for Meta', data: WhatsAppChannelCreated },
      handler: async ({ orgId, body }) => {
        const { channel, secrets } = await p.createWhatsApp(orgId, body);
        return { message: 'WhatsApp channel created', data: { channel: present(channel), webhook: { url: p.inboundUrl(channel), verifyToken: secrets.verifyToken } } };
      },
    }),
    defineRoute({
      method: 'post', path: '/channels/deliveries/:deliveryId/retry', operationId: 'retryChannelDelivery', tag, auth: admin,
      summary: 'Send a failed delivery again (its retry schedule starts over)',
      params: params('deliveryId'),
      response: { status: 202, description: 'Queued again', data: DeliveryView },
      errors: [400, 404],
      handler: async ({ orgId, params: a }) => ({ message: 'Delivery queued', data: presentDelivery(await s.channels.deliveries.retry(orgId, a.deliveryId)) }),
    }),
    defineRoute({
      method: 'get', path: '/channels/:channelId', operationId: 'getChannel', tag, auth: agent,
      summary: 'One channel (secrets masked)',
      params: params('channelId'),
      response: { status: 200, description: 'The channel', data: ChannelView },
      errors: [404],
      handler: async ({ orgId, params: a }) => ({ message: 'Channel', data: present(await p.get(orgId, a.channelId)) }),
    }),
    defineRoute({
      method: 'patch', path: '/channels/:channelId', operationId: 'updateChannel', tag, auth: admin,
      summary: 'Rename, enable or disable a channel, or replace its credentials',
      description: 'A disabled channel answers its provider webhooks with 404 and sends nothing.',
      params: params('channelId'), load,
      body: channelPatchBody,
      response: { status: 200, description: 'The channel', data: ChannelView },
      errors: [404],
      handler: async ({ orgId, params: a, body }) => ({ message: 'Channel updated', data: present(await p.update(orgId, a.channelId, body)) }),
    }),
    defineRoute({
      method: 'delete', path: '/channels/:channelId', operationId: 'deleteChannel', tag, auth: admin,
      summary: 'Remove a channel with its inbound events and deliveries (its conversations stay)',
      params: params('channelId'),
      response: { status: 200, description: 'Removed' },
      errors: [404],
      handler: async ({ orgId, params: a }) => {
        await p.remove(orgId, a.channelId);
        return { message: 'Channel deleted' };
      },
    }),
    defineRoute({
      method: 'post', path: '/channels/:channelId/verify', operationId: 'verifyChannel', tag, auth: admin,
      summary: 'Check a channel (enabled, credentials readable, Telegram getMe, WhatsApp handshake done) and set its status',
      params: params('channelId'),
      response: { status: 200, description: 'The checks', data: VerifyView },
      errors: [404],
      handler: async ({ orgId, params: a }) => {
        const { status, checks, channel } = await p.verify(orgId, a.channelId);
        return { message: 'Channel checked', data: { status, checks, channel: present(channel) } };
      },
    }),
    defineRoute({
      method: 'patch', path: '/channels/:channelId/email/addresses', operationId: 'setEmailChannelAddresses', tag, auth: admin,
      summary: 'The addresses an email channel receives mail for',
      description: 'Mail from SES (through SNS) sent to one of these addresses reaches the channel only once the organization has verified the address\'s domain (`POST /email/identity/verify`); until then, and always for forwarded mail, use the channel\'s `in+<token>` address.',
      params: params('channelId'), load,
      body: addressesBody,
      response: { status: 200, description: 'The channel', data: ChannelView },
      errors: [400, 404],
      handler: async ({ orgId, params: a, body }) => ({ message: 'Addresses saved', data: present(await p.setAddresses(orgId, a.channelId, body.emails)) }),
    }),
    defineRoute({
      method: 'get', path: '/channels/:channelId/deliveries', operationId: 'listChannelDeliveries', tag, auth: admin,
      summary: 'Outbound deliveries of a channel, newest first',
      params: params('channelId'),
      query: object({ ...paginationQuery, status: { type: 'string', enum: [...DELIVERY_STATUSES] } }),
      response: { status: 200, description: 'Deliveries', data: { type: 'array', items: DeliveryView }, paginated: true },
      errors: [404],
      handler: async ({ orgId, params: a, query }) => {
        const { deliveries, total } = await s.channels.deliveries.list(orgId, a.channelId, query);
        return { message: 'Deliveries', data: deliveries.map(presentDelivery), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
  ];
}
