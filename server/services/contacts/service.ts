// Contacts of an organization: reading, listing and filtering, writing fields, tags and attributes, deleting, and
// the find-or-create that conversations, tickets and channels share. Notes, conflicts and merges have their files.
import type { Knex } from 'knex';
import type { QueryBuilder } from 'objection';
import dbErrors from 'db-errors';
import type { Models } from '../../../db/index.js';
import type { Contact } from '../../../db/models/Contact.js';
import type { DomainEventBus } from '../../events.js';
import { Conflict, NotFound, ValidationFailed } from '../../errors.js';
import type { NotificationService } from '../notifications.js';
import { ContactAttributes } from './attributes.js';
import { ContactConflicts } from './conflicts.js';
import { afterCommit, normalizeEmail, normalizeFields, normalizePhone, normalizeTag, normalizeTags, LIMITS, type ContactFields } from './fields.js';
import { ContactMerger, type MergePreference } from './merge.js';
import { ContactNotes } from './notes.js';
import { storedIdentity, uniqueConflict, type ContactCore, type ContactServiceDeps, type IdentityInput } from './types.js';

export { uniqueConflict, type ContactServiceDeps, type IdentityInput };
import { applyFilters, orderBy, orderSql, tagCondition, textCondition, type ContactFilter, type ContactSort } from './search.js';
import type { Outbox } from '../webhooks/index.js';
import { presentContact, type PresentableContact } from '../../presenters/contact.js';
import { listPage, pageWithTotal, type Condition } from '../../../db/pages.js';

export interface ContactInput extends ContactFields {
  tags?: string[];
  attributes?: Record<string, unknown>;
  identities?: IdentityInput[];
}

export interface ContactPatch extends ContactFields {
  tags?: string[];
  /** Merged key by key; a null value deletes the key. */
  attributes?: Record<string, unknown>;
}

/** A contact as lists show it: its fields and identities, as plain values. */
export type ContactListItem = PresentableContact;

/** The identities of the row's contact, oldest first, as the presenter reads them. */
export const IDENTITIES_OF_ROW = `(select coalesce(json_agg(json_build_object('channel', i.channel, 'externalId', i.external_id) order by i.created_at), '[]'::json)
  from contact_identities i where i.organization_id = contacts.organization_id and i.contact_id = contacts.id) as identities`;

/** What the list presents of each contact, named as the presenter reads it. */
export const LIST_COLUMNS = `contacts.id, contacts.name, contacts.email, contacts.phone, contacts.company, contacts.tags, contacts.attributes,
  contacts.email_verified_at as "emailVerifiedAt", contacts.last_activity_at as "lastActivityAt", contacts.created_at as "createdAt",
  contacts.updated_at as "updatedAt", ${IDENTITIES_OF_ROW}`;

export interface Page {
  limit: number;
  offset: number;
  sort: ContactSort;
}

export class ContactService implements ContactCore {
  readonly attributes: ContactAttributes;
  readonly notes: ContactNotes;
  readonly conflicts: ContactConflicts;
  private readonly merger: ContactMerger;

  /** Webhook events, written in the change's transaction. */
  outbox: Outbox | null = null;

  constructor(private readonly deps: ContactServiceDeps) {
    this.attributes = new ContactAttributes(deps);
    this.notes = new ContactNotes(deps, this);
    this.conflicts = new ContactConflicts(deps, this);
    this.merger = new ContactMerger(deps, this);
  }

  private get models() {
    return this.deps.models;
  }

  async get(orgId: string, id: string, trx?: Knex.Transaction): Promise<Contact> {
    const contact = await this.models.Contact.forOrg(orgId, trx).findById(id);
    if (!contact) throw new NotFound('Contact');
    return contact;
  }

  /** One contact with its identities and the record of the contacts merged into it. */
  async getFull(orgId: string, id: string, trx?: Knex.Transaction): Promise<Contact> {
    const contact = await this.get(orgId, id, trx);
    await this.withIdentities(orgId, [contact], trx);
    contact.mergedFrom = await this.models.ContactMerge.forOrg(orgId, trx).where('survivorContactId', id).orderBy('createdAt', 'desc');
    return contact;
  }

  /** Loads the identities of many contacts in one query. */
  async withIdentities(orgId: string, contacts: Contact[], trx?: Knex.Transaction): Promise<Contact[]> {
    if (contacts.length === 0) return contacts;
    const rows = await this.models.ContactIdentity.forOrg(orgId, trx).whereIn('contactId', contacts.map((c) => c.id)).orderBy('createdAt');
    for (const c of contacts) c.identities = rows.filter((r) => r.contactId === c.id);
    return contacts;
  }

