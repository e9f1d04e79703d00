import { TenantModel } from '../BaseModel.js';

export type WebhookDeliveryStatus = 'pending' | 'succeeded' | 'failed';

export class WebhookDelivery extends TenantModel {
  static override tableName = 'webhook_deliveries';
  static override jsonAttributes = ['payload'];

  declare webhookId: string;
  /** X-Webhook-Id and the body's `id`: the same on every attempt and redelivery. */
  declare eventId: string;
  declare eventType: string;
  declare payload: Record<string, unknown>;
  declare messageId: string | null;
  /** A copy sent again by an admin (`redeliver`): the only second row an event may have for one hook. */
  declare redelivery: boolean;
  /** The event's time when this row is a redelivery (the body's `createdAt`); null: the row's own time is the event's. */
  declare eventCreatedAt: Date | string | null;
  declare status: WebhookDeliveryStatus;
  declare attempts: number;
  declare responseStatus: number | null;
  declare responseBody: string | null;
  declare lastError: string | null;
  declare durationMs: number | null;
  declare deliveredAt: Date | null;
}
