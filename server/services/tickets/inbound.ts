// A requester's mail answering a ticket: a `reply` event from the contact on the ticket's timeline; a resolved ticket
// opens again, a closed one gets a follow-up ticket (the closed one stays closed), agents hear `ticket_updated`, and
// the assignee (else the organization's admins) gets a `ticket_reply_received` notification.
import type { Ticket } from '../../../db/models/Ticket.js';
import type { TicketEvent } from '../../../db/models/TicketEvent.js';
import type { TicketActor, TicketCore } from './core.js';
import { statusPatch } from './rules.js';

export interface InboundTicketMail {
  content: string;
  from: string;
  subject: string | null;
  messageId: string | null;
  contactId: string | null;
  /** Stored files of the mail (channel_media objects), shown on its reply event. */
  attachments?: string[];
}

export async function receiveTicketMail(core: TicketCore, target: Ticket, mail: InboundTicketMail): Promise<{ ticket: Ticket; event: TicketEvent; followUp: boolean }> {
  const received = await core.run(async (trx, fx) => {
    let ticket = await core.lock(trx, target.organizationId, target.id);
    let followUp = false;
    if (ticket.status === 'closed' || ticket.status === 'merged') {
      // Nobody acted but the platform: the created event says system, and createdBy stays empty.
      const platform = { type: 'system', orgId: ticket.organizationId } as unknown as TicketActor;
      const title = (mail.subject ?? ticket.title).replace(/^\s*((re|fwd?|aw|wg)\s*:\s*)*/i, '').replace(/\[#\d+\]\s*/, '').trim() || ticket.title;
      ticket = await core.insertTicket(trx, fx, platform, { title: title.slice(0, 200), description: `Follow-up of ticket #${ticket.number}` }, 'email', {
        contactId: ticket.contactId, requesterName: ticket.requesterName, requesterEmail: ticket.requesterEmail,
      });
      followUp = true;
    } else if (ticket.status === 'resolved') {
      const reopened = await core.models.Ticket.forOrg(ticket.organizationId, trx).patchAndFetchById(ticket.id, { ...statusPatch('open', new Date()), updatedAt: new Date() });
      await core.addEvent(trx, reopened, 'system', 'status_changed', { content: 'The requester answered by mail', data: { from: 'resolved', to: 'open' } });
      fx.announce('status_changed', reopened);
      ticket = reopened;
    }
    const event = await core.models.TicketEvent.forOrg(ticket.organizationId, trx).insertAndFetch({
      organizationId: ticket.organizationId, ticketId: ticket.id, type: 'reply', actorType: 'contact', actorId: mail.contactId,
      content: mail.content, data: { direction: 'inbound', from: mail.from, messageId: mail.messageId }, clientMessageId: null,
    });
    if (mail.attachments?.length) await trx('ticket_event_attachments').insert(mail.attachments.map((objectId, position) => ({ organizationId: ticket.organizationId, eventId: event.id, objectId, position })));
    const touched = await core.models.Ticket.forOrg(ticket.organizationId, trx).patchAndFetchById(ticket.id, { updatedAt: new Date() });
    if (!followUp) fx.announce('replied', touched);
    return { ticket: touched, event, followUp };
  });
  await notifyReply(core, received.ticket, target, mail, received.followUp).catch((err) => core.deps.logger.error({ err, ticketId: received.ticket.id }, 'could not notify of a ticket reply'));
  return received;
}

/** After commit: the ticket's assignee hears of the reply, else every admin (an unassigned ticket is everyone's). */
async function notifyReply(core: TicketCore, ticket: Ticket, answered: Ticket, mail: InboundTicketMail, followUp: boolean): Promise<void> {
  // A follow-up starts unassigned: whoever had the closed ticket hears of it first.
  const assignee = ticket.assignedTo ?? answered.assignedTo;
  const recipients = assignee
    ? [assignee]
    : (await core.models.Membership.forOrg(ticket.organizationId).where({ status: 'accepted' }).whereIn('role', ['admin', 'owner']).whereNotNull('userId').select('userId')).map((m) => m.userId!);
  await core.deps.notifications.notify(ticket.organizationId, recipients, {
    type: 'ticket_reply_received',
    title: followUp ? `A reply to closed ticket #${answered.number} opened ticket #${ticket.number}` : `New reply on ticket #${ticket.number}`,
    body: mail.content.slice(0, 200),
    data: { ticketId: ticket.id, number: ticket.number, from: mail.from, ...(followUp ? { followUpOf: answered.id } : {}) },
  });
}
