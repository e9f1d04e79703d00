// Automatic sources (the AI service, channels) write contacts here: they fill empty fields and never overwrite a
// different value, opening a conflict for a person to apply or dismiss instead.
import type { Knex } from 'knex';
import type { Contact } from '../../../db/models/Contact.js';
import type { ContactConflict, ConflictKind, ConflictStatus } from '../../../db/models/ContactConflict.js';
import type { Conversation } from '../../../db/models/Conversation.js';
import { Conflict, NotFound, ValidationFailed } from '../../errors.js';
import { LIMITS, normalizeFields, STANDARD_FIELDS, type ContactFields } from './fields.js';
import type { ContactMerger } from './merge.js';
import { storedIdentity, uniqueConflict, type ContactCore, type ContactServiceDeps, type IdentityInput } from './types.js';

export type ConflictSource = 'ai' | 'channel';

interface SourceFields extends ContactFields {
  attributes?: Record<string, unknown>;
  note?: string;
  summary?: string;
  topics?: string[];
}

/**
 * What a source knows of a person: the AI names the conversation it learned it in, a channel the sender's identity
 * (never both: a channel's sender has no conversation yet, so the identity's holder, if any, is the contact itself).
 */
export type SourceInput = SourceFields & ({ conversationId?: string | null; identity?: undefined } | { identity: IdentityInput; conversationId?: undefined });

export interface UpsertResult {
  contact: Contact;
  created: boolean;
  /** The conflicts this call opened. */
  conflicts: ContactConflict[];
}

