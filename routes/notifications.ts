// /notifications: the caller's own notifications in the active organization.
import { presentNotification } from '../server/presenters/notification.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { object, paginationQuery, params } from './schemas/common.js';
import { NotificationView } from './schemas/live.js';

const tag = 'Notifications';
const auth = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;

export function notificationRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/notifications', operationId: 'listNotifications', tag, auth,
      summary: 'Your notifications, newest first',
      query: object({ ...paginationQuery, unreadOnly: { type: 'boolean', default: false } }),
      response: { status: 200, description: 'Notifications', data: { type: 'array', items: NotificationView }, paginated: true },
      handler: async ({ orgId, actor, query }) => {
        const { notifications, total } = await s.notifications.list(orgId, actor.userId, { unreadOnly: !!query.unreadOnly, limit: query.limit, offset: query.offset });
        return { message: 'Notifications', data: notifications.map(presentNotification), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'get', path: '/notifications/unread-count', operationId: 'countUnreadNotifications', tag, auth,
      summary: 'How many of your notifications are unread',
      response: { status: 200, description: 'Count', data: object({ count: { type: 'integer' } }) },
      handler: async ({ orgId, actor }) => ({ message: 'Unread notifications', data: { count: await s.notifications.unreadCount(orgId, actor.userId) } }),
    }),
    defineRoute({
      method: 'patch', path: '/notifications/read-all', operationId: 'markAllNotificationsRead', tag, auth,
      summary: 'Mark all your notifications as read',
      response: { status: 200, description: 'Marked', data: object({ updated: { type: 'integer' } }) },
      handler: async ({ orgId, actor }) => ({ message: 'All notifications read', data: { updated: await s.notifications.markAllRead(orgId, actor.userId) } }),
    }),
    defineRoute({
      method: 'patch', path: '/notifications/:id/read', operationId: 'markNotificationRead', tag, auth,
      summary: "Mark one of your notifications as read (another user's id answers 404)",
      params: params('id'),
      response: { status: 200, description: 'The notification with readAt', data: NotificationView },
      handler: async ({ orgId, actor, params }) => ({ message: 'Notification read', data: presentNotification(await s.notifications.markRead(orgId, actor.userId, params.id)) }),
    }),
  ];
}
