// Domain events -> rooms. The only place that decides who hears what; it runs after the writes committed.
import type { Namespace, Server } from 'socket.io';
import { presentContact, presentContactConflict } from '../server/presenters/contact.js';
import { presentConversation, presentMessage } from '../server/presenters/conversation.js';
import { presentNotification } from '../server/presenters/notification.js';
import { presentTicket } from '../server/presenters/ticket.js';
import type { AgentStatus } from './events.js';
import type { OrgNamespace, RealtimeDeps } from './types.js';
import { namespaceOf, rooms } from './rooms.js';

/** A namespace made only to publish through the Redis adapter is dropped after this long without sockets. */
const EMIT_ONLY_TTL_MS = 60_000;

export function createBroadcaster(io: Server, orgs: ReturnType<Server['of']>, deps: RealtimeDeps) {
  // What io.of(fn) returns is a ParentNamespace, which socket.io does not export: createChild is its public method,
  // `children` its private set of namespaces (no public way to forget a child that never had a socket).
  const parent = orgs as unknown as { createChild(name: string): Namespace; children: Set<Namespace> };
  // The server's registry of namespaces (declared in socket.io's typings): the only lookup that does not create one.
  const nsps = io._nsps;
  const emitOnly = new Map<string, NodeJS.Timeout>();
  // Organizations deleted while this instance ran: late events (an agent going offline) must not revive their namespace.
  const deleted = new Set<string>();

  /**
   * The organization's namespace on this instance. Without local sockets it exists only when Redis carries
   * emits to other instances; it is made through the parent so it keeps the handshake middleware.
   */
  const nsp = (orgId: string): OrgNamespace | null => {
    const name = namespaceOf(orgId);
    const existing = nsps.get(name);
    if (existing) return existing as unknown as OrgNamespace;
    if (!deps.redis || deleted.has(orgId)) return null;
    const created = parent.createChild(name);
    const drop = () => {
      emitOnly.delete(name);
      if (created.sockets.size > 0) return;
      created.adapter.close();
      nsps.delete(name);
      parent.children.delete(created);
    };
    emitOnly.set(name, setTimeout(drop, EMIT_ONLY_TTL_MS).unref());
    return created as unknown as OrgNamespace;
  };

  const off = [
    deps.events.on('message.created', ({ conversation, message }) => {
      const target = nsp(conversation.organizationId);
      if (!target) return;
      const payload = { conversationId: conversation.id, message: presentMessage(message) };
      // Internal notes go to the agents only: the visitor side only ever hears public messages. A public message is
      // one emit to both rooms (no socket is in both), so it is encoded once for all of its receivers.
      if (message.private || !conversation.visitorSessionId) target.to(rooms.agents).emit('new_message', payload);
      else target.to([rooms.agents, rooms.visitor(conversation.visitorSessionId)]).emit('new_message', payload);
    }),
    deps.events.on('conversation.created', ({ conversation }) => {
      nsp(conversation.organizationId)?.to(rooms.agents).emit('new_widget_conversation', { conversation: presentConversation(conversation) });
    }),
    deps.events.on('conversation.updated', ({ conversation, statusChanged }) => {
      const target = nsp(conversation.organizationId);
      if (!target) return;
      target.to(rooms.agents).emit('conversation_updated', { conversation: presentConversation(conversation) });
      // The visitor hears of status changes only; assignment and contact changes are agents' business.
      if (statusChanged && conversation.visitorSessionId) target.to(rooms.visitor(conversation.visitorSessionId)).emit('status_updated', { conversationId: conversation.id, status: conversation.status });
    }),
    deps.events.on('conversation.assigned', ({ conversation }) => {
      nsp(conversation.organizationId)?.to(rooms.agents).emit('conversation_assigned', { conversationId: conversation.id, assignedTo: conversation.assignedTo });
    }),
    deps.events.on('conversation.escalated', ({ conversation, reason }) => {
      nsp(conversation.organizationId)?.to(rooms.agents).emit('conversation_escalated', { conversation: presentConversation(conversation), reason });
    }),
    deps.events.on('notification.created', ({ notification }) => {
      nsp(notification.organizationId)?.to(rooms.user(notification.userId)).emit('notification_created', { notification: presentNotification(notification) });
    }),
    deps.events.on('ticket.updated', ({ action, ticket }) => {
      // Tickets are agents' business: never a visitor room.
      nsp(ticket.organizationId)?.to(rooms.agents).emit('ticket_updated', { action, ticket: presentTicket(ticket) });
    }),
    // Contacts are agents' business only: these never reach a visitor room.
    deps.events.on('contact.created', ({ contact }) => {
      nsp(contact.organizationId)?.to(rooms.agents).emit('contact_created', { contact: presentContact(contact) });
    }),
    deps.events.on('contact.updated', ({ contact }) => {
      nsp(contact.organizationId)?.to(rooms.agents).emit('contact_updated', { contact: presentContact(contact) });
    }),
    deps.events.on('contact.merged', ({ contact, sourceContactId }) => {
      nsp(contact.organizationId)?.to(rooms.agents).emit('contact_merged', { contact: presentContact(contact), sourceContactId });
    }),
    deps.events.on('contact.conflict_created', ({ conflict }) => {
      nsp(conflict.organizationId)?.to(rooms.agents).emit('contact_conflict_created', { conflict: presentContactConflict(conflict) });
    }),
    // Knowledge is agents' business only.
    deps.events.on('knowledge.progress', ({ organizationId, documentId, status, chunksDone, chunksTotal }) => {
      nsp(organizationId)?.to(rooms.agents).emit('knowledge_indexing_progress', { documentId, status, chunksDone, chunksTotal });
    }),
    deps.events.on('channel.delivery_updated', ({ organizationId, delivery }) => {
      nsp(organizationId)?.to(rooms.agents).emit('message_delivery_updated', { delivery });
    }),
    deps.events.on('channel.status_changed', ({ organizationId, previousStatus, channel }) => {
      nsp(organizationId)?.to(rooms.agents).emit('channel_status_changed', { channel, previousStatus });
    }),
    deps.events.on('knowledge.unanswered', ({ organizationId, question }) => {
      nsp(organizationId)?.to(rooms.agents).emit('unanswered_question_created', { question });
    }),
    deps.events.on('presence.changed', ({ organizationId, userId, status }) => {
      nsp(organizationId)?.to(rooms.agents).emit('user_status_update', { userId, status: status as AgentStatus });
    }),
    deps.events.on('session.revoked', ({ sessionIds }) => {
      // A session's sockets live in the namespace of the organization it was signed into.
      void deps.models.AuthSession.query()
        .select('id', 'organizationId')
        .whereIn('id', sessionIds)
        .then((sessions) => {
          for (const s of sessions) if (s.organizationId) nsp(s.organizationId)?.in(rooms.session(s.id)).disconnectSockets(true);
        })
        .catch((err) => deps.logger.error({ err }, 'could not disconnect revoked sessions'));
    }),
    deps.events.on('api_key.revoked', ({ organizationId, apiKeyId }) => {
      // A key's sockets sit in the room of its id (sockets/operator.ts); the adapter reaches every instance.
      nsp(organizationId)?.in(rooms.session(apiKeyId)).disconnectSockets(true);
    }),
    deps.events.on('membership.changed', ({ organizationId, userId, status, removed }) => {
      if (userId && (removed || status !== 'accepted')) nsp(organizationId)?.in(rooms.user(userId)).disconnectSockets(true);
    }),
    deps.events.on('organization.deleted', ({ organizationId }) => {
      nsp(organizationId)?.disconnectSockets(true);
      if (deleted.size >= 10_000) deleted.clear();
      deleted.add(organizationId);
    }),
  ];

  return {
    stop() {
      for (const unsubscribe of off) unsubscribe();
      for (const timer of emitOnly.values()) clearTimeout(timer);
    },
  };
}
