import { TenantModel } from '../BaseModel.js';

export type SenderType = 'visitor' | 'agent' | 'ai' | 'system';
export type MessageType = 'text' | 'image' | 'file' | 'system';

/** A file of a message as every presentation shows it; `url` is a short-lived download link minted for that view. */
export interface AttachmentView {
  objectId: string;
  fileName: string;
  mimeType: string;
  sizeBytes: number;
  url: string;
}

export class Message extends TenantModel {
  static override tableName = 'messages';
  static override jsonAttributes = ['metadata'];

  declare conversationId: string;
  declare seq: number;
  declare senderType: SenderType;
  declare senderId: string | null;
  declare content: string;
  declare type: MessageType;
  /** An internal note: agents only, never a visitor. */
  declare private: boolean;
  declare metadata: Record<string, unknown>;
  declare clientMessageId: string | null;
  /** Not a column: the message's files with fresh URLs, set before the message is presented. */
  declare attachments?: AttachmentView[];

  override $beforeUpdate(): void {}
}
