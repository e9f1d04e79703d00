// Files attached to messages: who may attach what, the rows written with the message, and the views (with a
// short-lived download URL minted each time a message is presented).
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { Message } from '../../db/models/Message.js';
import type { StorageObject } from '../../db/models/StorageObject.js';
import type { TicketEvent } from '../../db/models/TicketEvent.js';
import { ValidationFailed } from '../errors.js';
import type { AttachmentView, Sender } from '../services/messages/types.js';
import type { StorageDriver } from './driver.js';
import { refOf } from './service.js';

/** How long a URL inside a presented message works. */
export const ATTACHMENT_URL_SECONDS = 900;

interface AttachmentRow {
  messageId: string;
  objectId: string;
  fileName: string;
  mimeType: string;
  sizeBytes: number;
  key: string;
}

export class MessageAttachments {
  constructor(private readonly deps: { models: Models; driver: StorageDriver }) {}

  /**
   * Checks and stores a message's files in the message's transaction: uploaded attachment objects of the same
   * organization, and for a visitor only the visitor's own uploads. Anything else is 400 naming the id.
   */
  async attach(trx: Knex.Transaction, sender: Sender, message: Message, objectIds: string[]): Promise<AttachmentView[]> {
    const ids = [...new Set(objectIds.map((id) => id.toLowerCase()))];
    const objects = await this.deps.models.StorageObject.forOrg(sender.orgId, trx).whereIn('id', ids);
    const byId = new Map(objects.map((o) => [o.id, o]));
    const problems = ids.flatMap((id) => {
      const o = byId.get(id);
      // A channel's customer sends the media the server stored from the provider (channel_media), nothing else.
      const purposeOk = o && (sender.type === 'contact' ? o.purpose === 'channel_media' && o.createdBy === null : o.purpose === 'attachment');
      const allowed = o && purposeOk && o.status === 'uploaded' && (sender.type !== 'visitor' || o.visitorSessionId === sender.sessionId);
      return allowed ? [] : [{ field: 'attachments', message: `${id} is not an uploaded attachment you may send` }];
    });
    if (problems.length) throw new ValidationFailed('An attachment is not usable', problems);
    await trx('message_attachments').insert(ids.map((objectId, position) => ({ organizationId: sender.orgId, messageId: message.id, objectId, position })));
    return Promise.all(ids.map((id) => this.view(byId.get(id)!)));
  }

  private async view(o: Pick<StorageObject, 'id' | 'key' | 'fileName' | 'mimeType' | 'sizeBytes'>): Promise<AttachmentView> {
    const ref = refOf(o as StorageObject);
    const url = await this.deps.driver.downloadUrl(ref, ATTACHMENT_URL_SECONDS, o.mimeType.startsWith('image/') ? 'inline' : 'attachment');
    return { objectId: o.id, fileName: o.fileName, mimeType: o.mimeType, sizeBytes: o.sizeBytes, url };
  }

  /**
   * Sets `attachments` on messages that carry files (types image and file: a text page costs no query), with
   * fresh URLs. Other messages get an empty list.
   */
  async decorate(orgId: string, messages: Message[], trx?: Knex): Promise<void> {
    const withFiles = messages.filter((m) => m.type === 'file' || m.type === 'image');
    for (const m of messages) m.attachments ??= [];
    if (withFiles.length === 0) return;
    const db = trx ?? this.deps.models.StorageObject.knex();
    const rows = (await db('message_attachments as a')
      .join('storage_objects as o', 'o.id', 'a.object_id')
      .where('a.organization_id', orgId)
      .whereIn('a.message_id', withFiles.map((m) => m.id))
      .orderBy([{ column: 'a.message_id' }, { column: 'a.position' }])
      .select('a.message_id', 'a.object_id', 'o.file_name', 'o.mime_type', 'o.size_bytes', 'o.key')) as AttachmentRow[];
    const views = await Promise.all(rows.map(async (r) => ({ messageId: r.messageId, view: await this.view({ id: r.objectId, key: r.key, fileName: r.fileName, mimeType: r.mimeType, sizeBytes: r.sizeBytes }) })));
    const byMessage = new Map<string, AttachmentView[]>();
    for (const { messageId, view } of views) byMessage.set(messageId, [...(byMessage.get(messageId) ?? []), view]);
    for (const m of withFiles) m.attachments = byMessage.get(m.id) ?? [];
  }

  /** Sets `attachments` on a page of ticket events (the files of customers' mail), with fresh URLs; others get none. */
  async decorateTicketEvents(orgId: string, events: TicketEvent[]): Promise<void> {
    for (const e of events) e.attachments = [];
    const replies = events.filter((e) => e.type === 'reply');
    if (replies.length === 0) return;
    const rows = (await this.deps.models.StorageObject.knex()('ticket_event_attachments as a')
      .join('storage_objects as o', 'o.id', 'a.object_id')
      .where('a.organization_id', orgId)
      .whereIn('a.event_id', replies.map((e) => e.id))
      .orderBy([{ column: 'a.event_id' }, { column: 'a.position' }])
      .select('a.event_id', 'a.object_id', 'o.file_name', 'o.mime_type', 'o.size_bytes', 'o.key')) as (Omit<AttachmentRow, 'messageId'> & { eventId: string })[];
    const byId = new Map(replies.map((e) => [e.id, e]));
    for (const r of rows) byId.get(r.eventId)!.attachments!.push(await this.view({ id: r.objectId, key: r.key, fileName: r.fileName, mimeType: r.mimeType, sizeBytes: r.sizeBytes }));
  }

  /** Whether a visitor may read an object: their own upload, or a file of a public message in their conversation. */
  async visitorMay(orgId: string, sessionId: string, object: StorageObject): Promise<boolean> {
    if (object.visitorSessionId === sessionId) return true;
    const hit = await this.deps.models.StorageObject.knex()('message_attachments as a')
      .join('messages as m', 'm.id', 'a.message_id')
      .join('conversations as c', 'c.id', 'm.conversation_id')
      .where({ 'a.organization_id': orgId, 'a.object_id': object.id, 'm.private': false, 'c.visitor_session_id': sessionId })
      .first('a.id');
    return !!hit;
  }
}
