// Schemas of /email: the sender identity.
import type { JsonSchema } from '../registry.js';
import { nullableDateTime, object } from './common.js';

const nullableEmail = { type: ['string', 'null'], format: 'email', maxLength: 320 } as const;

export const identityBody = object({
  fromName: { type: ['string', 'null'], maxLength: 200, description: 'The display name of From (verified domains only)' },
  fromAddress: { ...nullableEmail, description: 'The organization\'s address; its domain is the one to verify' },
  replyTo: { ...nullableEmail, description: 'Where replies go (default: fromAddress)' },
  signature: { type: ['string', 'null'], maxLength: 2000, description: 'Plain text appended to the organization\'s mail' },
});

export const DnsRecordView: JsonSchema = object({
  type: { type: 'string', enum: ['TXT'] },
  name: { type: 'string' },
  value: { type: 'string' },
  purpose: { type: 'string', enum: ['verification', 'spf', 'dkim', 'dkim_next'], description: '`dkim`: `<selector>._domainkey.<domain>` with the organization\'s public key; its mail is DKIM-signed with the private key once the domain is verified. `dkim_next`: a rotation\'s next key, to publish beside `dkim`; it signs once `POST /email/identity/verify` finds it' },
}, ['type', 'name', 'value', 'purpose']);

export const EmailIdentityView: JsonSchema = object({
  fromName: { type: ['string', 'null'] },
  fromAddress: { ...nullableEmail },
  replyTo: { ...nullableEmail },
  signature: { type: ['string', 'null'] },
  domain: { type: ['string', 'null'] },
  domainVerified: { type: 'boolean' },
  domainVerifiedAt: nullableDateTime,
  dnsRecords: { type: 'array', items: DnsRecordView },
}, ['fromName', 'fromAddress', 'replyTo', 'signature', 'domain', 'domainVerified', 'domainVerifiedAt', 'dnsRecords']);


