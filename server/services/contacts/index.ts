// Contacts: customer records, their notes, tags, typed attributes, identities, conflicts and merges.
export { ContactService, type ContactInput, type ContactPatch, type IdentityInput } from './service.js';
export type { DefinitionInput, DefinitionPatch } from './attributes.js';
export type { ConflictSource, SourceInput, UpsertResult } from './conflicts.js';
export type { MergePreference } from './merge.js';
export type { ContactFilter, ContactSort, FilterOp } from './search.js';
export { SORTS as CONTACT_SORTS, STANDARD_FILTER_KEYS } from './search.js';
export { LIMITS as CONTACT_LIMITS } from './fields.js';
