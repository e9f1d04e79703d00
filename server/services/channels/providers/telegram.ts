// Telegram Bot API: the calls a channel makes (getMe, setWebhook, sendMessage) and reading an inbound Update.
import type { InboundMedia, InboundMessage } from '../types.js';
import { download, failureOf, postJson, ProviderError } from './errors.js';

interface TelegramFileRef {
  file_id?: string;
  file_name?: string;
  mime_type?: string;
}

export interface TelegramUpdate {
  update_id?: number;
  message?: {
    message_id?: number;
    from?: { id?: number; first_name?: string; last_name?: string; username?: string };
    chat?: { id?: number | string };
    text?: string;
    caption?: string;
    /** Sizes of one photo, smallest first. */
    photo?: TelegramFileRef[];
    document?: TelegramFileRef;
    audio?: TelegramFileRef;
    video?: TelegramFileRef;
    voice?: TelegramFileRef;
  };
}

export class TelegramApi {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
  ) {}

  private async call<T>(method: string, body: Record<string, unknown>): Promise<T> {
    const { status, json, retryAfter } = await postJson(`${this.baseUrl}/bot${this.token}/${method}`, body);
    const parameters = json.parameters as { retry_after?: number } | undefined;
    const failure = failureOf(status, String(json.description ?? 'error'), retryAfter ?? parameters?.retry_after);
    if (failure) throw failure;
    if (json.ok !== true) throw new ProviderError(String(json.description ?? 'Telegram answered not ok'), false);
    return json.result as T;
  }

  getMe(): Promise<{ id: number; username?: string }> {
    return this.call('getMe', {});
  }

  setWebhook(url: string, secretToken: string): Promise<boolean> {
    return this.call('setWebhook', { url, secret_token: secretToken, allowed_updates: ['message'] });
  }

  /** A file's bytes: getFile for its path, then the file from the Bot API's file host (failures: see `download`). */
  async fileBytes(fileId: string, maxBytes: number): Promise<Buffer> {
    const file = await this.call<{ file_path?: string; file_size?: number }>('getFile', { file_id: fileId });
    if (!file.file_path) throw new Error('Telegram gave no file path');
    if (typeof file.file_size === 'number' && file.file_size > maxBytes) throw new Error(`the file has ${file.file_size} bytes, more than ${maxBytes}`);
    return download(`${this.baseUrl}/file/bot${this.token}/${file.file_path}`, {}, maxBytes);
  }

  async sendMessage(chatId: string, text: string): Promise<string> {
    const sent = await this.call<{ message_id: number }>('sendMessage', { chat_id: chatId, text });
    return String(sent.message_id);
  }
}

/** The message of an Update (null for kinds we do not take: edits, callbacks, messages without text). */
export function telegramMessage(update: TelegramUpdate): InboundMessage | null {
  const m = update.message;
  if (!m || m.chat?.id === undefined) return null;
  const media = telegramMedia(m);
  const text = m.text ?? m.caption ?? '';
  if (!text && !media.length) return null;
  const name = [m.from?.first_name, m.from?.last_name].filter(Boolean).join(' ') || m.from?.username || null;
  return { kind: 'message', from: String(m.chat.id), fromName: name, subject: null, text, messageId: m.message_id === undefined ? null : String(m.message_id), inReplyTo: null, references: [], ...(media.length ? { media } : {}) };
}

function telegramMedia(m: NonNullable<TelegramUpdate['message']>): InboundMedia[] {
  // The largest size of a photo; photos come as JPEG.
  const photo = m.photo?.at(-1);
  if (photo?.file_id) return [{ source: 'telegram', fileId: photo.file_id, fileName: 'photo.jpg', mimeType: 'image/jpeg' }];
  const ref = m.document ?? m.audio ?? m.video ?? m.voice;
  if (!ref?.file_id) return [];
  return [{ source: 'telegram', fileId: ref.file_id, fileName: ref.file_name ?? (m.voice ? 'voice.ogg' : null), mimeType: ref.mime_type ?? (m.voice ? 'audio/ogg' : null) }];
}
