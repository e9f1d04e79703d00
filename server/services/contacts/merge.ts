// Merging one contact (the source) into another (the survivor) in one transaction: conversations, tickets, notes,
// identities, conflicts and earlier merge records move; tags join; missing fields and attributes are filled in.
import type { Knex } from 'knex';
import type { Contact } from '../../../db/models/Contact.js';
import { presentContact } from '../../presenters/contact.js';
import { NotFound, ValidationFailed } from '../../errors.js';
import { afterCommit, LIMITS, STANDARD_FIELDS, type StandardField } from './fields.js';
import type { ContactCore, ContactServiceDeps } from './types.js';

/** Which contact's value wins where both have one (default: the survivor's). `attributes` decides per key. */
export type MergePreference = Partial<Record<StandardField | 'attributes', 'target' | 'source'>>;

export class ContactMerger {
  /** Whether the tickets table exists yet (it arrives with its own migration); once true it stays true. */
  private ticketsTable = false;

  constructor(
    private readonly deps: ContactServiceDeps,
    private readonly contacts: ContactCore,
  ) {}

  private get models() {
    return this.deps.models;
  }

  async merge(orgId: string, byUserId: string | null, targetId: string, sourceId: string, prefer: MergePreference, trx?: Knex.Transaction): Promise<Contact> {
    if (targetId === sourceId) throw new ValidationFailed('A contact cannot be merged into itself', [{ field: 'sourceContactId', message: 'must differ from the contact merged into' }]);
    const survivor = trx ? await this.mergeIn(trx, orgId, byUserId, targetId, sourceId, prefer) : await this.deps.knex.transaction((t) => this.mergeIn(t, orgId, byUserId, targetId, sourceId, prefer));
    afterCommit(trx, () => this.deps.events.publish('contact.merged', { contact: survivor, sourceContactId: sourceId }));
    return survivor;
  }

  /** The merge inside the caller's transaction; any failure rolls every step back. */
  async mergeIn(trx: Knex.Transaction, orgId: string, byUserId: string | null, targetId: string, sourceId: string, prefer: MergePreference): Promise<Contact> {
    const { Contact, Conversation, ContactNote, ContactIdentity, ContactConflict, ContactMerge } = this.models;
    // Both rows locked in one order, so two merges of the same pair cannot deadlock.
    const rows = await Contact.forOrg(orgId, trx).whereIn('id', [targetId, sourceId]).orderBy('id').forUpdate();
    const target = rows.find((r) => r.id === targetId);
    const source = rows.find((r) => r.id === sourceId);
    if (!target || !source) throw new NotFound('Contact');
    await this.contacts.withIdentities(orgId, [source], trx);
    const snapshot = presentContact(source);

    // Counted from the rows returned: the embedded driver reports update counts differently.
    const count = async (rows: PromiseLike<unknown[]>) => (await rows).length;
    const moved: Record<string, number> = {};
    moved.conversations = await count(Conversation.forOrg(orgId, trx).where('contactId', sourceId).patch({ contactId: targetId }).returning('id'));
    moved.tickets = (await this.hasTickets(trx)) ? await count(trx('tickets').where({ organization_id: orgId, contact_id: sourceId }).update({ contact_id: targetId }, ['id'])) : 0;
    moved.notes = await count(ContactNote.forOrg(orgId, trx).where('contactId', sourceId).patch({ contactId: targetId }).returning('id'));
    moved.identities = await count(ContactIdentity.forOrg(orgId, trx).where('contactId', sourceId).patch({ contactId: targetId }).returning('id'));
    moved.conflicts =
      (await count(ContactConflict.forOrg(orgId, trx).where('contactId', sourceId).patch({ contactId: targetId }).returning('id'))) +
      (await count(ContactConflict.forOrg(orgId, trx).where('otherContactId', sourceId).patch({ otherContactId: targetId }).returning('id')));
    // A duplicate pair that now names the survivor twice was settled by this merge.
    await ContactConflict.forOrg(orgId, trx).where('kind', 'duplicate').where('status', 'open').whereColumn('contactId', 'otherContactId').patch({ status: 'applied', resolvedBy: byUserId, resolvedAt: new Date() });
    moved.merges = await count(ContactMerge.forOrg(orgId, trx).where('survivorContactId', sourceId).patch({ survivorContactId: targetId }).returning('id'));

    const patch: Partial<Contact> = {};
    for (const field of STANDARD_FIELDS) {
      const fromSource = prefer[field] === 'source' ? source[field] != null : target[field] == null;
      if (fromSource && source[field] != null && source[field] !== target[field]) patch[field] = source[field];
    }
    if (patch.email !== undefined) patch.emailVerifiedAt = source.emailVerifiedAt;
    const tags = [...new Set([...target.tags, ...source.tags])];
    if (tags.length > LIMITS.tags) throw new ValidationFailed(`The merged contact would have ${tags.length} tags (at most ${LIMITS.tags})`, [{ field: 'tags', message: 'too many tags together' }]);
    const attributes = prefer.attributes === 'source' ? { ...target.attributes, ...source.attributes } : { ...source.attributes, ...target.attributes };
    if (Object.keys(attributes).length > LIMITS.attributes) throw new ValidationFailed(`The merged contact would have more than ${LIMITS.attributes} attributes`, [{ field: 'attributes', message: 'too many attributes together' }]);
    moved.attributes = Object.keys(source.attributes).filter((k) => !(k in target.attributes)).length;
    moved.tags = tags.length - target.tags.length;
    const latest = [target.lastActivityAt, source.lastActivityAt].filter((d): d is Date => !!d).sort((a, b) => +new Date(b) - +new Date(a))[0];

    await ContactMerge.forOrg(orgId, trx).insert({ organizationId: orgId, survivorContactId: targetId, sourceContactId: sourceId, sourceSnapshot: snapshot, moved, mergedBy: byUserId });
    // The source goes before the survivor takes over its email or phone (both are unique).
    await Contact.forOrg(orgId, trx).deleteById(sourceId);
    await Contact.forOrg(orgId, trx).patch({ ...patch, tags, attributes, lastActivityAt: latest ?? null }).findById(targetId);
    const survivor = await this.contacts.getFull(orgId, targetId, trx);
    await this.contacts.outbox?.record(trx, orgId, 'contact.merged', { contact: presentContact(survivor), sourceContactId: sourceId });
    return survivor;
  }

  private async hasTickets(trx: Knex.Transaction): Promise<boolean> {
    if (this.ticketsTable) return true;
    const { rows } = (await trx.raw(`select to_regclass('tickets') is not null as present`)) as { rows: { present: boolean }[] };
    this.ticketsTable = rows[0]?.present === true;
    return this.ticketsTable;
  }
}