type NewConflict = { kind: ConflictKind; contactId: string; otherContactId?: string | null; field: string; currentValue: unknown; proposedValue: unknown };

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export class ContactConflicts {
  constructor(
    private readonly deps: ContactServiceDeps,
    private readonly contacts: ContactCore,
  ) {}

  private get models() {
    return this.deps.models;
  }

  /** `contactId` matches either side of a conflict; `status` defaults to open. */
  async list(orgId: string, opts: { status: ConflictStatus | 'all'; contactId?: string; limit: number; offset: number }): Promise<{ conflicts: ContactConflict[]; total: number }> {
    const base = this.models.ContactConflict.forOrg(orgId);
    if (opts.status !== 'all') base.where('status', opts.status);
    if (opts.contactId) base.where((w) => w.where('contactId', opts.contactId!).orWhere('otherContactId', opts.contactId!));
    const [total, conflicts] = await Promise.all([base.clone().resultSize(), base.clone().orderBy('createdAt', 'desc').orderBy('id', 'desc').limit(opts.limit).offset(opts.offset)]);
    return { conflicts, total };
  }

  /**
   * Finds the conversation's contact, else the one with this identity, email or phone; creates one when there is
   * none. Empty fields are filled; a different existing value opens a `field` conflict, a value another contact
   * holds a `duplicate` one. The conversation is linked to the contact; a note and a summary become contact notes.
   */
  async upsertFromSource(orgId: string, source: ConflictSource, input: SourceInput): Promise<UpsertResult> {
    const fields = normalizeFields(input);
    const result = await this.deps.knex.transaction(async (trx) => {
      let conversation: Conversation | null = null;
      if (input.conversationId) {
        conversation = (await this.models.Conversation.forOrg(orgId, trx).findById(input.conversationId).forNoKeyUpdate()) ?? null;
        if (!conversation) throw new NotFound('Conversation');
      }
      const attributes = await this.contacts.attributes.merge(orgId, {}, input.attributes ?? {}, trx);
      const holders = await this.holders(orgId, fields, input.identity, trx);
      const linked = conversation?.contactId ? await this.contacts.get(orgId, conversation.contactId, trx) : null;
      let contact = linked ?? holders.identity ?? holders.email ?? holders.phone ?? null;
      let created = false;
      // Whether the contact itself changed (not only its last activity): what makes a contact.updated webhook.
      let changed = false;
      const opened: NewConflict[] = [];

      if (!contact) {
        contact = await this.models.Contact.forOrg(orgId, trx)
          .insertAndFetch({ organizationId: orgId, ...fields, tags: [], attributes, lastActivityAt: new Date() })
          .catch(uniqueConflict);
        if (input.identity) await this.contacts.addIdentities(orgId, contact.id, [input.identity], trx);
        created = true;
      } else {
        const target = contact;
        const patch: Partial<Contact> = {};
        for (const field of STANDARD_FIELDS) {
          const proposed = fields[field];
          if (proposed == null || same(target[field], proposed)) continue;
          const holder = field === 'email' ? holders.email : field === 'phone' ? holders.phone : null;
          if (holder && holder.id !== target.id) opened.push({ kind: 'duplicate', contactId: target.id, otherContactId: holder.id, field, currentValue: target[field], proposedValue: proposed });
          else if (target[field] == null) patch[field] = proposed;
          else opened.push({ kind: 'field', contactId: target.id, field, currentValue: target[field], proposedValue: proposed });
        }
        const nextAttributes = { ...target.attributes };
        for (const [key, proposed] of Object.entries(attributes)) {
          if (!(key in target.attributes)) nextAttributes[key] = proposed;
          else if (!same(target.attributes[key], proposed)) opened.push({ kind: 'field', contactId: target.id, field: `attributes.${key}`, currentValue: target.attributes[key], proposedValue: proposed });
        }
        const count = Object.keys(nextAttributes).length;
        if (count > LIMITS.attributes) throw new ValidationFailed(`A contact has at most ${LIMITS.attributes} attributes`, [{ field: 'attributes', message: `at most ${LIMITS.attributes} attributes` }]);
        if (count !== Object.keys(target.attributes).length) patch.attributes = nextAttributes;
        // (With an identity there is no conversation: a contact holding it is the target.)
        if (input.identity && !holders.identity) {
          await this.contacts.addIdentities(orgId, target.id, [input.identity], trx);
          changed = true;
        }
        if (Object.keys(patch).length > 0) changed = true;
        contact = await this.models.Contact.forOrg(orgId, trx).patchAndFetchById(target.id, { ...patch, lastActivityAt: new Date() });
      }

      const conflicts = await this.open(orgId, source, conversation?.id ?? null, opened, trx);
      let relinked: Conversation | null = null;
      if (conversation && conversation.contactId !== contact.id) relinked = await this.models.Conversation.forOrg(orgId, trx).patchAndFetchById(conversation.id, { contactId: contact.id });
      const noteBase = { authorId: null, source, conversationId: conversation?.id ?? null } as const;
      if (input.note) await this.contacts.notes.create(orgId, contact.id, { ...noteBase, content: input.note }, trx);
      if (input.summary || input.topics?.length) {
        const text = [input.summary ? `Summary: ${input.summary}` : null, input.topics?.length ? `Topics: ${input.topics.join(', ')}` : null].filter(Boolean).join('\n');
        await this.contacts.notes.create(orgId, contact.id, { ...noteBase, content: text.slice(0, LIMITS.noteLength) }, trx);
      }
      await this.contacts.withIdentities(orgId, [contact], trx);
      if (created || changed) await this.contacts.record(trx, orgId, created ? 'contact.created' : 'contact.updated', contact.id);
      return { contact, created, conflicts, relinked, conversation };
    });

    this.contacts.announce(result.created ? 'contact.created' : 'contact.updated', result.contact);
    if (result.relinked) {
      result.relinked.contact = result.contact;
      this.deps.events.publish('conversation.updated', { conversation: result.relinked });
    }
    await this.announceConflicts(orgId, result.conflicts, result.conversation);
    return { contact: result.contact, created: result.created, conflicts: result.conflicts };
  }

  /** Applies or dismisses an open conflict; an applied duplicate merges the newer contact into the older one. */
  async resolve(orgId: string, id: string, action: 'apply' | 'dismiss', byUserId: string, merger: ContactMerger): Promise<{ conflict: ContactConflict; contact: Contact }> {
    const result = await this.deps.knex.transaction(async (trx) => {
      const conflict = await this.models.ContactConflict.forOrg(orgId, trx).findById(id).forUpdate();
      if (!conflict) throw new NotFound('Conflict');
      if (conflict.status !== 'open') throw new Conflict(`This conflict was already ${conflict.status}`);
      let contactId = conflict.contactId;
      let mergedSource: string | null = null;
      if (action === 'apply' && conflict.kind === 'field') {
        await this.applyField(orgId, conflict, trx);
      } else if (action === 'apply') {
        if (!conflict.otherContactId) throw new ValidationFailed('This conflict names no second contact');
        const pair = await this.models.Contact.forOrg(orgId, trx).whereIn('id', [conflict.contactId, conflict.otherContactId]).orderBy('createdAt').orderBy('id');
        if (pair.length !== 2) throw new NotFound('Contact');
        const [older, newer] = pair as [Contact, Contact];
        await merger.mergeIn(trx, orgId, byUserId, older.id, newer.id, {});
        mergedSource = newer.id;
        contactId = older.id;
      }
      // (An applied duplicate's merge records contact.merged itself.)
      if (action === 'apply' && !mergedSource) await this.contacts.record(trx, orgId, 'contact.updated', contactId);
      const resolved = await this.models.ContactConflict.forOrg(orgId, trx).patchAndFetchById(conflict.id, { status: action === 'apply' ? 'applied' : 'dismissed', resolvedBy: byUserId, resolvedAt: new Date() });
      return { conflict: resolved, contact: await this.contacts.getFull(orgId, contactId, trx), changed: action === 'apply', mergedSource };
    });
    if (result.mergedSource) this.deps.events.publish('contact.merged', { contact: result.contact, sourceContactId: result.mergedSource });
    else if (result.changed) this.contacts.announce('contact.updated', result.contact);
    return { conflict: result.conflict, contact: result.contact };
  }

  private async applyField(orgId: string, conflict: ContactConflict, trx: Knex.Transaction): Promise<void> {
    const contact = await this.models.Contact.forOrg(orgId, trx).findById(conflict.contactId).forUpdate();
    if (!contact) throw new NotFound('Contact');
    const field = conflict.field ?? '';
    if (field.startsWith('attributes.')) {
      const key = field.slice('attributes.'.length);
      const attributes = await this.contacts.attributes.merge(orgId, contact.attributes, { [key]: conflict.proposedValue }, trx);
      await this.models.Contact.forOrg(orgId, trx).patch({ attributes }).findById(contact.id);
      return;
    }
    if (!(STANDARD_FIELDS as readonly string[]).includes(field) || typeof conflict.proposedValue !== 'string') throw new ValidationFailed('This conflict cannot be applied');
    const patch = normalizeFields({ [field]: conflict.proposedValue });
    if (patch.email !== undefined) (patch as Partial<Contact>).emailVerifiedAt = null;
    await this.models.Contact.forOrg(orgId, trx).patch(patch).findById(contact.id).catch(uniqueConflict);
  }

  private async holders(orgId: string, fields: ContactFields, identity: IdentityInput | undefined, trx: Knex.Transaction) {
    const C = this.models.Contact;
    const [email, phone, byIdentity] = await Promise.all([
      fields.email ? C.forOrg(orgId, trx).whereRaw('lower(contacts.email) = ?', [fields.email]).first() : undefined,
      fields.phone ? C.forOrg(orgId, trx).where('phone', fields.phone).first() : undefined,
      identity ? this.models.ContactIdentity.forOrg(orgId, trx).where(storedIdentity(identity)).first() : undefined,
    ]);
    return { email: email ?? null, phone: phone ?? null, identity: byIdentity ? ((await C.forOrg(orgId, trx).findById(byIdentity.contactId)) ?? null) : null };
  }

  /** Inserts the conflicts not already open with the same proposal (a source repeating itself opens nothing new). */
  private async open(orgId: string, source: ConflictSource, conversationId: string | null, list: NewConflict[], trx: Knex.Transaction): Promise<ContactConflict[]> {
    const out: ContactConflict[] = [];
    for (const c of list) {
      const existing = await this.models.ContactConflict.forOrg(orgId, trx)
        .where({ kind: c.kind, contactId: c.contactId, field: c.field, status: 'open' })
        .whereRaw('proposed_value = ?::jsonb', [JSON.stringify(c.proposedValue)])
        .first();
      if (existing) continue;
      out.push(await this.models.ContactConflict.forOrg(orgId, trx).insertAndFetch({ organizationId: orgId, ...c, otherContactId: c.otherContactId ?? null, status: 'open', source, conversationId }));
    }
    return out;
  }

  /** Agents hear of each conflict live; the conversation's assignee is notified, else the organization's admins. */
  private async announceConflicts(orgId: string, conflicts: ContactConflict[], conversation: Conversation | null): Promise<void> {
    if (conflicts.length === 0) return;
    for (const conflict of conflicts) this.deps.events.publish('contact.conflict_created', { conflict });
    const recipients = conversation?.assignedTo
      ? [conversation.assignedTo]
      : (await this.models.Membership.forOrg(orgId).where({ status: 'accepted' }).whereIn('role', ['admin', 'owner']).whereNotNull('userId').select('userId')).map((m) => m.userId!);
    const first = conflicts[0]!;
    await this.deps.notifications.notify(orgId, recipients, {
      type: 'contact_conflict',
      title: conflicts.length === 1 ? 'A contact update needs your review' : `${conflicts.length} contact updates need your review`,
      body: conflicts.map((c) => (c.kind === 'duplicate' ? `Possible duplicate contact (${c.field})` : `Different ${c.field} proposed`)).join('; '),
      data: { contactId: first.contactId, conflictIds: conflicts.map((c) => c.id), conversationId: conversation?.id ?? null },
    });
  }
}
