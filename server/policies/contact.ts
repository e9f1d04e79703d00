// Who may change what on a contact, beyond the routes' roles.
import type { Role } from '../../db/models/Membership.js';
import { assertMakerOr } from './roles.js';

/** A note is changed or deleted by its author or an admin; notes of the AI service or a channel have no author: admins only. */
export function assertNoteEditable(note: { authorId: string | null }, by: { userId: string; role: Role }): void {
  assertMakerOr(note.authorId, by, 'admin', 'Only the author or an admin may change this note');
}
