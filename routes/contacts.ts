// /contacts: customer records, their notes, tags, attribute definitions, conflicts and merges (agents), plus the
// AI service's seek and upsert. Fixed paths are registered before /contacts/:contactId, which would take them for ids.
import { presentAttributeDefinition, presentContact, presentContactConflict, presentContactNote } from '../server/presenters/contact.js';
import { CONTACT_SORTS, STANDARD_FILTER_KEYS } from '../server/services/contacts/index.js';
import { contactAiRoutes } from './contactsAi.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { object, paginationQuery, params, uuid } from './schemas/common.js';
import { attributeKey, attributes, AttributeDefinitionView, ConflictView, contactFields, ContactView, identities, noteContent, NoteView, scalar, tag, tags } from './schemas/contacts.js';
import { SEARCH_TEXT_MAX } from '../server/limits.js';

const group = 'Contacts';
const agent = { kind: 'org', role: 'agent', orgFrom: 'token' } as const;
const admin = { kind: 'org', role: 'admin', orgFrom: 'token' } as const;
type Id = { contactId: string };
const sort = { type: 'string', enum: [...CONTACT_SORTS], default: '-createdAt', description: 'A field, descending with a leading "-"; names sort case-insensitively, empty activity last' } as const;
const pageQuery = { ...paginationQuery, sort };
const list = <const T extends object>(items: T) => ({ type: 'array', items }) as const;
const loadContact = (s: RouteServices) => ({ orgId, params }: { orgId: string; params: Id }) => s.contacts.get(orgId, params.contactId);

export function contactRoutes(s: RouteServices): AnyRoute[] {
  return [...contactAiRoutes(s), ...collectionRoutes(s), ...definitionRoutes(s), ...conflictRoutes(s), ...contactItemRoutes(s), ...noteRoutes(s)];
}

function collectionRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/contacts', operationId: 'listContacts', tag: group, auth: agent,
      summary: 'Contacts of the active organization; literal search, tag filter, fixed sorts',
      description: '`q` matches name, email, phone or company anywhere, case-insensitively and literally (`%`, `_`, `\\` and regex characters are plain text); spaces and dashes in a phone-like `q` are ignored against phones.',
      query: object({ ...pageQuery, q: { type: 'string', maxLength: SEARCH_TEXT_MAX }, tag: { ...tag, description: 'Only contacts with this tag' } }),
      response: { status: 200, description: 'Contacts', data: list(ContactView), paginated: true },
      handler: async ({ orgId, query }) => {
        const { contacts, total } = await s.contacts.list(orgId, query);
        return { message: 'Contacts', data: contacts.map(presentContact), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'post', path: '/contacts/filter', operationId: 'filterContacts', tag: group, auth: agent,
      summary: 'Contacts matching structured filters (all or any); pagination and sort in the query',
      description: `Keys: ${STANDARD_FILTER_KEYS.join(', ')}, or a defined attribute key. Ops: text fields eq/neq (case-insensitive), contains (literal), present; tags eq/contains (has the tag), neq (lacks it), present (has any); times (createdAt, ...) gt/lt/present; attributes by type: number eq/neq/gt/lt, date eq/gt/lt, boolean eq/neq, list eq/neq, text/link eq/neq/contains, all present. \`present\` takes true (default) or false. \`neq\` also matches contacts without a value. An unknown key, an op that does not apply or an ill-typed value is 400.`,
      query: object(pageQuery),
      body: object({
        filters: list(object({ key: { type: 'string', minLength: 1, maxLength: 64 }, op: { type: 'string', enum: ['eq', 'neq', 'contains', 'present', 'gt', 'lt'] }, value: scalar }, ['key', 'op'])),
        match: { type: 'string', enum: ['all', 'any'], default: 'all' },
      }, ['filters']),
      response: { status: 200, description: 'Contacts', data: list(ContactView), paginated: true },
      handler: async ({ orgId, query, body }) => {
        const { contacts, total } = await s.contacts.filter(orgId, { ...query, ...body });
        return { message: 'Contacts', data: contacts.map(presentContact), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'post', path: '/contacts', operationId: 'createContact', tag: group, auth: agent,
      summary: 'Create a contact',
      description: 'Email is unique per organization case-insensitively, the E.164 phone and each identity too: taken is 409.',
      body: object({ ...contactFields, tags, attributes, identities }),
      response: { status: 201, description: 'Created', data: ContactView },
      errors: [409],
      handler: async ({ orgId, body }) => ({ message: 'Contact created', data: presentContact(await s.contacts.create(orgId, body)) }),
    }),
    defineRoute({
      method: 'delete', path: '/contacts', operationId: 'deleteContacts', tag: group, auth: admin,
      summary: 'Delete several contacts at once: all or nothing',
      description: 'One transaction: an id that is not a contact of the organization answers 404 and deletes nothing. Their conversations and tickets stay, unlinked.',
      body: object({ ids: { type: 'array', items: uuid, minItems: 1, maxItems: 500 } }, ['ids']),
      response: { status: 200, description: 'Deleted', data: object({ deleted: { type: 'integer' } }) },
      errors: [404],
      handler: async ({ orgId, body }) => {
        const deleted = await s.contacts.removeMany(orgId, body.ids);
        return { message: `${deleted} contacts deleted`, data: { deleted } };
      },
    }),
    defineRoute({
      method: 'post', path: '/contacts/tags', operationId: 'tagContacts', tag: group, auth: agent,
      summary: 'Add tags to several contacts: all or nothing',
      description: 'An unknown id (404) or a contact that would pass 50 tags (400) changes none. Tags a contact already has change nothing; `updated` counts the contacts that changed.',
      body: object({ ids: { type: 'array', items: uuid, minItems: 1, maxItems: 500 }, tags: { ...tags, minItems: 1 } }, ['ids', 'tags']),
      response: { status: 200, description: 'Tagged', data: object({ updated: { type: 'integer' } }) },
      errors: [404],
      handler: async ({ orgId, body }) => ({ message: 'Contacts tagged', data: await s.contacts.bulkTag(orgId, body.ids, body.tags) }),
    }),
  ];
}

