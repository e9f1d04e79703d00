// What the internal AI service does with tickets. Every call names its organization, and every referenced
// conversation, contact and ticket is looked up inside it (else 404). Creates are idempotent by key.
import type { Knex } from 'knex';
import type { Ticket, TicketPriority } from '../../../db/models/Ticket.js';
import { NotFound } from '../../errors.js';
import type { Effects, TicketActor, TicketChanges, TicketCore } from './core.js';
import { contactIn, NO_REQUESTER, requesterOf, type Requester } from './requester.js';

export interface AiTicketInput {
  idempotencyKey: string;
  title: string;
  description?: string;
  priority?: TicketPriority;
  conversationId?: string;
  contactId?: string;
  requesterName?: string;
  requesterEmail?: string;
}

export class TicketAiService {
  constructor(private readonly core: TicketCore) {}

  /**
   * The first request with a key creates the ticket (`created: true`); a replay with the same body answers that
   * ticket, waiting for the first request when it is still running; the same key with another body is 409.
   */
  create(orgId: string, input: AiTicketInput): Promise<{ ticket: Ticket; created: boolean }> {
    const { idempotencyKey, ...fields } = input;
    const actor: TicketActor = { type: 'ai', orgId };
    const core = this.core;
    return core.run(async (trx, fx) => {
      await this.organization(trx, orgId);
      const claim = await core.deps.keys.claim(trx, orgId, 'tickets.ai.create', idempotencyKey, fields);
      if (claim.replay) return { ticket: await core.get(orgId, claim.resourceId, trx), created: false };
      const conversation = fields.conversationId ? await core.conversationIn(trx, orgId, fields.conversationId) : null;
      // The requester: the named contact, else the named email, else the conversation's contact or visitor.
      let requester: Requester = { ...NO_REQUESTER, requesterName: fields.requesterName ?? conversation?.visitorName ?? null };
      if (fields.contactId) requester = requesterOf(await contactIn(core.models, trx, orgId, fields.contactId));
      else if (fields.requesterEmail) requester = await core.requesterByEmail(trx, orgId, { name: fields.requesterName, email: fields.requesterEmail });
      else if (conversation?.contactId) requester = requesterOf(await contactIn(core.models, trx, orgId, conversation.contactId));
      else if (conversation?.visitorEmail) requester = await core.requesterByEmail(trx, orgId, { name: conversation.visitorName, email: conversation.visitorEmail });
      const ticket = await core.insertTicket(trx, fx, actor, { title: fields.title, description: fields.description, priority: fields.priority, conversationId: fields.conversationId }, 'ai', requester);
      await core.deps.keys.complete(trx, claim, ticket.id);
      return { ticket, created: true };
    });
  }

  /** Changes fields or status; with an idempotencyKey a replay answers the ticket without applying anything again. */
  update(orgId: string, ticketId: string, input: TicketChanges & { idempotencyKey?: string }): Promise<Ticket> {
    const { idempotencyKey, ...changes } = input;
    return this.withKey(orgId, ticketId, 'tickets.ai.update', idempotencyKey, { ticketId, ...changes }, async (trx, fx) =>
      this.core.applyChanges(trx, fx, { type: 'ai', orgId }, await this.core.lock(trx, orgId, ticketId), changes),
    );
  }

  /**
   * Closes the ticket (any status but merged) and mails the requester; the resolution note is kept on the timeline.
   * A ticket already closed is answered as it is: nothing is written or sent again.
   */
  close(orgId: string, ticketId: string, input: { resolutionNote?: string; idempotencyKey?: string }): Promise<Ticket> {
    return this.withKey(orgId, ticketId, 'tickets.ai.close', input.idempotencyKey, { ticketId, resolutionNote: input.resolutionNote ?? null }, async (trx, fx) => {
      const ticket = await this.core.lock(trx, orgId, ticketId);
      if (ticket.status === 'closed') return ticket;
      return this.core.applyChanges(trx, fx, { type: 'ai', orgId }, ticket, { status: 'closed' }, input.resolutionNote);
    });
  }

  /** The tickets of the conversation's contact (or, without a contact, of the conversation), newest first. */
  async status(orgId: string, conversationId: string): Promise<{ contactId: string | null; tickets: Ticket[] }> {
    const conversation = await this.core.models.Conversation.forOrg(orgId).findById(conversationId);
    if (!conversation) throw new NotFound('Conversation');
    const tickets = this.core.models.Ticket.forOrg(orgId).whereNot('status', 'merged').orderBy('number', 'desc').limit(50);
    if (conversation.contactId) tickets.where('contactId', conversation.contactId);
    else tickets.where('conversationId', conversation.id);
    return { contactId: conversation.contactId, tickets: await tickets };
  }

  /** An unknown organization is 404 (its key could not be stored anyway). */
  private async organization(trx: Knex.Transaction, orgId: string): Promise<void> {
    if (!(await this.core.models.Organization.query(trx).findById(orgId))) throw new NotFound('Organization');
  }

  private withKey(
    orgId: string,
    ticketId: string,
    scope: string,
    key: string | undefined,
    request: unknown,
    work: (trx: Knex.Transaction, fx: Effects) => Promise<Ticket>,
  ): Promise<Ticket> {
    return this.core.run(async (trx, fx) => {
      if (key) await this.organization(trx, orgId);
      const claim = key ? await this.core.deps.keys.claim(trx, orgId, scope, key, request) : null;
      if (claim?.replay) return this.core.get(orgId, claim.resourceId, trx);
      const ticket = await work(trx, fx);
      if (claim) await this.core.deps.keys.complete(trx, claim, ticketId);
      return ticket;
    });
  }
}
