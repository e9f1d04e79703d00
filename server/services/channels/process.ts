// Processing a stored inbound event (a job, so a crash between storing and processing still processes it): a mail
// answering a ticket joins the ticket; anything else joins its contact's open conversation on the channel, through
// the one send path, so agents hear `new_message` as for widget chats. WhatsApp statuses update deliveries.
import type { Knex } from 'knex';
import type { Conversation } from '../../../db/models/Conversation.js';
import type { Ticket } from '../../../db/models/Ticket.js';
import type { Job } from '../../jobs/index.js';
import type { ContactService } from '../contacts/index.js';
import type { MessageService } from '../messages/index.js';
import type { TicketService } from '../tickets/index.js';
import { receiveTicketMail } from '../tickets/inbound.js';
import type { InboundJob } from './inbound.js';
import type { ChannelRow, InboundEventRow, InboundMessage, InboundStatus } from './types.js';
import type { DeliveryUpdates } from './outbound.js';
import type { InboundMediaStore } from './media.js';
import { MESSAGE_CONTENT_MAX } from '../../limits.js';

const SUBJECT_NUMBER = /\[#(\d{1,9})\]/;

export class InboundProcessor {
  constructor(private readonly deps: { knex: Knex; contacts: ContactService; messages: MessageService; tickets: TicketService; deliveries: DeliveryUpdates; media: InboundMediaStore }) {}

  async handle(job: Job<InboundJob>): Promise<void> {
    const event = (await this.deps.knex('inbound_events').where({ id: job.payload.eventId }).first()) as InboundEventRow | undefined;
    if (!event || event.status !== 'pending') return;
    const channel = (await this.deps.knex('channels').where({ id: event.channelId }).first()) as ChannelRow | undefined;
    if (!channel) return this.finish(event, 'ignored', { error: 'channel removed' });
    if (event.payload.kind === 'status') {
      await this.deps.deliveries.providerStatus(channel, event.payload as InboundStatus);
      return this.finish(event, 'processed', {});
    }
    const mail = event.payload as InboundMessage;
    if (channel.type === 'email') {
      const ticket = await this.ticketOf(channel.organizationId, mail);
      if (ticket) {
        const { ticket: joined } = await receiveTicketMail(this.deps.tickets.core, ticket, { content: mail.text, from: mail.from, subject: mail.subject, messageId: mail.messageId, contactId: ticket.contactId });
        return this.finish(event, 'processed', { ticketId: joined.id });
      }
    }
    const conversationId = await this.toConversation(channel, event, mail);
    return this.finish(event, 'processed', { conversationId });
  }

  /** By In-Reply-To/References of a ticket mail, else by `[#number]` in the subject from the requester's address. */
  private async ticketOf(orgId: string, mail: InboundMessage): Promise<Ticket | null> {
    const ids = [mail.inReplyTo, ...mail.references].filter((x): x is string => !!x);
    const threaded = await this.deps.tickets.core.deps.mail.ticketForMessageIds(orgId, ids);
    if (threaded) return threaded;
    const number = SUBJECT_NUMBER.exec(mail.subject ?? '')?.[1];
    if (!number) return null;
    const ticket = await this.deps.tickets.core.models.Ticket.forOrg(orgId).where({ number: Number(number) }).first();
    return ticket && ticket.requesterEmail?.toLowerCase() === mail.from.toLowerCase() ? ticket : null;
  }

  private async toConversation(channel: ChannelRow, event: InboundEventRow, mail: InboundMessage): Promise<string> {
    const { knex } = this.deps;
    const orgId = channel.organizationId;
    // A reply to a mail we sent for a conversation goes back to that conversation.
    const ids = [mail.inReplyTo, ...mail.references].filter((x): x is string => !!x);
    const threaded = ids.length ? ((await knex('channel_deliveries').where({ organizationId: orgId }).whereIn('providerMessageId', ids).orderBy('createdAt', 'desc').first()) as { conversationId: string } | undefined) : undefined;
    const contactId = await this.contactOf(channel, mail);
    let conversation = threaded ? ((await knex('conversations').where({ id: threaded.conversationId, organizationId: orgId }).first()) as Conversation | undefined) : undefined;
    if (!conversation || conversation.status === 'closed' || conversation.contactId !== contactId) {
      conversation = (await knex('conversations').where({ organizationId: orgId, channelId: channel.id, contactId }).whereIn('status', ['open', 'pending', 'resolved']).orderBy('createdAt', 'desc').first()) as Conversation | undefined;
    }
    const files = mail.media?.length ? await this.deps.media.store(channel, event.id, mail.media) : null;
    const text = [mail.text, ...(files?.notes ?? [])].filter(Boolean).join('\n\n');
    const content = channel.type === 'email' && mail.subject && !conversation ? `${mail.subject}\n\n${text}` : text;
    const message = {
      // The event id as clientMessageId: a job run twice stores the message once (and opens one conversation).
      content: content.slice(0, MESSAGE_CONTENT_MAX) || (files?.objectIds.length ? mail.media!.map((m) => m.fileName ?? 'file').join(', ') : '(empty)'), clientMessageId: `inbound:${event.id}`,
      ...(files?.objectIds.length ? { attachments: files.objectIds, type: files.images ? ('image' as const) : ('file' as const) } : {}),
      metadata: { channel: channel.type, channelId: channel.id, from: mail.from, ...(mail.subject ? { subject: mail.subject } : {}), ...(mail.messageId ? { providerMessageId: mail.messageId } : {}) },
    };
    const start = {
      channel: channel.type, source: 'channel', subject: mail.subject?.slice(0, 255) ?? null, visitorName: mail.fromName,
      visitorEmail: channel.type === 'email' ? mail.from : null, channelId: channel.id, channelAddress: mail.from,
    };
    // The one send path: a first message opens the conversation in the same transaction, and routing and
    // notifications follow its conversation.created event as for widget chats.
    const sent = await this.deps.messages.send({ type: 'contact', orgId, contactId }, conversation ? { ...message, conversationId: conversation.id } : { ...message, start });
    return sent.conversation.id;
  }

  /** The contact with this channel identity, else found or created by email/phone through the conflict rules. */
  private async contactOf(channel: ChannelRow, mail: InboundMessage): Promise<string> {
    const identity = { channel: channel.type, externalId: mail.from };
    const known = (await this.deps.knex('contact_identities').where({ organizationId: channel.organizationId, channel: identity.channel, externalId: identity.externalId }).first()) as { contactId: string } | undefined;
    if (known) return known.contactId;
    const fields = { name: mail.fromName, ...(channel.type === 'email' ? { email: mail.from } : {}), ...(channel.type === 'whatsapp' ? { phone: `+${mail.from.replace(/^\+/, '')}` } : {}) };
    try {
      return (await this.deps.contacts.conflicts.upsertFromSource(channel.organizationId, 'channel', { ...fields, identity })).contact.id;
    } catch (err) {
      // A phone number that does not parse is no reason to lose the message: the identity alone names the contact.
      if (channel.type !== 'whatsapp') throw err;
      return (await this.deps.contacts.conflicts.upsertFromSource(channel.organizationId, 'channel', { name: mail.fromName, identity })).contact.id;
    }
  }

  private async finish(event: InboundEventRow, status: InboundEventRow['status'], e: { error?: string; conversationId?: string; ticketId?: string }): Promise<void> {
    await this.deps.knex('inbound_events').where({ id: event.id }).update({ status, error: e.error ?? null, conversationId: e.conversationId ?? null, ticketId: e.ticketId ?? null, processedAt: new Date() });
  }
}

