// /email: the organization's mail sender identity (read by agents, changed by admins) and its DNS verification.
import { EMAIL_TEMPLATES } from '../server/services/email/index.js';
import { email, object, otpCode, uuid } from './schemas/common.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { EmailIdentityView, identityBody } from './schemas/email.js';

const tag = 'Email';
const agent = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;
const admin = { kind: 'org', role: 'admin', orgFrom: 'token' } as const;

export function emailRoutes(s: RouteServices): AnyRoute[] {
  const identity = { status: 200, description: 'The sender identity', data: EmailIdentityView };
  return [
    defineRoute({
      method: 'get', path: '/email/identity', operationId: 'getEmailIdentity', tag, auth: agent,
      summary: 'The sender identity of the organization\'s mail, with the DNS records its domain should publish',
      response: identity,
      handler: async ({ orgId }) => ({ message: 'Email identity', data: await s.email.get(orgId) }),
    }),
    defineRoute({
      method: 'put', path: '/email/identity', operationId: 'putEmailIdentity', tag, auth: admin,
      summary: 'Set the sender identity (From name and address, Reply-To, signature)',
      description: 'Until the domain of `fromAddress` is verified, mail leaves from the platform\'s address as "<Org> via <platform>" with Reply-To the organization\'s address. Changing `fromAddress` to another domain makes it unverified again.',
      body: identityBody,
      response: identity,
      handler: async ({ orgId, body }) => ({ message: 'Email identity saved', data: await s.email.put(orgId, body) }),
    }),
    defineRoute({
      method: 'post', path: '/email/identity/verify', operationId: 'verifyEmailIdentity', tag, auth: admin,
      summary: 'Look up the verification TXT record of the from address\'s domain',
      description: 'Not finding the record is not an error: the answer says `domainVerified: false`.',
      response: identity,
      handler: async ({ orgId }) => ({ message: 'Email identity checked', data: await s.email.verify(orgId) }),
    }),
    defineRoute({
      method: 'post', path: '/email/identity/dkim/rotate', operationId: 'rotateEmailDkimKey', tag, auth: admin,
      summary: 'Start a DKIM key rotation: a new key under a new selector, listed as the `dkim_next` record to publish',
      description: 'The current key keeps signing until `POST /email/identity/verify` finds the `dkim_next` record in DNS; then the new key signs and the old one is deleted (its record can be removed). One rotation waits at a time: another before it finishes is 409.',
      response: identity,
      errors: [409],
      handler: async ({ orgId }) => ({ message: 'DKIM key rotation started', data: await s.email.rotateDkim(orgId) }),
    }),
    defineRoute({
      method: 'post', path: '/email/send', operationId: 'sendEmailAi', tag, auth: { kind: 'ai' },
      summary: 'AI service: mail the conversation\'s contact from a server-side template',
      description: '`to` must be the conversation\'s contact (else 400): no relay. The AI never sends HTML; templates are rendered here (`agent_verification_otp` issues a one-time code; a new one within 60 s is 429). A replay of `idempotencyKey` with the same body answers 200 with the same mail; another body 409.',
      body: object({
        organizationId: uuid, conversationId: uuid, to: email, template: { type: 'string', enum: [...EMAIL_TEMPLATES] },
        variables: { type: 'object', maxProperties: 10, additionalProperties: { type: 'string', maxLength: 5000 }, description: '`summary` (conversation_summary); `ticketNumber`, `status`, `message` (ticket_update)' },
        idempotencyKey: { type: 'string', minLength: 1, maxLength: 200 },
      }, ['organizationId', 'conversationId', 'to', 'template', 'idempotencyKey']),
      response: { status: 202, description: 'Queued', data: object({ emailId: uuid, status: { type: 'string', enum: ['queued', 'logged'] } }, ['emailId', 'status']), also: { status: 200, description: 'A replay of `idempotencyKey` with the same body: the mail of the first request, not sent again' } },
      errors: [404, 409, 429],
      handler: async ({ body }) => {
        const sent = await s.emailSend.send(body);
        return { status: sent.replay ? 200 : 202, message: 'Mail queued', data: { emailId: sent.emailId, status: sent.status } };
      },
    }),
    defineRoute({
      method: 'post', path: '/email/verify-otp', operationId: 'verifyEmailOtpAi', tag, auth: { kind: 'ai' },
      summary: 'AI service: check the code mailed by agent_verification_otp; sets the contact\'s emailVerifiedAt',
      description: 'Codes are single use, valid 10 minutes, and 5 wrong tries lock them (400 invalid_otp).',
      body: object({ organizationId: uuid, conversationId: uuid, email, code: otpCode }, ['organizationId', 'conversationId', 'email', 'code']),
      response: { status: 200, description: 'Verified', data: object({ verified: { type: 'boolean' }, verifiedAt: { type: 'string', format: 'date-time' } }, ['verified', 'verifiedAt']) },
      errors: [404],
      handler: async ({ body }) => ({ message: 'Email verified', data: await s.emailSend.verifyOtp(body) }),
    }),
  ];
}
