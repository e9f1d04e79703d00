// Agent client -> server events: send_message, join/leave_conversation, typing, update_status, sync; acks and errors.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { addMember, signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { ackData, closeAfterEach, expectAckError } from './helpers/socket-acks.js';
import { collect, connectOk, disconnected, nextEvent, request, settle } from './helpers/sockets.js';

describe('agent socket events', () => {
  const track = closeAfterEach();

  /** An owner and a visitor with one conversation, both connected. */
  async function live() {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl, { name: 'Olivia Owner' });
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
    return { server, baseUrl, owner, visitor, conversationId, agentSocket, visitorSocket };
  }

  async function messageCount(owner: { api: any; accessToken: string }, conversationId: string): Promise<number> {
    const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body.data.messages.length;
  }

  describe('send_message', () => {
    it('stores the reply, acks it and announces it to every agent and to the visitor', async () => {
      const { server, baseUrl, owner, conversationId, agentSocket, visitorSocket } = await live();
      const member = await addMember(server, owner, 'agent');
      const memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      const toMember = nextEvent(memberSocket, 'new_message', (p) => p.conversationId === conversationId);
      const toVisitor = nextEvent(visitorSocket, 'new_message', (p) => p.conversationId === conversationId);
      const ack = await request(agentSocket, 'send_message', { conversationId, content: 'How can I help?', clientMessageId: 'a-1' });
      const { message } = ackData(ack);
      expect(Object.keys(ackData(ack))).to.deep.equal(['message']);
      expect(message).to.include({ conversationId, seq: 2, senderType: 'agent', senderId: owner.userId, content: 'How can I help?', type: 'text', private: false, clientMessageId: 'a-1' });
      expect(message.id).to.be.a('string');
      expect(await toMember).to.deep.equal({ conversationId, message });
      expect(await toVisitor).to.deep.equal({ conversationId, message });

      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.messages.map((m: any) => m.id)).to.include(message.id);
      expect(res.body.data.firstReplyAt).to.be.a('string');
    });

    it('keeps the type of an image or file message', async () => {
      const { conversationId, agentSocket } = await live();
      const ack = await request(agentSocket, 'send_message', { conversationId, content: 'https://files.example.test/a.png', type: 'image' });
      expect(ackData(ack).message.type).to.equal('image');
    });

    it('answers validation_failed for invalid payloads and stores nothing', async () => {
      const { owner, conversationId, agentSocket, visitorSocket } = await live();
      const heard = collect(visitorSocket, 'new_message');
      const invalid: unknown[] = [
        undefined,
        'hello',
        {},
        { conversationId },
        { conversationId, content: '' },
        { conversationId, content: 'x'.repeat(50_001) },
        { conversationId: 'not-a-uuid', content: 'hi' },
        { conversationId, content: 42 },
        { conversationId, content: 'hi', type: 'system' },
        { conversationId, content: 'hi', private: 'yes' },
        { conversationId, content: 'hi', clientMessageId: '' },
        { conversationId, content: 'hi', senderType: 'visitor' },
        { conversationId, content: 'hi', organizationId: randomUUID() },
      ];
      for (const payload of invalid) expectAckError(await request(agentSocket, 'send_message', payload), 'validation_failed');
      await settle(100);
      expect(heard).to.have.length(0);
      expect(await messageCount(owner, conversationId)).to.equal(1);
      // The longest allowed content is fine.
      expect(ackData(await request(agentSocket, 'send_message', { conversationId, content: 'y'.repeat(50_000) })).message.content).to.have.length(50_000);
    });

    it('answers not_found for an unknown conversation and invalid_transition for a closed one', async () => {
      const { owner, conversationId, agentSocket } = await live();
      expectAckError(await request(agentSocket, 'send_message', { conversationId: randomUUID(), content: 'hi' }), 'not_found');
      const closed = await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'closed' }, { token: owner.accessToken });
      expect(closed.status, JSON.stringify(closed.body)).to.equal(200);
      expectAckError(await request(agentSocket, 'send_message', { conversationId, content: 'too late' }), 'invalid_transition');
      expect(await messageCount(owner, conversationId)).to.equal(1);
    });
  });

  describe('join_conversation and leave_conversation', () => {
    it('acks {}, marks the human as joined once (conversation_updated to agents) and can be left again', async () => {
      const { conversationId, agentSocket } = await live();
      const updates = collect(agentSocket, 'conversation_updated');
      const joined = await request(agentSocket, 'join_conversation', { conversationId });
      expect(ackData(joined)).to.deep.equal({});
      await settle(150);
      expect(updates).to.have.length(1);
      expect(updates[0]!.conversation.id).to.equal(conversationId);
      expect(updates[0]!.conversation.humanJoinedAt).to.be.a('string');
      // Joining again changes nothing and announces nothing.
      expect(ackData(await request(agentSocket, 'join_conversation', { conversationId }))).to.deep.equal({});
      await settle(150);
      expect(updates).to.have.length(1);
      expect(ackData(await request(agentSocket, 'leave_conversation', { conversationId }))).to.deep.equal({});
    });

    it('answers not_found for an unknown conversation and validation_failed for bad payloads', async () => {
      const { conversationId, agentSocket } = await live();
      expectAckError(await request(agentSocket, 'join_conversation', { conversationId: randomUUID() }), 'not_found');
      for (const event of ['join_conversation', 'leave_conversation'] as const) {
        for (const payload of [undefined, {}, { conversationId: 'nope' }, { conversationId: 7 }, { conversationId, extra: true }]) {
          expectAckError(await request(agentSocket, event, payload), 'validation_failed');
        }
      }
    });
  });

  describe('typing_start and typing_stop', () => {
    it('tell the visitor which agent is typing, and nobody else', async () => {
      const { owner, visitor, conversationId, agentSocket, visitorSocket, baseUrl } = await live();
      const otherVisitor = await newVisitor(owner);
      const otherSocket = track(await connectOk(baseUrl, owner.orgId, otherVisitor.token));
      const otherHeard = collect(otherSocket, 'agent_typing');
      const agentsHeard = collect(agentSocket, 'agent_typing');
      expect(visitor.sessionId).to.not.equal(otherVisitor.sessionId);

      const typing = nextEvent(visitorSocket, 'agent_typing');
      expect(ackData(await request(agentSocket, 'typing_start', { conversationId }))).to.deep.equal({});
      expect(await typing).to.deep.equal({ conversationId, agent: { id: owner.userId, name: 'Olivia Owner' } });

      const stopped = nextEvent(visitorSocket, 'agent_stopped_typing');
      expect(ackData(await request(agentSocket, 'typing_stop', { conversationId }))).to.deep.equal({});
      expect(await stopped).to.deep.equal({ conversationId, agent: { id: owner.userId, name: 'Olivia Owner' } });
      await settle(150);
      expect(otherHeard).to.have.length(0);
      expect(agentsHeard).to.have.length(0);
    });

    it('answer not_found for an unknown conversation and validation_failed for bad payloads', async () => {
      const { conversationId, agentSocket } = await live();
      for (const event of ['typing_start', 'typing_stop'] as const) {
        expectAckError(await request(agentSocket, event, { conversationId: randomUUID() }), 'not_found');
        expectAckError(await request(agentSocket, event, { conversationId: 'x' }), 'validation_failed');
        expectAckError(await request(agentSocket, event, { conversationId, typing: true }), 'validation_failed');
      }
    });
  });

  describe('update_status', () => {
    it("acks the effective status, tells the organization's agents and is kept in the profile", async () => {
      const { server, baseUrl, owner } = await live();
      const member = await addMember(server, owner, 'agent');
      const memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      const ownerSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
      for (const status of ['away', 'busy', 'online', 'offline'] as const) {
        const heard = nextEvent(ownerSocket, 'user_status_update', (p) => p.userId === member.userId && p.status === status);
        expect(ackData(await request(memberSocket, 'update_status', { status }))).to.deep.equal({ status });
        expect(await heard).to.deep.equal({ userId: member.userId, status });
      }
      const away = await request(memberSocket, 'update_status', { status: 'away' });
      expect(ackData(away)).to.deep.equal({ status: 'away' });
      const profile = await member.api.get('/agent/profile', { token: member.accessToken });
      expect(profile.body.data).to.include({ availability: 'away', status: 'away' });
    });

    it('answers validation_failed for an unknown status or extra fields', async () => {
      const { agentSocket } = await live();
      for (const payload of [undefined, {}, { status: 'sleeping' }, { status: 'ONLINE' }, { status: 'online', userId: randomUUID() }]) {
        expectAckError(await request(agentSocket, 'update_status', payload), 'validation_failed');
      }
    });
  });

  describe('presence', () => {
    it('announces online on the first socket and offline only when the last one closes', async () => {
      const { server, baseUrl, owner, agentSocket } = await live();
      const member = await addMember(server, owner, 'agent');
      const online = nextEvent(agentSocket, 'user_status_update', (p) => p.userId === member.userId);
      const first = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      expect(await online).to.deep.equal({ userId: member.userId, status: 'online' });

      const heard = collect(agentSocket, 'user_status_update');
      const second = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      first.close();
      await settle(200);
      expect(heard.filter((p) => p.userId === member.userId), 'a second socket keeps the agent online').to.deep.equal([]);

      const offline = nextEvent(agentSocket, 'user_status_update', (p) => p.userId === member.userId);
      second.close();
      expect(await offline).to.deep.equal({ userId: member.userId, status: 'offline' });
      const profile = await member.api.get('/agent/profile', { token: member.accessToken });
      expect(profile.body.data.status).to.equal('offline');
    });

    it('reconnects with the availability the agent chose', async () => {
      const { server, baseUrl, owner, agentSocket } = await live();
      const member = await addMember(server, owner, 'agent');
      const first = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      expect(ackData(await request(first, 'update_status', { status: 'busy' }))).to.deep.equal({ status: 'busy' });
      first.close();
      await disconnected(first);
      await settle(150);
      const back = nextEvent(agentSocket, 'user_status_update', (p) => p.userId === member.userId && p.status !== 'offline');
      track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      expect(await back).to.deep.equal({ userId: member.userId, status: 'busy' });
    });
  });

  describe('sync', () => {
    it('answers validation_failed for bad payloads and not_found for an unknown conversation', async () => {
      const { conversationId, agentSocket } = await live();
      for (const payload of [undefined, {}, { conversationId }, { conversationId, afterSeq: -1 }, { conversationId, afterSeq: '0' }, { conversationId, afterSeq: 1.5 }, { conversationId: 'x', afterSeq: 0 }, { conversationId, afterSeq: 0, limit: 5 }]) {
        expectAckError(await request(agentSocket, 'sync', payload), 'validation_failed');
      }
      expectAckError(await request(agentSocket, 'sync', { conversationId: randomUUID(), afterSeq: 0 }), 'not_found');
      const all = ackData(await request(agentSocket, 'sync', { conversationId, afterSeq: 0 }));
      expect(all.hasMore).to.equal(false);
      expect(all.messages.map((m: any) => m.seq)).to.deep.equal([1]);
    });
  });
});
