// What providers deliver: checked (channel, signature over the raw bytes, rate) before anything is parsed or stored,
// then stored once per provider message id, with the job that processes it, by one statement; the 200 follows the commit.
// Webhooks arriving together are stored together: one statement and one commit for all of them.
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { Forbidden, NotFound, RateLimited, Unauthorized, ValidationFailed } from '../../errors.js';
import type { JobQueue } from '../../jobs/index.js';
import { tickBatch } from '../../jobs/tickBatch.js';
import { safeEqualText, verifyHubSignature, verifyInboundSignature } from './crypto.js';
import type { ChannelProvisioning } from './provisioning.js';
import { mailFromJson, mailFromMime, type InboundJsonMail } from './providers/email.js';
import { telegramMessage, type TelegramUpdate } from './providers/telegram.js';
import { whatsappEvents, type WhatsAppWebhook } from './providers/whatsapp.js';
import type { ChannelRow, ChannelSecrets, ChannelType, EmailSecrets, InboundPayload, TelegramSecrets, WhatsAppSecrets } from './types.js';

export const INBOUND_QUEUE = 'channel-inbound';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The events one job processes: those of one organization stored by one statement (`eventId`: one event, as jobs written before were). */
export interface InboundJob {
  eventIds?: string[];
  eventId?: string;
}

export interface StoredInbound {
  stored: number;
  duplicates: number;
}

/** One webhook's rows to store, each with the id it gets when it is new. */
type EventRows = { id: string; organizationId: string; channelId: string; providerId: string; kind: string; payload: string }[];

/** Statements storing webhooks at once: the webhooks that arrive meanwhile wait and go together in the next one. */
const STORE_IN_FLIGHT = 4;
/** Webhooks stored by one statement at most. */
const STORE_BATCH = 100;
/** Stored events are claimed this much later at most, with the others stored meanwhile: one claim for a burst. */
const WAKE_WITHIN_MS = 20;

function parseJson<T>(raw: Buffer): T {
  try {
    return JSON.parse(raw.toString('utf8')) as T;
  } catch {
    throw new ValidationFailed('The body is not valid JSON', [{ field: 'body', message: 'invalid JSON' }]);
  }
}

export class ChannelInbound {
  private readonly limiter: RateLimiterMemory;

  /**
   * Group commit: the webhooks of one turn, and those that arrive while STORE_IN_FLIGHT such statements run, are
   * stored by one statement, so under load a commit (and its WAL flush) carries many events, and each webhook still
   * answers only after its own rows committed. Answers, per webhook, the ids of its rows that were new (or the error
   * of its own rows, when a batch failed).
   */
  private readonly storeTogether = tickBatch((webhooks: EventRows[]) => this.storeAll(webhooks), { inFlight: STORE_IN_FLIGHT, max: STORE_BATCH });

  constructor(private readonly deps: { knex: Knex; jobs: JobQueue; provisioning: ChannelProvisioning; perChannelPerMinute: number }) {
    // Per instance: a provider's burst at one channel cannot crowd out the others on this instance.
    this.limiter = new RateLimiterMemory({ points: deps.perChannelPerMinute, duration: 60, keyPrefix: 'channel-inbound' });
  }

  /** The enabled channel of this type with its secrets, else 404 (an unknown, disabled or other-type channel looks the same). */
  private async webhookChannel<T extends ChannelSecrets>(channelId: string, type: ChannelType): Promise<{ channel: ChannelRow; secrets: T }> {
    const found = UUID.test(channelId) ? await this.deps.provisioning.forWebhook<T>(channelId) : null;
    if (!found || found.channel.type !== type || !found.channel.enabled) throw new NotFound('Channel');
    return found;
  }

  private async consume(channelId: string): Promise<void> {
    try {
      await this.limiter.consume(channelId);
    } catch (err) {
      if (err instanceof RateLimiterRes) throw new RateLimited(err.msBeforeNext / 1000);
      throw err;
    }
  }

  async email(channelId: string, signature: string, raw: Buffer, contentType: string): Promise<StoredInbound> {
    const { channel, secrets } = await this.webhookChannel<EmailSecrets>(channelId, 'email');
    if (!signature || !verifyInboundSignature(signature, secrets.signingSecret, raw)) throw new Unauthorized('The X-Inbound-Signature is missing, wrong or outside its 5-minute window');
    await this.consume(channel.id);
    const mail = /json/i.test(contentType) ? mailFromJson(parseJson<InboundJsonMail>(raw), raw) : await mailFromMime(raw);
    if (!mail) throw new ValidationFailed('The mail has no sender address', [{ field: 'from', message: 'is required' }]);
    return this.store(channel, [{ providerId: mail.messageId!, payload: mail }]);
  }

  /** Mail that arrived over SMTP for in+<token>@INBOUND_EMAIL_DOMAIN (the SMTP session already accepted it). */
  async smtp(token: string, raw: Buffer): Promise<StoredInbound | null> {
    const channel = await this.deps.provisioning.byInboundToken(token);
    if (!channel || channel.type !== 'email' || !channel.enabled) return null;
    const mail = await mailFromMime(raw);
    if (!mail) return null;
    return this.store(channel, [{ providerId: mail.messageId!, payload: mail }]);
  }

