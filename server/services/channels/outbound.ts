// Agent and AI replies in channel conversations leaving through their channel: a delivery row and its job written in
// the message's transaction, a worker sending by SMTP, Telegram or the WhatsApp Graph API with retries, and the
// status updates providers report. Internal notes never get a delivery.
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Conversation } from '../../../db/models/Conversation.js';
import type { Message } from '../../../db/models/Message.js';
import type { DomainEventBus } from '../../events.js';
import { InvalidTransition, NotFound } from '../../errors.js';
import { RetryLater, type Job, type JobQueue } from '../../jobs/index.js';
import type { Logger } from '../../logger.js';
import { presentDelivery } from '../../presenters/channel.js';
import type { EmailIdentityService } from '../email/index.js';
import type { ChannelOutbox } from '../messages/types.js';
import type { NotificationService } from '../notifications.js';
import type { ChannelProvisioning } from './provisioning.js';
import type { EmailSender } from './providers/email.js';
import { ProviderError } from './providers/errors.js';
import { TelegramApi } from './providers/telegram.js';
import { sendWhatsAppText } from './providers/whatsapp.js';
import type { ChannelRow, DeliveryRow, DeliveryStatus, InboundStatus, TelegramSecrets, WhatsAppSecrets } from './types.js';

export const DELIVERY_QUEUE = 'channel-delivery';
/** 30 s, 2 min, 10 min, 1 h, 6 h: then the delivery has failed. */
export const DELIVERY_RETRY_SECONDS = [30, 120, 600, 3600, 21600];

export interface DeliveryJob {
  deliveryId: string;
}

/** Where WhatsApp statuses land (the inbound processor calls it). */
export interface DeliveryUpdates {
  providerStatus(channel: ChannelRow, status: InboundStatus): Promise<void>;
}

const PROGRESS: Record<DeliveryStatus, number> = { queued: 0, sent: 1, delivered: 2, read: 3, failed: 4, outside_window: 4 };

export class ChannelDeliveries implements ChannelOutbox, DeliveryUpdates {
  constructor(private readonly deps: {
    knex: Knex; jobs: JobQueue; events: DomainEventBus; notifications: NotificationService; provisioning: ChannelProvisioning; email: EmailIdentityService;
    emailSender: EmailSender; mailFrom: string; whatsappGraphUrl: string; telegramApiUrl: string; logger: Logger;
  }) {}

  async record(trx: Knex.Transaction, conversation: Conversation, message: Message): Promise<void> {
    const c = conversation as Conversation & { channelId?: string | null; channelAddress?: string | null };
    if (!c.channelId || !c.channelAddress || message.private) return;
    const [row] = (await trx('channel_deliveries').insert({ organizationId: c.organizationId, channelId: c.channelId, conversationId: c.id, messageId: message.id, recipient: c.channelAddress }, 'id')) as { id: string }[];
    await this.deps.jobs.enqueue<DeliveryJob>(DELIVERY_QUEUE, { deliveryId: row!.id }, { organizationId: c.organizationId, trx });
  }

  async list(orgId: string, channelId: string, opts: { status?: DeliveryStatus; limit: number; offset: number }): Promise<{ deliveries: DeliveryRow[]; total: number }> {
    await this.deps.provisioning.get(orgId, channelId);
    const base = this.deps.knex('channel_deliveries').where({ organizationId: orgId, channelId });
    if (opts.status) base.where('status', opts.status);
    const [rows, count] = await Promise.all([base.clone().orderBy('createdAt', 'desc').orderBy('id').limit(opts.limit).offset(opts.offset), base.clone().count<{ count: string }[]>('* as count')]);
    return { deliveries: rows as DeliveryRow[], total: Number(count[0]?.count ?? 0) };
  }

