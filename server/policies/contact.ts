// Who may change what on a contact, beyond the routes' roles.
import type { Role } from '../../db/models/Membership.js';
import { Forbidden } from '../errors.js';
import { atLeast } from './roles.js';

/** A note is changed or deleted by its author or an admin; notes of the AI service or a channel have no author: admins only. */
export function assertNoteEditable(note: { authorId: string | null }, by: { userId: string; role: Role }): void {
  if (note.authorId !== by.userId && !atLeast(by.role, 'admin')) throw new Forbidden('Only the author or an admin may change this note');
}
