// Catching up after a disconnect with sync, and a visitor writing to a resolved (reopens) or closed (new conversation) one.
import { expect } from 'chai';
import { addMember, signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { ackData, closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, disconnected, nextEvent, request, settle } from './helpers/sockets.js';

describe('socket sync and conversation lifecycle', () => {
  const track = closeAfterEach();

  async function live() {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    return { server, baseUrl, owner, visitor, conversationId, agentSocket };
  }

  describe('sync after a disconnect', () => {
    it('gives a visitor exactly the public messages it missed, in seq order', async () => {
      const { baseUrl, owner, visitor, conversationId, agentSocket } = await live();
      let visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      const seen = collect(visitorSocket, 'new_message');
      ackData(await request(agentSocket, 'send_message', { conversationId, content: 'seen live' }));
      await settle(150);
      expect(seen.map((p) => p.message.seq)).to.deep.equal([2]);
      const lastSeen = seen[seen.length - 1]!.message.seq;

      visitorSocket.close();
      await disconnected(visitorSocket);
      // Meanwhile: replies, internal notes, a REST reply and the visitor's own message from another tab.
      ackData(await request(agentSocket, 'send_message', { conversationId, content: 'missed 1' }));
      ackData(await request(agentSocket, 'send_message', { conversationId, content: 'hidden note', private: true }));
      ackData(await request(agentSocket, 'send_message', { conversationId, content: 'missed 2' }));
      const rest = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'missed 3' }, { token: owner.accessToken });
      expect(rest.status).to.equal(201);
      await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'hidden note 2', private: true }, { token: owner.accessToken });
      const tab = await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'missed 4 (other tab)' }, { token: visitor.token });
      expect(tab.status).to.equal(201);

      visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      const { messages, hasMore } = ackData(await request(visitorSocket, 'sync', { conversationId, afterSeq: lastSeen }));
      expect(hasMore).to.equal(false);
      expect(messages.map((m: any) => [m.seq, m.content])).to.deep.equal([
        [3, 'missed 1'],
        [5, 'missed 2'],
        [6, 'missed 3'],
        [8, 'missed 4 (other tab)'],
      ]);
      expect(messages.every((m: any) => m.private === false)).to.equal(true);
      // The public history is exactly what was seen live plus what sync returned.
      const history = await visitor.api.get(`/widget/conversations/${conversationId}/messages?afterSeq=1`, { token: visitor.token });
      expect(history.body.data.map((m: any) => m.seq)).to.deep.equal([lastSeen, ...messages.map((m: any) => m.seq)]);

      // Live delivery resumes after the reconnect.
      const next = nextEvent(visitorSocket, 'new_message');
      ackData(await request(agentSocket, 'send_message', { conversationId, content: 'back live' }));
      expect((await next).message.seq).to.equal(9);
    });

    it('gives an agent every message it missed, notes included, without gaps', async () => {
      const { server, baseUrl, owner, visitor, conversationId } = await live();
      const member = await addMember(server, owner, 'agent');
      let memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      const seen = collect(memberSocket, 'new_message');
      ackData(await request(visitorSocket, 'send_message', { conversationId, content: 'v2' }));
      await settle(150);
      const lastSeen = seen[seen.length - 1]!.message.seq;
      expect(lastSeen).to.equal(2);

      memberSocket.close();
      await disconnected(memberSocket);
      for (let i = 0; i < 3; i++) ackData(await request(visitorSocket, 'send_message', { conversationId, content: `visitor ${i}` }));
      await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'owner note', private: true }, { token: owner.accessToken });
      await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'owner reply' }, { token: owner.accessToken });

      memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
      const { messages, hasMore } = ackData(await request(memberSocket, 'sync', { conversationId, afterSeq: lastSeen }));
      expect(hasMore).to.equal(false);
      expect(messages.map((m: any) => m.seq)).to.deep.equal([3, 4, 5, 6, 7]);
      expect(messages.map((m: any) => m.content)).to.deep.equal(['visitor 0', 'visitor 1', 'visitor 2', 'owner note', 'owner reply']);
      expect(messages[3].private).to.equal(true);
      const full = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(full.body.data.messages.map((m: any) => m.seq)).to.deep.equal([1, 2, ...messages.map((m: any) => m.seq)]);
      expect(full.body.data.lastSeq).to.equal(7);
      // Nothing newer than the last seq.
      expect(ackData(await request(memberSocket, 'sync', { conversationId, afterSeq: 7 })).messages).to.deep.equal([]);
    });

    it('keeps seq gapless under concurrent senders', async () => {
      const { baseUrl, owner, visitor, conversationId, agentSocket } = await live();
      const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      const sends = [];
      for (let i = 0; i < 6; i++) {
        sends.push(request(agentSocket, 'send_message', { conversationId, content: `a${i}`, private: i % 2 === 0 }));
        sends.push(request(visitorSocket, 'send_message', { conversationId, content: `v${i}` }));
        sends.push(owner.api.post(`/conversations/${conversationId}/messages`, { content: `r${i}` }, { token: owner.accessToken }));
      }
      await Promise.all(sends);
      const { messages } = ackData(await request(agentSocket, 'sync', { conversationId, afterSeq: 0 }));
      expect(messages.map((m: any) => m.seq)).to.deep.equal(Array.from({ length: 19 }, (_, i) => i + 1));
    });
  });

  describe('a visitor writing again', () => {
    it('reopens a resolved conversation: status_updated open to the visitor, conversation_updated to agents', async () => {
      const { baseUrl, owner, visitor, conversationId, agentSocket } = await live();
      const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      const resolved = await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'resolved' }, { token: owner.accessToken });
      expect(resolved.status).to.equal(200);
      await settle(100);

      const reopenedForVisitor = nextEvent(visitorSocket, 'status_updated', (p) => p.status === 'open');
      const reopenedForAgents = nextEvent(agentSocket, 'conversation_updated', (p) => p.conversation.id === conversationId && p.conversation.status === 'open');
      const newMessage = nextEvent(agentSocket, 'new_message', (p) => p.conversationId === conversationId);
      const created = collect(agentSocket, 'new_widget_conversation');
      const { message } = ackData(await request(visitorSocket, 'send_message', { conversationId, content: 'one more thing' }));
      expect(message).to.include({ conversationId, seq: 2 });
      expect(await reopenedForVisitor).to.deep.equal({ conversationId, status: 'open' });
      const { conversation } = await reopenedForAgents;
      expect(conversation.resolvedAt).to.equal(null);
      expect((await newMessage).message.id).to.equal(message.id);
      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.status).to.equal('open');
      await settle(100);
      expect(created).to.deep.equal([]);
    });

    it('to a closed conversation starts a new one: new_widget_conversation, the ack names the new conversation', async () => {
      const { baseUrl, owner, visitor, conversationId, agentSocket } = await live();
      const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      expect((await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'closed' }, { token: owner.accessToken })).status).to.equal(200);
      await settle(100);
      const statusHeard = collect(visitorSocket, 'status_updated');

      const everyCreated = collect(agentSocket, 'new_widget_conversation');
      const created = nextEvent(agentSocket, 'new_widget_conversation');
      const toVisitor = nextEvent(visitorSocket, 'new_message');
      const { message } = ackData(await request(visitorSocket, 'send_message', { conversationId, content: 'I am back', clientMessageId: 'back-1' }));
      expect(message.conversationId).to.not.equal(conversationId);
      expect(message).to.include({ seq: 1, senderType: 'visitor', content: 'I am back' });
      const { conversation } = await created;
      expect(conversation).to.include({ id: message.conversationId, status: 'open' });
      expect(conversation.visitor.sessionId).to.equal(visitor.sessionId);
      expect(await toVisitor).to.deep.equal({ conversationId: message.conversationId, message });

      // A retry of the same send (the client still names the closed conversation) does not start a third one.
      const retry = ackData(await request(visitorSocket, 'send_message', { conversationId, content: 'I am back', clientMessageId: 'back-1' }));
      expect(retry.message.id).to.equal(message.id);

      const old = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(old.body.data.status).to.equal('closed');
      expect(old.body.data.messages).to.have.length(1);
      const mine = await visitor.api.get('/widget/conversations', { token: visitor.token });
      expect(mine.body.data.map((c: any) => c.id).sort()).to.deep.equal([conversationId, message.conversationId].sort());
      // The visitor carries on in the new conversation.
      expect(ackData(await request(visitorSocket, 'send_message', { conversationId: message.conversationId, content: 'still here' })).message.seq).to.equal(2);
      await settle(100);
      expect(statusHeard).to.deep.equal([]);
      expect(everyCreated.map((p) => p.conversation.id)).to.deep.equal([message.conversationId]);
    });

    it('to a closed conversation, sent twice at once with one clientMessageId, starts one new conversation', async () => {
      const { baseUrl, owner, visitor, conversationId, agentSocket } = await live();
      const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      expect((await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'closed' }, { token: owner.accessToken })).status).to.equal(200);
      const created = collect(agentSocket, 'new_widget_conversation');
      const [a, b] = await Promise.all([
        request(visitorSocket, 'send_message', { conversationId, content: 'twice', clientMessageId: 'twice-1' }),
        visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'twice', clientMessageId: 'twice-1' }, { token: visitor.token }),
      ]);
      expect([200, 201]).to.include(b.status);
      expect(ackData(a).message.id).to.equal(b.body.data.id);
      await settle(150);
      expect(created).to.have.length(1);
      const mine = await visitor.api.get('/widget/conversations', { token: visitor.token });
      expect(mine.body.data).to.have.length(2);
    });
  });
});
