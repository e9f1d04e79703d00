// Leaf types of the channels area: stored rows (camelCase through knex's mappers) and sealed credentials.
export type ChannelType = 'email' | 'whatsapp' | 'telegram';
export type ChannelStatus = 'pending' | 'active' | 'failed' | 'disabled';
export type DeliveryStatus = 'queued' | 'sent' | 'delivered' | 'read' | 'failed' | 'outside_window';

export interface ChannelRow {
  id: string;
  organizationId: string;
  type: ChannelType;
  name: string;
  status: ChannelStatus;
  enabled: boolean;
  config: Record<string, unknown>;
  secrets: string;
  inboundToken: string;
  lastError: string | null;
  /** Deliveries that failed for good in a row since the last one that went out. */
  consecutiveFailures: number;
  createdAt: Date;
  updatedAt: Date;
}

export interface EmailSecrets {
  signingSecret: string;
}
export interface TelegramSecrets {
  botToken: string;
  webhookSecret: string;
}
export interface WhatsAppSecrets {
  accessToken: string;
  appSecret: string;
  verifyToken: string;
}
export type ChannelSecrets = EmailSecrets | TelegramSecrets | WhatsAppSecrets;

export interface InboundEventRow {
  id: string;
  organizationId: string;
  channelId: string;
  providerId: string;
  kind: 'message' | 'status';
  payload: InboundPayload;
  status: 'pending' | 'processed' | 'failed' | 'ignored';
  error: string | null;
  conversationId: string | null;
  ticketId: string | null;
  processedAt: Date | null;
  createdAt: Date;
}

/** One inbound message in a provider-neutral shape, as stored in inbound_events.payload. */
export interface InboundMessage {
  kind: 'message';
  /** Email address, Telegram chat id or WhatsApp phone (wa_id). */
  from: string;
  fromName: string | null;
  subject: string | null;
  text: string;
  messageId: string | null;
  inReplyTo: string | null;
  references: string[];
  /** Files that came with it: a mail's attachments inline, a provider's media by the id it is fetched with. */
  media?: InboundMedia[];
}

/** A file of an inbound message, stored (and for providers fetched) when the event is processed. */
export type InboundMedia =
  | { source: 'inline'; fileName: string; mimeType: string; data: string }
  | { source: 'whatsapp'; mediaId: string; fileName: string | null; mimeType: string | null }
  | { source: 'telegram'; fileId: string; fileName: string | null; mimeType: string | null };

/** A WhatsApp status of something we sent. */
export interface InboundStatus {
  kind: 'status';
  providerMessageId: string;
  status: 'sent' | 'delivered' | 'read' | 'failed';
  error: string | null;
}

export type InboundPayload = InboundMessage | InboundStatus;

export interface DeliveryRow {
  id: string;
  organizationId: string;
  channelId: string;
  conversationId: string;
  messageId: string | null;
  recipient: string;
  status: DeliveryStatus;
  attempts: number;
  providerMessageId: string | null;
  lastError: string | null;
  sentAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}
