import type { Ticket } from '../../db/models/Ticket.js';
import type { TicketEvent } from '../../db/models/TicketEvent.js';
import { iso } from './time.js';

/** What a ticket's view is made of: a loaded model, or a plain row of a list. */
export type PresentableTicket = Pick<Ticket, 'id' | 'organizationId' | 'number' | 'title' | 'description' | 'status' | 'priority' | 'source' | 'contactId' | 'requesterName' | 'requesterEmail' | 'conversationId' | 'assignedTo' | 'createdBy' | 'tags' | 'dueAt' | 'resolvedAt' | 'closedAt' | 'mergedIntoId' | 'createdAt' | 'updatedAt'>;

export function presentTicket(t: PresentableTicket) {
  return {
    id: t.id,
    organizationId: t.organizationId,
    number: t.number,
    title: t.title,
    description: t.description ?? null,
    status: t.status,
    priority: t.priority,
    source: t.source,
    contactId: t.contactId ?? null,
    requester: t.requesterEmail || t.requesterName ? { name: t.requesterName ?? null, email: t.requesterEmail ?? null } : null,
    conversationId: t.conversationId ?? null,
    assignedTo: t.assignedTo ?? null,
    createdBy: t.createdBy ?? null,
    tags: t.tags ?? [],
    dueAt: iso(t.dueAt),
    resolvedAt: iso(t.resolvedAt),
    closedAt: iso(t.closedAt),
    mergedIntoId: t.mergedIntoId ?? null,
    createdAt: iso(t.createdAt),
    updatedAt: iso(t.updatedAt),
  };
}

export type TicketView = ReturnType<typeof presentTicket>;

export function presentTicketEvent(e: TicketEvent) {
  return {
    id: e.id,
    ticketId: e.ticketId,
    type: e.type,
    actorType: e.actorType,
    actorId: e.actorId ?? null,
    content: e.content ?? null,
    data: e.data ?? {},
    clientMessageId: e.clientMessageId ?? null,
    attachments: e.attachments ?? [],
    createdAt: iso(e.createdAt),
  };
}
