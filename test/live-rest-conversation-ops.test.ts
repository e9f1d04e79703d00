// REST conversation operations: routing (with the assignee's notification), read marks, recents, contact links
// (spec endpoint 3) and tenancy: another organization's ids answer exactly like ids that do not exist.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { expectApiError, expectApiSuccess, withoutRequestId } from './helpers/auth.js';
import { waitFor } from './helpers/wait.js';

describe('REST conversations: routing and read marks', () => {
  it('assigns to a member (who is notified), unassigns with null, refuses non-members', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent', 'Ada Assignee');
    const stranger = await signUp(server, baseUrl);
    const { conversationId } = await startConversation(await newVisitor(owner, { name: 'Rita Routed' }));
    const t = { token: owner.accessToken };
    const path = `/conversations/${conversationId}/route`;
    // The new_conversation notification is written after the start answered; count from after it.
    await waitFor(async () => expectApiSuccess(await agent.api.get('/notifications', { token: agent.accessToken }), 200).some((n: any) => n.type === 'new_conversation'), { what: 'the new_conversation notification' });
    const before = expectApiSuccess(await agent.api.get('/notifications/unread-count', { token: agent.accessToken }), 200).count;
    expect(before).to.equal(1);

    const assigned = expectApiSuccess(await owner.api.post(path, { agentId: agent.userId, reason: 'billing expert' }, t), 200);
    expect(assigned.id).to.equal(conversationId);
    expect(assigned.assignedTo).to.equal(agent.userId);
    const list = expectApiSuccess(await agent.api.get('/notifications', { token: agent.accessToken }), 200);
    const notice = list.find((n: any) => n.type === 'conversation_assigned');
    expect(notice, JSON.stringify(list)).to.not.equal(undefined);
    expect(notice).to.include({ userId: agent.userId, organizationId: owner.orgId, readAt: null });
    expect(notice.data).to.include({ conversationId, reason: 'billing expert' });
    expect(expectApiSuccess(await agent.api.get('/notifications/unread-count', { token: agent.accessToken }), 200).count).to.equal(before + 1);
    expect(expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200).assignedTo).to.equal(agent.userId);

    // Assigning again to the same agent changes nothing and notifies nobody again.
    expectApiSuccess(await owner.api.post(path, { agentId: agent.userId }, t), 200);
    expect(expectApiSuccess(await agent.api.get('/notifications/unread-count', { token: agent.accessToken }), 200).count).to.equal(before + 1);

    // Not a member of this organization (a real user elsewhere, or nobody at all): 400, assignment unchanged.
    expectApiError(await owner.api.post(path, { agentId: stranger.userId }, t), 400, 'validation_failed');
    expectApiError(await owner.api.post(path, { agentId: randomUUID() }, t), 400, 'validation_failed');
    expectApiError(await owner.api.post(path, { agentId: 'not-a-uuid' }, t), 400, 'validation_failed');
    expectApiError(await owner.api.post(path, {}, t), 400, 'validation_failed');
    expect(expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200).assignedTo).to.equal(agent.userId);

    // A suspended member cannot be assigned either.
    const other = await addMember(server, owner, 'agent', 'Sam Suspended');
    expectApiSuccess(await owner.api.patch(`/memberships/organizations/${owner.orgId}/members/${other.membershipId}/status`, { status: 'suspended' }, t), 200);
    expectApiError(await owner.api.post(path, { agentId: other.userId }, t), 400, 'validation_failed');

    const unassigned = expectApiSuccess(await owner.api.post(path, { agentId: null }, t), 200);
    expect(unassigned.assignedTo).to.equal(null);
    expect(expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200).assignedTo).to.equal(null);

    // Self-assignment by an agent works and does not notify the agent about their own action.
    const self = expectApiSuccess(await agent.api.post(path, { agentId: agent.userId }, { token: agent.accessToken }), 200);
    expect(self.assignedTo).to.equal(agent.userId);
    expect(expectApiSuccess(await agent.api.get('/notifications/unread-count', { token: agent.accessToken }), 200).count).to.equal(before + 1);
  });

  it('POST read brings unreadCount back to 0 after visitor messages raised it', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'one');
    const t = { token: owner.accessToken };
    for (const content of ['two', 'three']) expectApiSuccess(await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content }, { token: visitor.token }), 201);
    // Agent replies do not count as unread.
    expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'reply' }, t), 201);
    expect(expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200).unreadCount).to.equal(3);
    const listed = expectApiSuccess(await owner.api.get('/conversations', t), 200);
    expect(listed.find((c: any) => c.id === conversationId).unreadCount).to.equal(3);

    const read = expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/read`, undefined, t), 200);
    expect(read.unreadCount).to.equal(0);
    expect(expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200).unreadCount).to.equal(0);
    expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/read`, undefined, t), 200);

    expectApiSuccess(await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'four' }, { token: visitor.token }), 201);
    expect(expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200).unreadCount).to.equal(1);
  });

  it('recents: a conversation appears after it is opened, most recent first, per user; DELETE clears them', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const a = await startConversation(await newVisitor(owner));
    const b = await startConversation(await newVisitor(owner));
    const t = { token: owner.accessToken };
    const recents = async (who: { api: typeof owner.api; accessToken: string } = owner) =>
      expectApiSuccess(await who.api.get('/conversations/recents', { token: who.accessToken }), 200).map((c: any) => c.id);

    expect(await recents()).to.deep.equal([]);
    await owner.api.get('/conversations', t);
    expect(await recents(), 'listing is not viewing').to.deep.equal([]);
    expectApiSuccess(await owner.api.get(`/conversations/${a.conversationId}`, t), 200);
    expect(await recents()).to.deep.equal([a.conversationId]);
    expectApiSuccess(await owner.api.get(`/conversations/${b.conversationId}`, t), 200);
    expect(await recents()).to.deep.equal([b.conversationId, a.conversationId]);
    expectApiSuccess(await owner.api.get(`/conversations/${a.conversationId}`, t), 200);
    expect(await recents()).to.deep.equal([a.conversationId, b.conversationId]);
    expect(await recents(agent), "another user's views are their own").to.deep.equal([]);
    expectApiSuccess(await agent.api.get(`/conversations/${b.conversationId}`, { token: agent.accessToken }), 200);

    expectApiSuccess(await owner.api.delete('/conversations/recents', t), 200);
    expect(await recents()).to.deep.equal([]);
    expect(await recents(agent)).to.deep.equal([b.conversationId]);
    expectApiError(await owner.api.get('/conversations/recents'), 401, 'unauthorized');
  });
});

