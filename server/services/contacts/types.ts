// The contacts area's shared shapes: a leaf, so its parts (conflicts, merge, notes) depend on what they need of the
// contact service, not on the module that builds them.
import type { Knex } from 'knex';
import dbErrors from 'db-errors';
import type { Models } from '../../../db/index.js';
import type { Contact } from '../../../db/models/Contact.js';
import type { ContactNote, ContactNoteSource } from '../../../db/models/ContactNote.js';
import type { DomainEventBus } from '../../events.js';
import { Conflict } from '../../errors.js';
import type { NotificationService } from '../notifications.js';
import type { Outbox } from '../webhooks/index.js';
import type { ContactAttributes } from './attributes.js';

export interface IdentityInput {
  channel: string;
  externalId: string;
}

/** An identity as it is stored and looked up: the channel in lower case, both trimmed. */
export const storedIdentity = (i: IdentityInput): IdentityInput => ({ channel: i.channel.trim().toLowerCase(), externalId: i.externalId.trim() });

export interface ContactServiceDeps {
  models: Models;
  knex: Knex;
  events: DomainEventBus;
  notifications: NotificationService;
}

export interface NoteInput {
  content: string;
  authorId: string | null;
  source?: ContactNoteSource;
  conversationId?: string | null;
}

/** What the area's parts use of the contact service. */
export interface ContactCore {
  get(orgId: string, id: string, trx?: Knex.Transaction): Promise<Contact>;
  getFull(orgId: string, id: string, trx?: Knex.Transaction): Promise<Contact>;
  withIdentities(orgId: string, contacts: Contact[], trx?: Knex.Transaction): Promise<Contact[]>;
  addIdentities(orgId: string, contactId: string, identities: IdentityInput[], trx: Knex.Transaction): Promise<void>;
  announce<E extends 'contact.created' | 'contact.updated'>(event: E, contact: Contact): Contact;
  /** The change's webhook event, in the caller's transaction (the contact presented as it is at commit). */
  record(trx: Knex.Transaction, orgId: string, event: 'contact.created' | 'contact.updated', contactId: string): Promise<void>;
  readonly attributes: ContactAttributes;
  readonly notes: { create(orgId: string, contactId: string, input: NoteInput, trx?: Knex.Transaction): Promise<ContactNote> };
  outbox: Outbox | null;
}

/** Unique violations name their index; each of ours means one thing to the caller. */
export function uniqueConflict(err: unknown): never {
  if (err instanceof dbErrors.UniqueViolationError) {
    const name = err.constraint ?? '';
    if (name.includes('email')) throw new Conflict('Another contact already has this email');
    if (name.includes('phone')) throw new Conflict('Another contact already has this phone number');
    if (name.includes('identities')) throw new Conflict('This channel identity already belongs to another contact');
  }
  throw err;
}
