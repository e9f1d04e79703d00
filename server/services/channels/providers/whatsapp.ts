// WhatsApp Cloud API: sending a text through the Graph API and reading the webhook's messages and statuses.
import type { InboundMedia, InboundMessage, InboundStatus } from '../types.js';
import { download, failureOf, postJson, PROVIDER_TIMEOUT_MS, ProviderError } from './errors.js';

interface WhatsAppValue {
  contacts?: { wa_id?: string; profile?: { name?: string } }[];
  messages?: ({ id?: string; from?: string; type?: string; text?: { body?: string } } & Partial<Record<string, WhatsAppMediaRef | unknown>>)[];
  statuses?: { id?: string; status?: string; errors?: { code?: number; title?: string }[] }[];
}
export interface WhatsAppWebhook {
  entry?: { changes?: { value?: WhatsAppValue }[] }[];
}

interface WhatsAppMediaRef {
  id?: string;
  mime_type?: string;
  filename?: string;
  caption?: string;
}
const MEDIA_TYPES = new Set(['image', 'document', 'audio', 'video', 'sticker']);

/** Meta's error codes for a free-form message outside the 24-hour customer service window. */
const OUTSIDE_WINDOW_CODES = new Set([131047, 131026]);

/** Every message and status in one webhook call, each with the id it is deduplicated by (wamid). */
export function whatsappEvents(body: WhatsAppWebhook): { providerId: string; payload: InboundMessage | InboundStatus }[] {
  const out: { providerId: string; payload: InboundMessage | InboundStatus }[] = [];
  for (const entry of body.entry ?? []) {
    for (const change of entry.changes ?? []) {
      const value = change.value ?? {};
      const names = new Map((value.contacts ?? []).map((c) => [c.wa_id, c.profile?.name ?? null]));
      for (const m of value.messages ?? []) {
        if (!m.id || !m.from) continue;
        const ref = m.type && MEDIA_TYPES.has(m.type) ? (m[m.type] as WhatsAppMediaRef | undefined) : undefined;
        const media: InboundMedia[] = ref?.id ? [{ source: 'whatsapp', mediaId: ref.id, fileName: ref.filename ?? null, mimeType: ref.mime_type ?? null }] : [];
        const text = m.type === 'text' || m.text ? (m.text?.body ?? '') : media.length ? (ref?.caption ?? '') : `[${m.type ?? 'unsupported'} message]`;
        if (!text && !media.length) continue;
        out.push({ providerId: m.id, payload: { kind: 'message', from: m.from, fromName: names.get(m.from) ?? null, subject: null, text, messageId: m.id, inReplyTo: null, references: [], ...(media.length ? { media } : {}) } });
      }
      for (const s of value.statuses ?? []) {
        if (!s.id || !['sent', 'delivered', 'read', 'failed'].includes(s.status ?? '')) continue;
        const error = s.errors?.[0] ? `${s.errors[0].code ?? ''} ${s.errors[0].title ?? ''}`.trim() : null;
        out.push({ providerId: `${s.id}:${s.status}`, payload: { kind: 'status', providerMessageId: s.id, status: s.status as InboundStatus['status'], error } });
      }
    }
  }
  return out;
}

/** A media file's bytes: its URL from the Graph API, then the file itself, both with the access token (failures: see `download`). */
export async function fetchWhatsAppMedia(graphUrl: string, accessToken: string, mediaId: string, maxBytes: number): Promise<{ bytes: Buffer; mimeType: string | null }> {
  const headers = { authorization: `Bearer ${accessToken}` };
  const meta = await fetch(`${graphUrl}/${encodeURIComponent(mediaId)}`, { headers, signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS) });
  if (!meta.ok) throw new Error(`the Graph API answered ${meta.status} for the media`);
  const info = (await meta.json()) as { url?: string; mime_type?: string; file_size?: number };
  if (!info.url) throw new Error('the Graph API gave no media URL');
  if (typeof info.file_size === 'number' && info.file_size > maxBytes) throw new Error(`the file has ${info.file_size} bytes, more than ${maxBytes}`);
  return { bytes: await download(info.url, headers, maxBytes), mimeType: info.mime_type ?? null };
}

/** Sends a text; answers the wamid. */
export async function sendWhatsAppText(graphUrl: string, phoneNumberId: string, accessToken: string, to: string, text: string): Promise<string> {
  const { status, json, retryAfter } = await postJson(`${graphUrl}/${encodeURIComponent(phoneNumberId)}/messages`, { messaging_product: 'whatsapp', recipient_type: 'individual', to, type: 'text', text: { body: text } }, { authorization: `Bearer ${accessToken}` });
  const error = json.error as { code?: number; message?: string } | undefined;
  if (error?.code !== undefined && OUTSIDE_WINDOW_CODES.has(error.code)) throw new ProviderError(`outside the 24-hour window: ${error.message ?? ''}`.trim(), false, undefined, 'outside_window');
  const failure = failureOf(status, error?.message ?? 'error', retryAfter);
  if (failure) throw failure;
  const id = (json.messages as { id?: string }[] | undefined)?.[0]?.id;
  if (!id) throw new ProviderError('the Graph API answered without a message id', false);
  return id;
}
