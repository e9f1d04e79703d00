// What a send decides beyond the append rules: a visitor writing to a closed conversation opens a follow-up filed
// like the closed one (and a client id used in another of their chats is no retry of it); agents cannot write to a
// closed conversation; only customers open conversations, and a customer writes only to their own; concurrent sends
// and starts are serialized (gap-free seq, one conversation per retried start); history pages by seq.
import { expect } from 'chai';
import type { StatementFactory } from '../db/statements.js';
import { MessageService, type Sender } from '../server/services/messages/index.js';
import { expectApiSuccess } from './helpers/auth.js';
import { createContact } from './helpers/contacts.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, settle } from './helpers/sockets.js';
import { expectError } from './helpers/tenancy.js';

/** Every batch statement fails, so every send takes the transaction (the path that makes the decisions). */
const failingStatements: StatementFactory = () => ({
  rows: async () => {
    throw new Error('batch statement refused (the transactional path is under test)');
  },
});

function transactionalMessages(): MessageService {
  const { server } = sharedServer();
  return new MessageService({ models: server.db.models, knex: server.db.knex, statement: failingStatements, events: server.events, batching: { concurrency: 1, maxBatch: 200 } });
}

async function owner(): Promise<SignedUp> {
  const { server, baseUrl } = sharedServer();
  return signUp(server, baseUrl);
}

const read = async (o: SignedUp, id: string) => expectApiSuccess(await o.api.get(`/conversations/${id}`, { token: o.accessToken }), 200);
const setStatus = async (o: SignedUp, id: string, status: string) => expectApiSuccess(await o.api.patch(`/conversations/${id}/status`, { status }, { token: o.accessToken }), 200);

