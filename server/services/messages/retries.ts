// Idempotency of sends, checked in one place: a send carrying a clientMessageId that an earlier send of the same
// sender stored gets that message back instead of storing a second one.
import type { Knex } from 'knex';
import type { Conversation } from '../../../db/models/Conversation.js';
import type { Message } from '../../../db/models/Message.js';
import { Conflict } from '../../errors.js';
import { senderIdOf, storedSenderType, type Sender } from './types.js';

/**
 * Where the earlier message may be: in this conversation, or (for a customer's message that opens a conversation)
 * in a conversation the same customer opened since `since` (null: ever).
 */
export type RetryScope = { conversation: Conversation } | { openedSince: Date | null };

/**
 * The stored message of the send this one retries, or null. Runs after the lock that serializes the sender's sends
 * (the conversation's row, or the customer's session or contact row), as a statement of its own: its snapshot sees
 * what a concurrent sender committed meanwhile (a subquery in the locking SELECT would still read the snapshot taken
 * before the wait). Only the sender's own retry gets the stored message back: anyone else would read a message
 * (perhaps an internal note) by guessing its id, and is refused.
 */
export async function earlierSend(trx: Knex.Transaction, sender: Sender, clientMessageId: string | null | undefined, scope: RetryScope): Promise<{ message: Message; conversation: Conversation } | null> {
  if (!clientMessageId) return null;
  const senderType = storedSenderType(sender);
  const senderId = senderIdOf(sender);
  if ('conversation' in scope) {
    const existing = (await trx('messages').where({ conversationId: scope.conversation.id, clientMessageId }).first()) as Message | undefined;
    if (!existing) return null;
    if (existing.senderType !== senderType || (existing.senderId ?? null) !== senderId) throw new Conflict('This clientMessageId is already used by another message');
    return { message: existing, conversation: scope.conversation };
  }
  if (sender.type !== 'visitor' && sender.type !== 'contact') return null;
  const opened = trx('conversations')
    .where({ organizationId: sender.orgId, ...(sender.type === 'visitor' ? { visitorSessionId: sender.sessionId } : { contactId: sender.contactId }) })
    .select('id');
  if (scope.openedSince) opened.where('createdAt', '>=', scope.openedSince);
  const message = (await trx('messages')
    .where({ organizationId: sender.orgId, clientMessageId, senderType, senderId })
    .whereIn('conversationId', opened)
    .orderBy('createdAt', 'asc')
    .first()) as Message | undefined;
  if (!message) return null;
  const conversation = (await trx('conversations').where({ id: message.conversationId, organizationId: sender.orgId }).first()) as Conversation | undefined;
  return conversation ? { message, conversation } : null;
}
