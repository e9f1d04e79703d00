// The inbox's promises that the broader conversation tests leave open: a status set to the one it already has, and
// a read mark on a conversation already read, change nothing and announce nothing.
import { expect } from 'chai';
import { expectApiSuccess } from './helpers/auth.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, settle } from './helpers/sockets.js';

describe('conversations: changes that change nothing', () => {
  const track = closeAfterEach();
  let owner: SignedUp;
  const t = () => ({ token: owner.accessToken });
  const read = async (id: string) => expectApiSuccess(await owner.api.get(`/conversations/${id}`, t()), 200);

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('a status set to the one the conversation has answers 200, keeps its times and announces nothing', async () => {
    const { baseUrl } = sharedServer();
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    for (const status of ['open', 'pending', 'resolved', 'closed'] as const) {
      const { conversationId } = await startConversation(await newVisitor(owner));
      if (status !== 'open') expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status }, t()), 200);
      const before = await read(conversationId);
      const updates = collect(agentSocket, 'conversation_updated');
      const same = expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status }, t()), 200);
      expect(same.status, status).to.equal(status);
      expect(same.resolvedAt, status).to.equal(before.resolvedAt);
      expect(same.updatedAt, status).to.equal(before.updatedAt);
      expect(await read(conversationId)).to.deep.include({ status, resolvedAt: before.resolvedAt, updatedAt: before.updatedAt });
      await settle(200);
      expect(updates.filter((u) => u.conversation.id === conversationId), `${status} -> ${status} announced`).to.deep.equal([]);
    }
  });

  it('marking a conversation read when nothing is unread leaves it as it was', async () => {
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'one');
    const first = expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/read`, undefined, t()), 200);
    expect(first.unreadCount).to.equal(0);
    await settle(20);
    const again = expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/read`, undefined, t()), 200);
    expect(again).to.deep.include({ unreadCount: 0, updatedAt: first.updatedAt });
    expect((await read(conversationId)).updatedAt).to.equal(first.updatedAt);
  });
});