describe('what a send decides', () => {
  const track = closeAfterEach();

  describe('a visitor writing to a closed conversation', () => {
    it('opens a follow-up filed like the closed one: priority, source, visitor, contact; fresh status, tags and counters', async () => {
      const o = await owner();
      const visitor = await newVisitor(o, { name: 'Flo Follow', email: 'flo@example.test' });
      const started = await visitor.api.post('/widget/conversations', { content: 'first chat', source: 'qr' }, { token: visitor.token });
      expect(started.status, JSON.stringify(started.body)).to.equal(201);
      const closedId = started.body.data.conversation.id;
      expectApiSuccess(await o.api.patch(`/conversations/${closedId}`, { priority: 'high', tags: ['vip'] }, { token: o.accessToken }), 200);
      const contact = await createContact(o, { name: 'Flo Follow', email: 'flo.contact@example.test' });
      expectApiSuccess(await o.api.post(`/conversations/${closedId}/contact`, { contactId: contact.id }, { token: o.accessToken }), 200);
      await setStatus(o, closedId, 'closed');

      const sent = await visitor.api.post(`/widget/conversations/${closedId}/messages`, { content: 'me again' }, { token: visitor.token });
      expect(sent.status, JSON.stringify(sent.body)).to.equal(201);
      const followUpId = sent.body.data.conversationId;
      expect(followUpId).to.not.equal(closedId);
      const followUp = await read(o, followUpId);
      expect(followUp).to.deep.include({ status: 'open', priority: 'high', channel: 'widget', source: 'qr', contactId: contact.id, subject: null, tags: [], lastSeq: 1, unreadCount: 1 });
      expect(followUp.visitor).to.deep.equal({ sessionId: visitor.sessionId, name: 'Flo Follow', email: 'flo@example.test' });
      expect(followUp.messages.map((m: any) => [m.seq, m.senderType, m.senderId, m.content])).to.deep.equal([[1, 'visitor', visitor.sessionId, 'me again']]);
      // The closed conversation is left as it was.
      const closed = await read(o, closedId);
      expect(closed).to.deep.include({ status: 'closed', lastSeq: 1 });
    });

    it("is no retry of a message in another of the visitor's chats that used the same client id", async () => {
      const o = await owner();
      const visitor = await newVisitor(o);
      const { conversationId: first } = await startConversation(visitor, 'about my order');
      // A widget start without a source is filed as the widget's, with no tags.
      expect(await read(o, first)).to.deep.include({ source: 'widget', channel: 'widget', priority: 'medium', tags: [] });
      // A second chat, opened while the first was still open, whose first message used the id 'c-1'.
      const other = await visitor.api.post('/widget/conversations', { content: 'about my invoice', clientMessageId: 'c-1' }, { token: visitor.token });
      expect(other.status).to.equal(201);
      await settle(5);
      await setStatus(o, first, 'closed');

      const sent = await visitor.api.post(`/widget/conversations/${first}/messages`, { content: 'the order again', clientMessageId: 'c-1' }, { token: visitor.token });
      expect(sent.status, JSON.stringify(sent.body)).to.equal(201);
      expect(sent.body.data).to.include({ content: 'the order again', clientMessageId: 'c-1', seq: 1 });
      expect(sent.body.data.conversationId).to.not.be.oneOf([first, other.body.data.conversation.id]);
      // Its own retry is one: the same message back, nothing opened again.
      const retry = await visitor.api.post(`/widget/conversations/${first}/messages`, { content: 'the order again', clientMessageId: 'c-1' }, { token: visitor.token });
      expect(retry.status).to.equal(200);
      expect(retry.body.data.id).to.equal(sent.body.data.id);
    });
  });

  it('refuses an agent writing to a closed conversation (400 invalid_transition) and opens nothing', async () => {
    const o = await owner();
    const visitor = await newVisitor(o);
    const { conversationId } = await startConversation(visitor, 'hello');
    await setStatus(o, conversationId, 'closed');
    const before = (await o.api.get('/conversations?limit=100', { token: o.accessToken })).body.data.length;
    const res = await o.api.post(`/conversations/${conversationId}/messages`, { content: 'too late' }, { token: o.accessToken });
    expectError(res, 400, 'invalid_transition');
    expect((await o.api.get('/conversations?limit=100', { token: o.accessToken })).body.data.length).to.equal(before);
    expect((await read(o, conversationId)).lastSeq).to.equal(1);
  });

  describe('who opens conversations and where customers write', () => {
    it('only a customer opens a conversation: an agent, the AI or the platform cannot', async () => {
      const o = await owner();
      const messages = sharedServer().server.services.messages;
      const senders: Sender[] = [{ type: 'agent', orgId: o.orgId, userId: o.userId }, { type: 'ai', orgId: o.orgId }, { type: 'system', orgId: o.orgId }];
      for (const sender of senders) {
        const err = await messages.send(sender, { content: 'hello', start: {} }).then(() => null, (e: unknown) => e as { status: number; code: string });
        expect(err, sender.type).to.deep.include({ status: 400, code: 'validation_failed' });
      }
      expect((await o.api.get('/conversations?limit=100', { token: o.accessToken })).body.data).to.deep.equal([]);
    });

    it("a visitor writing into another visitor's conversation gets 404 and stores nothing", async () => {
      const o = await owner();
      const [ada, eve] = [await newVisitor(o), await newVisitor(o)];
      const { conversationId } = await startConversation(ada, 'my chat');
      const res = await eve.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'injected' }, { token: eve.token });
      expectError(res, 404, 'not_found');
      expect((await read(o, conversationId)).messages.map((m: any) => m.content)).to.deep.equal(['my chat']);
    });

    it("a channel contact opens its own conversation and cannot write into another contact's", async () => {
      const o = await owner();
      const messages = sharedServer().server.services.messages;
      const [ann, bob] = [await createContact(o, { name: 'Ann', email: 'ann@example.test' }), await createContact(o, { name: 'Bob', email: 'bob@example.test' })];
      const asContact = (contactId: string): Sender => ({ type: 'contact', orgId: o.orgId, contactId });
      const opened = await messages.send(asContact(ann.id), { content: 'hello by mail', clientMessageId: 'mail-1', start: { channel: 'email', source: 'email', subject: 'Order 42' } });
      expect(opened).to.deep.include({ started: true, duplicate: false });
      const conversation = await read(o, opened.conversation.id);
      expect(conversation).to.deep.include({ contactId: ann.id, channel: 'email', source: 'email', subject: 'Order 42', status: 'open' });
      expect(conversation.visitor.sessionId).to.equal(null);
      expect(conversation.messages.map((m: any) => [m.senderType, m.senderId, m.content])).to.deep.equal([['visitor', ann.id, 'hello by mail']]);

      const err = await messages.send(asContact(bob.id), { conversationId: opened.conversation.id, content: 'not mine' }).then(() => null, (e: unknown) => e as { status: number; code: string });
      expect(err).to.deep.include({ status: 404, code: 'not_found' });
      const own = await messages.send(asContact(ann.id), { conversationId: opened.conversation.id, content: 'a second mail' });
      expect(own.message.seq).to.equal(2);
      expect((await read(o, opened.conversation.id)).lastSeq).to.equal(2);
    });
  });

  describe('concurrent sends', () => {
    it('sends racing on one conversation through the transaction (two instances, a contact\'s mails) all land once, seq gap-free', async () => {
      const o = await owner();
      const visitor = await newVisitor(o);
      const { conversationId } = await startConversation(visitor, 'hello');
      // Each instance keeps its own sends to a conversation in order; two instances only have the row lock.
      const [here, there] = [transactionalMessages(), transactionalMessages()];
      const agent: Sender = { type: 'agent', orgId: o.orgId, userId: o.userId };
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? here : there).send(agent, { conversationId, content: `reply ${i}` })));
      expect(results.map((r) => r.message.seq).sort((a, b) => a - b)).to.deep.equal([2, 3, 4, 5, 6, 7, 8, 9]);
      expect((await read(o, conversationId)).lastSeq).to.equal(9);

      // A channel contact's sends skip the batch altogether: several mails at once still line up.
      const contact = await createContact(o, { name: 'Mo', email: 'mo@example.test' });
      const messages = sharedServer().server.services.messages;
      const sender: Sender = { type: 'contact', orgId: o.orgId, contactId: contact.id };
      const opened = await messages.send(sender, { content: 'mail 0', start: { channel: 'email', source: 'email' } });
      const mails = await Promise.all(Array.from({ length: 6 }, (_, i) => messages.send(sender, { conversationId: opened.conversation.id, content: `mail ${i + 1}` })));
      expect(mails.map((r) => r.message.seq).sort((a, b) => a - b)).to.deep.equal([2, 3, 4, 5, 6, 7]);
    });

    it("a customer's start retried while the first is in flight opens one conversation", async () => {
      const o = await owner();
      const visitor = await newVisitor(o);
      const starts = await Promise.all(Array.from({ length: 6 }, () => visitor.api.post('/widget/conversations', { content: 'hello?', clientMessageId: 'start-race' }, { token: visitor.token })));
      expect(starts.map((r) => r.status).sort()).to.deep.equal([200, 200, 200, 200, 200, 201]);
      expect(new Set(starts.map((r) => r.body.data.conversation.id)).size).to.equal(1);

      const contact = await createContact(o, { name: 'Cy', email: 'cy@example.test' });
      const messages = sharedServer().server.services.messages;
      const sender: Sender = { type: 'contact', orgId: o.orgId, contactId: contact.id };
      const mails = await Promise.all(Array.from({ length: 6 }, () => messages.send(sender, { content: 'by mail', clientMessageId: 'mail-race', start: { channel: 'email', source: 'email' } })));
      expect(mails.filter((r) => r.started)).to.have.length(1);
      expect(new Set(mails.map((r) => r.conversation.id)).size).to.equal(1);
      expect((await o.api.get('/conversations?limit=100', { token: o.accessToken })).body.data).to.have.length(2);
    });
  });

  it("a client id of the AI's message is no retry for the platform, though neither has a sender id (409)", async () => {
    const o = await owner();
    const visitor = await newVisitor(o);
    const { conversationId } = await startConversation(visitor, 'hello');
    const service = transactionalMessages();
    const ai: Sender = { type: 'ai', orgId: o.orgId };
    const answer = await service.send(ai, { conversationId, content: 'an AI answer', clientMessageId: 'shared-1' });
    const err = await service.send({ type: 'system', orgId: o.orgId }, { conversationId, content: 'summary', type: 'system', private: true, clientMessageId: 'shared-1' }).then(() => null, (e: unknown) => e as { status: number; code: string });
    expect(err).to.deep.include({ status: 409, code: 'conflict' });
    // The AI's own retry is one.
    const again = await service.send(ai, { conversationId, content: 'an AI answer', clientMessageId: 'shared-1' });
    expect(again).to.deep.include({ duplicate: true });
    expect(again.message.id).to.equal(answer.message.id);
    expect((await read(o, conversationId)).lastSeq).to.equal(2);
  });

  it('announces a retried send once: agents hear one new_message', async () => {
    const { baseUrl } = sharedServer();
    const o = await owner();
    const visitor = await newVisitor(o);
    const { conversationId } = await startConversation(visitor, 'hello');
    const agentSocket = track(await connectOk(baseUrl, o.orgId, o.accessToken));
    const heard = collect(agentSocket, 'new_message');
    for (const expected of [201, 200, 200]) {
      const res = await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'are you there?', clientMessageId: 'r-1' }, { token: visitor.token });
      expect(res.status).to.equal(expected);
    }
    await settle(200);
    expect(heard.map((e: any) => e.message.content)).to.deep.equal(['are you there?']);
  });

  it('pages history by seq: the newest before beforeSeq, or after afterSeq; visitors never see notes', async () => {
    const o = await owner();
    const visitor = await newVisitor(o);
    const { conversationId } = await startConversation(visitor, 'm1');
    const t = { token: o.accessToken };
    for (const [content, note] of [['m2', false], ['n3', true], ['m4', false], ['n5', true], ['m6', false]] as const) {
      expect((await o.api.post(`/conversations/${conversationId}/messages`, { content, private: note }, t)).status).to.equal(201);
    }
    const page = async (query: string) => expectApiSuccess(await o.api.get(`/conversations/${conversationId}/messages?${query}`, t), 200).map((m: any) => m.content);
    expect(await page('beforeSeq=6&limit=2')).to.deep.equal(['m4', 'n5']);
    expect(await page('beforeSeq=3&limit=10')).to.deep.equal(['m1', 'm2']);
    expect(await page('afterSeq=2&limit=2')).to.deep.equal(['n3', 'm4']);
    expect(await page('limit=100')).to.deep.equal(['m1', 'm2', 'n3', 'm4', 'n5', 'm6']);
    const mine = expectApiSuccess(await visitor.api.get(`/widget/conversations/${conversationId}/messages?afterSeq=1`, { token: visitor.token }), 200);
    expect(mine.map((m: any) => m.content)).to.deep.equal(['m2', 'm4', 'm6']);
  });
});
