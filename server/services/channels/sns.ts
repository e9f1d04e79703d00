// Amazon SES inbound mail delivered by SNS (`POST /channels/inbound`): the SNS message's signature is checked with
// its signing certificate (SignatureVersion 1: SHA1withRSA, 2: SHA256withRSA), fetched only from an allowed URL
// (https://sns.<region>.amazonaws.com/ by default) and kept per URL; a subscription is confirmed by calling its
// SubscribeURL (same rule); a notification's mail is parsed and stored on the email channel it was addressed to.
import { createPublicKey, createVerify, type KeyObject } from 'node:crypto';
import { Forbidden, NotFound, Unauthorized, ValidationFailed } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { ChannelInbound, StoredInbound } from './inbound.js';
import { mailFromMime } from './providers/email.js';
import { PROVIDER_TIMEOUT_MS } from './providers/errors.js';
import type { ChannelRow } from './types.js';

export interface SnsMessage {
  Type?: string;
  MessageId?: string;
  Token?: string;
  TopicArn?: string;
  Subject?: string;
  Message?: string;
  Timestamp?: string;
  SignatureVersion?: string;
  Signature?: string;
  SigningCertURL?: string;
  SubscribeURL?: string;
}

interface SesNotification {
  notificationType?: string;
  mail?: { destination?: string[] };
  receipt?: { recipients?: string[]; action?: { type?: string; encoding?: string } };
  content?: string;
}

/** How far ahead of our clock a Timestamp may be. */
const CLOCK_SKEW_SECONDS = 300;

const str = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

/** The string SNS signs: the listed keys of this message type, each as "Key\nValue\n", in this order. */
function stringToSign(m: SnsMessage): string | null {
  const keys = m.Type === 'Notification'
    ? ['Message', 'MessageId', ...(m.Subject !== undefined ? ['Subject'] : []), 'Timestamp', 'TopicArn', 'Type']
    : m.Type === 'SubscriptionConfirmation' || m.Type === 'UnsubscribeConfirmation'
      ? ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type']
      : null;
  if (!keys) return null;
  let out = '';
  for (const k of keys) {
    const v = m[k as keyof SnsMessage];
    if (typeof v !== 'string') return null;
    out += `${k}\n${v}\n`;
  }
  return out;
}

export class SnsInbound {
  private readonly certificates = new Map<string, Promise<KeyObject>>();

  constructor(private readonly deps: {
    inbound: ChannelInbound;
    /** The email channel a recipient address names (in+<token>@INBOUND_EMAIL_DOMAIN or one of its addresses). */
    channelFor: (address: string) => Promise<ChannelRow | null>;
    enabled: boolean;
    urlPattern: RegExp;
    /** The topics taken (null: any). */
    topicArns: string[] | null;
    /** Oldest a message may be, by its signed Timestamp. */
    maxAgeSeconds: number;
    logger: Logger;
  }) {}

  async receive(raw: Buffer): Promise<StoredInbound & { confirmed?: boolean }> {
    if (!this.deps.enabled) throw new NotFound();
    let message: SnsMessage;
    try {
      message = JSON.parse(raw.toString('utf8')) as SnsMessage;
    } catch {
      throw new Unauthorized('Not a signed SNS message');
    }
    this.checkAge(message);
    await this.verify(message);
    // Authentic, but whose? Any AWS account can publish signed messages: only the operator's topics are taken, and
    // a subscription of any other topic is never confirmed.
    if (this.deps.topicArns && !this.deps.topicArns.includes(message.TopicArn ?? '')) throw new Forbidden('This SNS topic is not one this server takes mail from');
    if (message.Type === 'SubscriptionConfirmation') {
      await this.confirm(message);
      return { stored: 0, duplicates: 0, confirmed: true };
    }
    if (message.Type !== 'Notification') return { stored: 0, duplicates: 0 };
    return this.notification(message);
  }

  /** A replayed message is refused once it is older than the window (or dated more than 5 minutes ahead). */
  private checkAge(m: SnsMessage): void {
    const at = str(m.Timestamp) ? Date.parse(m.Timestamp) : NaN;
    const age = (Date.now() - at) / 1000;
    if (!Number.isFinite(age) || age > this.deps.maxAgeSeconds || age < -CLOCK_SKEW_SECONDS) throw new Unauthorized(`The SNS message's Timestamp is missing or outside its ${this.deps.maxAgeSeconds}-second window`);
  }

