// Server -> client events caused by REST and widget actions: new conversations, status, assignment, notifications.
import { expect } from 'chai';
import { addMember, signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, nextEvent, settle } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

describe('socket broadcasts', () => {
  const track = closeAfterEach();

  async function org() {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    return { server, baseUrl, owner, agentSocket };
  }

  it('new_widget_conversation and the first new_message reach the agents when a visitor starts a conversation', async () => {
    const { owner, agentSocket } = await org();
    const visitor = await newVisitor(owner, { name: 'Nora New', email: 'nora@example.test' });
    const created = nextEvent(agentSocket, 'new_widget_conversation');
    const first = nextEvent(agentSocket, 'new_message');
    const { conversationId, body } = await startConversation(visitor, 'My order is late');
    const { conversation } = await created;
    expect(conversation).to.include({ id: conversationId, organizationId: owner.orgId, status: 'open', channel: 'widget', assignedTo: null });
    expect(conversation.visitor).to.deep.equal({ sessionId: visitor.sessionId, name: 'Nora New', email: 'nora@example.test' });
    const message = await first;
    expect(message.conversationId).to.equal(conversationId);
    expect(message.message).to.include({ seq: 1, senderType: 'visitor', content: 'My order is late' });
    expect(message.message.id).to.equal(body.data.message.id);
  });

  it("does not tell another organization's agents about a new conversation", async () => {
    const { server, baseUrl, owner } = await org();
    const other = await signUp(server, baseUrl);
    const otherSocket = track(await connectOk(baseUrl, other.orgId, other.accessToken));
    const created = collect(otherSocket, 'new_widget_conversation');
    const messages = collect(otherSocket, 'new_message');
    await startConversation(await newVisitor(owner));
    await settle();
    expect(created).to.deep.equal([]);
    expect(messages).to.deep.equal([]);
  });

  it('conversation_updated to agents and status_updated to the visitor on every status change', async () => {
    const { baseUrl, owner, agentSocket } = await org();
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
    for (const status of ['pending', 'open', 'resolved', 'open', 'closed'] as const) {
      const updated = nextEvent(agentSocket, 'conversation_updated', (p) => p.conversation.id === conversationId && p.conversation.status === status);
      const toVisitor = nextEvent(visitorSocket, 'status_updated', (p) => p.status === status);
      const res = await owner.api.patch(`/conversations/${conversationId}/status`, { status }, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      const { conversation } = await updated;
      expect(conversation.status).to.equal(status);
      if (status === 'resolved') expect(conversation.resolvedAt).to.be.a('string');
      expect(await toVisitor).to.deep.equal({ conversationId, status });
    }
    // An illegal transition changes and announces nothing.
    const heard = collect(agentSocket, 'conversation_updated');
    const visitorHeard = collect(visitorSocket, 'status_updated');
    const res = await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'open' }, { token: owner.accessToken });
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal('invalid_transition');
    await settle();
    expect(heard).to.deep.equal([]);
    expect(visitorHeard).to.deep.equal([]);
  });

  it('keeps assignment and contact changes from the visitor: conversation_updated to agents only', async () => {
    const { baseUrl, owner, agentSocket } = await org();
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
    const visitorHeard = collect(visitorSocket, 'status_updated');
    const assigned = nextEvent(agentSocket, 'conversation_updated', (p) => p.conversation.id === conversationId && p.conversation.assignedTo === owner.userId);
    expect((await owner.api.post(`/conversations/${conversationId}/route`, { agentId: owner.userId }, { token: owner.accessToken })).status).to.equal(200);
    await assigned;
    const linked = nextEvent(agentSocket, 'conversation_updated', (p) => p.conversation.id === conversationId && p.conversation.contactId !== null);
    expect((await owner.api.post(`/conversations/${conversationId}/contact`, { email: 'someone@example.test' }, { token: owner.accessToken })).status).to.equal(200);
    await linked;
    await settle();
    expect(visitorHeard).to.deep.equal([]);
  });

  it("status_updated reaches only that conversation's visitor", async () => {
    const { baseUrl, owner } = await org();
    const visitor = await newVisitor(owner);
    const bystander = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    await startConversation(bystander);
    const bystanderSocket = track(await connectOk(baseUrl, owner.orgId, bystander.token));
    const visitorSocket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
    const heard = collect(bystanderSocket, 'status_updated');
    const mine = nextEvent(visitorSocket, 'status_updated');
    expect((await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'pending' }, { token: owner.accessToken })).status).to.equal(200);
    expect(await mine).to.deep.equal({ conversationId, status: 'pending' });
    await settle();
    expect(heard).to.deep.equal([]);
  });

  it('conversation_assigned to every agent and notification_created only to the assignee', async () => {
    const { server, baseUrl, owner, agentSocket } = await org();
    const member = await addMember(server, owner, 'agent', 'Ada Agent');
    const memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
    // The owner's own new_conversation notice comes first; only what follows the assignment counts.
    const welcomed = nextEvent(agentSocket, 'notification_created', (p) => p.notification.type === 'new_conversation');
    const { conversationId } = await startConversation(await newVisitor(owner));
    await welcomed;
    const ownerNotes = collect(agentSocket, 'notification_created');

    const assignedToOwnerSocket = nextEvent(agentSocket, 'conversation_assigned');
    const assignedToMemberSocket = nextEvent(memberSocket, 'conversation_assigned');
    const updated = nextEvent(agentSocket, 'conversation_updated', (p) => p.conversation.assignedTo === member.userId);
    const notified = nextEvent(memberSocket, 'notification_created', (p) => p.notification.type === 'conversation_assigned');
    const res = await owner.api.post(`/conversations/${conversationId}/route`, { agentId: member.userId, reason: 'billing expert' }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(await assignedToOwnerSocket).to.deep.equal({ conversationId, assignedTo: member.userId });
    expect(await assignedToMemberSocket).to.deep.equal({ conversationId, assignedTo: member.userId });
    expect((await updated).conversation.id).to.equal(conversationId);
    const { notification } = await notified;
    expect(notification).to.include({ userId: member.userId, organizationId: owner.orgId, type: 'conversation_assigned', readAt: null });
    expect(notification.data).to.include({ conversationId, reason: 'billing expert' });
    // The same notification is what the REST list shows.
    const list = await member.api.get('/notifications', { token: member.accessToken });
    expect(list.body.data.map((n: any) => n.id)).to.include(notification.id);
    await settle();
    expect(ownerNotes).to.deep.equal([]);

    // Assigning the same agent again announces nothing; unassigning announces assignedTo null without a notification.
    const again = collect(agentSocket, 'conversation_assigned');
    expect((await owner.api.post(`/conversations/${conversationId}/route`, { agentId: member.userId }, { token: owner.accessToken })).status).to.equal(200);
    await settle();
    expect(again).to.deep.equal([]);
    const memberNotes = collect(memberSocket, 'notification_created');
    const unassigned = nextEvent(agentSocket, 'conversation_assigned');
    expect((await owner.api.post(`/conversations/${conversationId}/route`, { agentId: null }, { token: owner.accessToken })).status).to.equal(200);
    expect(await unassigned).to.deep.equal({ conversationId, assignedTo: null });
    await settle();
    expect(memberNotes).to.deep.equal([]);
  });

  it('notification_created for a new conversation reaches each agent of the organization on their own socket', async () => {
    const { server, baseUrl, owner, agentSocket } = await org();
    const member = await addMember(server, owner, 'agent');
    const memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
    const toOwner = nextEvent(agentSocket, 'notification_created', (p) => p.notification.type === 'new_conversation');
    const toMember = nextEvent(memberSocket, 'notification_created', (p) => p.notification.type === 'new_conversation');
    const { conversationId } = await startConversation(await newVisitor(owner, { name: 'Nils' }));
    const [a, b] = [(await toOwner).notification, (await toMember).notification];
    expect(a.userId).to.equal(owner.userId);
    expect(b.userId).to.equal(member.userId);
    expect(a.data).to.include({ conversationId });
    expect(b.data).to.include({ conversationId });
    expect(a.id).to.not.equal(b.id);
  });

  it('auto-assignment on a new conversation announces conversation_assigned and notifies the picked agent', async () => {
    const { server, baseUrl, owner, agentSocket } = await org();
    const settings = await owner.api.patch(`/organizations/${owner.orgId}`, { settings: { autoAssignment: true } }, { token: owner.accessToken });
    expect(settings.status, JSON.stringify(settings.body)).to.equal(200);
    // The owner holds a socket but is busy, so the online member is the only candidate.
    const busy = await owner.api.patch('/agent/status', { status: 'busy' }, { token: owner.accessToken });
    expect(busy.status, JSON.stringify(busy.body)).to.equal(200);
    const member = await addMember(server, owner, 'agent');
    const memberSocket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
    await waitFor(async () => (await member.api.get('/agent/profile', { token: member.accessToken })).body.data.status === 'online', { what: 'the member online' });
    const assigned = nextEvent(agentSocket, 'conversation_assigned');
    const notified = nextEvent(memberSocket, 'notification_created', (p) => p.notification.type === 'conversation_assigned');
    const { conversationId } = await startConversation(await newVisitor(owner));
    expect(await assigned).to.deep.equal({ conversationId, assignedTo: member.userId });
    expect((await notified).notification.data).to.include({ conversationId, reason: 'auto' });
  });

  it('conversation_updated when a contact is linked', async () => {
    const { owner, agentSocket } = await org();
    const { conversationId } = await startConversation(await newVisitor(owner));
    const updated = nextEvent(agentSocket, 'conversation_updated', (p) => p.conversation.id === conversationId && p.conversation.contactId !== null);
    const res = await owner.api.post(`/conversations/${conversationId}/contact`, { name: 'Carla Contact', email: 'carla@example.test' }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const { conversation } = await updated;
    expect(conversation.contactId).to.equal(res.body.data.contactId);
  });
});