describe('REST conversations: contact links (spec endpoint 3)', () => {
  it('finds-or-creates by email, links by contactId, unlinks with null; another organization\'s contact is 404', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const other = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    const a = await startConversation(await newVisitor(owner));
    const b = await startConversation(await newVisitor(owner));
    const link = (id: string, body: unknown, token = owner.accessToken) => owner.api.post(`/conversations/${id}/contact`, body, { token });

    const created = expectApiSuccess(await link(a.conversationId, { name: 'Carla Contact', email: 'Carla@Example.test', company: 'Acme' }), 200);
    expect(created.id).to.equal(a.conversationId);
    expect(created.contactId).to.be.a('string');
    expect(created.contact).to.include({ id: created.contactId, name: 'Carla Contact', email: 'carla@example.test', company: 'Acme' });

    // The same email (any case) finds the same contact; recorded fields are not overwritten; phones become E.164.
    const found = expectApiSuccess(await link(b.conversationId, { email: 'carla@example.TEST', name: 'Someone Else', phone: '+1 415 555 0100' }), 200);
    expect(found.contactId).to.equal(created.contactId);
    expect(found.contact).to.include({ name: 'Carla Contact', phone: '+14155550100' });
    expect(await server.db.models.Contact.acrossOrgs().where('organizationId', owner.orgId).resultSize()).to.equal(1);

    // GET shows the contact.
    const shown = expectApiSuccess(await owner.api.get(`/conversations/${a.conversationId}`, t), 200);
    expect(shown.contactId).to.equal(created.contactId);
    expect(shown.contact.id).to.equal(created.contactId);

    const unlinked = expectApiSuccess(await link(a.conversationId, { contactId: null }), 200);
    expect(unlinked.contactId).to.equal(null);
    expect(unlinked.contact).to.equal(null);
    expect(expectApiSuccess(await owner.api.get(`/conversations/${a.conversationId}`, t), 200).contact).to.equal(null);

    const relinked = expectApiSuccess(await link(a.conversationId, { contactId: created.contactId }), 200);
    expect(relinked.contactId).to.equal(created.contactId);
    expect(relinked.contact.email).to.equal('carla@example.test');

    // A contact of another organization, or none at all: 404, link unchanged.
    const c = await startConversation(await newVisitor(other));
    const foreign = expectApiSuccess(await other.api.post(`/conversations/${c.conversationId}/contact`, { email: 'carla@example.test' }, { token: other.accessToken }), 200);
    expect(foreign.contactId).to.not.equal(created.contactId, 'contacts are per organization');
    const foreignRes = await link(b.conversationId, { contactId: foreign.contactId });
    const missingRes = await link(b.conversationId, { contactId: randomUUID() });
    expectApiError(foreignRes, 404, 'not_found');
    expectApiError(missingRes, 404, 'not_found');
    expect(withoutRequestId(foreignRes.body)).to.deep.equal(withoutRequestId(missingRes.body));
    expect(expectApiSuccess(await owner.api.get(`/conversations/${b.conversationId}`, t), 200).contactId).to.equal(created.contactId);

    expectApiError(await link(b.conversationId, {}), 400, 'validation_failed');
    expectApiError(await link(b.conversationId, { contactId: 'nope' }), 400, 'validation_failed');
    expectApiError(await link(b.conversationId, { email: 'not-an-email' }), 400, 'validation_failed');
  });
});

