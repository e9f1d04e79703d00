// Tickets live: ticket_updated {action, ticket} reaches the organization's agents after each change and never a
// visitor or another organization; assigning a ticket notifies the assignee (ticket_assigned), not oneself.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { collect, connectOk, nextEvent, settle, type ClientSocket } from './helpers/sockets.js';
import { aiClient, createTicket, ok, patchTicket } from './helpers/tickets.js';

describe('Tickets: live updates and notifications', () => {
  let owner: SignedUp;
  let agent: Member;
  let other: SignedUp;
  const sockets: ClientSocket[] = [];

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    agent = await addMember(server, owner, 'agent');
    other = await signUp(server, baseUrl);
  });

  after(() => {
    for (const s of sockets) s.close();
  });

  async function open(orgId: string, token: string): Promise<ClientSocket> {
    const s = await connectOk(sharedServer().baseUrl, orgId, token);
    sockets.push(s);
    return s;
  }

  it('announces every kind of ticket change to agents only, never to a visitor or another organization', async () => {
    const agentSocket = await open(owner.orgId, agent.accessToken);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const visitorSocket = await open(owner.orgId, visitor.token);
    const outsider = await open(other.orgId, other.accessToken);
    const visitorSaw = collect(visitorSocket, 'ticket_updated');
    const outsiderSaw = collect(outsider, 'ticket_updated');
    const agentSaw = collect(agentSocket, 'ticket_updated');

    const created = nextEvent(agentSocket, 'ticket_updated', (p) => p.action === 'created');
    const t = await createTicket(owner, { title: 'Live one', requester: { email: `live-${Date.now()}@example.test` } });
    const got = await created;
    expect(got.ticket).to.deep.equal(t);

    const expectAction = async (action: string, change: () => Promise<unknown>) => {
      const seen = nextEvent(agentSocket, 'ticket_updated', (p) => p.action === action && p.ticket.id === t.id);
      await change();
      return seen;
    };
    expect((await expectAction('status_changed', async () => ok(await patchTicket(owner, t.id, { status: 'in_progress' }), 200))).ticket.status).to.equal('in_progress');
    expect((await expectAction('assigned', async () => ok(await patchTicket(owner, t.id, { assignedTo: agent.userId }), 200))).ticket.assignedTo).to.equal(agent.userId);
    await expectAction('updated', async () => ok(await patchTicket(owner, t.id, { title: 'Live two' }), 200));
    await expectAction('note_added', async () => ok(await owner.api.post(`/tickets/${t.id}/notes`, { content: 'internal' }, { token: owner.accessToken }), 201));
    await expectAction('replied', async () => ok(await owner.api.post(`/tickets/${t.id}/replies`, { content: 'public' }, { token: owner.accessToken }), 201));
    expect((await expectAction('linked', async () => ok(await owner.api.post(`/tickets/${t.id}/link`, { conversationId }, { token: owner.accessToken }), 200))).ticket.conversationId).to.equal(conversationId);
    const target = await createTicket(owner, { title: 'Target' });
    expect((await expectAction('merged', async () => ok(await owner.api.post(`/tickets/${t.id}/merge`, { targetTicketId: target.id }, { token: owner.accessToken }), 200))).ticket.status).to.equal('merged');
    await expectAction('deleted', async () => ok(await owner.api.delete(`/tickets/${t.id}`, { token: owner.accessToken }), 200));
    // The AI service's changes are announced the same way.
    const aiSeen = nextEvent(agentSocket, 'ticket_updated', (p) => p.action === 'created' && p.ticket.source === 'ai');
    ok(await aiClient(sharedServer().baseUrl).post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: `live-${Date.now()}`, title: 'AI live', conversationId }), 201);
    await aiSeen;

    await settle(500);
    expect(agentSaw.length).to.be.greaterThan(8);
    expect(visitorSaw, 'a visitor never hears of tickets').to.deep.equal([]);
    expect(outsiderSaw, 'another organization never hears of these tickets').to.deep.equal([]);
  });

  it('nothing is announced for a refused change', async () => {
    const agentSocket = await open(owner.orgId, agent.accessToken);
    const t = await createTicket(owner);
    ok(await patchTicket(owner, t.id, { status: 'closed' }), 200);
    await settle(300);
    const seen = collect(agentSocket, 'ticket_updated');
    expect((await patchTicket(owner, t.id, { status: 'open' })).status).to.equal(400);
    expect((await owner.api.post('/tickets', { title: 'x', assignedTo: other.userId }, { token: owner.accessToken })).status).to.equal(400);
    await settle(500);
    expect(seen).to.deep.equal([]);
  });

  it('assigning a ticket notifies the assignee with ticket_assigned (live and in the list); assigning yourself does not', async () => {
    const agentSocket = await open(owner.orgId, agent.accessToken);
    const ownerSocket = await open(owner.orgId, owner.accessToken);
    const ownerNotes = collect(ownerSocket, 'notification_created');
    const t = await createTicket(owner, { title: 'Needs you' });
    const live = nextEvent(agentSocket, 'notification_created', (p) => p.notification.type === 'ticket_assigned');
    ok(await patchTicket(owner, t.id, { assignedTo: agent.userId }), 200);
    const { notification } = await live;
    expect(notification).to.include({ type: 'ticket_assigned', userId: agent.userId, organizationId: owner.orgId, body: 'Needs you' });
    expect(notification.data).to.deep.equal({ ticketId: t.id, number: t.number });
    const listed = ok(await agent.api.get('/notifications', { token: agent.accessToken }), 200);
    expect(listed.filter((n: any) => n.type === 'ticket_assigned' && n.data.ticketId === t.id)).to.have.length(1);
    // On create as well.
    const onCreate = nextEvent(agentSocket, 'notification_created', (p) => p.notification.type === 'ticket_assigned' && p.notification.body === 'Born assigned');
    await createTicket(owner, { title: 'Born assigned', assignedTo: agent.userId });
    await onCreate;
    // Assigning yourself: no notification.
    ok(await patchTicket(owner, t.id, { assignedTo: owner.userId }), 200);
    await settle(500);
    expect(ownerNotes.filter((p) => p.notification.type === 'ticket_assigned')).to.deep.equal([]);
    const ownerList = ok(await owner.api.get('/notifications', { token: owner.accessToken }), 200);
    expect(ownerList.filter((n: any) => n.type === 'ticket_assigned')).to.deep.equal([]);
  });
});
