// Internal notes about a contact: any agent reads and writes them; only the author or an admin edits or deletes one.
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import type { Role } from '../../../db/models/Membership.js';
import { atLeast } from '../../policies/roles.js';
import type { ContactNote, ContactNoteSource } from '../../../db/models/ContactNote.js';
import { Forbidden, NotFound } from '../../errors.js';
import type { ContactService } from './service.js';

export interface NoteAuthor {
  userId: string;
  role: Role;
}

export class ContactNotes {
  constructor(
    private readonly deps: { models: Models },
    private readonly contacts: ContactService,
  ) {}

  private get models() {
    return this.deps.models;
  }

  async list(orgId: string, contactId: string, page: { limit: number; offset: number }): Promise<{ notes: ContactNote[]; total: number }> {
    await this.contacts.get(orgId, contactId);
    const base = this.models.ContactNote.forOrg(orgId).where('contactId', contactId);
    const [total, notes] = await Promise.all([base.clone().resultSize(), base.clone().orderBy('createdAt', 'desc').orderBy('id', 'desc').limit(page.limit).offset(page.offset)]);
    return { notes, total };
  }

  async create(orgId: string, contactId: string, input: { content: string; authorId: string | null; source?: ContactNoteSource; conversationId?: string | null }, trx?: Knex.Transaction): Promise<ContactNote> {
    await this.contacts.get(orgId, contactId, trx);
    return this.models.ContactNote.forOrg(orgId, trx).insertAndFetch({
      organizationId: orgId,
      contactId,
      authorId: input.authorId,
      source: input.source ?? 'agent',
      conversationId: input.conversationId ?? null,
      content: input.content,
    });
  }

  async update(orgId: string, contactId: string, noteId: string, by: NoteAuthor, content: string): Promise<ContactNote> {
    const note = await this.editable(orgId, contactId, noteId, by);
    return this.models.ContactNote.forOrg(orgId).patchAndFetchById(note.id, { content });
  }

  async remove(orgId: string, contactId: string, noteId: string, by: NoteAuthor): Promise<void> {
    const note = await this.editable(orgId, contactId, noteId, by);
    await this.models.ContactNote.forOrg(orgId).deleteById(note.id);
  }

  async get(orgId: string, contactId: string, noteId: string): Promise<ContactNote> {
    const note = await this.models.ContactNote.forOrg(orgId).findById(noteId).where('contactId', contactId);
    if (!note) throw new NotFound('Note');
    return note;
  }

  /** The note policy, in one place: its author, or an admin (notes of the AI service or a channel: admins only). */
  private async editable(orgId: string, contactId: string, noteId: string, by: NoteAuthor): Promise<ContactNote> {
    const note = await this.get(orgId, contactId, noteId);
    if (note.authorId !== by.userId && !atLeast(by.role, 'admin')) throw new Forbidden('Only the author or an admin may change this note');
    return note;
  }
}