  /** A failed delivery tries again from the start of its schedule. */
  async retry(orgId: string, deliveryId: string): Promise<DeliveryRow> {
    return this.deps.knex.transaction(async (trx) => {
      const row = (await trx('channel_deliveries').where({ organizationId: orgId, id: deliveryId }).forUpdate().first()) as DeliveryRow | undefined;
      if (!row) throw new NotFound('Delivery');
      if (row.status !== 'failed' && row.status !== 'outside_window') throw new InvalidTransition(`A ${row.status} delivery cannot be retried`);
      const [updated] = (await trx('channel_deliveries').where({ id: row.id }).update({ status: 'queued', lastError: null, updatedAt: new Date() }, '*')) as DeliveryRow[];
      await this.deps.jobs.enqueue<DeliveryJob>(DELIVERY_QUEUE, { deliveryId: row.id }, { organizationId: orgId, trx });
      return updated!;
    });
  }

  async handle(job: Job<DeliveryJob>): Promise<void> {
    const { knex } = this.deps;
    const delivery = (await knex('channel_deliveries').where({ id: job.payload.deliveryId }).first()) as DeliveryRow | undefined;
    if (!delivery || delivery.status !== 'queued') return;
    const channel = (await knex('channels').where({ id: delivery.channelId }).first()) as ChannelRow | undefined;
    const message = delivery.messageId ? ((await knex('messages').where({ id: delivery.messageId }).first()) as Message | undefined) : undefined;
    if (!channel || !channel.enabled) return this.settle(delivery, 'failed', 'the channel is disabled or removed', true);
    // Never an internal note, whatever wrote the row.
    if (!message || message.private) return this.settle(delivery, 'failed', 'not a public message', false);
    await knex('channel_deliveries').where({ id: delivery.id }).update({ attempts: knex.raw('attempts + 1'), updatedAt: new Date() });
    try {
      const providerMessageId = await this.send(channel, delivery, message);
      await knex('channel_deliveries').where({ id: delivery.id }).update({ providerMessageId, sentAt: new Date(), lastError: null });
      await this.settle(delivery, 'sent', null, false);
      await this.deps.provisioning.deliverySucceeded(channel);
    } catch (err) {
      const failure = err instanceof ProviderError ? err : new ProviderError(err instanceof Error ? err.message : 'delivery failed', true);
      const lastAttempt = job.attempt > DELIVERY_RETRY_SECONDS.length;
      if (failure.retryable && !lastAttempt) {
        await knex('channel_deliveries').where({ id: delivery.id }).update({ lastError: failure.message.slice(0, 500), updatedAt: new Date() });
        throw new RetryLater(failure.message, failure.retryAfterSeconds);
      }
      await this.settle(delivery, failure.finalStatus, failure.message, true);
      // Outside WhatsApp's 24-hour window is about one customer, not the channel.
      if (failure.finalStatus === 'failed') await this.deps.provisioning.deliveryFailed(channel, failure.message, failure.credentialsRefused);
    }
  }

  private async send(channel: ChannelRow, delivery: DeliveryRow, message: Message): Promise<string> {
    if (channel.type === 'telegram') {
      return new TelegramApi(this.deps.telegramApiUrl, this.deps.provisioning.secretsOf<TelegramSecrets>(channel).botToken).sendMessage(delivery.recipient, message.content);
    }
    if (channel.type === 'whatsapp') {
      const phoneNumberId = String(channel.config.phoneNumberId ?? '');
      return sendWhatsAppText(this.deps.whatsappGraphUrl, phoneNumberId, this.deps.provisioning.secretsOf<WhatsAppSecrets>(channel).accessToken, delivery.recipient, message.content);
    }
    return this.sendMail(channel, delivery, message);
  }

