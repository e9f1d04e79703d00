// What a client may see of a channel (secrets only masked) and of a channel delivery.
import { mask } from '../services/channels/crypto.js';
import type { ChannelRow, ChannelSecrets, ChannelStatus, ChannelType, DeliveryRow, DeliveryStatus } from '../services/channels/types.js';

export interface ChannelView {
  id: string;
  type: ChannelType;
  name: string;
  status: ChannelStatus;
  enabled: boolean;
  config: Record<string, unknown>;
  lastError: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface ChannelDeliveryView {
  id: string;
  channelId: string;
  conversationId: string;
  messageId: string | null;
  recipient: string;
  status: DeliveryStatus;
  attempts: number;
  lastError: string | null;
  sentAt: string | null;
  createdAt: string;
  updatedAt: string;
}

const iso = (d: Date | string | null): string | null => (d === null ? null : new Date(d).toISOString());

/** `secrets` is the opened credentials (null when they cannot be read): each one appears masked in `config`. */
export function presentChannel(row: ChannelRow, secrets: ChannelSecrets | null, extra: Record<string, unknown> = {}): ChannelView {
  const masked = secrets ? Object.fromEntries(Object.entries(secrets).map(([k, v]) => [k, mask(String(v))])) : {};
  return {
    id: row.id, type: row.type, name: row.name, status: row.status, enabled: row.enabled,
    config: { ...row.config, ...extra, secrets: masked }, lastError: row.lastError, createdAt: iso(row.createdAt)!, updatedAt: iso(row.updatedAt)!,
  };
}

export function presentDelivery(row: DeliveryRow): ChannelDeliveryView {
  return {
    id: row.id, channelId: row.channelId, conversationId: row.conversationId, messageId: row.messageId, recipient: row.recipient, status: row.status,
    attempts: row.attempts, lastError: row.lastError, sentAt: iso(row.sentAt), createdAt: iso(row.createdAt)!, updatedAt: iso(row.updatedAt)!,
  };
}
