// /tickets: create, read, change, delete, list filters and search, limits and bad input, notes and the timeline,
// conversation links and chat-to-ticket, and every ticket route answering 404 for another organization's ids.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, uniqueEmail, type Member, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { expectError } from './helpers/tenancy.js';
import { createTicket, events, ok, patchTicket } from './helpers/tickets.js';

describe('Tickets: create, read, change, delete', () => {
  let owner: SignedUp;
  let agent: Member;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    agent = await addMember(server, owner, 'agent');
  });

  it('creates an open agent ticket with a requester found or created as a contact by email', async () => {
    const email = uniqueEmail('Requester').toUpperCase();
    const t = await createTicket(agent, { title: '  Invoice wrong  ', description: 'Twice charged', priority: 'high', requester: { name: 'Rita', email }, tags: ['Billing', 'billing', ' VIP '], dueAt: '2030-01-02T03:04:05Z' });
    expect(t).to.include({ title: 'Invoice wrong', description: 'Twice charged', status: 'open', priority: 'high', source: 'agent', createdBy: agent.userId, assignedTo: null, conversationId: null, mergedIntoId: null, resolvedAt: null, closedAt: null });
    expect(t.number).to.be.a('number');
    expect(t.tags).to.deep.equal(['billing', 'vip']);
    expect(t.dueAt).to.equal('2030-01-02T03:04:05.000Z');
    expect(t.requester).to.deep.equal({ name: 'Rita', email: email.toLowerCase() });
    expect(t.contactId).to.match(/^[0-9a-f-]{36}$/);
    // The same email (any case) finds the same contact.
    const again = await createTicket(agent, { requester: { email: email.toLowerCase() } });
    expect(again.contactId).to.equal(t.contactId);
    expect(again.number).to.equal(t.number + 1);
    expect(again.priority).to.equal('medium');
    // By contactId: the requester is that contact.
    const byContact = await createTicket(agent, { contactId: t.contactId });
    expect(byContact.requester).to.deep.equal({ name: 'Rita', email: email.toLowerCase() });
    // Read back.
    expect(ok(await agent.api.get(`/tickets/${t.id}`, { token: agent.accessToken }), 200)).to.deep.equal(t);
  });

  it('refuses bad input with 400 validation_failed: lengths, types, tags, unknown fields, both contactId and requester', async () => {
    const bad = async (body: Record<string, unknown>) => expectError(await agent.api.post('/tickets', body, { token: agent.accessToken }), 400, 'validation_failed');
    await bad({});
    await bad({ title: '' });
    await bad({ title: '   ' });
    await bad({ title: 'x'.repeat(301) });
    await bad({ title: 42 });
    await bad({ title: 'ok', priority: 'critical' });
    await bad({ title: 'ok', status: 'open' });
    await bad({ title: 'ok', organizationId: owner.orgId });
    await bad({ title: 'ok', number: 7 });
    await bad({ title: 'ok', tags: Array.from({ length: 51 }, (_, i) => `t${i}`) });
    await bad({ title: 'ok', tags: ['x'.repeat(51)] });
    await bad({ title: 'ok', tags: [''] });
    await bad({ title: 'ok', tags: 'billing' });
    await bad({ title: 'ok', dueAt: 'tomorrow' });
    await bad({ title: 'ok', description: 'x'.repeat(20001) });
    await bad({ title: 'ok\u0000' });
    await bad({ title: 'ok', requester: { name: 'No email' } });
    await bad({ title: 'ok', requester: { email: 'not-an-email' } });
    await bad({ title: 'ok', contactId: 'nope' });
    const t = await createTicket(agent, { requester: { email: uniqueEmail('both') } });
    await bad({ title: 'ok', contactId: t.contactId, requester: { email: uniqueEmail('both') } });
    // Exactly 50 tags and a 300-character title are fine.
    const max = await createTicket(agent, { title: 'x'.repeat(300), tags: Array.from({ length: 50 }, (_, i) => `t${i}`) });
    expect(max.tags).to.have.length(50);
  });

  it('assigns only to accepted members of the organization (400 otherwise), on create and on change', async () => {
    const { server, baseUrl } = sharedServer();
    const t = await createTicket(owner, { assignedTo: agent.userId });
    expect(t.assignedTo).to.equal(agent.userId);
    const stranger = await signUp(server, baseUrl);
    const res = await owner.api.post('/tickets', { title: 'x', assignedTo: stranger.userId }, { token: owner.accessToken });
    expectError(res, 400, 'validation_failed');
    expect(res.body.error.details.map((d: any) => d.field)).to.include('assignedTo');
    expectError(await owner.api.post('/tickets', { title: 'x', assignedTo: randomUUID() }, { token: owner.accessToken }), 400, 'validation_failed');
    // A pending invitee is not an accepted member yet.
    const invite = await owner.api.post(`/memberships/organizations/${owner.orgId}/members/invite`, { email: uniqueEmail('pending'), role: 'agent' }, { token: owner.accessToken });
    expect(invite.status).to.equal(201);
    expectError(await patchTicket(owner, t.id, { assignedTo: stranger.userId }), 400, 'validation_failed');
    // A suspended member is refused too.
    const suspended = await addMember(server, owner, 'agent');
    expect(ok(await patchTicket(owner, t.id, { assignedTo: suspended.userId }), 200).assignedTo).to.equal(suspended.userId);
    ok(await owner.api.patch(`/memberships/organizations/${owner.orgId}/members/${suspended.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
    expect(ok(await patchTicket(owner, t.id, { assignedTo: null }), 200).assignedTo).to.equal(null);
    expectError(await patchTicket(owner, t.id, { assignedTo: suspended.userId }), 400, 'validation_failed');
    expectError(await owner.api.post('/tickets', { title: 'x', assignedTo: suspended.userId }, { token: owner.accessToken }), 400, 'validation_failed');
    expect(ok(await patchTicket(owner, t.id, { assignedTo: owner.userId }), 200).assignedTo).to.equal(owner.userId);
  });

  it('changes fields with one timeline event per kind of change, and nothing for no change', async () => {
    const t = await createTicket(agent, { description: 'First words' });
    const changed = ok(await patchTicket(agent, t.id, { title: 'New title', description: null, tags: ['A', 'b'], dueAt: '2031-05-05T00:00:00Z', priority: 'urgent', assignedTo: agent.userId }), 200);
    expect(changed).to.include({ title: 'New title', description: null, priority: 'urgent', assignedTo: agent.userId, dueAt: '2031-05-05T00:00:00.000Z' });
    expect(changed.tags).to.deep.equal(['a', 'b']);
    const before = await events(agent, t.id);
    expect(before.map((e) => e.type)).to.deep.equal(['created', 'updated', 'priority_changed', 'assigned']);
    expect(before[1].data.fields).to.have.members(['title', 'description', 'tags', 'dueAt']);
    expect(before[2].data).to.deep.equal({ from: 'medium', to: 'urgent' });
    expect(before[3].data).to.deep.equal({ from: null, to: agent.userId });
    expect(before[3]).to.include({ actorType: 'agent', actorId: agent.userId });
    // The same values again: 200, no new event.
    ok(await patchTicket(agent, t.id, { title: 'New title', priority: 'urgent', tags: ['b', 'a'].reverse() }), 200);
    expect(await events(agent, t.id)).to.have.length(4);
    expectError(await patchTicket(agent, t.id, {}), 400, 'validation_failed');
    expectError(await patchTicket(agent, t.id, { status: 'merged' }), 400, 'validation_failed');
    expectError(await patchTicket(agent, t.id, { mergedIntoId: randomUUID() }), 400, 'validation_failed');
  });

  it('deletes a ticket for admins only; agents 403; then 404', async () => {
    const t = await createTicket(agent);
    expectError(await agent.api.delete(`/tickets/${t.id}`, { token: agent.accessToken }), 403, 'forbidden');
    ok(await owner.api.delete(`/tickets/${t.id}`, { token: owner.accessToken }), 200);
    expectError(await agent.api.get(`/tickets/${t.id}`, { token: agent.accessToken }), 404, 'not_found');
    expectError(await owner.api.delete(`/tickets/${t.id}`, { token: owner.accessToken }), 404, 'not_found');
  });

  it('requires authentication on every ticket route', async () => {
    const { baseUrl } = sharedServer();
    const t = await createTicket(agent);
    const anon = (await signUp(sharedServer().server, baseUrl)).api;
    expectError(await anon.get('/tickets'), 401, 'unauthorized');
    expectError(await anon.post('/tickets', { title: 'x' }), 401, 'unauthorized');
    expectError(await anon.get(`/tickets/${t.id}`), 401, 'unauthorized');
    expectError(await anon.post(`/tickets/${t.id}/notes`, { content: 'x' }), 401, 'unauthorized');
  });
});

describe('Tickets: list, filters and literal search', () => {
  let owner: SignedUp;
  let agent: Member;
  const ids: Record<string, any> = {};

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    agent = await addMember(server, owner, 'agent');
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    ids.conversationId = conversationId;
    ids.a = await createTicket(owner, { title: 'Refund 100% please', priority: 'high', assignedTo: agent.userId });
    ids.b = await createTicket(owner, { title: 'Login broken', description: 'Error code a_b in the app', requester: { email: uniqueEmail('list') } });
    ids.c = await createTicket(owner, { title: 'Feature wish', assignedTo: owner.userId, conversationId });
    ids.d = await createTicket(owner, { title: 'Old issue' });
    ok(await patchTicket(owner, ids.d.id, { status: 'pending' }), 200);
    ids.e = await createTicket(owner, { title: 'Duplicate of refund' });
    ok(await owner.api.post(`/tickets/${ids.e.id}/merge`, { targetTicketId: ids.a.id }, { token: owner.accessToken }), 200);
    // Another organization's tickets never show up.
    const other = await signUp(server, baseUrl);
    await createTicket(other, { title: 'Refund elsewhere' });
  });

  const titles = async (query: string) => ok(await agent.api.get(`/tickets${query}`, { token: agent.accessToken }), 200).map((t: any) => t.title);

  it('lists newest first with pagination, leaving merged tickets out unless asked for', async () => {
    const res = await agent.api.get('/tickets', { token: agent.accessToken });
    expect(ok(res, 200).map((t: any) => t.title)).to.deep.equal(['Old issue', 'Feature wish', 'Login broken', 'Refund 100% please']);
    expect(res.body.pagination).to.deep.equal({ limit: 50, offset: 0, total: 4 });
    const page = await agent.api.get('/tickets?limit=2&offset=1', { token: agent.accessToken });
    expect(ok(page, 200).map((t: any) => t.title)).to.deep.equal(['Feature wish', 'Login broken']);
    expect(page.body.pagination).to.deep.equal({ limit: 2, offset: 1, total: 4 });
    expect(await titles('?status=merged')).to.deep.equal(['Duplicate of refund']);
    expectError(await agent.api.get('/tickets?limit=201', { token: agent.accessToken }), 400, 'validation_failed');
  });

  it('filters by status list (repeated or comma-separated), priority, assignee, contact and conversation', async () => {
    expect(await titles('?status=pending')).to.deep.equal(['Old issue']);
    expect(await titles('?status=pending&status=open')).to.deep.equal(['Old issue', 'Feature wish', 'Login broken', 'Refund 100% please']);
    expect(await titles('?status=pending,merged')).to.deep.equal(['Duplicate of refund', 'Old issue']);
    expect(await titles('?priority=high')).to.deep.equal(['Refund 100% please']);
    expect(await titles('?assignedTo=me')).to.deep.equal(['Refund 100% please']);
    expect(await titles(`?assignedTo=${owner.userId}`)).to.deep.equal(['Feature wish']);
    expect(await titles('?assignedTo=unassigned')).to.deep.equal(['Old issue', 'Login broken']);
    expect(await titles(`?contactId=${ids.b.contactId}`)).to.deep.equal(['Login broken']);
    expect(await titles(`?conversationId=${ids.conversationId}`)).to.deep.equal(['Feature wish']);
    expect(await titles('?assignedTo=unassigned&status=open')).to.deep.equal(['Login broken']);
    for (const q of ['?status=nope', '?status=open,', '?priority=x', '?assignedTo=someone', '?contactId=1', '?unknown=1']) {
      expectError(await agent.api.get(`/tickets${q}`, { token: agent.accessToken }), 400, 'validation_failed');
    }
  });

  it('searches title and description literally (%, _ and regex characters mean themselves) and by number', async () => {
    expect(await titles('?q=refund')).to.deep.equal(['Refund 100% please']);
    expect(await titles(`?q=${encodeURIComponent('100%')}`)).to.deep.equal(['Refund 100% please']);
    expect(await titles(`?q=${encodeURIComponent('%')}`)).to.deep.equal(['Refund 100% please']);
    expect(await titles(`?q=${encodeURIComponent('a_b')}`)).to.deep.equal(['Login broken']);
    expect(await titles(`?q=${encodeURIComponent('a%b')}`)).to.deep.equal([]);
    expect(await titles(`?q=${encodeURIComponent('.*')}`)).to.deep.equal([]);
    expect(await titles(`?q=${encodeURIComponent('ERROR CODE')}`)).to.deep.equal(['Login broken']);
    expect(await titles(`?q=${encodeURIComponent(`#${ids.c.number}`)}`)).to.deep.equal(['Feature wish']);
    expect(await titles(`?q=${ids.d.number}`)).to.deep.equal(['Old issue']);
    expectError(await agent.api.get(`/tickets?q=${'x'.repeat(201)}`, { token: agent.accessToken }), 400, 'validation_failed');
  });
});

describe('Tickets: notes, timeline, links and chat-to-ticket', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('adds notes (201 event) and pages the timeline with after and limit', async () => {
    const t = await createTicket(owner);
    const note = ok(await owner.api.post(`/tickets/${t.id}/notes`, { content: 'Called the customer' }, { token: owner.accessToken }), 201);
    expect(note).to.include({ ticketId: t.id, type: 'note', content: 'Called the customer', actorType: 'agent', actorId: owner.userId });
    for (let i = 0; i < 3; i++) ok(await owner.api.post(`/tickets/${t.id}/notes`, { content: `n${i}` }, { token: owner.accessToken }), 201);
    const all = await events(owner, t.id);
    expect(all.map((e) => e.content)).to.deep.equal([null, 'Called the customer', 'n0', 'n1', 'n2']);
    expect((await events(owner, t.id, '?limit=2')).map((e) => e.type)).to.deep.equal(['created', 'note']);
    expect((await events(owner, t.id, `?after=${all[1].id}&limit=2`)).map((e) => e.content)).to.deep.equal(['n0', 'n1']);
    expect(await events(owner, t.id, `?after=${all[4].id}`)).to.deep.equal([]);
    expectError(await owner.api.get(`/tickets/${t.id}/events?after=${randomUUID()}`, { token: owner.accessToken }), 400, 'validation_failed');
    for (const content of ['', '  ', 'x'.repeat(50001)]) expectError(await owner.api.post(`/tickets/${t.id}/notes`, { content }, { token: owner.accessToken }), 400, 'validation_failed');
    expectError(await owner.api.post(`/tickets/${t.id}/notes`, { content: 'x', private: true }, { token: owner.accessToken }), 400, 'validation_failed');
  });

  it('links to a conversation and unlinks with null', async () => {
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const t = await createTicket(owner);
    expect(ok(await owner.api.post(`/tickets/${t.id}/link`, { conversationId }, { token: owner.accessToken }), 200).conversationId).to.equal(conversationId);
    expect(ok(await owner.api.post(`/tickets/${t.id}/link`, { conversationId: null }, { token: owner.accessToken }), 200).conversationId).to.equal(null);
    const linked = (await events(owner, t.id)).filter((e) => e.type === 'linked');
    expect(linked.map((e) => e.data)).to.deep.equal([{ from: null, to: conversationId }, { from: conversationId, to: null }]);
    expectError(await owner.api.post(`/tickets/${t.id}/link`, {}, { token: owner.accessToken }), 400, 'validation_failed');
    expectError(await owner.api.post(`/tickets/${t.id}/link`, { conversationId: randomUUID() }, { token: owner.accessToken }), 404, 'not_found');
  });

  it("turns a conversation into a linked ticket whose requester is the visitor, found or created as a contact", async () => {
    const email = uniqueEmail('visitor');
    const visitor = await newVisitor(owner, { name: 'Vic Visitor', email });
    const { conversationId } = await startConversation(visitor);
    const t = ok(await owner.api.post(`/conversations/${conversationId}/tickets`, { title: 'From chat', priority: 'low' }, { token: owner.accessToken }), 201);
    expect(t).to.include({ title: 'From chat', priority: 'low', status: 'open', conversationId, source: 'widget' });
    expect(t.requester).to.deep.equal({ name: 'Vic Visitor', email });
    expect(t.contactId).to.be.a('string');
    // A conversation with a contact: that contact is the requester.
    const v2 = await newVisitor(owner);
    const c2 = await startConversation(v2);
    const contactEmail = uniqueEmail('contact');
    ok(await owner.api.post(`/conversations/${c2.conversationId}/contact`, { name: 'Cora Contact', email: contactEmail }, { token: owner.accessToken }), 200);
    const t2 = ok(await owner.api.post(`/conversations/${c2.conversationId}/tickets`, { title: 'Second' }, { token: owner.accessToken }), 201);
    expect(t2.requester).to.deep.equal({ name: 'Cora Contact', email: contactEmail });
    expectError(await owner.api.post(`/conversations/${c2.conversationId}/tickets`, {}, { token: owner.accessToken }), 400, 'validation_failed');
    expectError(await owner.api.post(`/conversations/${c2.conversationId}/tickets`, { title: 'x', requester: { email } }, { token: owner.accessToken }), 400, 'validation_failed');
  });
});

describe('Tickets: another organization\'s ids answer 404 on every route', () => {
  it('GET, PATCH, DELETE, notes, replies, events, merge (either side), link (either side), chat-to-ticket, and references on create', async () => {
    const { server, baseUrl } = sharedServer();
    const mine = await signUp(server, baseUrl);
    const theirs = await signUp(server, baseUrl);
    const foreign = await createTicket(theirs, { requester: { email: uniqueEmail('foreign') } });
    const own = await createTicket(mine, { requester: { email: uniqueEmail('own') } });
    const visitor = await newVisitor(theirs);
    const { conversationId: foreignConversation } = await startConversation(visitor);
    const a = { token: mine.accessToken };
    const nf = (res: any) => expectError(res, 404, 'not_found');
    nf(await mine.api.get(`/tickets/${foreign.id}`, a));
    nf(await mine.api.patch(`/tickets/${foreign.id}`, { title: 'mine now' }, a));
    nf(await mine.api.patch(`/tickets/${foreign.id}`, { title: '' }, a));
    nf(await mine.api.delete(`/tickets/${foreign.id}`, a));
    nf(await mine.api.post(`/tickets/${foreign.id}/notes`, { content: 'x' }, a));
    nf(await mine.api.post(`/tickets/${foreign.id}/replies`, { content: 'x' }, a));
    nf(await mine.api.get(`/tickets/${foreign.id}/events`, a));
    nf(await mine.api.post(`/tickets/${foreign.id}/merge`, { targetTicketId: own.id }, a));
    nf(await mine.api.post(`/tickets/${own.id}/merge`, { targetTicketId: foreign.id }, a));
    nf(await mine.api.post(`/tickets/${foreign.id}/link`, { conversationId: null }, a));
    nf(await mine.api.post(`/tickets/${own.id}/link`, { conversationId: foreignConversation }, a));
    nf(await mine.api.post(`/conversations/${foreignConversation}/tickets`, { title: 'x' }, a));
    nf(await mine.api.post('/tickets', { title: 'x', contactId: foreign.contactId }, a));
    nf(await mine.api.post('/tickets', { title: 'x', conversationId: foreignConversation }, a));
    nf(await mine.api.patch(`/tickets/${own.id}`, { contactId: foreign.contactId }, a));
    nf(await mine.api.get(`/tickets/not-a-uuid`, a));
    // Nothing of theirs changed.
    const still = ok(await theirs.api.get(`/tickets/${foreign.id}`, { token: theirs.accessToken }), 200);
    expect(still).to.deep.equal(foreign);
    expect(await events(theirs, foreign.id)).to.have.length(1);
    expect(ok(await mine.api.get(`/tickets/${own.id}`, a), 200)).to.include({ status: 'open', conversationId: null, contactId: own.contactId });
  });
});
