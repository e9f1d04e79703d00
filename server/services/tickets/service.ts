// Tickets as agents work them: the list, one ticket, create, change, delete, the timeline, notes, replies by mail,
// conversation links and turning a chat into a ticket.
import type { Ticket, TicketPriority, TicketSource, TicketStatus } from '../../../db/models/Ticket.js';
import { containsPattern } from '../../../db/search.js';
import type { TicketEvent } from '../../../db/models/TicketEvent.js';
import { InvalidTransition, ValidationFailed } from '../../errors.js';
import { TicketAiService } from './ai.js';
import { TicketCore, type NewTicket, type TicketActor, type TicketChanges, type TicketDeps } from './core.js';
import { mergeTicket } from './merge.js';
import { NO_REQUESTER, requesterOf, type Requester } from './requester.js';
import { FINAL_STATUSES, numberQuery } from './rules.js';
import type { Outbox } from '../webhooks/index.js';
import { listPage, type Condition } from '../../../db/pages.js';
import type { PresentableTicket } from '../../presenters/ticket.js';

/** A ticket as lists show it, as plain values. */
export type TicketListItem = PresentableTicket;

/** What the list presents of each ticket, named as the presenter reads it. */
export const LIST_COLUMNS = `tickets.id, tickets.organization_id as "organizationId", tickets.number, tickets.title, tickets.description, tickets.status,
  tickets.priority, tickets.source, tickets.contact_id as "contactId", tickets.requester_name as "requesterName",
  tickets.requester_email as "requesterEmail", tickets.conversation_id as "conversationId", tickets.assigned_to as "assignedTo",
  tickets.created_by as "createdBy", tickets.tags, tickets.due_at as "dueAt", tickets.resolved_at as "resolvedAt",
  tickets.closed_at as "closedAt", tickets.merged_into_id as "mergedIntoId", tickets.created_at as "createdAt", tickets.updated_at as "updatedAt"`;

export interface TicketFilters {
  status?: TicketStatus[];
  priority?: TicketPriority;
  /** A user id, `me` or `unassigned`. */
  assignedTo?: string;
  contactId?: string;
  conversationId?: string;
  q?: string;
  limit: number;
  offset: number;
}

export interface ReplyInput {
  content: string;
  clientMessageId?: string;
  cc?: string[];
}

/** What became of a reply's mail: `queued` for SMTP delivery, or `logged` when no SMTP transport is configured. */
export interface ReplyDelivery {
  emailId: string;
  status: 'queued' | 'logged';
  to: string;
  cc: string[];
  messageId: string;
}

const CHANNEL_SOURCES: readonly TicketSource[] = ['email', 'widget', 'whatsapp', 'telegram'];

/** The WHERE of a ticket list: the organization, then each filter given. */
export function listConditions(orgId: string, userId: string, f: Omit<TicketFilters, 'limit' | 'offset'>): Condition[] {
  const where: Condition[] = [{ sql: 'tickets.organization_id = ?', bindings: [orgId] }];
  const is = (sql: string, ...bindings: unknown[]) => where.push({ sql, bindings });
  // Merged tickets live on in their target; they show up only when asked for.
  if (f.status?.length) is(`tickets.status in (${f.status.map(() => '?').join(', ')})`, ...f.status);
  else is("tickets.status <> 'merged'");
  if (f.priority) is('tickets.priority = ?', f.priority);
  if (f.assignedTo === 'unassigned') is('tickets.assigned_to is null');
  else if (f.assignedTo) is('tickets.assigned_to = ?', f.assignedTo === 'me' ? userId : f.assignedTo);
  if (f.contactId) is('tickets.contact_id = ?', f.contactId);
  if (f.conversationId) is('tickets.conversation_id = ?', f.conversationId);
  const q = f.q?.trim();
  if (q) {
    // A literal substring: the pattern escapes %, _ and backslashes, so they mean themselves. ILIKE (rather than
    // strpos) lets trigram indexes serve it on PostgreSQL.
    const number = numberQuery(q);
    const like = containsPattern(q);
    if (number !== null) is('(tickets.title ilike ? or tickets.description ilike ? or tickets.number = ?)', like, like, number);
    else is('(tickets.title ilike ? or tickets.description ilike ?)', like, like);
  }
  return where;
}

