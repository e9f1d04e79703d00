// Messages: the one send path (service.ts), the append rules both its writes share (rules.ts), group commit
// (batch.ts), idempotency (retries.ts) and the words callers use (types.ts).
export { MessageService } from './service.js';
export type { BatchStats, MessageBatcherOptions } from './batch.js';
export { senderIdOf } from './types.js';
export type { Appended, AppendedInTransaction, AttachmentPort, AttachmentView, ChannelOutbox, ConversationRef, MessageInput, NewConversation, Sender, SendInput, SendResult, StartInput, StartResult } from './types.js';