  async list(orgId: string, opts: Page & { q?: string; tag?: string }): Promise<{ contacts: ContactListItem[]; total: number }> {
    const where: Condition[] = [{ sql: 'contacts.organization_id = ?', bindings: [orgId] }];
    if (opts.q?.trim()) where.push(textCondition(opts.q));
    if (opts.tag) where.push(tagCondition(opts.tag));
    const { rows, total } = await listPage<ContactListItem>(this.deps.knex, { table: 'contacts', columns: LIST_COLUMNS, where, order: orderSql(opts.sort), limit: opts.limit, offset: opts.offset });
    return { contacts: rows, total };
  }

  async filter(orgId: string, opts: Page & { filters: ContactFilter[]; match: 'all' | 'any' }): Promise<{ contacts: ContactListItem[]; total: number }> {
    const base = this.models.Contact.forOrg(orgId);
    applyFilters(base, opts.filters, opts.match, await this.attributes.list(orgId));
    return this.page(base, opts);
  }

  /** Each contact with its identities (a subquery per row of the page), and the total, in one statement. */
  private async page(base: QueryBuilder<Contact, Contact[]>, opts: Page): Promise<{ contacts: ContactListItem[]; total: number }> {
    const { rows, total } = await pageWithTotal<Contact, ContactListItem>(this.deps.knex, base, (q) => orderBy(q, opts.sort).limit(opts.limit).offset(opts.offset), opts.offset, [this.deps.knex.raw(IDENTITIES_OF_ROW)]);
    return { contacts: rows, total };
  }

  async create(orgId: string, input: ContactInput): Promise<Contact> {
    const fields = normalizeFields(input);
    const contact = await this.deps.knex.transaction(async (trx) => {
      const attributes = await this.attributes.merge(orgId, {}, input.attributes ?? {}, trx);
      const row = await this.models.Contact.forOrg(orgId, trx)
        .insertAndFetch({ organizationId: orgId, ...fields, tags: normalizeTags(input.tags ?? []), attributes })
        .catch(uniqueConflict);
      await this.addIdentities(orgId, row.id, input.identities ?? [], trx);
      await this.record(trx, orgId, 'contact.created', row.id);
      return row;
    });
    return this.announce('contact.created', await this.getFull(orgId, contact.id));
  }

  async update(orgId: string, id: string, patch: ContactPatch): Promise<Contact> {
    await this.deps.knex.transaction(async (trx) => {
      const current = await this.models.Contact.forOrg(orgId, trx).findById(id).forUpdate();
      if (!current) throw new NotFound('Contact');
      const changes: Partial<Contact> = { ...normalizeFields(patch) };
      if (patch.tags !== undefined) changes.tags = normalizeTags(patch.tags);
      if (patch.attributes !== undefined) changes.attributes = await this.attributes.merge(orgId, current.attributes, patch.attributes, trx);
      // A changed email is no longer a verified one.
      if (changes.email !== undefined && changes.email !== current.email) changes.emailVerifiedAt = null;
      await this.models.Contact.forOrg(orgId, trx).patch(changes).findById(id).catch(uniqueConflict);
      await this.record(trx, orgId, 'contact.updated', id);
    });
    return this.announce('contact.updated', await this.getFull(orgId, id));
  }

  async remove(orgId: string, id: string): Promise<void> {
    await this.removeMany(orgId, [id]);
  }

  /**
   * All or nothing: an id that is not a contact of the organization is 404 and nothing is deleted. Conversations
   * and tickets keep working with the contact unlinked (their foreign keys set it to null).
   */
  async removeMany(orgId: string, ids: string[]): Promise<number> {
    const unique = [...new Set(ids)];
    return this.deps.knex.transaction(async (trx) => {
      const found = await this.models.Contact.forOrg(orgId, trx).whereIn('id', unique).select('id').forUpdate();
      if (found.length !== unique.length) throw new NotFound('Contact');
      // Rows returned rather than a count: the embedded driver reports counts differently.
      return (await this.models.Contact.forOrg(orgId, trx).whereIn('id', unique).delete().returning('id')).length;
    });
  }

