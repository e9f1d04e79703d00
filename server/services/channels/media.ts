// Files of inbound messages into storage: a mail's attachments from the stored event, WhatsApp and Telegram media
// fetched from the provider. A file that cannot be fetched or is not allowed becomes a note on the message, so the
// message itself is never lost.
import { createHash } from 'node:crypto';
import type { StorageService } from '../../storage/index.js';
import { MESSAGE_ATTACHMENTS_MAX } from '../../limits.js';
import { PURPOSE_RULES } from '../../storage/rules.js';
import type { ChannelProvisioning } from './provisioning.js';
import { TelegramApi } from './providers/telegram.js';
import { fetchWhatsAppMedia } from './providers/whatsapp.js';
import type { ChannelRow, InboundMedia, TelegramSecrets, WhatsAppSecrets } from './types.js';

export interface StoredMedia {
  objectIds: string[];
  /** Only images: the message shows as an image message. */
  images: boolean;
  /** One line per file that was not stored, and why. */
  notes: string[];
}

const MAX_BYTES = PURPOSE_RULES.channel_media.maxBytes;

/** The same id for the same file of the same event, so a processing job that runs twice stores each file once. */
function objectId(eventId: string, index: number): string {
  const h = createHash('sha256').update(`${eventId}:${index}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

const extensionTypes: Record<string, string> = { jpg: 'image/jpeg', jpeg: 'image/jpeg', png: 'image/png', gif: 'image/gif', webp: 'image/webp', pdf: 'application/pdf', txt: 'text/plain', ogg: 'audio/ogg', mp3: 'audio/mpeg', mp4: 'video/mp4' };

export class InboundMediaStore {
  constructor(private readonly deps: { storage: StorageService; provisioning: ChannelProvisioning; whatsappGraphUrl: string; telegramApiUrl: string }) {}

  async store(channel: ChannelRow, eventId: string, media: InboundMedia[]): Promise<StoredMedia> {
    const out: StoredMedia = { objectIds: [], images: true, notes: [] };
    for (const [index, item] of media.entries()) {
      const label = item.fileName ?? `file ${index + 1}`;
      if (index >= MESSAGE_ATTACHMENTS_MAX) {
        out.notes.push(`[${label} was not stored: at most ${MESSAGE_ATTACHMENTS_MAX} files per message]`);
        continue;
      }
      try {
        const { bytes, mimeType } = await this.bytesOf(channel, item);
        const fileName = item.fileName ?? `${item.source}-${index + 1}.${(mimeType.split('/')[1] ?? 'bin').replace(/[^a-z0-9]/g, '')}`;
        const object = await this.deps.storage.storeReceived(channel.organizationId, { id: objectId(eventId, index), purpose: 'channel_media', fileName, mimeType, bytes });
        out.objectIds.push(object.id);
        if (!object.mimeType.startsWith('image/')) out.images = false;
      } catch (err) {
        out.notes.push(`[${label} was not stored: ${err instanceof Error ? err.message.slice(0, 200) : 'failed'}]`);
      }
    }
    return out;
  }

  private async bytesOf(channel: ChannelRow, item: InboundMedia): Promise<{ bytes: Buffer; mimeType: string }> {
    const guess = (fetched: string | null) => item.mimeType ?? fetched ?? extensionTypes[(item.fileName ?? '').split('.').pop()?.toLowerCase() ?? ''] ?? 'application/octet-stream';
    if (item.source === 'inline') return { bytes: Buffer.from(item.data, 'base64'), mimeType: guess(null) };
    if (item.source === 'whatsapp') {
      const { accessToken } = this.deps.provisioning.secretsOf<WhatsAppSecrets>(channel);
      const got = await fetchWhatsAppMedia(this.deps.whatsappGraphUrl, accessToken, item.mediaId, MAX_BYTES);
      return { bytes: got.bytes, mimeType: guess(got.mimeType) };
    }
    const { botToken } = this.deps.provisioning.secretsOf<TelegramSecrets>(channel);
    return { bytes: await new TelegramApi(this.deps.telegramApiUrl, botToken).fileBytes(item.fileId, MAX_BYTES), mimeType: guess(null) };
  }
}
