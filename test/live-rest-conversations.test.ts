// REST inbox: listing with filters and pagination, one conversation with its history, message pages,
// agent replies (notes, types, idempotency, limits) and the status machine.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { expectApiError, expectApiSuccess } from './helpers/auth.js';

type Status = 'open' | 'pending' | 'resolved' | 'closed';

async function setStatus(owner: SignedUp, conversationId: string, status: Status) {
  return owner.api.patch(`/conversations/${conversationId}/status`, { status }, { token: owner.accessToken });
}

/** A fresh conversation moved (legally) into `status`. */
async function conversationIn(owner: SignedUp, status: Status): Promise<string> {
  const { conversationId } = await startConversation(await newVisitor(owner));
  if (status !== 'open') expectApiSuccess(await setStatus(owner, conversationId, status), 200);
  return conversationId;
}

describe('REST conversations: inbox and history', () => {
  it('lists newest activity first, without messages, with filters, search and pagination', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent', 'Alex Agent');
    const other = await signUp(server, baseUrl);
    await startConversation(await newVisitor(other, { name: 'Zed Zebra' }), 'zebra in another org');

    const a = await startConversation(await newVisitor(owner, { name: 'Zed Zebra' }), 'first question');
    const b = await startConversation(await newVisitor(owner, { name: 'Bea Brown' }), 'my invoice shows 50% extra');
    const c = await startConversation(await newVisitor(owner, { name: 'Cal Cyan' }), 'third question');
    // Activity on the oldest conversation moves it to the top.
    expectApiSuccess(await owner.api.post(`/conversations/${a.conversationId}/messages`, { content: 'a reply about refunds' }, { token: owner.accessToken }), 201);
    await server.db.models.Conversation.acrossOrgs().patch({ subject: 'Shipping delay' }).where('id', c.conversationId);

    const all = await owner.api.get('/conversations', { token: owner.accessToken });
    expectApiSuccess(all, 200);
    expect(all.body.data.map((x: any) => x.id)).to.deep.equal([a.conversationId, c.conversationId, b.conversationId]);
    expect(all.body.pagination).to.deep.equal({ limit: 50, offset: 0, total: 3 });
    for (const item of all.body.data) {
      expect(item).to.not.have.property('messages');
      expect(item.organizationId).to.equal(owner.orgId);
    }
    expect(all.body.data[0].visitor.name).to.equal('Zed Zebra');

    // Pagination keeps the order and the total.
    const page = await owner.api.get('/conversations?limit=1&offset=1', { token: owner.accessToken });
    expect(page.body.data.map((x: any) => x.id)).to.deep.equal([c.conversationId]);
    expect(page.body.pagination).to.deep.equal({ limit: 1, offset: 1, total: 3 });
    const past = await owner.api.get('/conversations?limit=2&offset=3', { token: owner.accessToken });
    expect(past.body.data).to.deep.equal([]);
    expect(past.body.pagination.total).to.equal(3);
    expectApiError(await owner.api.get('/conversations?limit=201', { token: owner.accessToken }), 400, 'validation_failed');

    const ids = async (query: string, who: { api: SignedUp['api']; accessToken: string } = owner) => {
      const res = await who.api.get(`/conversations?${query}`, { token: who.accessToken });
      expectApiSuccess(res, 200);
      expect(res.body.pagination.total).to.equal(res.body.data.length);
      return res.body.data.map((x: any) => x.id).sort();
    };
    // q: visitor name (case-insensitive), subject, message text (agent replies too); % is literal.
    expect(await ids('q=zebra')).to.deep.equal([a.conversationId]);
    expect(await ids('q=SHIPPING')).to.deep.equal([c.conversationId]);
    expect(await ids('q=refunds')).to.deep.equal([a.conversationId]);
    expect(await ids('q=invoice')).to.deep.equal([b.conversationId]);
    expect(await ids(`q=${encodeURIComponent('50%')}`)).to.deep.equal([b.conversationId]);
    expect(await ids(`q=${encodeURIComponent('%')}`)).to.deep.equal([b.conversationId]);
    expect(await ids('q=nothing-matches-this')).to.deep.equal([]);

    // status, assignment filters.
    expectApiSuccess(await setStatus(owner, b.conversationId, 'pending'), 200);
    expectApiSuccess(await owner.api.post(`/conversations/${c.conversationId}/route`, { agentId: agent.userId }, { token: owner.accessToken }), 200);
    expect(await ids('status=pending')).to.deep.equal([b.conversationId]);
    expect(await ids('status=open')).to.deep.equal([a.conversationId, c.conversationId].sort());
    expect(await ids('status=closed')).to.deep.equal([]);
    expect(await ids('unassigned=true')).to.deep.equal([a.conversationId, b.conversationId].sort());
    expect(await ids('assignedToMe=true')).to.deep.equal([]);
    expect(await ids('assignedToMe=true', agent)).to.deep.equal([c.conversationId]);
    expect(await ids('assignedToMe=true&status=pending', agent)).to.deep.equal([]);
    expect(await ids('unassigned=true&q=invoice')).to.deep.equal([b.conversationId]);
    expectApiError(await owner.api.get('/conversations?status=archived', { token: owner.accessToken }), 400, 'validation_failed');
  });

  it('GET /conversations/:id returns the conversation with its whole history oldest first, notes included (spec endpoint 6)', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const visitor = await newVisitor(owner, { name: 'Hana History', email: 'hana@example.test' });
    const { conversationId } = await startConversation(visitor, 'one');
    const t = { token: owner.accessToken };
    expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'two' }, t), 201);
    expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'three (note)', private: true }, t), 201);
    expectApiSuccess(await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'four' }, { token: visitor.token }), 201);

    const unauth = await owner.api.get(`/conversations/${conversationId}`);
    expectApiError(unauth, 401, 'unauthorized');

    const data = expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200);
    expect(data.id).to.equal(conversationId);
    expect(data.status).to.equal('open');
    expect(data.visitor).to.deep.equal({ sessionId: visitor.sessionId, name: 'Hana History', email: 'hana@example.test' });
    expect(data).to.have.property('contact', null);
    expect(data.messages.map((m: any) => [m.seq, m.content, m.senderType, m.private])).to.deep.equal([
      [1, 'one', 'visitor', false],
      [2, 'two', 'agent', false],
      [3, 'three (note)', 'agent', true],
      [4, 'four', 'visitor', false],
    ]);
    expect(data.messages.every((m: any) => m.conversationId === conversationId)).to.equal(true);
    expect(data.messages[1].senderId).to.equal(owner.userId);
    expect(data.lastSeq).to.equal(4);

    // The whole history, not a first page (more than the default list limit of 50).
    const many = Array.from({ length: 48 }, (_, i) => `bulk ${i}`);
    for (const content of many) await owner.api.post(`/conversations/${conversationId}/messages`, { content }, t);
    const full = expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200);
    expect(full.messages).to.have.length(52);
    expect(full.messages.map((m: any) => m.seq)).to.deep.equal(Array.from({ length: 52 }, (_, i) => i + 1));
  });

  it('pages messages with afterSeq, beforeSeq and limit (notes included for agents)', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const { conversationId } = await startConversation(await newVisitor(owner), 'm1');
    const t = { token: owner.accessToken };
    for (let i = 2; i <= 6; i++) expectApiSuccess(await owner.api.post(`/conversations/${conversationId}/messages`, { content: `m${i}`, private: i === 4 }, t), 201);
    const seqs = async (query: string) => {
      const res = await owner.api.get(`/conversations/${conversationId}/messages${query}`, t);
      expectApiSuccess(res, 200);
      return res.body.data.map((m: any) => m.seq);
    };
    expect(await seqs('')).to.deep.equal([1, 2, 3, 4, 5, 6]);
    expect(await seqs('?afterSeq=2&limit=2')).to.deep.equal([3, 4]);
    expect(await seqs('?afterSeq=4')).to.deep.equal([5, 6]);
    expect(await seqs('?afterSeq=6')).to.deep.equal([]);
    expect(await seqs('?beforeSeq=5&limit=2')).to.deep.equal([3, 4]);
    expect(await seqs('?beforeSeq=3')).to.deep.equal([1, 2]);
    expect(await seqs('?beforeSeq=1')).to.deep.equal([]);
    expect(await seqs('?limit=1')).to.deep.equal([1]);
    const note = await owner.api.get(`/conversations/${conversationId}/messages?afterSeq=3&limit=1`, t);
    expect(note.body.data[0]).to.include({ seq: 4, content: 'm4', private: true });
    expectApiError(await owner.api.get(`/conversations/${conversationId}/messages?limit=0`, t), 400, 'validation_failed');
    expectApiError(await owner.api.get(`/conversations/${conversationId}/messages?afterSeq=-1`, t), 400, 'validation_failed');
  });
});