  async telegram(channelId: string, secretToken: string, raw: Buffer): Promise<StoredInbound> {
    const { channel, secrets } = await this.webhookChannel<TelegramSecrets>(channelId, 'telegram');
    if (!secretToken || !safeEqualText(secretToken, secrets.webhookSecret)) throw new Unauthorized('The X-Telegram-Bot-Api-Secret-Token is missing or wrong');
    await this.consume(channel.id);
    const update = parseJson<TelegramUpdate>(raw);
    if (typeof update.update_id !== 'number') throw new ValidationFailed('An Update has an update_id', [{ field: 'update_id', message: 'is required' }]);
    const message = telegramMessage(update);
    // Updates we do not take are still acknowledged, else Telegram would send them again and again.
    return message ? this.store(channel, [{ providerId: String(update.update_id), payload: message }]) : { stored: 0, duplicates: 0 };
  }

  /** Meta's subscription handshake: echo the challenge when the verify token is ours; the channel becomes active. */
  async whatsappHandshake(channelId: string, mode: string | undefined, verifyToken: string | undefined, challenge: string | undefined): Promise<string> {
    // Read afresh: the handshake changes the channel's status.
    const channel = await this.deps.provisioning.byId(channelId).then((c) => (c && c.type === 'whatsapp' && c.enabled ? c : null));
    if (!channel) throw new NotFound('Channel');
    if (mode !== 'subscribe' || !verifyToken || !safeEqualText(verifyToken, this.deps.provisioning.secretsOf<WhatsAppSecrets>(channel).verifyToken)) throw new Forbidden('The verify token is wrong');
    // Remembered apart from the status, which failed deliveries may change later.
    if (channel.status !== 'active' || !channel.config.webhookVerifiedAt) await this.deps.provisioning.setStatus(channel, 'active', null, { ...channel.config, webhookVerifiedAt: channel.config.webhookVerifiedAt ?? new Date().toISOString() });
    return challenge ?? '';
  }

  async whatsapp(channelId: string, signature: string, raw: Buffer): Promise<StoredInbound> {
    const { channel, secrets } = await this.webhookChannel<WhatsAppSecrets>(channelId, 'whatsapp');
    if (!signature || !verifyHubSignature(signature, secrets.appSecret, raw)) throw new Unauthorized('The X-Hub-Signature-256 is missing or wrong');
    await this.consume(channel.id);
    return this.store(channel, whatsappEvents(parseJson<WhatsAppWebhook>(raw)));
  }

  /**
   * Each event once per (channel, provider id): a provider's redelivery is a no-op that still answers 200. The
   * events and their processing jobs go in one statement (one round trip, atomic), shared with the other webhooks
   * arriving meanwhile, so the 200 waits for nothing else.
   */
  async store(channel: ChannelRow, events: { providerId: string; payload: InboundPayload }[]): Promise<StoredInbound> {
    if (events.length === 0) return { stored: 0, duplicates: 0 };
    // One row per provider id even within a single call (a webhook listing the same status twice).
    const unique = [...new Map(events.map((e) => [e.providerId.slice(0, 998), e])).entries()];
    const rows = unique.map(([providerId, e]) => ({ id: randomUUID(), organizationId: channel.organizationId, channelId: channel.id, providerId, kind: e.payload.kind, payload: JSON.stringify(e.payload) }));
    const inserted = await this.storeTogether(rows);
    if (inserted instanceof Error) throw inserted;
    return { stored: inserted.length, duplicates: events.length - inserted.length };
  }

  /**
   * Stores the rows of several webhooks in one statement. An event that two of them carry (a provider's redelivery
   * racing the first delivery) belongs to the first; the other finds it stored. When the statement fails, each
   * webhook is stored on its own, so a bad one fails alone.
   */
  private async storeAll(webhooks: EventRows[]): Promise<(string[] | Error)[]> {
    const owners = new Map<string, string>();
    const rows: EventRows = [];
    for (const webhook of webhooks) {
      for (const row of webhook) {
        const key = `${row.channelId}\n${row.providerId}`;
        if (owners.has(key)) continue;
        owners.set(key, row.id);
        rows.push(row);
      }
    }
    try {
      // One processing job per organization of the statement: the events stored together are processed together.
      const inserted = new Set(await this.deps.jobs.insertWithJobs('inbound_events', rows, ['channel_id', 'provider_id'], INBOUND_QUEUE, 'eventIds', WAKE_WITHIN_MS));
      return webhooks.map((webhook) => webhook.filter((row) => inserted.has(row.id)).map((row) => row.id));
    } catch (err) {
      if (webhooks.length === 1) return [err instanceof Error ? err : new Error(String(err))];
      return Promise.all(webhooks.map(async (webhook) => (await this.storeAll([webhook]))[0]!));
    }
  }
}
