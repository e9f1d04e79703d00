import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { collect, connectOk, nextEvent, request, settle } from './helpers/sockets.js';

describe('live support smoke', () => {
  it('carries a visitor message to an agent and an agent reply to the visitor, notes stay internal', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const visitor = await newVisitor(owner);
    const agentSocket = await connectOk(baseUrl, owner.orgId, owner.accessToken);
    const visitorSocket = await connectOk(baseUrl, owner.orgId, visitor.token);
    try {
      const created = nextEvent(agentSocket, 'new_widget_conversation');
      const { conversationId } = await startConversation(visitor);
      expect((await created).conversation.id).to.equal(conversationId);

      const agentGot = nextEvent(agentSocket, 'new_message', (p) => p.message.content === 'from visitor');
      // The visitor gets its own message too, after the ack when it travels through Redis.
      const echoed = nextEvent(visitorSocket, 'new_message', (p) => p.message.content === 'from visitor');
      const ack = await request(visitorSocket, 'send_message', { conversationId, content: 'from visitor', clientMessageId: 'v-1' });
      expect(ack.success, JSON.stringify(ack)).to.equal(true);
      expect(ack.data.message.seq).to.equal(2);
      expect((await agentGot).message.seq).to.equal(2);
      expect((await echoed).message.seq).to.equal(2);

      const visitorMessages = collect(visitorSocket, 'new_message');
      const note = await request(agentSocket, 'send_message', { conversationId, content: 'internal note', private: true });
      expect(note.success).to.equal(true);
      const reply = await request(agentSocket, 'send_message', { conversationId, content: 'public reply' });
      expect(reply.success).to.equal(true);
      await settle();
      expect(visitorMessages.map((p) => p.message.content)).to.deep.equal(['public reply']);
    } finally {
      agentSocket.close();
      visitorSocket.close();
    }
  });
});
