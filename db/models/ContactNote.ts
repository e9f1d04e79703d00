import { TenantModel } from '../BaseModel.js';

export type ContactNoteSource = 'agent' | 'ai' | 'channel';

/** An internal note about a contact; agents edit only their own (admins any). */
export class ContactNote extends TenantModel {
  static override tableName = 'contact_notes';

  declare contactId: string;
  /** Null for notes written by the AI service or a channel, and once the author's account is gone. */
  declare authorId: string | null;
  declare source: ContactNoteSource;
  declare conversationId: string | null;
  declare content: string;
}