export class TicketService {
  readonly core: TicketCore;
  /** The internal AI service's ticket actions. */
  readonly ai: TicketAiService;

  /** Webhook events, written in the change's transaction (ticket changes all run through the core). */
  set outbox(outbox: Outbox | null) {
    this.core.outbox = outbox;
  }

  constructor(deps: TicketDeps) {
    this.core = new TicketCore(deps);
    this.ai = new TicketAiService(this.core);
  }

  private get models() {
    return this.core.models;
  }

  async list(orgId: string, userId: string, f: TicketFilters): Promise<{ tickets: TicketListItem[]; total: number }> {
    const where = listConditions(orgId, userId, f);
    const { rows, total } = await listPage<TicketListItem>(this.core.deps.knex, { table: 'tickets', columns: LIST_COLUMNS, where, order: 'tickets.number desc', limit: f.limit, offset: f.offset });
    return { tickets: rows, total };
  }

  get(orgId: string, ticketId: string): Promise<Ticket> {
    return this.core.get(orgId, ticketId);
  }

  create(actor: TicketActor, input: NewTicket): Promise<Ticket> {
    return this.core.run((trx, fx) => this.core.insertTicket(trx, fx, actor, input, actor.type === 'ai' ? 'ai' : 'agent'));
  }

  update(actor: TicketActor, ticketId: string, input: TicketChanges): Promise<Ticket> {
    return this.core.run(async (trx, fx) => this.core.applyChanges(trx, fx, actor, await this.core.lock(trx, actor.orgId, ticketId), input));
  }

  async remove(orgId: string, ticketId: string): Promise<void> {
    await this.core.run(async (trx, fx) => {
      const ticket = await this.core.lock(trx, orgId, ticketId);
      await this.models.Ticket.forOrg(orgId, trx).deleteById(ticket.id);
      fx.announce('deleted', ticket);
    });
  }

  /** The timeline, oldest first; `after` is the id of the last event the client has. */
  async events(orgId: string, ticketId: string, opts: { after?: string; limit: number }): Promise<TicketEvent[]> {
    await this.core.get(orgId, ticketId);
    const query = this.models.TicketEvent.forOrg(orgId).where('ticketId', ticketId);
    if (opts.after) {
      const after = await this.models.TicketEvent.forOrg(orgId).where('ticketId', ticketId).findById(opts.after);
      if (!after) throw new ValidationFailed('`after` names no event of this ticket', [{ field: 'after', message: 'no event of this ticket' }]);
      query.where('seq', '>', after.seq);
    }
    return query.orderBy('seq').limit(opts.limit);
  }

  addNote(actor: TicketActor, ticketId: string, content: string): Promise<TicketEvent> {
    return this.core.run(async (trx, fx) => {
      const ticket = await this.core.lock(trx, actor.orgId, ticketId);
      const event = await this.core.addEvent(trx, ticket, actor, 'note', { content });
      fx.announce('note_added', ticket);
      return event;
    });
  }

