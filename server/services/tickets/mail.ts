// Mail to a ticket's requester: sent From the organization through the outbox, one thread per ticket. Every mail
// has its own Message-ID (stored in ticket_mails), In-Reply-To the previous one and References the whole thread.
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import type { MailHeaders, OutboxEmail } from '../../../db/models/OutboxEmail.js';
import type { Organization } from '../../../db/models/Organization.js';
import type { Ticket } from '../../../db/models/Ticket.js';
import type { TicketMail, TicketMailKind } from '../../../db/models/TicketMail.js';
import type { Mailer } from '../../mail/index.js';
import { senderOf, type EmailIdentityRow } from '../email/identity.js';
import { parseMailbox } from '../../mail/address.js';

export { parseMailbox, type MailAddress } from '../../mail/address.js';

/** Mail clients cope with long References, but RFC 5322 suggests trimming: the root and the latest ones stay. */
const MAX_REFERENCES = 20;

/**
 * Who a ticket mail is from: the organization's sender identity (server/services/email), which until its domain is
 * verified means MAIL_FROM's address as "<Org> via <platform>" with Reply-To the organization's address.
 */
export function ticketSender(organization: Pick<Organization, 'name'>, mailFrom: string, identity?: Parameters<typeof senderOf>[2]): Pick<MailHeaders, 'from' | 'replyTo'> {
  return senderOf(organization.name, mailFrom, identity);
}

export function ticketSubject(ticket: Pick<Ticket, 'number' | 'title'>): string {
  return `[#${ticket.number}] ${ticket.title}`;
}

function bodyOf(kind: TicketMailKind, ticket: Ticket, organization: Organization, content: string | null, signature: string | null): string {
  const hello = ticket.requesterName ? `Hello ${ticket.requesterName},\n\n` : 'Hello,\n\n';
  const sign = `\n-- \n${signature ? `${signature}\n` : ''}${organization.name} support, ticket #${ticket.number}\n`;
  switch (kind) {
    case 'created':
      return `${hello}we received your request and opened ticket #${ticket.number}: ${ticket.title}\nWe will answer you here.\n${sign}`;
    case 'reply':
      return `${content ?? ''}\n${sign}`;
    case 'resolved':
      return `${hello}your ticket #${ticket.number} (${ticket.title}) is resolved. If something is still not right, answer this mail and we will reopen it.\n${sign}`;
    case 'closed':
      return `${hello}your ticket #${ticket.number} (${ticket.title}) is now closed.\n${sign}`;
  }
}

export interface TicketMailResult {
  mail: TicketMail;
  outbox: OutboxEmail;
}

export class TicketMailer {
  constructor(private readonly deps: { models: Models; mailer: Mailer; mailFrom: string }) {}

  /** The domain of MAIL_FROM's address, for Message-IDs. */
  private get domain(): string {
    return parseMailbox(this.deps.mailFrom).address.split('@')[1] || 'localhost';
  }

  /**
   * Queues one mail of the ticket's thread inside `trx` (the caller holds the ticket's row lock, so two mails of one
   * ticket never pick the same predecessor). Nothing is sent when the ticket has no requester address.
   */
  async send(trx: Knex.Transaction, ticket: Ticket, kind: TicketMailKind, opts: { content?: string; cc?: string[]; eventId?: string } = {}): Promise<TicketMailResult | null> {
    const to = ticket.requesterEmail;
    if (!to) return null;
    const organization = await this.deps.models.Organization.query(trx).findById(ticket.organizationId);
    if (!organization) return null;
    const thread = await this.deps.models.TicketMail.forOrg(ticket.organizationId, trx).where('ticketId', ticket.id).orderBy('createdAt').orderBy('id').select('messageId');
    const ids = thread.map((m) => m.messageId);
    const references = ids.length > MAX_REFERENCES ? [ids[0]!, ...ids.slice(ids.length - MAX_REFERENCES + 1)] : ids;
    const messageId = `<ticket-${ticket.id}.${randomBytes(8).toString('hex')}@${this.domain}>`;
    const inReplyTo = ids.length ? ids[ids.length - 1]! : undefined;
    const identity = (await trx('email_identities').where({ organizationId: ticket.organizationId }).first()) as EmailIdentityRow | undefined;
    const headers: MailHeaders = {
      ...ticketSender(organization, this.deps.mailFrom, identity),
      messageId,
      ...(inReplyTo ? { inReplyTo, references } : {}),
      ...(opts.cc?.length ? { cc: opts.cc } : {}),
      organizationId: ticket.organizationId,
    };
    const outbox = await this.deps.mailer.queue({ kind: `ticket_${kind}`, to, subject: ticketSubject(ticket), text: bodyOf(kind, ticket, organization, opts.content ?? null, identity?.signature ?? null), headers }, trx);
    const mail = await this.deps.models.TicketMail.forOrg(ticket.organizationId, trx).insertAndFetch({
      organizationId: ticket.organizationId,
      ticketId: ticket.id,
      kind,
      messageId,
      inReplyTo: inReplyTo ?? null,
      toAddress: to,
      outboxEmailId: outbox.id,
      eventId: opts.eventId ?? null,
      // Strictly increasing within a ticket even inside one transaction, where now() would repeat.
      createdAt: new Date(),
    });
    return { mail, outbox };
  }

  /**
   * The ticket an inbound mail belongs to, by a Message-ID it answers (In-Reply-To or References). A merged ticket's
   * thread lands on the ticket it was merged into.
   */
  async ticketForMessageIds(orgId: string, messageIds: string[], trx?: Knex.Transaction): Promise<Ticket | null> {
    if (messageIds.length === 0) return null;
    const hit = await this.deps.models.TicketMail.forOrg(orgId, trx).whereIn('messageId', messageIds).orderBy('createdAt', 'desc').first();
    if (!hit) return null;
    return this.landingOf(orgId, await this.deps.models.Ticket.forOrg(orgId, trx).findById(hit.ticketId), trx);
  }

  /** Where mail for `ticket` lands: the ticket itself, or the ticket it was merged into (followed through merges). */
  async landingOf(orgId: string, ticket: Ticket | undefined, trx?: Knex.Transaction): Promise<Ticket | null> {
    for (let hops = 0; ticket?.mergedIntoId && hops < 10; hops++) ticket = await this.deps.models.Ticket.forOrg(orgId, trx).findById(ticket.mergedIntoId);
    return ticket ?? null;
  }
}