describe('REST conversations: tenancy', () => {
  it("every :id route answers another organization's conversation exactly like a random uuid, and changes nothing", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const other = await signUp(server, baseUrl);
    const foreignVisitor = await newVisitor(other);
    const { conversationId: foreignId } = await startConversation(foreignVisitor, 'secret');
    const t = { token: owner.accessToken };
    const calls: [string, (id: string) => Promise<any>][] = [
      ['GET /:id', (id) => owner.api.get(`/conversations/${id}`, t)],
      ['GET /:id/messages', (id) => owner.api.get(`/conversations/${id}/messages`, t)],
      ['POST /:id/messages', (id) => owner.api.post(`/conversations/${id}/messages`, { content: 'hi', clientMessageId: 'x' }, t)],
      ['PATCH /:id/status', (id) => owner.api.patch(`/conversations/${id}/status`, { status: 'closed' }, t)],
      ['POST /:id/route (member)', (id) => owner.api.post(`/conversations/${id}/route`, { agentId: agent.userId }, t)],
      ['POST /:id/route (null)', (id) => owner.api.post(`/conversations/${id}/route`, { agentId: null }, t)],
      ['POST /:id/read', (id) => owner.api.post(`/conversations/${id}/read`, undefined, t)],
      ['POST /:id/contact', (id) => owner.api.post(`/conversations/${id}/contact`, { email: 'x@example.test' }, t)],
    ];
    for (const [name, call] of calls) {
      const foreign = await call(foreignId);
      const missing = await call(randomUUID());
      const malformed = await call('not-a-uuid');
      expectApiError(foreign, 404, 'not_found');
      expectApiError(missing, 404, 'not_found');
      expectApiError(malformed, 404, 'not_found');
      expect(withoutRequestId(foreign.body), name).to.deep.equal(withoutRequestId(missing.body));
    }
    // Lists and recents never show it either.
    const listed = expectApiSuccess(await owner.api.get('/conversations?q=secret', t), 200);
    expect(listed).to.deep.equal([]);
    expect(expectApiSuccess(await owner.api.get('/conversations/recents', t), 200)).to.deep.equal([]);

    const untouched = expectApiSuccess(await other.api.get(`/conversations/${foreignId}`, { token: other.accessToken }), 200);
    expect(untouched).to.include({ status: 'open', assignedTo: null, contactId: null, unreadCount: 1, lastSeq: 1 });
    expect(untouched.messages).to.have.length(1);
  });

  it('an agent reads conversations but cannot manage the widget (admin role)', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const { conversationId } = await startConversation(await newVisitor(owner));
    const t = { token: agent.accessToken };
    expect(expectApiSuccess(await agent.api.get('/conversations', t), 200).map((c: any) => c.id)).to.deep.equal([conversationId]);
    expectApiSuccess(await agent.api.get(`/conversations/${conversationId}`, t), 200);
    expectApiError(await agent.api.put('/widget/manage', { displayName: 'Hijacked' }, t), 403, 'forbidden');
    expectApiError(await agent.api.get('/widget/manage', t), 403, 'forbidden');
    expectApiError(await agent.api.get('/widget/qr?format=svg', t), 403, 'forbidden');
    const widget = await server.db.models.Widget.acrossOrgs().findOne({ organizationId: owner.orgId });
    expect(widget!.displayName).to.not.equal('Hijacked');
  });
});
