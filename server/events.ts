// Domain events, published by services after their transaction commits; sockets/broadcast.ts turns them into emits.
import { EventEmitter } from 'node:events';
import type { Contact } from '../db/models/Contact.js';
import type { ContactConflict } from '../db/models/ContactConflict.js';
import type { Conversation } from '../db/models/Conversation.js';
import type { Message } from '../db/models/Message.js';
import type { Notification } from '../db/models/Notification.js';
import type { Ticket } from '../db/models/Ticket.js';
import type { TicketAction } from './services/tickets/types.js';
import type { ConversationRef } from './services/messages/types.js';
import type { Logger } from './logger.js';
import type { ChannelDeliveryView, ChannelView } from './presenters/channel.js';

export interface DomainEvents {
  /** Every session in `sessionIds` was revoked (logout, reuse detection, password change or reset). */
  'session.revoked': { userId: string; sessionIds: string[] };
  /** The user's access to an organization ended or changed (suspension, removal, role change). */
  'membership.changed': { organizationId: string; userId: string | null; membershipId: string; status: string; role: string; removed: boolean };
  'organization.deleted': { organizationId: string };
  /** An API key was revoked: its sockets are cut on every instance. */
  'api_key.revoked': { organizationId: string; apiKeyId: string };
  /**
   * A customer's first message opened a conversation (widget, follow-up to a closed chat, or a channel); its message
   * is announced by message.created. Routing and notifications react to it (services/conversations/arrivals.ts).
   */
  'conversation.created': { conversation: Conversation };
  /** Status, assignee, priority or contact changed. */
  'conversation.updated': { conversation: Conversation; statusChanged?: boolean };
  'conversation.assigned': { conversation: Conversation };
  /** The AI handed the conversation to humans. */
  'conversation.escalated': { conversation: Conversation; reason: string | null };
  'message.created': { conversation: ConversationRef; message: Message };
  'notification.created': { notification: Notification };
  /** A ticket was created, changed, merged, linked, answered or deleted (agents only). */
  'ticket.updated': { action: TicketAction; ticket: Ticket };
  /** Contacts (with their identities loaded): created, changed, or another contact merged into this one. */
  'contact.created': { contact: Contact };
  'contact.updated': { contact: Contact };
  'contact.merged': { contact: Contact; sourceContactId: string };
  /** An automatic source proposed a value that differs from a recorded one, or a likely duplicate. */
  'contact.conflict_created': { conflict: ContactConflict };
  /** A knowledge source moved on while (re)indexing: agents see its progress. */
  'knowledge.progress': { organizationId: string; documentId: string; status: string; chunksDone: number; chunksTotal: number };
  /** The AI recorded a question it could not answer (new, or asked in another conversation). */
  'knowledge.unanswered': { organizationId: string; question: { id: string; question: string; occurrences: number; status: string } };
  /** A channel delivery of an agent's message moved on (sent, delivered, read, failed): agents only. */
  'channel.delivery_updated': { organizationId: string; delivery: ChannelDeliveryView };
  /** A channel's status moved (verified, handshake done, failed a check, disabled or enabled): agents only. */
  'channel.status_changed': { organizationId: string; previousStatus: string; channel: ChannelView };
  /**
   * An agent's effective status changed (first socket, last socket, or an explicit choice). `availability`: the one
   * chosen, on an explicit choice (the status alone says offline while no socket is open).
   */
  'presence.changed': { organizationId: string; userId: string; status: string; availability?: string };
}

export type DomainEventName = keyof DomainEvents;

export class DomainEventBus {
  private readonly emitter = new EventEmitter();

  constructor(private readonly logger: Logger) {
    this.emitter.setMaxListeners(100);
  }

  /** Listeners run synchronously; one failing listener is logged and never breaks the publisher. */
  publish<E extends DomainEventName>(name: E, payload: DomainEvents[E]): void {
    for (const listener of this.emitter.listeners(name)) {
      try {
        (listener as (p: DomainEvents[E]) => void)(payload);
      } catch (err) {
        this.logger.error({ err, event: name }, 'domain event listener failed');
      }
    }
  }

  on<E extends DomainEventName>(name: E, listener: (payload: DomainEvents[E]) => void): () => void {
    this.emitter.on(name, listener);
    return () => this.emitter.off(name, listener);
  }
}
