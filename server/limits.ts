// Bounds of what callers may send, defined once: request schemas (REST and socket), the services that check input
// arriving by other ways (channels, batches, merges) and the OpenAPI document all read them from here.

/** Characters of a message's text (REST, sockets, channels and the services that store it). */
export const MESSAGE_CONTENT_MAX = 50_000;
/** Characters of a client-chosen message id. */
export const CLIENT_MESSAGE_ID_MAX = 100;
/** Uploaded files shown with one message. */
export const MESSAGE_ATTACHMENTS_MAX = 10;

/** Items one page of a list answers at most, and by default. */
export const PAGE_SIZE_MAX = 200;
export const PAGE_SIZE_DEFAULT = 50;
/** Characters of a list's free-text search (`q`). */
export const SEARCH_TEXT_MAX = 200;

/** Characters of a person's name (users, members, contacts, requesters). */
export const PERSON_NAME_MAX = 200;

/** Tags of one contact or ticket, and characters of each. */
export const TAGS_MAX = 50;
export const TAG_LENGTH_MAX = 50;
/** Custom attribute values of one contact. */
export const CONTACT_ATTRIBUTES_MAX = 100;
/** Characters of a note on a contact. */
export const NOTE_LENGTH_MAX = 5000;