describe('REST conversations: replies', () => {
  it('stores agent replies and notes with the next seq; a repeated clientMessageId answers 200 with the first message', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const { conversationId } = await startConversation(await newVisitor(owner));
    const t = { token: owner.accessToken };
    const path = `/conversations/${conversationId}/messages`;

    const reply = expectApiSuccess(await owner.api.post(path, { content: 'Hi, how can I help?', clientMessageId: 'c-1' }, t), 201);
    expect(reply).to.include({ conversationId, seq: 2, senderType: 'agent', senderId: owner.userId, content: 'Hi, how can I help?', type: 'text', private: false, clientMessageId: 'c-1' });
    const note = expectApiSuccess(await owner.api.post(path, { content: 'VIP customer', private: true }, t), 201);
    expect(note).to.include({ seq: 3, private: true });
    const image = expectApiSuccess(await owner.api.post(path, { content: 'https://cdn.example.test/a.png', type: 'image' }, t), 201);
    expect(image).to.include({ seq: 4, type: 'image', private: false });

    const again = await owner.api.post(path, { content: 'a different text', clientMessageId: 'c-1' }, t);
    const repeated = expectApiSuccess(again, 200);
    expect(repeated).to.deep.equal(reply);

    const history = expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200);
    expect(history.messages.map((m: any) => m.seq)).to.deep.equal([1, 2, 3, 4]);
    expect(history.messages.filter((m: any) => m.clientMessageId === 'c-1')).to.have.length(1);
    expect(history.firstReplyAt).to.be.a('string');
    expect(history.humanJoinedAt).to.be.a('string');
    expect(history.lastSeq).to.equal(4);
    expect(await server.db.models.Message.acrossOrgs().where({ conversationId, clientMessageId: 'c-1' }).resultSize()).to.equal(1);
  });

  it('rejects content over 50,000 characters, empty content, unknown types and fields; 50,000 exactly is fine', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const { conversationId } = await startConversation(await newVisitor(owner));
    const t = { token: owner.accessToken };
    const path = `/conversations/${conversationId}/messages`;
    expectApiError(await owner.api.post(path, { content: 'x'.repeat(50_001) }, t), 400, 'validation_failed');
    expectApiError(await owner.api.post(path, { content: '' }, t), 400, 'validation_failed');
    expectApiError(await owner.api.post(path, {}, t), 400, 'validation_failed');
    expectApiError(await owner.api.post(path, { content: 'x', type: 'system' }, t), 400, 'validation_failed');
    expectApiError(await owner.api.post(path, { content: 'x', senderType: 'visitor' }, t), 400, 'validation_failed');
    const max = expectApiSuccess(await owner.api.post(path, { content: 'y'.repeat(50_000) }, t), 201);
    expect(max.content).to.have.length(50_000);
    expect(max.seq).to.equal(2);
    expect(await server.db.models.Message.acrossOrgs().where({ conversationId }).resultSize()).to.equal(2);
  });

  it('a closed conversation refuses agent replies with 400 invalid_transition and stores nothing', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const conversationId = await conversationIn(owner, 'closed');
    const res = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'too late' }, { token: owner.accessToken });
    expectApiError(res, 400, 'invalid_transition');
    expect(await server.db.models.Message.acrossOrgs().where({ conversationId }).resultSize()).to.equal(1);
  });
});