  /** Threaded after the conversation's earlier mails (the customer's and ours), From the organization's identity. */
  private async sendMail(channel: ChannelRow, delivery: DeliveryRow, message: Message): Promise<string> {
    const { knex } = this.deps;
    const orgId = channel.organizationId;
    const conversation = (await knex('conversations').where({ id: delivery.conversationId }).first()) as Conversation;
    const organization = (await knex('organizations').where({ id: orgId }).first()) as { name: string };
    const inbound = (await knex('messages').where({ conversationId: conversation.id, senderType: 'visitor' }).whereRaw(`metadata->>'providerMessageId' is not null`).where('seq', '<', message.seq).select('metadata', 'createdAt')) as { metadata: { providerMessageId: string }; createdAt: Date }[];
    const sent = (await knex('channel_deliveries').where({ conversationId: conversation.id }).whereNot({ id: delivery.id }).whereNotNull('providerMessageId').where('createdAt', '<', delivery.createdAt).select('providerMessageId', 'createdAt')) as { providerMessageId: string; createdAt: Date }[];
    const thread = [...inbound.map((m) => ({ id: m.metadata.providerMessageId, at: new Date(m.createdAt).getTime() })), ...sent.map((d) => ({ id: d.providerMessageId, at: new Date(d.createdAt).getTime() }))]
      .sort((a, b) => a.at - b.at).map((t) => t.id);
    // One Message-ID per delivery, kept across attempts, so a retried mail is the same mail.
    const domain = this.deps.mailFrom.replace(/^.*@/, '').replace(/[>\s].*$/, '') || 'localhost';
    const messageId = delivery.providerMessageId ?? `<conversation-${conversation.id}.${randomBytes(8).toString('hex')}@${domain}>`;
    if (!delivery.providerMessageId) await knex('channel_deliveries').where({ id: delivery.id }).update({ providerMessageId: messageId });
    const sender = await this.deps.email.senderFor(orgId, organization.name);
    const dkim = await this.deps.email.dkimFor(orgId, sender.from.address);
    const signature = await this.deps.email.signatureOf(orgId);
    const subject = conversation.subject ? (/^re:/i.test(conversation.subject) ? conversation.subject : `Re: ${conversation.subject}`) : `Your conversation with ${organization.name}`;
    return this.deps.emailSender.send({
      from: sender.from, replyTo: String(channel.config.address ?? sender.replyTo ?? ''), to: delivery.recipient, subject,
      text: signature ? `${message.content}\n\n-- \n${signature}\n` : message.content, messageId,
      ...(thread.length ? { inReplyTo: thread[thread.length - 1], references: thread.slice(-20) } : {}),
      ...(dkim ? { dkim } : {}),
    });
  }

  async providerStatus(channel: ChannelRow, status: InboundStatus): Promise<void> {
    const delivery = (await this.deps.knex('channel_deliveries').where({ channelId: channel.id, providerMessageId: status.providerMessageId }).first()) as DeliveryRow | undefined;
    // Statuses arrive out of order: read never falls back to delivered.
    if (!delivery || PROGRESS[status.status] <= PROGRESS[delivery.status]) return;
    await this.settle(delivery, status.status, status.error, status.status === 'failed');
  }

  private async settle(delivery: DeliveryRow, status: DeliveryStatus, error: string | null, notify: boolean): Promise<void> {
    const [row] = (await this.deps.knex('channel_deliveries').where({ id: delivery.id }).update({ status, lastError: error?.slice(0, 500) ?? null, updatedAt: new Date() }, '*')) as DeliveryRow[];
    this.deps.events.publish('channel.delivery_updated', { organizationId: delivery.organizationId, delivery: presentDelivery(row!) });
    if (!notify) return;
    const admins = ((await this.deps.knex('memberships').where({ organizationId: delivery.organizationId, status: 'accepted' }).whereIn('role', ['owner', 'admin']).select('userId')) as { userId: string }[]).map((m) => m.userId);
    await this.deps.notifications
      .notify(delivery.organizationId, admins, { type: 'channel_failed', title: 'A channel message could not be delivered', body: error, data: { channelId: delivery.channelId, deliveryId: delivery.id, conversationId: delivery.conversationId, status } })
      .catch((err) => this.deps.logger.warn({ err, deliveryId: delivery.id }, 'could not notify admins of a failed channel delivery'));
  }
}
