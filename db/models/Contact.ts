import { TenantModel } from '../BaseModel.js';
import type { ContactIdentity } from './ContactIdentity.js';
import type { ContactMerge } from './ContactMerge.js';

/** A customer of an organization: one per email and per E.164 phone inside it. */
export class Contact extends TenantModel {
  static override tableName = 'contacts';
  static override jsonAttributes = ['attributes', 'tags'];

  declare name: string | null;
  declare email: string | null;
  declare phone: string | null;
  declare company: string | null;
  declare tags: string[];
  /** Values of the organization's attribute definitions, by key. */
  declare attributes: Record<string, unknown>;
  declare emailVerifiedAt: Date | null;
  declare lastActivityAt: Date | null;
  /** Loaded by the service before a contact is presented or announced. */
  declare identities?: ContactIdentity[];
  /** The contacts merged into this one (loaded for a single contact). */
  declare mergedFrom?: ContactMerge[];
}
