// Who may remove a stored file.
import type { Role } from '../../db/models/Membership.js';
import { Forbidden } from '../errors.js';
import { atLeast } from './roles.js';

/** A file is deleted by the member who uploaded it or an admin. */
export function assertFileDeletable(file: { createdBy: string | null }, by: { userId: string; role: Role }): void {
  if (file.createdBy !== by.userId && !atLeast(by.role, 'admin')) throw new Forbidden('Only the uploader or an admin may delete this file');
}
