// /email: the organization's mail sender identity (read by agents, changed by admins) and its DNS verification.
import type { EmailIdentityInput } from '../server/services/email/index.js';
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
      handler: async ({ orgId }) => ({ message: 'Email identity', data: await s.email.get(orgId!) }),
    }),
    defineRoute<EmailIdentityInput>({
      method: 'put', path: '/email/identity', operationId: 'putEmailIdentity', tag, auth: admin,
      summary: 'Set the sender identity (From name and address, Reply-To, signature)',
      description: 'Until the domain of `fromAddress` is verified, mail leaves from the platform\'s address as "<Org> via <platform>" with Reply-To the organization\'s address. Changing `fromAddress` to another domain makes it unverified again.',
      body: identityBody,
      response: identity,
      handler: async ({ orgId, body }) => ({ message: 'Email identity saved', data: await s.email.put(orgId!, body) }),
    }),
    defineRoute({
      method: 'post', path: '/email/identity/verify', operationId: 'verifyEmailIdentity', tag, auth: admin,
      summary: 'Look up the verification TXT record of the from address\'s domain',
      description: 'Not finding the record is not an error: the answer says `domainVerified: false`.',
      response: identity,
      handler: async ({ orgId }) => ({ message: 'Email identity checked', data: await s.email.verify(orgId!) }),
    }),
  ];
}
