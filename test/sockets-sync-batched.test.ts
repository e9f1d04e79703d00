// Syncs of many sockets at the same moment (a reconnect storm) are read together; each still gets exactly what the
// page read of its own conversation gives: the messages after its seq, in order, notes only for agents, and
// not_found for a conversation of another organization or of another visitor.
import { expect } from 'chai';
import { presentMessage } from '../server/presenters/conversation.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { ackData, closeAfterEach, expectAckError } from './helpers/socket-acks.js';
import { connectOk, request, type ClientSocket } from './helpers/sockets.js';

describe('socket sync, many at once', function () {
  this.timeout(60_000);
  const track = closeAfterEach();

  /** A conversation with visitor messages, agent replies and internal notes, interleaved. */
  async function busyConversation(owner: SignedUp, replies: number) {
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'first');
    for (let i = 0; i < replies; i++) {
      const reply = await owner.api.post(`/conversations/${conversationId}/messages`, { content: `reply ${i}`, private: i % 3 === 1 }, { token: owner.accessToken });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
      if (i % 2 === 0) expect((await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: `visitor ${i}` }, { token: visitor.token })).status).to.equal(201);
    }
    return { visitor, conversationId };
  }

  it('answers each socket exactly what the page read gives for its conversation and seq', async () => {
    const { server, baseUrl } = sharedServer();
    const a = await signUp(server, baseUrl);
    const b = await signUp(server, baseUrl);
    const a1 = await busyConversation(a, 6);
    const a2 = await busyConversation(a, 9);
    const b1 = await busyConversation(b, 4);

    const agentA = track(await connectOk(baseUrl, a.orgId, a.accessToken));
    const agentB = track(await connectOk(baseUrl, b.orgId, b.accessToken));
    const visitorA1 = track(await connectOk(baseUrl, a.orgId, a1.visitor.token));
    const visitorA2 = track(await connectOk(baseUrl, a.orgId, a2.visitor.token));
    const visitorB1 = track(await connectOk(baseUrl, b.orgId, b1.visitor.token));

    // What sync answered before it was batched: the page read of that conversation, presented.
    const page = async (orgId: string, conversationId: string, afterSeq: number, publicOnly: boolean) => {
      const messages = server.services.messages;
      return (await messages.decorate(orgId, await messages.page(orgId, conversationId, { afterSeq, limit: 1001, publicOnly }))).map(presentMessage);
    };
    type Ask = { socket: ClientSocket; conversationId: string; afterSeq: number; expect: Promise<unknown[]> | 'not_found' };
    const asks: Ask[] = [
      { socket: agentA, conversationId: a1.conversationId, afterSeq: 0, expect: page(a.orgId, a1.conversationId, 0, false) },
      { socket: agentA, conversationId: a1.conversationId, afterSeq: 4, expect: page(a.orgId, a1.conversationId, 4, false) },
      { socket: agentA, conversationId: a2.conversationId, afterSeq: 2, expect: page(a.orgId, a2.conversationId, 2, false) },
      { socket: agentA, conversationId: b1.conversationId, afterSeq: 0, expect: 'not_found' },
      { socket: agentB, conversationId: b1.conversationId, afterSeq: 1, expect: page(b.orgId, b1.conversationId, 1, false) },
      { socket: agentB, conversationId: a2.conversationId, afterSeq: 0, expect: 'not_found' },
      { socket: visitorA1, conversationId: a1.conversationId, afterSeq: 0, expect: page(a.orgId, a1.conversationId, 0, true) },
      { socket: visitorA1, conversationId: a1.conversationId, afterSeq: 3, expect: page(a.orgId, a1.conversationId, 3, true) },
      // Past the last seq (and past what an integer column holds): nothing, not an error.
      { socket: visitorA1, conversationId: a1.conversationId, afterSeq: 2 ** 31 + 5, expect: Promise.resolve([]) },
      { socket: visitorA1, conversationId: a2.conversationId, afterSeq: 0, expect: 'not_found' },
      { socket: visitorA2, conversationId: a2.conversationId, afterSeq: 5, expect: page(a.orgId, a2.conversationId, 5, true) },
      { socket: visitorA2, conversationId: b1.conversationId, afterSeq: 0, expect: 'not_found' },
      { socket: visitorB1, conversationId: b1.conversationId, afterSeq: 0, expect: page(b.orgId, b1.conversationId, 0, true) },
    ];
    // Every sync leaves at once, from five sockets: the server reads them together.
    const acks = await Promise.all(asks.map((ask) => request(ask.socket, 'sync', { conversationId: ask.conversationId, afterSeq: ask.afterSeq })));
    for (const [i, ask] of asks.entries()) {
      if (ask.expect === 'not_found') {
        expectAckError(acks[i]!, 'not_found');
        // The same words as the page read's 404.
        expect(acks[i]!.error!.message, `sync ${i}`).to.equal('Conversation not found');
        continue;
      }
      const { messages, hasMore } = ackData(acks[i]!);
      expect(hasMore, `sync ${i}`).to.equal(false);
      expect(messages, `sync ${i}`).to.deep.equal(await ask.expect);
    }
    // The answers are not all alike: notes reach agents only, and seqs start after each one's own afterSeq.
    const agentSeqs = ackData(acks[0]!).messages.map((m: { seq: number }) => m.seq);
    const visitorSeqs = ackData(acks[6]!).messages.map((m: { seq: number }) => m.seq);
    expect(agentSeqs).to.deep.equal(Array.from({ length: agentSeqs.length }, (_, k) => k + 1));
    expect(visitorSeqs.length).to.be.above(0).and.below(agentSeqs.length);
    expect(ackData(acks[6]!).messages.every((m: { private: boolean }) => !m.private)).to.equal(true);
    expect(ackData(acks[1]!).messages[0].seq).to.equal(5);
  });
});
