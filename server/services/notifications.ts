// Notifications for one user inside one organization; each new one is pushed live to that user's sockets.
import type { Models } from '../../db/index.js';
import type { Notification } from '../../db/models/Notification.js';
import type { DomainEventBus } from '../events.js';
import { NotFound } from '../errors.js';

export interface NewNotification {
  type: string;
  title: string;
  body?: string | null;
  data?: Record<string, unknown>;
}

export class NotificationService {
  constructor(private readonly deps: { models: Models; events: DomainEventBus }) {}

  private get models() {
    return this.deps.models;
  }

  /** One row per recipient in a single statement, then one live push per recipient. */
  async notify(orgId: string, userIds: string[], n: NewNotification): Promise<Notification[]> {
    const recipients = [...new Set(userIds)];
    if (recipients.length === 0) return [];
    const rows = (await this.models.Notification.forOrg(orgId)
      .insert(recipients.map((userId) => ({ organizationId: orgId, userId, type: n.type, title: n.title, body: n.body ?? null, data: n.data ?? {} })))
      .returning('*')) as unknown as Notification[];
    for (const notification of rows) this.deps.events.publish('notification.created', { notification });
    return rows;
  }

  async list(orgId: string, userId: string, opts: { unreadOnly: boolean; limit: number; offset: number }): Promise<{ notifications: Notification[]; total: number }> {
    const base = this.models.Notification.forOrg(orgId).where('userId', userId);
    if (opts.unreadOnly) base.whereNull('readAt');
    const [total, notifications] = await Promise.all([base.clone().resultSize(), base.clone().orderBy('createdAt', 'desc').orderBy('id', 'desc').limit(opts.limit).offset(opts.offset)]);
    return { notifications, total };
  }

  async unreadCount(orgId: string, userId: string): Promise<number> {
    return this.models.Notification.forOrg(orgId).where('userId', userId).whereNull('readAt').resultSize();
  }

  /** Another user's notification answers exactly like a missing one. */
  async markRead(orgId: string, userId: string, id: string): Promise<Notification> {
    const notification = await this.models.Notification.forOrg(orgId).findById(id).where('userId', userId);
    if (!notification) throw new NotFound('Notification');
    if (notification.readAt) return notification;
    return this.models.Notification.forOrg(orgId).patchAndFetchById(id, { readAt: new Date() });
  }

  async markAllRead(orgId: string, userId: string): Promise<number> {
    return this.models.Notification.forOrg(orgId).where('userId', userId).whereNull('readAt').patch({ readAt: new Date() });
  }
}
