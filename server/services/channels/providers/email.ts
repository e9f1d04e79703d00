// Email: reading an inbound mail (MIME, or the JSON a mail provider posts) and sending a reply over SMTP, threaded.
import { createHash } from 'node:crypto';
import { simpleParser, type AddressObject } from 'mailparser';
import nodemailer, { type Transporter } from 'nodemailer';
import addressparser from 'nodemailer/lib/addressparser';
import type { InboundMedia, InboundMessage } from '../types.js';
import { PROVIDER_TIMEOUT_MS, ProviderError } from './errors.js';

export interface InboundJsonMail {
  from?: unknown;
  to?: unknown;
  subject?: unknown;
  text?: unknown;
  html?: unknown;
  messageId?: unknown;
  inReplyTo?: unknown;
  references?: unknown;
  /** `[{fileName, mimeType, content}]`, content in base64. */
  attachments?: unknown;
}

const str = (v: unknown): string | null => (typeof v === 'string' && v.trim() ? v.trim() : null);
const ids = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : typeof v === 'string' ? v.split(/\s+/) : []).map((x) => x.trim()).filter(Boolean);
const stripHtml = (html: string) => html.replace(/<style[\s\S]*?<\/style>|<script[\s\S]*?<\/script>/gi, '').replace(/<br\s*\/?>|<\/p>/gi, '\n').replace(/<[^>]+>/g, '').replace(/\n{3,}/g, '\n\n').trim();

/**
 * The first mailbox of a From value, by nodemailer's parser (the one MIME mail gets through mailparser): quotes and
 * comments in the name (`Sales "EU" <a@b>`, `a@b (Ann)`) stay out of the address. A value naming no address is none.
 */
function mailbox(value: string): { address: string; name: string | null } | null {
  const first = addressparser(value, { flatten: true }).find((a) => a.address.includes('@'));
  return first ? { address: first.address.toLowerCase(), name: first.name.trim() || null } : null;
}

/** Without a Message-ID, the same bytes are the same mail. */
const contentId = (raw: Buffer) => `<sha256-${createHash('sha256').update(raw).digest('hex')}@inbound>`;

function jsonAttachments(value: unknown): InboundMedia[] {
  if (!Array.isArray(value)) return [];
  return value.flatMap((a: Record<string, unknown> | null, i): InboundMedia[] => {
    // Anything but an object has no `content`: skipped like an entry without it.
    const data = str(a?.content);
    return data ? [{ source: 'inline', fileName: str(a!.fileName) ?? `attachment-${i + 1}`, mimeType: str(a!.mimeType) ?? 'application/octet-stream', data }] : [];
  });
}

export function mailFromJson(body: InboundJsonMail, raw: Buffer): InboundMessage | null {
  const from = str(body.from);
  const who = from ? mailbox(from) : null;
  if (!who) return null;
  const text = str(body.text) ?? (str(body.html) ? stripHtml(String(body.html)) : '');
  const media = jsonAttachments(body.attachments);
  return {
    kind: 'message', from: who.address, fromName: who.name, subject: str(body.subject), text: text || (media.length ? '' : '(no text)'), messageId: str(body.messageId) ?? contentId(raw), inReplyTo: str(body.inReplyTo), references: ids(body.references),
    ...(media.length ? { media } : {}),
  };
}

export async function mailFromMime(raw: Buffer): Promise<InboundMessage | null> {
  const parsed = await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true });
  const from = (parsed.from as AddressObject | undefined)?.value[0];
  if (!from?.address) return null;
  const text = parsed.text?.trim() || (parsed.html ? stripHtml(parsed.html) : '');
  // Images the HTML part shows inline (related) are part of the text, not files the customer sent.
  const media: InboundMedia[] = parsed.attachments
    .filter((a) => !a.related)
    .map((a, i) => ({ source: 'inline', fileName: a.filename || `attachment-${i + 1}`, mimeType: a.contentType || 'application/octet-stream', data: a.content.toString('base64') }));
  return {
    kind: 'message', from: from.address.toLowerCase(), fromName: from.name || null, subject: parsed.subject ?? null, text: text || (media.length ? '' : '(no text)'),
    messageId: parsed.messageId ?? contentId(raw), inReplyTo: parsed.inReplyTo ?? null, references: ids(parsed.references),
    ...(media.length ? { media } : {}),
  };
}

export interface OutgoingMail {
  from: { name: string; address: string };
  replyTo?: string;
  to: string;
  subject: string;
  text: string;
  messageId: string;
  inReplyTo?: string;
  references?: string[];
  /** The organization's DKIM key when its domain is verified. */
  dkim?: { domainName: string; keySelector: string; privateKey: string };
}

/** SMTP delivery for channel replies: 4xx and connection trouble retry, 5xx is final. */
export class EmailSender {
  private readonly transport: Transporter | null;

  constructor(smtpUrl: string | null) {
    // Timeouts in the URL's query (nodemailer reads them there), so a stuck server cannot hold a worker.
    const url = smtpUrl ? new URL(smtpUrl) : null;
    if (url && !url.searchParams.has('socketTimeout')) url.searchParams.set('socketTimeout', String(PROVIDER_TIMEOUT_MS));
    if (url && !url.searchParams.has('connectionTimeout')) url.searchParams.set('connectionTimeout', String(PROVIDER_TIMEOUT_MS));
    this.transport = url ? nodemailer.createTransport(url.toString()) : null;
  }

  async send(mail: OutgoingMail): Promise<string> {
    if (!this.transport) throw new ProviderError('no SMTP_URL is configured', false);
    try {
      await this.transport.sendMail({ ...mail, references: mail.references?.length ? mail.references : undefined });
    } catch (err) {
      const { responseCode: code, code: kind } = err as { responseCode?: number; code?: string };
      // 530/535 and nodemailer's EAUTH: the SMTP server refused our login, which no retry fixes.
      const refused = kind === 'EAUTH' || code === 530 || code === 535;
      throw new ProviderError(`SMTP: ${err instanceof Error ? err.message.slice(0, 200) : 'failed'}`, !refused && (code === undefined || code < 500), undefined, 'failed', refused);
    }
    return mail.messageId;
  }

  close(): void {
    this.transport?.close();
  }
}
