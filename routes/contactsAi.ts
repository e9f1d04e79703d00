// The AI service's contact routes (x-ai-tool-secret): seek a contact, and upsert one from a conversation without
// ever overwriting a recorded value. `organizationId` is required; a conversation outside it answers 404.
import { presentContact, presentContactConflict } from '../server/presenters/contact.js';
import type { RouteServices } from './services.js';
import { defineRoute, type AnyRoute } from './registry.js';
import { email, object, uuid } from './schemas/common.js';
import { attributes, ConflictView, contactFields, ContactView, noteContent } from './schemas/contacts.js';
import { PERSON_NAME_MAX } from '../server/limits.js';

const group = 'Contacts (AI service)';
const ai = { kind: 'ai' } as const;

export function contactAiRoutes(s: RouteServices): AnyRoute[] {
  return [
    defineRoute({
      method: 'get', path: '/contacts/ai/seek', operationId: 'aiSeekContact', tag: group, auth: ai,
      summary: 'Find a contact by email, else phone, else exact name (case-insensitive); nothing found is 200 `{found: false}`',
      description: 'One of `email`, `phone` or `name` is required (400 without). With several given, email is tried first, then phone, then name; several contacts with one name: the most recently active.',
      // One of email, phone or name is required (checked by the service: 400 without any).
      query: object({ organizationId: uuid, email, phone: { type: 'string', minLength: 1, maxLength: 50 }, name: { type: 'string', minLength: 1, maxLength: PERSON_NAME_MAX } }, ['organizationId']),
      response: { status: 200, description: 'Found or not', data: object({ found: { type: 'boolean' }, contact: { oneOf: [ContactView, { type: 'null' }] } }) },
      handler: async ({ query }) => {
        const contact = await s.contacts.seek(query.organizationId, query);
        return { message: contact ? 'Contact found' : 'No contact found', data: { found: !!contact, contact: contact ? presentContact(contact) : null } };
      },
    }),
    defineRoute({
      method: 'post', path: '/contacts/ai/upsert', operationId: 'aiUpsertContact', tag: group, auth: ai,
      summary: "Create or complete the conversation's contact from what the AI learned; 201 when created, else 200",
      description:
        "The contact is the conversation's, else the one with this email, else this phone; none: created (201). Empty fields are filled; a field holding a different value is never overwritten: a `field` conflict opens instead, and an email or phone another contact holds opens a `duplicate` conflict. The conversation is linked to the contact. `note` becomes an AI note, `summary` and `topics` one more. Conflicts are announced to agents (contact_conflict_created) and notified (contact_conflict) to the conversation's assignee, or to the organization's admins when unassigned. An open conflict with the same proposal is not opened twice.",
      body: object(
        {
          organizationId: uuid,
          conversationId: uuid,
          ...contactFields,
          attributes,
          note: noteContent,
          summary: { type: 'string', minLength: 1, maxLength: 4000 },
          topics: { type: 'array', maxItems: 20, items: { type: 'string', minLength: 1, maxLength: 100 } },
        },
        ['organizationId'],
      ),
      response: { status: 201, description: 'Created (200: an existing contact)', data: object({ contact: ContactView, created: { type: 'boolean' }, conflicts: { type: 'array', items: ConflictView } }), also: { status: 200, description: 'An existing contact, updated' } },
      errors: [404],
      handler: async ({ body }) => {
        const { organizationId, ...input } = body;
        const { contact, created, conflicts } = await s.contacts.conflicts.upsertFromSource(organizationId, 'ai', input);
        return { status: created ? 201 : 200, message: created ? 'Contact created' : 'Contact updated', data: { contact: presentContact(contact), created, conflicts: conflicts.map(presentContactConflict) } };
      },
    }),
  ];
}