  /**
   * A reply mailed to the requester (and `cc`) in the ticket's thread. A repeated clientMessageId answers the first
   * reply and sends nothing. Closed and merged tickets take no replies; a ticket without requester email is 400.
   */
  reply(actor: TicketActor, ticketId: string, input: ReplyInput): Promise<{ event: TicketEvent; delivery: ReplyDelivery; duplicate: boolean }> {
    return this.core.run(async (trx, fx) => {
      const ticket = await this.core.lock(trx, actor.orgId, ticketId);
      if (input.clientMessageId) {
        const first = await this.models.TicketEvent.forOrg(actor.orgId, trx).where({ ticketId, clientMessageId: input.clientMessageId }).first();
        if (first) {
          if (first.type !== 'reply') throw new ValidationFailed('This clientMessageId names another kind of event', [{ field: 'clientMessageId', message: 'already used' }]);
          return { event: first, delivery: first.data.delivery as ReplyDelivery, duplicate: true };
        }
      }
      if (FINAL_STATUSES.includes(ticket.status)) throw new InvalidTransition(`A ${ticket.status} ticket takes no replies`);
      if (!ticket.requesterEmail) throw new ValidationFailed('The ticket has no requester email to reply to', [{ field: 'requester', message: 'no email address' }]);
      const cc = [...new Set((input.cc ?? []).map((a) => a.trim().toLowerCase()))].filter((a) => a !== ticket.requesterEmail);
      const event = await this.core.addEvent(trx, ticket, actor, 'reply', { content: input.content, clientMessageId: input.clientMessageId ?? null });
      const sent = (await this.core.deps.mail.send(trx, ticket, 'reply', { content: input.content, cc, eventId: event.id }))!;
      const delivery: ReplyDelivery = { emailId: sent.outbox.id, status: sent.outbox.status === 'logged' ? 'logged' : 'queued', to: sent.mail.toAddress, cc, messageId: sent.mail.messageId };
      const stored = await this.models.TicketEvent.forOrg(ticket.organizationId, trx).patchAndFetchById(event.id, { data: { delivery } });
      fx.announce('replied', await this.models.Ticket.forOrg(ticket.organizationId, trx).patchAndFetchById(ticket.id, { updatedAt: new Date() }));
      return { event: stored, delivery, duplicate: false };
    });
  }

  merge(actor: TicketActor, sourceId: string, targetId: string): Promise<Ticket> {
    return mergeTicket(this.core, actor, sourceId, targetId);
  }

  /** Links the ticket to a conversation of the organization, or unlinks it with null. */
  link(actor: TicketActor, ticketId: string, conversationId: string | null): Promise<Ticket> {
    return this.core.run(async (trx, fx) => {
      const ticket = await this.core.lock(trx, actor.orgId, ticketId);
      if (conversationId) await this.core.conversationIn(trx, actor.orgId, conversationId);
      if (ticket.conversationId === conversationId) return ticket;
      const linked = await this.models.Ticket.forOrg(actor.orgId, trx).patchAndFetchById(ticket.id, { conversationId });
      await this.core.addEvent(trx, linked, actor, 'linked', { data: { from: ticket.conversationId, to: conversationId } });
      fx.announce('linked', linked);
      return linked;
    });
  }

  /**
   * Turns a chat into a ticket linked to it. The requester is the conversation's contact, else its visitor (found or
   * created as a contact by email); the source is the conversation's channel.
   */
  fromConversation(actor: TicketActor, conversationId: string, input: { title: string; priority?: TicketPriority; description?: string | null }): Promise<Ticket> {
    return this.core.run(async (trx, fx) => {
      const conversation = await this.core.conversationIn(trx, actor.orgId, conversationId);
      let requester: Requester = NO_REQUESTER;
      if (conversation.contactId) {
        const contact = await this.models.Contact.forOrg(actor.orgId, trx).findById(conversation.contactId);
        if (contact) requester = requesterOf(contact);
      }
      if (!requester.contactId && conversation.visitorEmail) {
        requester = await this.core.requesterByEmail(trx, actor.orgId, { name: conversation.visitorName, email: conversation.visitorEmail });
      } else if (!requester.contactId && conversation.visitorName) {
        requester = { ...NO_REQUESTER, requesterName: conversation.visitorName };
      }
      const source = CHANNEL_SOURCES.find((s) => s === conversation.channel) ?? 'agent';
      return this.core.insertTicket(trx, fx, actor, { ...input, conversationId }, source, requester);
    });
  }
}
