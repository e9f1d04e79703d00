// What every ticket action shares: one transaction with its after-commit effects, loading and locking a ticket,
// writing the timeline, creating a ticket (number, requester, first mail) and applying changes to one.
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import type { Conversation } from '../../../db/models/Conversation.js';
import type { Ticket, TicketPriority, TicketSource, TicketStatus } from '../../../db/models/Ticket.js';
import type { TicketEvent, TicketEventType } from '../../../db/models/TicketEvent.js';
import type { DomainEventBus } from '../../events.js';
import { InvalidTransition, NotFound, ValidationFailed } from '../../errors.js';
import type { Logger } from '../../logger.js';
import type { ContactService } from '../contacts/index.js';
import type { NotificationService } from '../notifications.js';
import type { IdempotencyKeys } from './idempotency.js';
import type { TicketMailer } from './mail.js';
import { contactIn, NO_REQUESTER, requesterOf, type Requester, type RequesterInput } from './requester.js';
import { assertTransition, normalizeTags, statusPatch } from './rules.js';
import type { Outbox } from '../webhooks/index.js';
import { presentTicket } from '../../presenters/ticket.js';
import type { TicketAction } from './types.js';

export type { TicketAction } from './types.js';

export type TicketActor = { type: 'agent'; orgId: string; userId: string } | { type: 'ai'; orgId: string };

/** What happened to a ticket, as told to agents in `ticket_updated`. */

export interface TicketDeps {
  models: Models;
  knex: Knex;
  events: DomainEventBus;
  notifications: NotificationService;
  /** Finds or creates requesters by email (one contact per email in an organization, safe under concurrency). */
  contacts: Pick<ContactService, 'findOrCreateByEmail'>;
  mail: TicketMailer;
  keys: IdempotencyKeys;
  logger: Logger;
}

export interface NewTicket {
  title: string;
  description?: string | null;
  priority?: TicketPriority;
  contactId?: string | null;
  requester?: RequesterInput | null;
  conversationId?: string | null;
  assignedTo?: string | null;
  tags?: string[];
  dueAt?: string | null;
}

export interface TicketChanges {
  title?: string;
  description?: string | null;
  priority?: TicketPriority;
  status?: Exclude<TicketStatus, 'merged'>;
  assignedTo?: string | null;
  contactId?: string | null;
  tags?: string[];
  dueAt?: string | null;
}

/** Collected inside a transaction, carried out only once it committed. */
export class Effects {
  readonly changed: { action: TicketAction; ticket: Ticket }[] = [];
  readonly assigned: { ticket: Ticket; by: TicketActor }[] = [];

  announce(action: TicketAction, ticket: Ticket): void {
    this.changed.push({ action, ticket });
  }
}

/** The webhook event of each ticket action (internal notes and deletions are not announced outside). */
const TICKET_WEBHOOK_EVENTS: Record<TicketAction, string | null> = {
  created: 'ticket.created', updated: 'ticket.updated', status_changed: 'ticket.status_changed', assigned: 'ticket.updated', note_added: null,
  replied: 'ticket.reply_sent', merged: 'ticket.merged', linked: 'ticket.updated', deleted: null,
};

export class TicketCore {
  /** Webhook events, written in the change's transaction. */
  outbox: Outbox | null = null;

  constructor(readonly deps: TicketDeps) {}

  get models(): Models {
    return this.deps.models;
  }

  /** Runs `work` in one transaction; announces and notifies after it committed, never before. */
  async run<T>(work: (trx: Knex.Transaction, fx: Effects) => Promise<T>): Promise<T> {
    const fx = new Effects();
    const result = await this.deps.knex.transaction(async (trx) => {
      const value = await work(trx, fx);
      // Webhook events join the transaction: none for a change that rolls back, none lost for one that commits.
      for (const { action, ticket } of fx.changed) {
        const type = TICKET_WEBHOOK_EVENTS[action];
        if (type) await this.outbox?.record(trx, ticket.organizationId, type, () => ({ ticket: presentTicket(ticket) }));
      }
      return value;
    });
    for (const { action, ticket } of fx.changed) this.deps.events.publish('ticket.updated', { action, ticket });
    for (const { ticket, by } of fx.assigned) {
      // Assigning a ticket to yourself needs no notification.
      if (!ticket.assignedTo || (by.type === 'agent' && by.userId === ticket.assignedTo)) continue;
      await this.deps.notifications
        .notify(ticket.organizationId, [ticket.assignedTo], { type: 'ticket_assigned', title: `Ticket #${ticket.number} was assigned to you`, body: ticket.title, data: { ticketId: ticket.id, number: ticket.number } })
        .catch((err) => this.deps.logger.error({ err, ticketId: ticket.id }, 'could not notify the assignee of a ticket'));
    }
    return result;
  }

