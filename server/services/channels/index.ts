// Channels (email, WhatsApp, Telegram): provisioning, inbound webhooks and SMTP, processing and outbound deliveries,
// wired on the shared job queue.
import type { Knex } from 'knex';
import type { DomainEventBus } from '../../events.js';
import type { JobQueue } from '../../jobs/index.js';
import type { Logger } from '../../logger.js';
import type { ContactService } from '../contacts/index.js';
import type { EmailIdentityService } from '../email/index.js';
import type { MessageService } from '../messages/index.js';
import type { NotificationService } from '../notifications.js';
import type { OrganizationService } from '../organizations.js';
import type { StorageService } from '../../storage/index.js';
import type { TicketService } from '../tickets/index.js';
import { SecretSealer } from './crypto.js';
import { ChannelInbound, INBOUND_QUEUE, type InboundJob } from './inbound.js';
import { ChannelDeliveries, DELIVERY_QUEUE, DELIVERY_RETRY_SECONDS, type DeliveryJob } from './outbound.js';
import { InboundMediaStore } from './media.js';
import { InboundProcessor } from './process.js';
import { EmailSender } from './providers/email.js';
import { ChannelProvisioning } from './provisioning.js';
import { SmtpInbound } from './smtpIn.js';
import { SnsInbound } from './sns.js';

export { signInbound, SecretSealer } from './crypto.js';
export { DELIVERY_QUEUE, DELIVERY_RETRY_SECONDS } from './outbound.js';
export { INBOUND_QUEUE } from './inbound.js';
export type { ChannelPatch, VerifyCheck } from './provisioning.js';
export type * from './types.js';

export interface ChannelSettings {
  encryptionKey: Buffer;
  inboundEmailDomain: string;
  smtpInPort: number | null;
  whatsappGraphUrl: string;
  telegramApiUrl: string;
  /** Inbound webhook calls one channel may take per minute on one instance. */
  inboundPerMinute: number;
  /** SES inbound mail through SNS (`POST /channels/inbound`), and which URLs may serve its certificate. */
  sns: { enabled: boolean; certUrlPattern: RegExp; topicArns: string[] | null; maxAgeSeconds: number };
}

export interface ChannelDeps {
  knex: Knex;
  jobs: JobQueue;
  events: DomainEventBus;
  logger: Logger;
  organizations: OrganizationService;
  contacts: ContactService;
  messages: MessageService;
  tickets: TicketService;
  notifications: NotificationService;
  email: EmailIdentityService;
  /** Where inbound attachments and media are kept. */
  storage: StorageService;
  settings: ChannelSettings;
  publicUrl: string;
  smtpUrl: string | null;
  mailFrom: string;
  host: string;
}

export class ChannelService {
  readonly provisioning: ChannelProvisioning;
  readonly inbound: ChannelInbound;
  readonly deliveries: ChannelDeliveries;
  readonly smtpIn: SmtpInbound;
  readonly sns: SnsInbound;
  private readonly emailSender: EmailSender;
  /** The bound SMTP_IN_PORT once started (null when inbound SMTP is off). */
  smtpInPort: number | null = null;

  constructor(private readonly deps: ChannelDeps) {
    const { knex, jobs, settings } = deps;
    const sealer = new SecretSealer(settings.encryptionKey);
    this.provisioning = new ChannelProvisioning({ knex, sealer, organizations: deps.organizations, urls: { publicUrl: deps.publicUrl, inboundEmailDomain: settings.inboundEmailDomain, telegramApiUrl: settings.telegramApiUrl }, events: deps.events });
    this.inbound = new ChannelInbound({ knex, jobs, provisioning: this.provisioning, perChannelPerMinute: settings.inboundPerMinute });
    this.emailSender = new EmailSender(deps.smtpUrl);
    this.deliveries = new ChannelDeliveries({
      knex, jobs, events: deps.events, notifications: deps.notifications, provisioning: this.provisioning, email: deps.email, emailSender: this.emailSender,
      mailFrom: deps.mailFrom, whatsappGraphUrl: settings.whatsappGraphUrl, telegramApiUrl: settings.telegramApiUrl, logger: deps.logger,
    });
    const media = new InboundMediaStore({ storage: deps.storage, provisioning: this.provisioning, whatsappGraphUrl: settings.whatsappGraphUrl, telegramApiUrl: settings.telegramApiUrl });
    const processor = new InboundProcessor({ knex, contacts: deps.contacts, messages: deps.messages, tickets: deps.tickets, deliveries: this.deliveries, media });
    this.sns = new SnsInbound({ inbound: this.inbound, channelFor: (address) => this.provisioning.byAddress(address), enabled: settings.sns.enabled, urlPattern: settings.sns.certUrlPattern, topicArns: settings.sns.topicArns, maxAgeSeconds: settings.sns.maxAgeSeconds, logger: deps.logger });
    this.smtpIn = new SmtpInbound({ inbound: this.inbound, domain: settings.inboundEmailDomain, logger: deps.logger });
    // Many at once: the events of one claim are processed together (a few statements for all of them), so they
    // hold few of the pool's connections and leave the rest to the webhooks waiting on one statement for their 200.
    // Under load a claim waits for a quarter of the slots: 16 events or more per statement.
    jobs.define<InboundJob>({ queue: INBOUND_QUEUE, handle: (job) => processor.handle(job), retryDelaysSeconds: [5, 30, 120, 600, 3600], concurrency: 64 });
    jobs.define<DeliveryJob>({ queue: DELIVERY_QUEUE, handle: (job) => this.deliveries.handle(job), retryDelaysSeconds: DELIVERY_RETRY_SECONDS });
    // Replies in channel conversations write their delivery inside the message's transaction.
    deps.messages.channelOutbox = this.deliveries;
  }

  async start(): Promise<void> {
    if (this.deps.settings.sns.enabled && !this.deps.settings.sns.topicArns) this.deps.logger.warn('EMAIL_INBOUND_SNS is on without SNS_TOPIC_ARNS: mail from any SNS topic is taken (refused in production)');
    if (this.deps.settings.smtpInPort !== null) this.smtpInPort = await this.smtpIn.listen(this.deps.settings.smtpInPort, this.deps.host);
  }

  async stop(): Promise<void> {
    await this.smtpIn.close();
    this.emailSender.close();
  }
}