  /** Adding a tag the contact already has changes nothing (and announces nothing). */
  async addTag(orgId: string, id: string, tag: string): Promise<{ contact: Contact; changed: boolean }> {
    const { changed } = await this.retag(orgId, [id], (tags) => [...tags, normalizeTag(tag)]);
    return { contact: await this.getFull(orgId, id), changed: changed.length > 0 };
  }

  async removeTag(orgId: string, id: string, tag: string): Promise<{ contact: Contact; changed: boolean }> {
    const gone = normalizeTag(tag);
    const { changed } = await this.retag(orgId, [id], (tags) => tags.filter((t) => t !== gone));
    return { contact: await this.getFull(orgId, id), changed: changed.length > 0 };
  }

  /** Adds tags to many contacts in one transaction: an unknown id or a contact going over the limit changes none. */
  async bulkTag(orgId: string, ids: string[], tags: string[]): Promise<{ updated: number }> {
    const adding = tags.map(normalizeTag);
    const { changed } = await this.retag(orgId, ids, (current) => [...current, ...adding]);
    return { updated: changed.length };
  }

  private async retag(orgId: string, ids: string[], next: (tags: string[]) => string[]): Promise<{ changed: string[] }> {
    const unique = [...new Set(ids)];
    const changed = await this.deps.knex.transaction(async (trx) => {
      const rows = await this.models.Contact.forOrg(orgId, trx).whereIn('id', unique).forUpdate();
      if (rows.length !== unique.length) throw new NotFound('Contact');
      const out: string[] = [];
      for (const row of rows) {
        const tags = [...new Set(next(row.tags))];
        if (tags.length > LIMITS.tags) throw new ValidationFailed(`A contact has at most ${LIMITS.tags} tags`, [{ field: 'tags', message: `contact ${row.id} would have ${tags.length} tags` }]);
        if (tags.length === row.tags.length && tags.every((t) => row.tags.includes(t))) continue;
        await this.models.Contact.forOrg(orgId, trx).patch({ tags }).findById(row.id);
        out.push(row.id);
      }
      return out;
    });
    if (changed.length) {
      const contacts = await this.withIdentities(orgId, await this.models.Contact.forOrg(orgId).whereIn('id', changed));
      for (const c of contacts) this.announce('contact.updated', c);
    }
    return { changed };
  }

  async merge(orgId: string, byUserId: string | null, targetId: string, sourceId: string, prefer: MergePreference = {}): Promise<Contact> {
    return this.merger.merge(orgId, byUserId, targetId, sourceId, prefer);
  }

  /** Applies or dismisses an open conflict (an applied duplicate merges the newer contact into the older). */
  async resolveConflict(orgId: string, conflictId: string, action: 'apply' | 'dismiss', byUserId: string) {
    return this.conflicts.resolve(orgId, conflictId, action, byUserId, this.merger);
  }

  /**
   * A contact by id; the id of a contact merged away resolves to its survivor, so links made with an old id keep
   * working.
   */
  async resolve(orgId: string, id: string, trx?: Knex.Transaction): Promise<Contact> {
    const contact = await this.models.Contact.forOrg(orgId, trx).findById(id);
    if (contact) return contact;
    const merge = await this.models.ContactMerge.forOrg(orgId, trx).where('sourceContactId', id).first();
    if (!merge) throw new NotFound('Contact');
    return this.get(orgId, merge.survivorContactId, trx);
  }

  /** The AI service's lookup: by email, else phone, else exact name (case-insensitive); the most recently active wins. */
  async seek(orgId: string, by: { email?: string; phone?: string; name?: string }): Promise<Contact | null> {
    const query = this.models.Contact.forOrg(orgId);
    if (by.email) query.whereRaw('lower(contacts.email) = ?', [normalizeEmail(by.email)]);
    else if (by.phone) query.where('contacts.phone', normalizePhone(by.phone));
    else if (by.name?.trim()) query.whereRaw('lower(contacts.name) = lower(?)', [by.name.trim()]);
    else throw new ValidationFailed('Give an email, a phone or a name', [{ field: 'query', message: 'one of email, phone, name is required' }]);
    const found = await orderBy(query, '-lastActivityAt').first();
    return found ? (await this.withIdentities(orgId, [found]))[0]! : null;
  }

  /**
   * The contact with this email, created when there is none; an existing one only gains the name it lacked.
   * Safe against a concurrent create of the same email. With `trx`, the contact.created event waits for its commit.
   */
  async findOrCreateByEmail(orgId: string, input: { name?: string | null; email: string }, trx?: Knex.Transaction): Promise<Contact> {
    const email = normalizeEmail(input.email);
    if (!email) throw new ValidationFailed('An email is required', [{ field: 'email', message: 'is required' }]);
    return this.findOrCreate(orgId, { name: input.name ?? null, email }, trx);
  }

