// Contact, note, attribute definition and conflict shapes for agents and the AI service.
import type { Contact } from '../../db/models/Contact.js';
import type { ContactIdentity } from '../../db/models/ContactIdentity.js';
import type { ContactAttributeDefinition } from '../../db/models/ContactAttributeDefinition.js';
import type { ContactConflict } from '../../db/models/ContactConflict.js';
import type { ContactNote } from '../../db/models/ContactNote.js';
import { iso } from './time.js';

/** What a contact's view is made of: a loaded model, or a plain row of a list. */
export type PresentableContact = Pick<Contact, 'id' | 'name' | 'email' | 'phone' | 'company' | 'tags' | 'attributes' | 'emailVerifiedAt' | 'lastActivityAt' | 'createdAt' | 'updatedAt' | 'mergedFrom'> & {
  identities?: Pick<ContactIdentity, 'channel' | 'externalId'>[];
};

export function presentContact(c: PresentableContact) {
  return {
    id: c.id,
    name: c.name ?? null,
    email: c.email ?? null,
    phone: c.phone ?? null,
    company: c.company ?? null,
    tags: c.tags ?? [],
    attributes: c.attributes ?? {},
    identities: (c.identities ?? []).map((i) => ({ channel: i.channel, externalId: i.externalId })),
    emailVerifiedAt: iso(c.emailVerifiedAt),
    lastActivityAt: iso(c.lastActivityAt),
    createdAt: iso(c.createdAt),
    updatedAt: iso(c.updatedAt),
    ...(c.mergedFrom !== undefined ? { mergedFrom: c.mergedFrom.map((m) => ({ contactId: m.sourceContactId, name: (m.sourceSnapshot.name as string | null) ?? null, email: (m.sourceSnapshot.email as string | null) ?? null, mergedBy: m.mergedBy ?? null, mergedAt: iso(m.createdAt) })) } : {}),
  };
}

export type ContactView = ReturnType<typeof presentContact>;

export function presentContactNote(n: ContactNote) {
  return { id: n.id, contactId: n.contactId, content: n.content, authorId: n.authorId ?? null, source: n.source, conversationId: n.conversationId ?? null, createdAt: iso(n.createdAt), updatedAt: iso(n.updatedAt) };
}

export function presentAttributeDefinition(d: ContactAttributeDefinition) {
  return { key: d.key, label: d.label, type: d.type, options: d.options ?? [], description: d.description ?? null, createdAt: iso(d.createdAt), updatedAt: iso(d.updatedAt) };
}

export function presentContactConflict(c: ContactConflict) {
  return {
    id: c.id,
    kind: c.kind,
    status: c.status,
    contactId: c.contactId,
    otherContactId: c.otherContactId ?? null,
    field: c.field ?? null,
    currentValue: c.currentValue ?? null,
    proposedValue: c.proposedValue ?? null,
    source: c.source,
    conversationId: c.conversationId ?? null,
    resolvedBy: c.resolvedBy ?? null,
    resolvedAt: iso(c.resolvedAt),
    createdAt: iso(c.createdAt),
  };
}

export type ContactConflictView = ReturnType<typeof presentContactConflict>;