  async get(orgId: string, ticketId: string, trx?: Knex.Transaction): Promise<Ticket> {
    const ticket = await this.models.Ticket.forOrg(orgId, trx).findById(ticketId);
    if (!ticket) throw new NotFound('Ticket');
    return ticket;
  }

  /** The ticket, locked for the rest of the transaction: changes to one ticket (and its mail thread) take turns. */
  async lock(trx: Knex.Transaction, orgId: string, ticketId: string): Promise<Ticket> {
    const ticket = await this.models.Ticket.forOrg(orgId, trx).findById(ticketId).forNoKeyUpdate();
    if (!ticket) throw new NotFound('Ticket');
    return ticket;
  }

  async conversationIn(trx: Knex.Transaction, orgId: string, conversationId: string): Promise<Conversation> {
    const conversation = await this.models.Conversation.forOrg(orgId, trx).findById(conversationId);
    if (!conversation) throw new NotFound('Conversation');
    return conversation;
  }

  /** Tickets go to accepted members only; anyone else (pending, suspended, another organization's) is 400. */
  async assertAssignee(trx: Knex.Transaction, orgId: string, userId: string): Promise<void> {
    const member = await this.models.Membership.forOrg(orgId, trx).where({ userId, status: 'accepted' }).first();
    if (!member) throw new ValidationFailed('assignedTo must be an accepted member of the organization', [{ field: 'assignedTo', message: 'not an accepted member of the organization' }]);
  }

  async addEvent(trx: Knex.Transaction, ticket: Ticket, actor: TicketActor | 'system', type: TicketEventType, e: { content?: string | null; data?: Record<string, unknown>; clientMessageId?: string | null } = {}): Promise<TicketEvent> {
    return await this.models.TicketEvent.forOrg(ticket.organizationId, trx).insertAndFetch({
      organizationId: ticket.organizationId,
      ticketId: ticket.id,
      type,
      actorType: actor === 'system' ? 'system' : actor.type,
      actorId: actor !== 'system' && actor.type === 'agent' ? actor.userId : null,
      content: e.content ?? null,
      data: e.data ?? {},
      clientMessageId: e.clientMessageId ?? null,
    });
  }

  /** The requester named by `contactId`, or by `requester` (the contact is found or created by email). */
  async requesterFor(trx: Knex.Transaction, orgId: string, input: Pick<NewTicket, 'contactId' | 'requester'>): Promise<Requester> {
    if (input.contactId) return requesterOf(await contactIn(this.models, trx, orgId, input.contactId));
    if (input.requester) return this.requesterByEmail(trx, orgId, input.requester);
    return NO_REQUESTER;
  }

  /** The contact with this email (created when missing) as the requester. */
  async requesterByEmail(trx: Knex.Transaction, orgId: string, input: RequesterInput): Promise<Requester> {
    return requesterOf(await this.deps.contacts.findOrCreateByEmail(orgId, { name: input.name ?? null, email: input.email }, trx));
  }

