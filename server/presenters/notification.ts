import type { Notification } from '../../db/models/Notification.js';
import { iso } from './time.js';

export function presentNotification(n: Notification) {
  return {
    id: n.id,
    organizationId: n.organizationId,
    userId: n.userId,
    type: n.type,
    title: n.title,
    body: n.body ?? null,
    data: n.data ?? {},
    readAt: iso(n.readAt),
    createdAt: iso(n.createdAt),
  };
}

export type NotificationView = ReturnType<typeof presentNotification>;