describe('REST conversations: status machine', () => {
  const legal: [Status, Status][] = [
    ['open', 'pending'],
    ['pending', 'open'],
    ['open', 'resolved'],
    ['pending', 'resolved'],
    ['resolved', 'open'],
    ['open', 'closed'],
    ['pending', 'closed'],
    ['resolved', 'closed'],
  ];
  const illegal: [Status, Status][] = [
    ['closed', 'open'],
    ['closed', 'pending'],
    ['closed', 'resolved'],
    ['resolved', 'pending'],
  ];

  it('allows every legal transition and sets or clears resolvedAt', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    for (const [from, to] of legal) {
      const id = await conversationIn(owner, from);
      const before = expectApiSuccess(await owner.api.get(`/conversations/${id}`, { token: owner.accessToken }), 200);
      expect(before.status).to.equal(from);
      const data = expectApiSuccess(await setStatus(owner, id, to), 200);
      expect(data.status, `${from} -> ${to}`).to.equal(to);
      if (to === 'resolved') {
        expect(data.resolvedAt, `${from} -> resolved sets resolvedAt`).to.be.a('string');
        expect(Date.now() - Date.parse(data.resolvedAt)).to.be.within(0, 60_000);
      }
      if (to === 'open') expect(data.resolvedAt, `${from} -> open clears resolvedAt`).to.equal(null);
      if (from === 'resolved' && to === 'closed') expect(data.resolvedAt).to.equal(before.resolvedAt);
      const stored = expectApiSuccess(await owner.api.get(`/conversations/${id}`, { token: owner.accessToken }), 200);
      expect(stored.status).to.equal(to);
    }
  });

  it('refuses illegal transitions with 400 invalid_transition and leaves the status alone', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    for (const [from, to] of illegal) {
      const id = await conversationIn(owner, from);
      expectApiError(await setStatus(owner, id, to), 400, 'invalid_transition');
      const stored = expectApiSuccess(await owner.api.get(`/conversations/${id}`, { token: owner.accessToken }), 200);
      expect(stored.status, `${from} -> ${to} refused`).to.equal(from);
    }
    const id = await conversationIn(owner, 'open');
    expectApiError(await setStatus(owner, id, 'archived' as Status), 400, 'validation_failed');
    expectApiError(await owner.api.patch(`/conversations/${id}/status`, {}, { token: owner.accessToken }), 400, 'validation_failed');
  });

  it('an agent (not only admins) may resolve and reopen', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const id = await conversationIn(owner, 'open');
    const resolved = expectApiSuccess(await agent.api.patch(`/conversations/${id}/status`, { status: 'resolved' }, { token: agent.accessToken }), 200);
    expect(resolved.resolvedAt).to.be.a('string');
    const reopened = expectApiSuccess(await agent.api.patch(`/conversations/${id}/status`, { status: 'open' }, { token: agent.accessToken }), 200);
    expect(reopened.resolvedAt).to.equal(null);
  });
});
