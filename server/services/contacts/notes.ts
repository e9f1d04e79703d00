// Internal notes about a contact: any agent reads and writes them; only the author or an admin edits or deletes one.
import type { Knex } from 'knex';
import type { Models } from '../../../db/index.js';
import type { Role } from '../../../db/models/Membership.js';
import { assertNoteEditable } from '../../policies/contact.js';
import type { ContactNote } from '../../../db/models/ContactNote.js';
import { NotFound } from '../../errors.js';
import type { ContactCore, NoteInput } from './types.js';

export interface NoteAuthor {
  userId: string;
  role: Role;
}

export class ContactNotes {
  constructor(
    private readonly deps: { models: Models },
    private readonly contacts: ContactCore,
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

  async create(orgId: string, contactId: string, input: NoteInput, trx?: Knex.Transaction): Promise<ContactNote> {
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

  /** A note that exists and that `by` may change (server/policies/contact.ts). */
  private async editable(orgId: string, contactId: string, noteId: string, by: NoteAuthor): Promise<ContactNote> {
    const note = await this.get(orgId, contactId, noteId);
    assertNoteEditable(note, by);
    return note;
  }
}