function definitionRoutes(s: RouteServices): AnyRoute[] {
  const keyParams = object({ key: attributeKey }, ['key']);
  const fields = { label: { type: 'string', minLength: 1, maxLength: 200, pattern: '\\S' }, options: { type: 'array', maxItems: 100, items: { type: 'string', minLength: 1, maxLength: 100 }, description: 'The values of a list attribute (required for list, refused for other types)' }, description: { type: ['string', 'null'], maxLength: 1000 } } as const;
  return [
    defineRoute({
      method: 'get', path: '/contacts/attribute-definitions', operationId: 'listContactAttributeDefinitions', tag: group, auth: agent,
      summary: 'The custom attributes contacts may carry, by key',
      response: { status: 200, description: 'Definitions', data: list(AttributeDefinitionView) },
      handler: async ({ orgId }) => ({ message: 'Attribute definitions', data: (await s.contacts.attributes.list(orgId)).map(presentAttributeDefinition) }),
    }),
    defineRoute({
      method: 'get', path: '/contacts/attribute-definitions/:key', operationId: 'getContactAttributeDefinition', tag: group, auth: agent,
      summary: 'One attribute definition',
      params: keyParams,
      response: { status: 200, description: 'Definition', data: AttributeDefinitionView },
      handler: async ({ orgId, params }) => ({ message: 'Attribute definition', data: presentAttributeDefinition(await s.contacts.attributes.get(orgId, params.key)) }),
    }),
    defineRoute({
      method: 'post', path: '/contacts/attribute-definitions', operationId: 'createContactAttributeDefinition', tag: group, auth: admin,
      summary: 'Define a custom attribute (key unique per organization: 409)',
      body: object({ key: attributeKey, type: { type: 'string', enum: ['text', 'number', 'date', 'boolean', 'list', 'link'] }, ...fields }, ['key', 'label', 'type']),
      response: { status: 201, description: 'Created', data: AttributeDefinitionView },
      errors: [409],
      handler: async ({ orgId, body }) => ({ message: 'Attribute defined', data: presentAttributeDefinition(await s.contacts.attributes.create(orgId, body)) }),
    }),
    defineRoute({
      method: 'patch', path: '/contacts/attribute-definitions/:key', operationId: 'updateContactAttributeDefinition', tag: group, auth: admin,
      summary: 'Change the label, description or list options of an attribute',
      description: 'The key and the type are fixed once defined (stored values were checked against them). Values already stored keep their option even when it is removed from the list.',
      params: keyParams,
      body: { ...object(fields), minProperties: 1 },
      response: { status: 200, description: 'Updated', data: AttributeDefinitionView },
      load: ({ orgId, params }) => s.contacts.attributes.get(orgId, params.key),
      handler: async ({ orgId, params, body }) => ({ message: 'Attribute updated', data: presentAttributeDefinition(await s.contacts.attributes.update(orgId, params.key, body)) }),
    }),
    defineRoute({
      method: 'delete', path: '/contacts/attribute-definitions/:key', operationId: 'deleteContactAttributeDefinition', tag: group, auth: admin,
      summary: 'Remove an attribute definition and its values from every contact',
      params: keyParams,
      response: { status: 200, description: 'Deleted' },
      handler: async ({ orgId, params }) => {
        await s.contacts.attributes.remove(orgId, params.key);
        return { message: 'Attribute deleted' };
      },
    }),
  ];
}

function conflictRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/contacts/conflicts', operationId: 'listContactConflicts', tag: group, auth: agent,
      summary: 'Conflicts opened by the AI service or channels, newest first (default: the open ones)',
      description: '`contactId` matches either contact of a conflict. A `field` conflict proposes a value for a field that already holds another; a `duplicate` names a second contact holding the proposed email, phone or identity.',
      query: object({ ...paginationQuery, status: { type: 'string', enum: ['open', 'applied', 'dismissed', 'all'], default: 'open' }, contactId: uuid }),
      response: { status: 200, description: 'Conflicts', data: list(ConflictView), paginated: true },
      handler: async ({ orgId, query }) => {
        const { conflicts, total } = await s.contacts.conflicts.list(orgId, query);
        return { message: 'Conflicts', data: conflicts.map(presentContactConflict), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'post', path: '/contacts/conflicts/:conflictId/resolve', operationId: 'resolveContactConflict', tag: group, auth: agent,
      summary: 'Apply or dismiss an open conflict',
      description: '`apply` on a field conflict writes the proposed value (409 when another contact holds that email or phone meanwhile); on a duplicate it merges the newer contact into the older one (as POST /contacts/{id}/merge with the older one preferred). A conflict already resolved is 409.',
      params: params('conflictId'),
      body: object({ action: { type: 'string', enum: ['apply', 'dismiss'] } }, ['action']),
      response: { status: 200, description: 'Resolved', data: object({ conflict: ConflictView, contact: ContactView }) },
      errors: [409],
      handler: async ({ orgId, actor, params, body }) => {
        const { conflict, contact } = await s.contacts.resolveConflict(orgId, params.conflictId, body.action, actor.userId);
        return { message: body.action === 'apply' ? 'Conflict applied' : 'Conflict dismissed', data: { conflict: presentContactConflict(conflict), contact: presentContact(contact) } };
      },
    }),
  ];
}

function contactItemRoutes(s: RouteServices): AnyRoute[] {
  const preference = { type: 'string', enum: ['target', 'source'] } as const;
  return [
    defineRoute({
      method: 'get', path: '/contacts/:contactId', operationId: 'getContact', tag: group, auth: agent,
      summary: 'One contact, with `mergedFrom` (the contacts merged into it)',
      params: params('contactId'),
      response: { status: 200, description: 'Contact', data: ContactView },
      handler: async ({ orgId, params }) => ({ message: 'Contact', data: presentContact(await s.contacts.getFull(orgId, params.contactId)) }),
    }),
    defineRoute({
      method: 'patch', path: '/contacts/:contactId', operationId: 'updateContact', tag: group, auth: agent,
      summary: 'Change fields; `attributes` merge key by key (null deletes a key); `tags` replace the list',
      description: 'A changed email clears emailVerifiedAt. Email or phone taken by another contact: 409.',
      params: params('contactId'),
      body: { ...object({ ...contactFields, tags, attributes }), minProperties: 1 },
      response: { status: 200, description: 'Updated', data: ContactView },
      errors: [409],
      load: loadContact(s),
      handler: async ({ orgId, params, body }) => ({ message: 'Contact updated', data: presentContact(await s.contacts.update(orgId, params.contactId, body)) }),
    }),
    defineRoute({
      method: 'delete', path: '/contacts/:contactId', operationId: 'deleteContact', tag: group, auth: admin,
      summary: 'Delete a contact (its conversations and tickets stay, unlinked; its notes and identities go)',
      params: params('contactId'),
      response: { status: 200, description: 'Deleted' },
      handler: async ({ orgId, params }) => {
        await s.contacts.remove(orgId, params.contactId);
        return { message: 'Contact deleted' };
      },
    }),
    defineRoute({
      method: 'post', path: '/contacts/:contactId/tags', operationId: 'addContactTag', tag: group, auth: agent,
      summary: 'Add a tag (lowercased); a tag the contact already has answers 200 and changes nothing',
      params: params('contactId'),
      body: object({ tag }, ['tag']),
      response: { status: 200, description: 'The contact', data: ContactView },
      load: loadContact(s),
      handler: async ({ orgId, params, body }) => {
        const { contact, changed } = await s.contacts.addTag(orgId, params.contactId, body.tag);
        return { message: changed ? 'Tag added' : 'Tag already present', data: presentContact(contact) };
      },
    }),
    defineRoute({
      method: 'delete', path: '/contacts/:contactId/tags/:tag', operationId: 'removeContactTag', tag: group, auth: agent,
      summary: 'Remove a tag (case-insensitive); a tag the contact does not have answers 200 and changes nothing',
      params: object({ contactId: uuid, tag }, ['contactId', 'tag']),
      response: { status: 200, description: 'The contact', data: ContactView },
      handler: async ({ orgId, params }) => {
        const { contact, changed } = await s.contacts.removeTag(orgId, params.contactId, params.tag);
        return { message: changed ? 'Tag removed' : 'Tag not present', data: presentContact(contact) };
      },
    }),
    defineRoute({
      method: 'post', path: '/contacts/:contactId/merge', operationId: 'mergeContact', tag: group, auth: agent,
      summary: 'Merge another contact (the source) into this one; the source is deleted and then answers 404',
      description:
        'One transaction moves the source\'s conversations, tickets, notes, identities and conflicts, joins the tags and adds the attributes this contact lacks. Where both have a value, this contact\'s wins unless `prefer.<field>` is `source` (`prefer.attributes: source` lets the source win per key). The survivor lists the source in `mergedFrom`; linking a conversation to the source\'s old id links the survivor. Merging a contact into itself is 400; together over 50 tags or 100 attributes is 400 and nothing changes.',
      params: params('contactId'),
      body: object({ sourceContactId: uuid, prefer: object({ name: preference, email: preference, phone: preference, company: preference, attributes: preference }) }, ['sourceContactId']),
      response: { status: 200, description: 'The survivor', data: ContactView },
      load: loadContact(s),
      handler: async ({ orgId, actor, params, body }) => ({ message: 'Contacts merged', data: presentContact(await s.contacts.merge(orgId, actor.userId, params.contactId, body.sourceContactId, body.prefer)) }),
    }),
  ];
}

function noteRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/contacts/:contactId/notes', operationId: 'listContactNotes', tag: group, auth: agent,
      summary: 'Notes about a contact, newest first',
      params: params('contactId'),
      query: object(paginationQuery),
      response: { status: 200, description: 'Notes', data: list(NoteView), paginated: true },
      handler: async ({ orgId, params, query }) => {
        const { notes, total } = await s.contacts.notes.list(orgId, params.contactId, query);
        return { message: 'Notes', data: notes.map(presentContactNote), pagination: { limit: query.limit, offset: query.offset, total } };
      },
    }),
    defineRoute({
      method: 'post', path: '/contacts/:contactId/notes', operationId: 'createContactNote', tag: group, auth: agent,
      summary: 'Write a note about a contact (at most 5,000 characters)',
      params: params('contactId'),
      body: object({ content: noteContent }, ['content']),
      response: { status: 201, description: 'Created', data: NoteView },
      load: loadContact(s),
      handler: async ({ orgId, actor, params, body }) => ({ message: 'Note added', data: presentContactNote(await s.contacts.notes.create(orgId, params.contactId, { content: body.content, authorId: actor.userId })) }),
    }),
    defineRoute({
      method: 'patch', path: '/contacts/:contactId/notes/:noteId', operationId: 'updateContactNote', tag: group, auth: agent,
      summary: 'Edit a note: its author or an admin (else 403); notes of the AI service: admins',
      params: params('contactId', 'noteId'),
      body: object({ content: noteContent }, ['content']),
      response: { status: 200, description: 'Updated', data: NoteView },
      load: ({ orgId, params }) => s.contacts.notes.get(orgId, params.contactId, params.noteId),
      handler: async ({ orgId, membership, params, body }) => ({
        message: 'Note updated',
        data: presentContactNote(await s.contacts.notes.update(orgId, params.contactId, params.noteId, { userId: membership.userId!, role: membership.role }, body.content)),
      }),
    }),
    defineRoute({
      method: 'delete', path: '/contacts/:contactId/notes/:noteId', operationId: 'deleteContactNote', tag: group, auth: agent,
      summary: 'Delete a note: its author or an admin (else 403)',
      params: params('contactId', 'noteId'),
      response: { status: 200, description: 'Deleted' },
      handler: async ({ orgId, membership, params }) => {
        await s.contacts.notes.remove(orgId, params.contactId, params.noteId, { userId: membership.userId!, role: membership.role });
        return { message: 'Note deleted' };
      },
    }),
  ];
}
