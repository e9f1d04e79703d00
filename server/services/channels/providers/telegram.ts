// Telegram Bot API: the calls a channel makes (getMe, setWebhook, sendMessage) and reading an inbound Update.
import type { InboundMessage } from '../types.js';
import { failureOf, postJson, ProviderError } from './errors.js';

export interface TelegramUpdate {
  update_id?: number;
  message?: {
    message_id?: number;
    from?: { id?: number; first_name?: string; last_name?: string; username?: string };
    chat?: { id?: number | string };
    text?: string;
    caption?: string;
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

  async sendMessage(chatId: string, text: string): Promise<string> {
    const sent = await this.call<{ message_id: number }>('sendMessage', { chat_id: chatId, text });
    return String(sent.message_id);
  }
}

/** The message of an Update (null for kinds we do not take: edits, callbacks, messages without text). */
export function telegramMessage(update: TelegramUpdate): InboundMessage | null {
  const m = update.message;
  const text = m?.text ?? m?.caption;
  if (!m || m.chat?.id === undefined || !text) return null;
  const name = [m.from?.first_name, m.from?.last_name].filter(Boolean).join(' ') || m.from?.username || null;
  return { kind: 'message', from: String(m.chat.id), fromName: name, subject: null, text, messageId: m.message_id === undefined ? null : String(m.message_id), inReplyTo: null, references: [] };
}
