import type { Notification } from '../../db/models/Notification.js';

export function presentNotification(n: Notification) {
  return {
    id: n.id,
    organizationId: n.organizationId,
    userId: n.userId,
    type: n.type,
    title: n.title,
    body: n.body ?? null,
    data: n.data ?? {},
    readAt: n.readAt ? new Date(n.readAt).toISOString() : null,
    createdAt: new Date(n.createdAt).toISOString(),
  };
}

export type NotificationView = ReturnType<typeof presentNotification>;
