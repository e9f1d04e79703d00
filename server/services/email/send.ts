// Mail the AI service may send on an organization's behalf: server-side templates only, to the conversation's own
// contact only (no relay), idempotent by key; and the contact's email verification by one-time code.
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import { NotFound, RateLimited, ValidationFailed } from '../../errors.js';
import { OTP_TTL_SECONDS, type OtpService } from '../../auth/otp.js';
import type { Mailer } from '../../mail/index.js';
import type { ContactService } from '../contacts/index.js';
import type { IdempotencyKeys } from '../tickets/idempotency.js';
import type { EmailIdentityService } from './identity.js';

export const EMAIL_TEMPLATES = ['agent_verification_otp', 'conversation_summary', 'ticket_update'] as const;
export type EmailTemplate = (typeof EMAIL_TEMPLATES)[number];

export interface TemplatedMail {
  organizationId: string;
  conversationId: string;
  to: string;
  template: EmailTemplate;
  variables?: Record<string, string>;
  idempotencyKey: string;
}

/** A new code for the same address is refused this long after the last one (429). */
const RESEND_SECONDS = 60;

const text = (v: unknown, max = 5000): string => String(v ?? '').replace(/[\r\u0000]/g, '').slice(0, max);

export class EmailSendService {
  constructor(private readonly deps: { models: Models; knex: Knex; mailer: Mailer; otp: OtpService; keys: IdempotencyKeys; identity: EmailIdentityService; contacts: ContactService }) {}

  /** The conversation's contact address (404 for another organization's conversation). */
  private async recipientOf(orgId: string, conversationId: string, db: Knex | Knex.Transaction): Promise<{ email: string | null; contactId: string | null; name: string | null }> {
    const conversation = (await db('conversations').where({ id: conversationId, organizationId: orgId }).first()) as { contactId: string | null; visitorEmail: string | null; visitorName: string | null } | undefined;
    if (!conversation) throw new NotFound('Conversation');
    const contact = conversation.contactId ? ((await db('contacts').where({ id: conversation.contactId, organizationId: orgId }).first()) as { email: string | null; name: string | null } | undefined) : undefined;
    return { email: (contact?.email ?? conversation.visitorEmail)?.toLowerCase() ?? null, contactId: conversation.contactId, name: contact?.name ?? conversation.visitorName };
  }

  private otpKey(orgId: string, email: string): string {
    return `${orgId}:${email.toLowerCase()}`;
  }

  async send(input: TemplatedMail): Promise<{ emailId: string; status: string; replay: boolean }> {
    const to = input.to.trim().toLowerCase();
    const recipient = await this.recipientOf(input.organizationId, input.conversationId, this.deps.knex);
    if (!recipient.email || recipient.email !== to) throw new ValidationFailed('`to` must be the conversation\'s contact', [{ field: 'to', message: 'is not the conversation\'s contact' }]);
    if (input.template === 'agent_verification_otp') {
      const last = await this.deps.otp.find(this.otpKey(input.organizationId, to), 'contact_verification');
      const age = last ? (Date.now() - (new Date(last.expiresAt).getTime() - OTP_TTL_SECONDS * 1000)) / 1000 : Infinity;
      if (last && !last.consumedAt && age < RESEND_SECONDS) throw new RateLimited(RESEND_SECONDS - age);
    }
    return this.deps.knex.transaction(async (trx) => {
      const claim = await this.deps.keys.claim(trx, input.organizationId, 'email_send', input.idempotencyKey, { ...input, to });
      if (claim.replay) {
        const row = (await trx('outbox_emails').where({ id: claim.resourceId }).first()) as { id: string; status: string };
        return { emailId: row.id, status: row.status === 'logged' ? 'logged' : 'queued', replay: true };
      }
      const organization = (await trx('organizations').where({ id: input.organizationId }).first()) as { name: string };
      const sender = await this.deps.identity.senderFor(input.organizationId, organization.name, trx);
      const signature = await this.deps.identity.signatureOf(input.organizationId, trx);
      const { subject, body } = await this.render(input, organization.name, trx);
      // A code mail carries no signature: the code must be the only 6-digit number in it, and names and signatures
      // are free text that may hold one.
      const sign = input.template === 'agent_verification_otp' ? '' : `\n-- \n${signature ? `${signature}\n` : ''}${organization.name}\n`;
      const outbox = await this.deps.mailer.queue({ kind: `ai_${input.template}`, to, subject, text: `${recipient.name ? `Hello ${recipient.name},` : 'Hello,'}\n\n${body}\n${sign}`, headers: { from: sender.from, ...(sender.replyTo ? { replyTo: sender.replyTo } : {}), organizationId: input.organizationId } }, trx);
      await this.deps.keys.complete(trx, claim, outbox.id);
      return { emailId: outbox.id, status: outbox.status === 'logged' ? 'logged' : 'queued', replay: false };
    });
  }

  private async render(input: TemplatedMail, orgName: string, trx: Knex.Transaction): Promise<{ subject: string; body: string }> {
    const v = input.variables ?? {};
    switch (input.template) {
      case 'agent_verification_otp': {
        const code = await this.deps.otp.issue(this.otpKey(input.organizationId, input.to), 'contact_verification', { conversationId: input.conversationId }, trx);
        return { subject: `Your ${orgName} verification code`, body: `your verification code is ${code}. It is valid for 10 minutes. If you did not ask for it, ignore this mail.` };
      }
      case 'conversation_summary':
        return { subject: `Summary of your conversation with ${orgName}`, body: text(v.summary) || 'Thank you for contacting us.' };
      case 'ticket_update':
        return { subject: `Update on your ticket${v.ticketNumber ? ` #${text(v.ticketNumber, 12)}` : ''}`, body: `${v.status ? `Status: ${text(v.status, 40)}\n\n` : ''}${text(v.message)}` };
    }
  }

  /** Checks the code (CONTRACT §2 rules: single use, 5 tries, 10 minutes) and marks the contact's email verified. */
  async verifyOtp(input: { organizationId: string; conversationId: string; email: string; code: string }): Promise<{ verified: true; verifiedAt: string }> {
    const email = input.email.trim().toLowerCase();
    const recipient = await this.recipientOf(input.organizationId, input.conversationId, this.deps.knex);
    if (recipient.email !== email) throw new ValidationFailed('`email` must be the conversation\'s contact', [{ field: 'email', message: 'is not the conversation\'s contact' }]);
    // Outside a transaction: a wrong code's attempt must count even though the call fails.
    await this.deps.otp.verify(this.otpKey(input.organizationId, email), 'contact_verification', input.code, { consume: true });
    const verifiedAt = new Date();
    // A chat whose visitor gave an email but has no contact yet gets its contact now: the verification belongs to one.
    let contactId = recipient.contactId;
    if (!contactId) {
      contactId = (await this.deps.contacts.findOrCreateByEmail(input.organizationId, { name: recipient.name, email })).id;
      await this.deps.knex('conversations').where({ id: input.conversationId, organizationId: input.organizationId }).whereNull('contactId').update({ contactId });
    }
    await this.deps.knex('contacts').where({ id: contactId, organizationId: input.organizationId }).update({ emailVerifiedAt: verifiedAt, updatedAt: verifiedAt });
    return { verified: true, verifiedAt: verifiedAt.toISOString() };
  }
}