  /** Signature over the canonical string with the certificate at an allowed URL; anything else is 401. */
  private async verify(m: SnsMessage): Promise<void> {
    const canonical = stringToSign(m);
    const algorithm = m.SignatureVersion === '1' ? 'RSA-SHA1' : m.SignatureVersion === '2' ? 'RSA-SHA256' : null;
    if (!canonical || !algorithm || !str(m.Signature) || !str(m.SigningCertURL) || !this.allowed(m.SigningCertURL)) throw new Unauthorized('The SNS signature is missing or not verifiable');
    let key: KeyObject;
    try {
      key = await this.certificate(m.SigningCertURL);
    } catch (err) {
      this.deps.logger.warn({ err: (err as Error).message }, 'could not fetch the SNS signing certificate');
      throw new Unauthorized('The SNS signing certificate could not be fetched');
    }
    const ok = createVerify(algorithm).update(canonical, 'utf8').verify(key, m.Signature, 'base64');
    if (!ok) throw new Unauthorized('The SNS signature is wrong');
  }

  private allowed(url: string): boolean {
    return this.deps.urlPattern.test(url);
  }

  private certificate(url: string): Promise<KeyObject> {
    let pending = this.certificates.get(url);
    if (!pending) {
      pending = (async () => {
        const res = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS) });
        if (!res.ok) throw new Error(`certificate answered ${res.status}`);
        return createPublicKey(await res.text());
      })();
      // A failed fetch is tried again next time, not remembered.
      pending.catch(() => this.certificates.delete(url));
      if (this.certificates.size >= 100) this.certificates.clear();
      this.certificates.set(url, pending);
    }
    return pending;
  }

  private async confirm(m: SnsMessage): Promise<void> {
    const subscribeUrl = m.SubscribeURL;
    if (!str(subscribeUrl) || !this.allowed(subscribeUrl)) throw new ValidationFailed('The SubscribeURL is not an SNS URL', [{ field: 'SubscribeURL', message: 'not allowed' }]);
    // A redirect, a refused connection or a timeout is the confirmation failing, like an error status: 400, not 500.
    const res = await fetch(subscribeUrl, { redirect: 'error', signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS) }).catch(() => null);
    if (!res) throw new ValidationFailed('Confirming the subscription failed: its SubscribeURL could not be reached', [{ field: 'SubscribeURL', message: 'confirmation failed' }]);
    if (!res.ok) throw new ValidationFailed(`Confirming the subscription answered ${res.status}`, [{ field: 'SubscribeURL', message: 'confirmation failed' }]);
    this.deps.logger.info({ topic: m.TopicArn }, 'SNS subscription confirmed');
  }

  /** SES's "Received" notification with the mail's content (the SNS action): stored on the channel it was sent to. */
  private async notification(m: SnsMessage): Promise<StoredInbound> {
    let ses: SesNotification;
    try {
      ses = JSON.parse(m.Message!) as SesNotification;
    } catch {
      throw new ValidationFailed('The SNS message is not an SES notification', [{ field: 'Message', message: 'invalid JSON' }]);
    }
    if (ses.notificationType !== 'Received' || !str(ses.content)) return { stored: 0, duplicates: 0 };
    const recipients = [...(ses.receipt?.recipients ?? []), ...(ses.mail?.destination ?? [])].filter(str);
    let channel: ChannelRow | null = null;
    for (const address of recipients) {
      channel = await this.deps.channelFor(address.toLowerCase());
      if (channel) break;
    }
    // Mail for an address no channel takes is acknowledged (SNS would only send it again), not stored.
    if (!channel || !channel.enabled) return { stored: 0, duplicates: 0 };
    const bytes = ses.receipt?.action?.encoding === 'BASE64' ? Buffer.from(ses.content, 'base64') : Buffer.from(ses.content, 'utf8');
    const mail = await mailFromMime(bytes);
    if (!mail) throw new ValidationFailed('The mail has no sender address', [{ field: 'from', message: 'is required' }]);
    return this.deps.inbound.store(channel, [{ providerId: mail.messageId!, payload: mail }]);
  }
}
