// Who a ticket is for: a contact of the organization, found by id or (through the contacts area) by email.
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import type { Contact } from '../../../db/models/Contact.js';
import { NotFound } from '../../errors.js';

export interface RequesterInput {
  name?: string | null;
  email: string;
}

export interface Requester {
  contactId: string | null;
  requesterName: string | null;
  requesterEmail: string | null;
}

export const NO_REQUESTER: Requester = { contactId: null, requesterName: null, requesterEmail: null };

export function requesterOf(contact: Contact): Requester {
  return { contactId: contact.id, requesterName: contact.name ?? null, requesterEmail: contact.email ?? null };
}

export async function contactIn(models: Models, trx: Knex.Transaction, orgId: string, contactId: string): Promise<Contact> {
  const contact = await models.Contact.forOrg(orgId, trx).findById(contactId);
  if (!contact) throw new NotFound('Contact');
  return contact;
}
