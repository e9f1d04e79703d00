// Who may remove a stored file.
import type { Role } from '../../db/models/Membership.js';
import { assertMakerOr } from './roles.js';

/** A file is deleted by the member who uploaded it or an admin. */
export function assertFileDeletable(file: { createdBy: string | null }, by: { userId: string; role: Role }): void {
  assertMakerOr(file.createdBy, by, 'admin', 'Only the uploader or an admin may delete this file');
}
