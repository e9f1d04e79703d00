// Visitor socket events: a visitor only ever touches their own conversations and only sees public messages.
import { Forbidden } from '../server/errors.js';
import { assertVisitorMessage } from '../server/policies/index.js';
import { presentMessage } from '../server/presenters/conversation.js';
import { on } from './ack.js';
import type { ConversationRef } from './events.js';
import type { AppSocket, RealtimeDeps } from './types.js';
import { rooms } from './rooms.js';
import * as schemas from './schemas.js';

export function attachVisitor(socket: AppSocket, deps: RealtimeDeps): void {
  const visitor = socket.data.visitor!;
  const orgId = socket.data.orgId;
  const log = deps.logger.child({ socket: socket.id, visitorSessionId: visitor.sessionId, orgId });

  socket.join(rooms.visitor(visitor.sessionId));

  on(socket, log, 'send_message', schemas.visitorSendMessage, async (p) => {
    assertVisitorMessage(p, 'payload');
    const { message } = await deps.messages.send({ type: 'visitor', orgId, sessionId: visitor.sessionId }, p);
    return { message: presentMessage(message) };
  });

  const typing = (event: 'customer_typing' | 'customer_stopped_typing') => async (p: ConversationRef) => {
    const conversation = await deps.widget.visitorConversation(visitor, p.conversationId);
    socket.nsp.to(rooms.agents).emit(event, { conversationId: conversation.id });
    return {};
  };
  on(socket, log, 'typing_start', schemas.conversationRef, typing('customer_typing'));
  on(socket, log, 'typing_stop', schemas.conversationRef, typing('customer_stopped_typing'));

  // Agent-only events answer forbidden instead of leaving the client waiting for an ack that never comes.
  for (const event of ['join_conversation', 'leave_conversation', 'update_status', 'request_assist']) {
    on(socket, log, event, schemas.anything, async () => {
      throw new Forbidden('Visitors cannot do this');
    });
  }

  on(socket, log, 'sync', schemas.sync, async (p) => {
    // One read: the conversation must be this visitor's (else 404) and only public messages come back.
    const messages = await deps.messages.missed({ orgId, conversationId: p.conversationId, afterSeq: p.afterSeq, limit: schemas.SYNC_LIMIT + 1, visitorSessionId: visitor.sessionId });
    return { messages: messages.slice(0, schemas.SYNC_LIMIT).map(presentMessage), hasMore: messages.length > schemas.SYNC_LIMIT };
  });
}
