// Internal notes never reach a visitor (socket, REST, sync); a repeated clientMessageId is stored and announced once.
import { expect } from 'chai';
import { addMember, signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { ackData, closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, nextEvent, request, settle } from './helpers/sockets.js';

describe('socket privacy and idempotency', () => {
  const track = closeAfterEach();

  async function live() {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const member = await addMember(server, owner, 'agent');
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    const memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
    const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
    return { server, baseUrl, owner, member, visitor, conversationId, agentSocket, memberSocket, visitorSocket };
  }

  describe('internal notes', () => {
    it('reach the agents but never the visitor: not live, not in the widget history, not in a visitor sync', async () => {
      const { owner, visitor, conversationId, agentSocket, memberSocket, visitorSocket } = await live();
      const visitorHeard = collect(visitorSocket, 'new_message');
      const memberHeard = collect(memberSocket, 'new_message');

      const viaSocket = ackData(await request(agentSocket, 'send_message', { conversationId, content: 'note via socket', private: true })).message;
      expect(viaSocket).to.include({ private: true, seq: 2, senderType: 'agent' });
      const rest = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'note via REST', private: true }, { token: owner.accessToken });
      expect(rest.status, JSON.stringify(rest.body)).to.equal(201);
      expect(rest.body.data).to.include({ private: true, seq: 3 });
      const publicReply = ackData(await request(agentSocket, 'send_message', { conversationId, content: 'public reply' })).message;
      expect(publicReply.seq).to.equal(4);
      await settle();

      expect(visitorHeard.map((p) => p.message.content)).to.deep.equal(['public reply']);
      expect(memberHeard.map((p) => [p.message.content, p.message.private])).to.deep.equal([
        ['note via socket', true],
        ['note via REST', true],
        ['public reply', false],
      ]);

      const history = await visitor.api.get(`/widget/conversations/${conversationId}/messages`, { token: visitor.token });
      expect(history.status, JSON.stringify(history.body)).to.equal(200);
      expect(history.body.data.map((m: any) => m.seq)).to.deep.equal([1, 4]);
      expect(history.body.data.every((m: any) => m.private === false)).to.equal(true);
      const later = await visitor.api.get(`/widget/conversations/${conversationId}/messages?afterSeq=1`, { token: visitor.token });
      expect(later.body.data.map((m: any) => m.content)).to.deep.equal(['public reply']);

      const visitorSync = ackData(await request(visitorSocket, 'sync', { conversationId, afterSeq: 0 }));
      expect(visitorSync.messages.map((m: any) => m.seq)).to.deep.equal([1, 4]);
      expect(JSON.stringify(visitorSync)).to.not.include('note via');

      const agentSync = ackData(await request(memberSocket, 'sync', { conversationId, afterSeq: 0 }));
      expect(agentSync.messages.map((m: any) => [m.seq, m.private])).to.deep.equal([
        [1, false],
        [2, true],
        [3, true],
        [4, false],
      ]);
    });

    it('do not count as the first reply, and a note-only conversation shows the visitor no agent message', async () => {
      const { owner, visitor, conversationId, agentSocket } = await live();
      ackData(await request(agentSocket, 'send_message', { conversationId, content: 'just a note', private: true }));
      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.firstReplyAt).to.equal(null);
      const list = await visitor.api.get(`/widget/conversations/${conversationId}/messages`, { token: visitor.token });
      expect(list.body.data.map((m: any) => m.senderType)).to.deep.equal(['visitor']);
    });
  });

  describe('clientMessageId', () => {
    it('over the socket: stored once, announced once, the repeat acks the same message', async () => {
      const { owner, conversationId, agentSocket, memberSocket, visitorSocket } = await live();
      const memberHeard = collect(memberSocket, 'new_message');
      const visitorHeard = collect(visitorSocket, 'new_message');
      const first = ackData(await request(agentSocket, 'send_message', { conversationId, content: 'only once', clientMessageId: 'retry-1' })).message;
      const second = ackData(await request(agentSocket, 'send_message', { conversationId, content: 'only once', clientMessageId: 'retry-1' })).message;
      expect(second).to.deep.equal(first);
      // A retry with changed content is still the first message.
      const third = ackData(await request(agentSocket, 'send_message', { conversationId, content: 'edited retry', clientMessageId: 'retry-1' })).message;
      expect(third.id).to.equal(first.id);
      expect(third.content).to.equal('only once');
      await settle();
      expect(memberHeard.map((p) => p.message.id)).to.deep.equal([first.id]);
      expect(visitorHeard.map((p) => p.message.id)).to.deep.equal([first.id]);
      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.messages.filter((m: any) => m.clientMessageId === 'retry-1')).to.have.length(1);
      expect(res.body.data.messages).to.have.length(2);
      // The next message takes the next seq: the repeats left no gap.
      expect(ackData(await request(agentSocket, 'send_message', { conversationId, content: 'next' })).message.seq).to.equal(3);
    });

    it('over REST: 201 then 200 with the same message, announced once', async () => {
      const { owner, conversationId, memberSocket, visitorSocket } = await live();
      const memberHeard = collect(memberSocket, 'new_message');
      const visitorHeard = collect(visitorSocket, 'new_message');
      const path = `/conversations/${conversationId}/messages`;
      const first = await owner.api.post(path, { content: 'rest once', clientMessageId: 'rest-1' }, { token: owner.accessToken });
      expect(first.status, JSON.stringify(first.body)).to.equal(201);
      const second = await owner.api.post(path, { content: 'rest once', clientMessageId: 'rest-1' }, { token: owner.accessToken });
      expect(second.status, JSON.stringify(second.body)).to.equal(200);
      expect(second.body.data).to.deep.equal(first.body.data);
      await settle();
      expect(memberHeard.map((p) => p.message.id)).to.deep.equal([first.body.data.id]);
      expect(visitorHeard.map((p) => p.message.id)).to.deep.equal([first.body.data.id]);
      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.messages).to.have.length(2);
    });

    it('is shared by REST and socket: a socket retry of a REST send acks the stored message', async () => {
      const { owner, conversationId, agentSocket, memberSocket } = await live();
      const memberHeard = collect(memberSocket, 'new_message');
      const rest = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'both ways', clientMessageId: 'mixed-1' }, { token: owner.accessToken });
      expect(rest.status).to.equal(201);
      const viaSocket = ackData(await request(agentSocket, 'send_message', { conversationId, content: 'both ways', clientMessageId: 'mixed-1' })).message;
      expect(viaSocket.id).to.equal(rest.body.data.id);
      await settle();
      expect(memberHeard).to.have.length(1);
    });

    it('concurrent sends with one clientMessageId store one message', async () => {
      const { owner, conversationId, agentSocket, memberSocket } = await live();
      const memberHeard = collect(memberSocket, 'new_message');
      const acks = await Promise.all(Array.from({ length: 5 }, () => request(agentSocket, 'send_message', { conversationId, content: 'raced', clientMessageId: 'race-1' })));
      const ids = new Set(acks.map((a) => ackData(a).message.id));
      expect(ids.size).to.equal(1);
      await settle();
      expect(memberHeard).to.have.length(1);
      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.messages.map((m: any) => m.seq)).to.deep.equal([1, 2]);
    });

    it('for a visitor over the socket and over REST: stored and announced once', async () => {
      const { owner, visitor, conversationId, agentSocket, visitorSocket } = await live();
      const agentHeard = collect(agentSocket, 'new_message');
      const first = ackData(await request(visitorSocket, 'send_message', { conversationId, content: 'visitor once', clientMessageId: 'vis-1' })).message;
      const again = ackData(await request(visitorSocket, 'send_message', { conversationId, content: 'visitor once', clientMessageId: 'vis-1' })).message;
      expect(again).to.deep.equal(first);
      const rest = await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'visitor once', clientMessageId: 'vis-1' }, { token: visitor.token });
      expect(rest.status, JSON.stringify(rest.body)).to.equal(200);
      expect(rest.body.data.id).to.equal(first.id);
      await settle();
      expect(agentHeard.map((p) => p.message.id)).to.deep.equal([first.id]);
      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.messages).to.have.length(2);
      expect(res.body.data.unreadCount).to.equal(2);
    });

    it("never hands a visitor an agent's message (an internal note) whose clientMessageId it repeats", async () => {
      const { owner, visitor, conversationId, agentSocket, visitorSocket } = await live();
      // The note's own new_message can follow its ack (through Redis): awaited, so that it is not collected below.
      const noteHeard = nextEvent(agentSocket, 'new_message', (p) => p.message.clientMessageId === 'agent-7');
      const note = ackData(await request(agentSocket, 'send_message', { conversationId, content: 'secret: refund approved up to 500', private: true, clientMessageId: 'agent-7' })).message;
      expect((await noteHeard).message.id).to.equal(note.id);
      const agentHeard = collect(agentSocket, 'new_message');
      const ack = await request(visitorSocket, 'send_message', { conversationId, content: 'guessing', clientMessageId: 'agent-7' });
      expect(JSON.stringify(ack)).to.not.include('secret');
      expect(ack.success, JSON.stringify(ack)).to.equal(false);
      expect(ack.error!.code).to.equal('conflict');
      const rest = await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'guessing', clientMessageId: 'agent-7' }, { token: visitor.token });
      expect(JSON.stringify(rest.body)).to.not.include('secret');
      expect(rest.status, JSON.stringify(rest.body)).to.equal(409);
      // And the other way: an agent repeating a visitor's id does not get the visitor's message as its own.
      const mine = ackData(await request(visitorSocket, 'send_message', { conversationId, content: 'visitor text', clientMessageId: 'v-9' })).message;
      const agentAck = await request(agentSocket, 'send_message', { conversationId, content: 'agent text', clientMessageId: 'v-9' });
      expect(agentAck.success, JSON.stringify(agentAck)).to.equal(false);
      expect(agentAck.error!.code).to.equal('conflict');
      await settle();
      expect(agentHeard.map((p) => p.message.id)).to.deep.equal([mine.id]);
      const res = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
      expect(res.body.data.messages.map((m: any) => m.id)).to.deep.equal([res.body.data.messages[0].id, note.id, mine.id]);
    });

    it('is scoped to one conversation: the same id in another conversation is a new message', async () => {
      const { owner, visitor, conversationId, agentSocket } = await live();
      const other = await startConversation(await newVisitor(owner));
      const a = ackData(await request(agentSocket, 'send_message', { conversationId, content: 'to A', clientMessageId: 'same' })).message;
      const heard = nextEvent(agentSocket, 'new_message', (p) => p.conversationId === other.conversationId);
      const b = ackData(await request(agentSocket, 'send_message', { conversationId: other.conversationId, content: 'to B', clientMessageId: 'same' })).message;
      expect(b.id).to.not.equal(a.id);
      expect(b.conversationId).to.equal(other.conversationId);
      expect((await heard).message.id).to.equal(b.id);
      expect(visitor.sessionId).to.be.a('string');
    });
  });
});
