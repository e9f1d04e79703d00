// Visitor client -> server events (send_message, typing, sync) and what a visitor may never hear or do.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { ackData, closeAfterEach, expectAckError } from './helpers/socket-acks.js';
import { collect, connectOk, nextEvent, request, settle, type ClientSocket } from './helpers/sockets.js';

/** Every server -> client event a visitor must never receive. */
const AGENT_ONLY = ['new_widget_conversation', 'conversation_updated', 'conversation_assigned', 'customer_typing', 'customer_stopped_typing', 'user_status_update', 'notification_created'] as const;

function agentOnlyHeard(socket: ClientSocket): () => Record<string, unknown[]> {
  const heard = Object.fromEntries(AGENT_ONLY.map((e) => [e, collect(socket, e)]));
  return () => Object.fromEntries(Object.entries(heard).filter(([, v]) => v.length > 0));
}

describe('visitor socket events', () => {
  const track = closeAfterEach();

  async function live() {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const visitor = await newVisitor(owner, { name: 'Vera Visitor' });
    const { conversationId } = await startConversation(visitor);
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
    return { server, baseUrl, owner, visitor, conversationId, agentSocket, visitorSocket };
  }

  describe('send_message', () => {
    it('stores the message, acks it and announces it to the agents and back to the visitor', async () => {
      const { owner, visitor, conversationId, agentSocket, visitorSocket } = await live();
      const toAgent = nextEvent(agentSocket, 'new_message', (p) => p.conversationId === conversationId);
      const echo = nextEvent(visitorSocket, 'new_message', (p) => p.conversationId === conversationId);
      const data = ackData(await request(visitorSocket, 'send_message', { conversationId, content: 'Is anyone there?', clientMessageId: 'v-1' }));
      expect(Object.keys(data)).to.deep.equal(['message']);
      expect(data.message).to.include({ conversationId, seq: 2, senderType: 'visitor', senderId: visitor.sessionId, content: 'Is anyone there?', type: 'text', private: false, clientMessageId: 'v-1' });
      expect(await toAgent).to.deep.equal({ conversationId, message: data.message });
      expect(await echo).to.deep.equal({ conversationId, message: data.message });
      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.unreadCount).to.equal(2);
      expect(res.body.data.messages.map((m: any) => m.content)).to.deep.equal(['Hello, I need help', 'Is anyone there?']);
    });

    it('answers validation_failed for invalid payloads, including a visitor trying to write an internal note', async () => {
      const { owner, conversationId, agentSocket, visitorSocket } = await live();
      const heard = collect(agentSocket, 'new_message');
      const invalid: unknown[] = [
        undefined,
        {},
        { conversationId },
        { conversationId, content: '' },
        { conversationId, content: 'z'.repeat(50_001) },
        { conversationId: 'nope', content: 'hi' },
        { conversationId, content: 'hi', private: true },
        { conversationId, content: 'hi', type: 'system' },
        { conversationId, content: 'hi', senderType: 'agent' },
      ];
      for (const payload of invalid) expectAckError(await request(visitorSocket, 'send_message', payload), 'validation_failed');
      await settle(100);
      expect(heard).to.have.length(0);
      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.messages).to.have.length(1);
    });

    it('answers not_found for an unknown conversation', async () => {
      const { visitorSocket } = await live();
      expectAckError(await request(visitorSocket, 'send_message', { conversationId: randomUUID(), content: 'hi' }), 'not_found');
    });
  });

  describe('typing_start and typing_stop', () => {
    it('tell the agents that the customer is typing, with the conversation only', async () => {
      const { conversationId, agentSocket, visitorSocket } = await live();
      const typing = nextEvent(agentSocket, 'customer_typing');
      expect(ackData(await request(visitorSocket, 'typing_start', { conversationId }))).to.deep.equal({});
      expect(await typing).to.deep.equal({ conversationId });
      const stopped = nextEvent(agentSocket, 'customer_stopped_typing');
      expect(ackData(await request(visitorSocket, 'typing_stop', { conversationId }))).to.deep.equal({});
      expect(await stopped).to.deep.equal({ conversationId });
    });

    it('answer not_found for an unknown conversation and validation_failed for bad payloads, announcing nothing', async () => {
      const { conversationId, agentSocket, visitorSocket } = await live();
      const heard = collect(agentSocket, 'customer_typing');
      for (const event of ['typing_start', 'typing_stop'] as const) {
        expectAckError(await request(visitorSocket, event, { conversationId: randomUUID() }), 'not_found');
        for (const payload of [undefined, {}, { conversationId: 'x' }, { conversationId, who: 'me' }]) expectAckError(await request(visitorSocket, event, payload), 'validation_failed');
      }
      await settle(100);
      expect(heard).to.have.length(0);
    });
  });

  describe('sync', () => {
    it('returns the public messages after afterSeq, and validates the payload', async () => {
      const { conversationId, agentSocket, visitorSocket } = await live();
      ackData(await request(agentSocket, 'send_message', { conversationId, content: 'reply one' }));
      ackData(await request(agentSocket, 'send_message', { conversationId, content: 'reply two' }));
      const data = ackData(await request(visitorSocket, 'sync', { conversationId, afterSeq: 1 }));
      expect(data).to.have.all.keys('messages', 'hasMore');
      expect(data.hasMore).to.equal(false);
      expect(data.messages.map((m: any) => [m.seq, m.content])).to.deep.equal([
        [2, 'reply one'],
        [3, 'reply two'],
      ]);
      expect(ackData(await request(visitorSocket, 'sync', { conversationId, afterSeq: 3 })).messages).to.deep.equal([]);
      expectAckError(await request(visitorSocket, 'sync', { conversationId: randomUUID(), afterSeq: 0 }), 'not_found');
      for (const payload of [undefined, { conversationId }, { conversationId, afterSeq: -1 }, { conversationId, afterSeq: '1' }, { conversationId, afterSeq: 0, publicOnly: false }]) {
        expectAckError(await request(visitorSocket, 'sync', payload), 'validation_failed');
      }
    });
  });

  describe('agent-only surface', () => {
    it('never delivers agent-only events to a visitor while the agents hear them', async () => {
      const { baseUrl, owner, conversationId, agentSocket, visitorSocket } = await live();
      const visitorHeard = agentOnlyHeard(visitorSocket);
      const agentHeard = collect(agentSocket, 'conversation_updated');
      const second = await newVisitor(owner);
      const secondSocket = track(await connectOk(baseUrl, owner.orgId, second.token));
      // customer typing from another visitor, a new conversation, a status change, an assignment, presence, notifications.
      ackData(await request(secondSocket, 'typing_start', { conversationId: (await startConversation(second)).conversationId }));
      expect((await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'pending' }, { token: owner.accessToken })).status).to.equal(200);
      expect((await owner.api.post(`/conversations/${conversationId}/route`, { agentId: owner.userId }, { token: owner.accessToken })).status).to.equal(200);
      ackData(await request(agentSocket, 'update_status', { status: 'away' }));
      await settle();
      expect(agentHeard.length).to.be.greaterThan(0);
      expect(visitorHeard()).to.deep.equal({});
    });

    it('refuses agent events sent from a visitor socket with a forbidden ack: no status change, no join', async () => {
      const { owner, conversationId, agentSocket, visitorSocket } = await live();
      // The agent's own "online" from connecting may still be on its way (presence goes through Redis when configured).
      await settle();
      const statusHeard = collect(agentSocket, 'user_status_update');
      const updatesHeard = collect(agentSocket, 'conversation_updated');
      const tryAgentEvent = async (event: 'update_status' | 'join_conversation' | 'leave_conversation', payload: unknown) => {
        const ack = await request(visitorSocket, event, payload);
        expect(ack, JSON.stringify(ack)).to.deep.equal({ success: false, error: { code: 'forbidden', message: 'Visitors cannot do this', details: [] } });
      };
      await tryAgentEvent('update_status', { status: 'online' });
      await tryAgentEvent('join_conversation', { conversationId });
      await tryAgentEvent('leave_conversation', { conversationId });
      await settle(100);
      expect(statusHeard).to.deep.equal([]);
      expect(updatesHeard).to.deep.equal([]);
      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.humanJoinedAt).to.equal(null);
    });
  });
});
