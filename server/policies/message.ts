// What each kind of sender may put in a message, for REST routes and socket events alike.
import type { MessageType } from '../../db/models/Message.js';
import { ValidationFailed } from '../errors.js';

/**
 * Visitors write text. A picture or a file comes as an uploaded attachment (the message is then a file message),
 * never as a link in `content`, which an agent's screen would show as the visitor's own image.
 */
export function assertVisitorMessage(input: { type?: MessageType; attachments?: string[] }, where: 'body' | 'payload'): void {
  if (!input.type || input.type === 'text' || input.attachments?.length) return;
  throw new ValidationFailed('Visitors send text; images and files come as attachments (upload them, then list their ids in attachments)', [
    { field: 'type', message: `must be text unless the message has attachments`, in: where },
  ]);
}
