// Agent socket events. The membership is reloaded for privileged events, so a role change or suspension applies at once.
import { presentMessage } from '../server/presenters/conversation.js';
import { on } from './ack.js';
import type { ConversationRef } from './events.js';
import type { AppSocket, RealtimeDeps } from './types.js';
import { rooms } from './rooms.js';
import { Forbidden } from '../server/errors.js';
import { authorize, type Rule } from '../server/policies/index.js';
import * as schemas from './schemas.js';

export function attachOperator(socket: AppSocket, deps: RealtimeDeps): void {
  const actor = socket.data.operator!;
  const orgId = socket.data.orgId;
  const log = deps.logger.child({ socket: socket.id, userId: actor.userId, orgId });

  socket.join([rooms.agents, rooms.user(actor.userId), rooms.session(actor.sessionId)]);

  const bot = actor.apiKey;
  const rules = deps.policies.conversation;
  // The REST routes' rules: a person by the membership reloaded now (shared for a moment by the agent's events), a
  // key by its scopes (its socket is cut by revocation on every instance).
  const allow = async (rule: Rule): Promise<void> => {
    authorize(actor, rule, bot ? null : await deps.membershipCheck.active(orgId, actor.userId));
  };

  // Bots are not agents on duty: they never count as online, so routing never assigns them conversations.
  if (!bot) void (async () => {
    try {
      // The handshake already loaded the membership (with the chosen availability): no second query here.
      if (await deps.presence.connected(orgId, actor.userId)) {
        deps.events.publish('presence.changed', { organizationId: orgId, userId: actor.userId, status: actor.membership?.availability ?? 'online' });
      }
    } catch (err) {
      log.warn({ err }, 'presence update failed');
    }
  })();
  if (!bot) socket.on('disconnect', () => {
    void deps.presence
      .disconnected(orgId, actor.userId)
      .then((offline) => offline && deps.events.publish('presence.changed', { organizationId: orgId, userId: actor.userId, status: 'offline' }))
      .catch((err) => log.warn({ err }, 'presence update failed'));
  });

  on(socket, log, 'send_message', schemas.agentSendMessage, async (p) => {
    await allow(rules.reply);
    const { message } = await deps.messages.send({ type: 'agent', orgId, userId: actor.userId }, p);
    return { message: presentMessage(message) };
  });

  on(socket, log, 'request_assist', schemas.conversationRef, async (p) => {
    await allow(rules.read);
    if (!deps.assist) return { conversationId: p.conversationId, query: '', passages: [], templates: [], aiPending: false };
    const assist = deps.assist;
    const local = await assist.local(orgId, p.conversationId);
    // The AI service's answer comes later to this socket only; the ack never waits for it.
    if (assist.forwards) void assist.suggestion(orgId, local, actor.userId).then((suggestion) => socket.emit('assist_result', { conversationId: p.conversationId, suggestion }));
    return { ...local, aiPending: assist.forwards };
  });

  on(socket, log, 'join_conversation', schemas.conversationRef, async (p) => {
    await allow(rules.read);
    await deps.conversations.agentJoined(orgId, p.conversationId);
    await socket.join(rooms.conversation(p.conversationId));
    return {};
  });

  on(socket, log, 'leave_conversation', schemas.conversationRef, async (p) => {
    await socket.leave(rooms.conversation(p.conversationId));
    return {};
  });

  const typing = (event: 'agent_typing' | 'agent_stopped_typing') => async (p: ConversationRef) => {
    const conversation = await deps.conversations.get(orgId, p.conversationId);
    if (conversation.visitorSessionId) {
      socket.nsp.to(rooms.visitor(conversation.visitorSessionId)).emit(event, { conversationId: conversation.id, agent: { id: actor.userId, name: actor.name } });
    }
    return {};
  };
  on(socket, log, 'typing_start', schemas.conversationRef, typing('agent_typing'));
  on(socket, log, 'typing_stop', schemas.conversationRef, typing('agent_stopped_typing'));

  on(socket, log, 'update_status', schemas.updateStatus, async (p) => {
    if (bot) throw new Forbidden('An API key has no agent status');
    await deps.membershipCheck.active(orgId, actor.userId);
    return { status: await deps.agents.setStatus(orgId, actor.userId, p.status) };
  });

  on(socket, log, 'sync', schemas.sync, async (p) => {
    await allow(rules.read);
    // One read: the conversation must be the organization's (else 404); notes included.
    const messages = await deps.messages.missed({ orgId, conversationId: p.conversationId, afterSeq: p.afterSeq, limit: schemas.SYNC_LIMIT + 1 });
    return { messages: messages.slice(0, schemas.SYNC_LIMIT).map(presentMessage), hasMore: messages.length > schemas.SYNC_LIMIT };
  });
}