  /**
   * The find-or-create of a conversation's contact link: by email (filling only empty fields), else a new contact.
   * Never overwrites what someone recorded.
   */
  async findOrCreate(orgId: string, input: ContactFields, trx?: Knex.Transaction): Promise<Contact> {
    const run = async (t: Knex.Transaction) => {
      const fields = normalizeFields(input);
      const byEmail = fields.email ? await this.models.Contact.forOrg(orgId, t).whereRaw('lower(contacts.email) = ?', [fields.email]).first() : undefined;
      if (byEmail) return { contact: await this.fillEmpty(byEmail, fields, t), created: false };
      // Without an email (or with a new one) a known phone is the same person, as long as no other email is on record.
      const byPhone = fields.phone ? await this.models.Contact.forOrg(orgId, t).where('contacts.phone', fields.phone).first() : undefined;
      if (byPhone && (!byPhone.email || !fields.email)) return { contact: await this.fillEmpty(byPhone, fields, t), created: false };
      if (byPhone) delete fields.phone;
      // A savepoint, so that losing a race to a concurrent create leaves the caller's transaction usable.
      try {
        const contact = (await t.transaction(async (sp) => this.models.Contact.forOrg(orgId, sp).insertAndFetch({ organizationId: orgId, ...fields, tags: [], attributes: {} }))) as Contact;
        return { contact, created: true };
      } catch (err) {
        if (!(err instanceof dbErrors.UniqueViolationError) || !fields.email) uniqueConflict(err);
        const winner = await this.models.Contact.forOrg(orgId, t).whereRaw('lower(contacts.email) = ?', [fields.email]).first();
        if (!winner) throw err;
        return { contact: await this.fillEmpty(winner, fields, t), created: false };
      }
    };
    // Webhook subscribers hear of a contact however it came (a ticket's requester, a channel's new sender).
    const recorded = async (t: Knex.Transaction) => {
      const found = await run(t);
      if (found.created) await this.record(t, orgId, 'contact.created', found.contact.id);
      return found;
    };
    const { contact, created } = trx ? await recorded(trx) : await this.deps.knex.transaction(recorded);
    contact.identities = [];
    if (created) afterCommit(trx, () => this.announce('contact.created', contact));
    return contact;
  }

  /** Fills the fields a contact lacks; a phone another contact holds is left out rather than failing the caller. */
  private async fillEmpty(contact: Contact, fields: ContactFields, trx: Knex.Transaction): Promise<Contact> {
    const patch: Partial<Contact> = {};
    if (!contact.name && fields.name) patch.name = fields.name;
    if (!contact.company && fields.company) patch.company = fields.company;
    if (!contact.email && fields.email) patch.email = fields.email;
    if (!contact.phone && fields.phone) {
      const holder = await this.models.Contact.forOrg(contact.organizationId, trx).where('phone', fields.phone).first();
      if (!holder) patch.phone = fields.phone;
    }
    if (Object.keys(patch).length === 0) return contact;
    return this.models.Contact.forOrg(contact.organizationId, trx).patchAndFetchById(contact.id, patch);
  }

  /** Records channel identities; one already known in the organization is 409. */
  async addIdentities(orgId: string, contactId: string, identities: IdentityInput[], trx: Knex.Transaction): Promise<void> {
    if (identities.length === 0) return;
    const rows = identities.map((i) => ({ organizationId: orgId, contactId, ...storedIdentity(i) }));
    await this.models.ContactIdentity.forOrg(orgId, trx).insert(rows).catch(uniqueConflict);
  }

  /** Marks activity (a linked conversation, an AI upsert, an inbound channel message). */
  async touch(orgId: string, id: string, trx?: Knex.Transaction): Promise<void> {
    await this.models.Contact.forOrg(orgId, trx).findById(id).patch({ lastActivityAt: new Date() });
  }

  async record(trx: Knex.Transaction, orgId: string, event: 'contact.created' | 'contact.updated', contactId: string): Promise<void> {
    await this.outbox?.record(trx, orgId, event, async () => ({ contact: presentContact(await this.getFull(orgId, contactId, trx)) }));
  }

  announce<E extends 'contact.created' | 'contact.updated'>(event: E, contact: Contact): Contact {
    this.deps.events.publish(event, { contact });
    return contact;
  }
}
