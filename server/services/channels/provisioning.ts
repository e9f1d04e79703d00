// Creating, changing and removing an organization's channels: credentials sealed at rest, the plan's `channels`
// limit, and the provider handshakes (Telegram's getMe + setWebhook) that make a channel usable.
import { randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { DomainEventBus } from '../../events.js';
import { NotFound, PlanLimitReached, ServiceUnavailable, ValidationFailed } from '../../errors.js';
import type { OrganizationService } from '../organizations.js';
import { withinLimit } from '../plans.js';
import type { SecretSealer } from './crypto.js';
import { presentChannel } from '../../presenters/channel.js';
import { ProviderError } from './providers/errors.js';
import { TelegramApi } from './providers/telegram.js';
import type { ChannelRow, ChannelSecrets, ChannelStatus, ChannelType, EmailSecrets, TelegramSecrets, WhatsAppSecrets } from './types.js';

export interface ChannelUrls {
  publicUrl: string;
  inboundEmailDomain: string;
  telegramApiUrl: string;
}

export interface ChannelPatch {
  name?: string;
  enabled?: boolean;
  botToken?: string;
  accessToken?: string;
  appSecret?: string;
}

export interface VerifyCheck {
  name: string;
  ok: boolean;
  detail?: string;
}

const randomSecret = () => randomBytes(32).toString('base64url');
/** Deliveries failing for good in a row that make a channel `failed` (a refused credential does at once). */
export const CHANNEL_FAILURE_THRESHOLD = 5;
/** How long a webhook may use a channel as read before: a change elsewhere reaches this instance within it. */
const CACHE_MS = 5_000;
const CACHE_SIZE = 10_000;

export class ChannelProvisioning {
  private readonly cache = new Map<string, { value: { channel: ChannelRow; secrets: ChannelSecrets }; at: number }>();
  constructor(private readonly deps: { knex: Knex; sealer: SecretSealer; organizations: OrganizationService; urls: ChannelUrls; events: DomainEventBus }) {}

  inboundUrl(channel: Pick<ChannelRow, 'id' | 'type'>): string {
    return `${this.deps.urls.publicUrl}/api/v1/channels/${channel.type}/inbound/${channel.id}`;
  }

  smtpAddress(channel: Pick<ChannelRow, 'inboundToken'>): string {
    return `in+${channel.inboundToken}@${this.deps.urls.inboundEmailDomain}`;
  }

  secretsOf<T extends ChannelSecrets>(channel: ChannelRow): T {
    return this.deps.sealer.open<T>(channel.secrets);
  }

  async list(orgId: string, opts: { limit: number; offset: number }): Promise<{ channels: ChannelRow[]; total: number }> {
    const base = this.deps.knex('channels').where({ organizationId: orgId });
    const [channels, count] = await Promise.all([base.clone().orderBy('createdAt', 'desc').orderBy('id').limit(opts.limit).offset(opts.offset), base.clone().count<{ count: string }[]>('* as count')]);
    return { channels: channels as ChannelRow[], total: Number(count[0]?.count ?? 0) };
  }

  async get(orgId: string, channelId: string): Promise<ChannelRow> {
    const row = (await this.deps.knex('channels').where({ organizationId: orgId, id: channelId }).first()) as ChannelRow | undefined;
    if (!row) throw new NotFound('Channel');
    return row;
  }

  /** Any organization's channel, for provider webhooks that name only the channel. */
  async byId(channelId: string): Promise<ChannelRow | null> {
    return ((await this.deps.knex('channels').where({ id: channelId }).first()) as ChannelRow | undefined) ?? null;
  }

  /**
   * A channel and its opened secrets as a provider webhook needs them, remembered for a few seconds: a busy channel
   * costs no query and no decryption per call. Changes on this instance apply at once; on others within CACHE_MS.
   */
  async forWebhook<T extends ChannelSecrets>(channelId: string): Promise<{ channel: ChannelRow; secrets: T } | null> {
    const hit = this.cache.get(channelId);
    if (hit && Date.now() - hit.at < CACHE_MS) return hit.value as { channel: ChannelRow; secrets: T };
    const channel = await this.byId(channelId);
    if (!channel) return null;
    const value = { channel, secrets: this.secretsOf<T>(channel) };
    // Bounded: a flood of ids starts it afresh rather than growing it.
    if (this.cache.size >= CACHE_SIZE) this.cache.clear();
    this.cache.set(channelId, { value, at: Date.now() });
    return value;
  }

  /**
   * The email channel mail to `address` is for: `in+<token>@INBOUND_EMAIL_DOMAIN`, else a channel listing the
   * address whose organization has verified the address's domain. Any organization can list any address on its
   * channel, so without that proof the first to list `support@acme.example` would receive Acme's mail.
   */
  async byAddress(address: string): Promise<ChannelRow | null> {
    const token = new RegExp(`^in\\+([0-9a-f]{24})@${this.deps.urls.inboundEmailDomain.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'i').exec(address)?.[1];
    if (token) return this.byInboundToken(token);
    const lower = address.toLowerCase();
    const domain = lower.slice(lower.lastIndexOf('@') + 1);
    if (!domain || !lower.includes('@')) return null;
    const row = (await this.deps.knex('channels as c')
      .join('email_identities as i', 'i.organizationId', 'c.organizationId')
      .where('c.type', 'email')
      .whereRaw(`c.config->'emails' @> ?::jsonb`, [JSON.stringify([lower])])
      .where('i.verifiedDomain', domain)
      .whereNotNull('i.domainVerifiedAt')
      .select('c.*')
      .orderBy('c.createdAt')
      .first()) as ChannelRow | undefined;
    return row ?? null;
  }

  async byInboundToken(token: string): Promise<ChannelRow | null> {
    return ((await this.deps.knex('channels').where({ inboundToken: token.toLowerCase() }).first()) as ChannelRow | undefined) ?? null;
  }

  async createEmail(orgId: string, input: { name: string; address: string; domain?: string }): Promise<{ channel: ChannelRow; secrets: EmailSecrets }> {
    const address = input.address.toLowerCase();
    const domain = (input.domain ?? address.split('@')[1]!).toLowerCase();
    const secrets: EmailSecrets = { signingSecret: randomSecret() };
    const channel = await this.insert(orgId, { type: 'email', name: input.name, status: 'active', config: { address, domain, emails: [address] } }, secrets);
    return { channel, secrets };
  }

  async createTelegram(orgId: string, input: { name: string; botToken: string }): Promise<ChannelRow> {
    await this.assertRoom(orgId);
    const id = randomUUID();
    const secrets: TelegramSecrets = { botToken: input.botToken, webhookSecret: randomSecret() };
    const api = new TelegramApi(this.deps.urls.telegramApiUrl, input.botToken);
    const bot = await api.getMe().catch((err: Error) => {
      throw unreachable(err) ?? new ValidationFailed(`Telegram refused the bot token: ${err.message}`, [{ field: 'botToken', message: 'refused by Telegram' }]);
    });
    await api.setWebhook(this.inboundUrl({ id, type: 'telegram' }), secrets.webhookSecret).catch((err: Error) => {
      throw unreachable(err) ?? new ValidationFailed(`Telegram refused the webhook: ${err.message}`, [{ field: 'botToken', message: 'setWebhook failed' }]);
    });
    return this.insert(orgId, { id, type: 'telegram', name: input.name, status: 'active', config: { botId: bot.id, botUsername: bot.username ?? null } }, secrets);
  }

  async createWhatsApp(orgId: string, input: { name: string; phoneNumberId: string; wabaId: string; accessToken: string; appSecret: string }): Promise<{ channel: ChannelRow; secrets: WhatsAppSecrets }> {
    const secrets: WhatsAppSecrets = { accessToken: input.accessToken, appSecret: input.appSecret, verifyToken: randomSecret() };
    // Pending until Meta calls the verification handshake with the verify token.
    const channel = await this.insert(orgId, { type: 'whatsapp', name: input.name, status: 'pending', config: { phoneNumberId: input.phoneNumberId, wabaId: input.wabaId } }, secrets);
    return { channel, secrets };
  }

  async update(orgId: string, channelId: string, patch: ChannelPatch): Promise<ChannelRow> {
    const channel = await this.get(orgId, channelId);
    const change: Record<string, unknown> = { updatedAt: new Date() };
    if (patch.name !== undefined) change.name = patch.name;
    if (patch.enabled !== undefined) {
      change.enabled = patch.enabled;
      change.status = patch.enabled ? (channel.status === 'disabled' ? (channel.type === 'whatsapp' ? 'pending' : 'active') : channel.status) : 'disabled';
    }
    const credentials = { botToken: patch.botToken, accessToken: patch.accessToken, appSecret: patch.appSecret };
    const given = Object.entries(credentials).filter(([, v]) => v !== undefined);
    if (given.length) {
      const allowed = channel.type === 'telegram' ? ['botToken'] : channel.type === 'whatsapp' ? ['accessToken', 'appSecret'] : [];
      const wrong = given.find(([k]) => !allowed.includes(k));
      if (wrong) throw new ValidationFailed(`A ${channel.type} channel has no ${wrong[0]}`, [{ field: wrong[0], message: 'not for this channel type' }]);
      change.secrets = this.deps.sealer.seal({ ...this.secretsOf(channel), ...Object.fromEntries(given) });
    }
    const [row] = (await this.deps.knex('channels').where({ id: channel.id }).update(change, '*')) as ChannelRow[];
    this.cache.delete(channel.id);
    this.announceStatus(channel.status, row!);
    return row!;
  }

  async setAddresses(orgId: string, channelId: string, emails: string[]): Promise<ChannelRow> {
    const channel = await this.get(orgId, channelId);
    if (channel.type !== 'email') throw new ValidationFailed('Only an email channel has addresses', [{ field: 'emails', message: 'not an email channel' }]);
    const list = [...new Set(emails.map((e) => e.toLowerCase()))];
    const [row] = (await this.deps.knex('channels').where({ id: channel.id }).update({ config: JSON.stringify({ ...channel.config, emails: list }), updatedAt: new Date() }, '*')) as ChannelRow[];
    return row!;
  }

  async remove(orgId: string, channelId: string): Promise<void> {
    const channel = await this.get(orgId, channelId);
    await this.deps.knex('channels').where({ id: channel.id }).delete();
    this.cache.delete(channel.id);
  }

  /** Checks what can be checked from here; Telegram asks getMe again. */
  async verify(orgId: string, channelId: string): Promise<{ status: ChannelStatus; checks: VerifyCheck[]; channel: ChannelRow }> {
    const channel = await this.get(orgId, channelId);
    const checks: VerifyCheck[] = [{ name: 'enabled', ok: channel.enabled }];
    let readable = true;
    try {
      this.secretsOf(channel);
    } catch {
      readable = false;
    }
    checks.push({ name: 'credentials_readable', ok: readable });
    if (channel.type === 'telegram' && readable) {
      const ok = await new TelegramApi(this.deps.urls.telegramApiUrl, this.secretsOf<TelegramSecrets>(channel).botToken).getMe().then(() => true, () => false);
      checks.push({ name: 'bot_token', ok });
    }
    // Failed deliveries do not undo Meta's handshake.
    const handshaken = channel.status === 'active' || !!channel.config.webhookVerifiedAt;
    if (channel.type === 'whatsapp') checks.push({ name: 'webhook_verified', ok: handshaken, ...(handshaken ? {} : { detail: 'Meta has not called the verification handshake yet' }) });
    const status: ChannelStatus = !channel.enabled ? 'disabled' : checks.every((c) => c.ok) ? 'active' : channel.type === 'whatsapp' && readable ? 'pending' : 'failed';
    const failed = checks.find((c) => !c.ok);
    // A passing verification starts the count of failed deliveries afresh.
    const [row] = (await this.deps.knex('channels').where({ id: channel.id }).update({ status, lastError: failed && status === 'failed' ? `check failed: ${failed.name}` : null, consecutiveFailures: status === 'active' ? 0 : channel.consecutiveFailures, updatedAt: new Date() }, '*')) as ChannelRow[];
    this.cache.delete(channel.id);
    this.announceStatus(channel.status, row!);
    return { status, checks, channel: row! };
  }

  async setStatus(channel: ChannelRow, status: ChannelStatus, lastError: string | null = null, config?: Record<string, unknown>): Promise<void> {
    const [row] = (await this.deps.knex('channels').where({ id: channel.id }).update({ status, lastError, updatedAt: new Date(), ...(config ? { config: JSON.stringify(config) } : {}) }, '*')) as ChannelRow[];
    this.cache.delete(channel.id);
    if (row) this.announceStatus(channel.status, row);
  }

  /**
   * A delivery failed for good: one more in a row. A refused credential, or CHANNEL_FAILURE_THRESHOLD in a row,
   * makes the channel `failed` (a disabled one stays disabled).
   */
  async deliveryFailed(channel: ChannelRow, error: string, credentialsRefused: boolean): Promise<void> {
    const { knex } = this.deps;
    const [row] = (await knex('channels').where({ id: channel.id }).update({
      consecutiveFailures: knex.raw('consecutive_failures + 1'),
      status: knex.raw(`case when status <> 'disabled' and (? or consecutive_failures + 1 >= ?) then 'failed' else status end`, [credentialsRefused, CHANNEL_FAILURE_THRESHOLD]),
      lastError: error.slice(0, 500),
      updatedAt: new Date(),
    }, '*')) as ChannelRow[];
    this.cache.delete(channel.id);
    if (row) this.announceStatus(channel.status, row);
  }

  /** A delivery went out: the count starts again, and a `failed` channel is active again. Costs nothing on a healthy channel. */
  async deliverySucceeded(channel: ChannelRow): Promise<void> {
    if (channel.consecutiveFailures === 0 && channel.status !== 'failed') return;
    const { knex } = this.deps;
    const [row] = (await knex('channels').where({ id: channel.id }).update({
      consecutiveFailures: 0,
      status: knex.raw(`case when status = 'failed' then 'active' else status end`),
      lastError: knex.raw(`case when status = 'failed' then null else last_error end`),
      updatedAt: new Date(),
    }, '*')) as ChannelRow[];
    this.cache.delete(channel.id);
    if (row) this.announceStatus(channel.status, row);
  }

  /** Agents hear `channel_status_changed` when a write moved the status (secrets masked, as GET shows them). */
  private announceStatus(previousStatus: ChannelStatus, row: ChannelRow): void {
    if (row.status === previousStatus) return;
    let secrets: ChannelSecrets | null = null;
    try {
      secrets = this.secretsOf(row);
    } catch {
      secrets = null;
    }
    this.deps.events.publish('channel.status_changed', { organizationId: row.organizationId, previousStatus, channel: presentChannel(row, secrets, { webhookUrl: this.inboundUrl(row), ...(row.type === 'email' ? { smtpAddress: this.smtpAddress(row) } : {}) }) });
  }

  private async assertRoom(orgId: string): Promise<void> {
    const { limits, plan } = await this.deps.organizations.entitlements(orgId);
    const [{ count }] = (await this.deps.knex('channels').where({ organizationId: orgId }).count('* as count')) as { count: string }[];
    if (!withinLimit(limits.channels, Number(count))) throw new PlanLimitReached(`The ${plan} plan allows ${limits.channels} channels; upgrade to add more`);
  }

  private async insert(orgId: string, row: { id?: string; type: ChannelType; name: string; status: ChannelStatus; config: Record<string, unknown> }, secrets: ChannelSecrets): Promise<ChannelRow> {
    if (!row.id) await this.assertRoom(orgId);
    const [inserted] = (await this.deps.knex('channels').insert({
      ...(row.id ? { id: row.id } : {}),
      organizationId: orgId, type: row.type, name: row.name, status: row.status, config: JSON.stringify(row.config),
      secrets: this.deps.sealer.seal(secrets), inboundToken: randomBytes(12).toString('hex'),
    }, '*')) as ChannelRow[];
    return inserted!;
  }
}

/**
 * Telegram down, slow or busy (network failure, timeout, 429, 5xx) says nothing about the token: 503, to try again,
 * rather than a 400 that would send the admin looking for a mistake in it.
 */
function unreachable(err: Error): ServiceUnavailable | null {
  return err instanceof ProviderError && err.retryable ? new ServiceUnavailable('Telegram could not be reached; try again in a moment') : null;
}