  /** Inserts a ticket with the organization's next number, its `created` event and the requester's first mail. */
  async insertTicket(trx: Knex.Transaction, fx: Effects, actor: TicketActor, input: NewTicket, source: TicketSource, requester?: Requester): Promise<Ticket> {
    const orgId = actor.orgId;
    const who = requester ?? (await this.requesterFor(trx, orgId, input));
    if (input.conversationId) await this.conversationIn(trx, orgId, input.conversationId);
    if (input.assignedTo) await this.assertAssignee(trx, orgId, input.assignedTo);
    const tags = normalizeTags(input.tags ?? []);
    // The counter row stays locked until commit: concurrent creates take turns, and a rollback returns the number.
    const [counter] = (await trx('ticket_counters')
      .insert({ organizationId: orgId, lastNumber: 1 })
      .onConflict('organization_id')
      .merge({ lastNumber: trx.raw('ticket_counters.last_number + 1') })
      .returning('lastNumber')) as { lastNumber: number }[];
    const ticket = await this.models.Ticket.forOrg(orgId, trx).insertAndFetch({
      organizationId: orgId,
      number: counter!.lastNumber,
      title: input.title.trim(),
      description: input.description ?? null,
      status: 'open',
      priority: input.priority ?? 'medium',
      source,
      ...who,
      conversationId: input.conversationId ?? null,
      assignedTo: input.assignedTo ?? null,
      createdBy: actor.type === 'agent' ? actor.userId : null,
      tags,
      dueAt: input.dueAt ? new Date(input.dueAt) : null,
    });
    await this.addEvent(trx, ticket, actor, 'created', { data: { number: ticket.number, source, assignedTo: ticket.assignedTo, conversationId: ticket.conversationId } });
    if (ticket.assignedTo) fx.assigned.push({ ticket, by: actor });
    await this.deps.mail.send(trx, ticket, 'created');
    fx.announce('created', ticket);
    return ticket;
  }

  /**
   * Applies a PATCH to a locked ticket: one timeline event per kind of change, the requester mailed when it
   * becomes resolved or closed. Nothing changed: nothing written, nothing announced.
   */
  async applyChanges(trx: Knex.Transaction, fx: Effects, actor: TicketActor, current: Ticket, input: TicketChanges, note?: string): Promise<Ticket> {
    if (current.status === 'merged') throw new InvalidTransition('A merged ticket cannot change');
    const patch: Partial<Ticket> = {};
    const fields: string[] = [];
    const set = <K extends keyof Ticket>(key: K, value: Ticket[K], same: boolean) => {
      if (same) return;
      patch[key] = value;
      fields.push(key);
    };
    if (input.title !== undefined) set('title', input.title.trim(), input.title.trim() === current.title);
    if (input.description !== undefined) set('description', input.description, input.description === current.description);
    if (input.tags !== undefined) {
      const tags = normalizeTags(input.tags);
      set('tags', tags, JSON.stringify(tags) === JSON.stringify(current.tags));
    }
    if (input.dueAt !== undefined) {
      const dueAt = input.dueAt === null ? null : new Date(input.dueAt);
      set('dueAt', dueAt, (dueAt?.getTime() ?? null) === (current.dueAt?.getTime() ?? null));
    }
    if (input.contactId !== undefined && input.contactId !== current.contactId) {
      Object.assign(patch, input.contactId === null ? NO_REQUESTER : await this.requesterFor(trx, current.organizationId, { contactId: input.contactId }));
      fields.push('contactId');
    }
    const priorityChanged = input.priority !== undefined && input.priority !== current.priority;
    if (priorityChanged) patch.priority = input.priority;
    const assigneeChanged = input.assignedTo !== undefined && input.assignedTo !== current.assignedTo;
    if (assigneeChanged) {
      if (input.assignedTo) await this.assertAssignee(trx, current.organizationId, input.assignedTo);
      patch.assignedTo = input.assignedTo;
    }
    const statusChanged = input.status !== undefined && input.status !== current.status;
    if (statusChanged) {
      assertTransition(current.status, input.status!);
      Object.assign(patch, statusPatch(input.status!, new Date()));
    }
    if (Object.keys(patch).length === 0) return current;

    const ticket = await this.models.Ticket.forOrg(current.organizationId, trx).patchAndFetchById(current.id, patch);
    if (fields.length) await this.addEvent(trx, ticket, actor, 'updated', { data: { fields } });
    if (priorityChanged) await this.addEvent(trx, ticket, actor, 'priority_changed', { data: { from: current.priority, to: ticket.priority } });
    if (assigneeChanged) {
      await this.addEvent(trx, ticket, actor, 'assigned', { data: { from: current.assignedTo, to: ticket.assignedTo } });
      if (ticket.assignedTo) fx.assigned.push({ ticket, by: actor });
    }
    if (statusChanged) {
      await this.addEvent(trx, ticket, actor, 'status_changed', { content: note ?? null, data: { from: current.status, to: ticket.status } });
      if (ticket.status === 'resolved' || ticket.status === 'closed') await this.deps.mail.send(trx, ticket, ticket.status);
    }
    fx.announce(statusChanged ? 'status_changed' : assigneeChanged && fields.length === 0 && !priorityChanged ? 'assigned' : 'updated', ticket);
    return ticket;
  }
}
