// What follows a send, on both write paths: conversation.created is published once per opened conversation (a
// widget start, a follow-up to a closed chat) and nothing for a retry, and routing and notifications react to that
// event alone; a visitor reopening a resolved conversation records the conversation.updated webhook whichever path
// stores the message.
import { expect } from 'chai';
import type { Conversation } from '../db/models/Conversation.js';
import type { DomainEvents } from '../server/events.js';
import { expectApiSuccess } from './helpers/auth.js';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { settle } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

/** Records the conversation.created events of one organization while `run` runs. */
async function createdDuring(orgId: string, run: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const off = sharedServer().server.events.on('conversation.created', ({ conversation }) => {
    if (conversation.organizationId === orgId) seen.push(conversation.id);
  });
  try {
    await run();
    await settle(100);
  } finally {
    off();
  }
  return seen;
}

const noticesFor = async (who: Pick<SignedUp, 'api' | 'accessToken'>, conversationId: string) =>
  expectApiSuccess(await who.api.get('/notifications?limit=200', { token: who.accessToken }), 200).filter((n: any) => n.type === 'new_conversation' && n.data.conversationId === conversationId);

describe('domain events of the message path', () => {
  it('a widget start publishes conversation.created once; its retry publishes nothing and notifies no one again', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const visitor = await newVisitor(owner, { name: 'Ida Event' });
    let first: any;
    const created = await createdDuring(owner.orgId, async () => {
      first = await visitor.api.post('/widget/conversations', { message: 'hello', clientMessageId: 'start-1' }, { token: visitor.token });
      expect(first.status).to.equal(201);
      const again = await visitor.api.post('/widget/conversations', { message: 'hello', clientMessageId: 'start-1' }, { token: visitor.token });
      expect(again.status).to.equal(200);
      expect(again.body.data.conversation.id).to.equal(first.body.data.conversation.id);
      expect(again.body.data.message.id).to.equal(first.body.data.message.id);
    });
    const conversationId = first.body.data.conversation.id;
    expect(created).to.deep.equal([conversationId]);
    await waitFor(async () => (await noticesFor(agent, conversationId)).length === 1, { what: "the agent's notification" });
    expect(await noticesFor(owner, conversationId)).to.have.length(1);
    expect((await noticesFor(agent, conversationId))[0].title).to.contain('Ida Event');
  });

  it('a visitor writing to a closed conversation opens a follow-up that is routed and notified like a new chat', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'first chat');
    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'closed' }, { token: owner.accessToken }), 200);
    let followUpId = '';
    const created = await createdDuring(owner.orgId, async () => {
      const sent = await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'me again', clientMessageId: 'f-1' }, { token: visitor.token });
      expect(sent.status, JSON.stringify(sent.body)).to.equal(201);
      followUpId = sent.body.data.conversationId;
      // The retry of that send answers the same message in the follow-up, and opens nothing more.
      const retry = await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'me again', clientMessageId: 'f-1' }, { token: visitor.token });
      expect(retry.status).to.equal(200);
      expect(retry.body.data.id).to.equal(sent.body.data.id);
    });
    expect(followUpId).to.be.a('string').and.not.equal(conversationId);
    expect(created).to.deep.equal([followUpId]);
    await waitFor(async () => (await noticesFor(agent, followUpId)).length === 1, { what: 'the follow-up notification' });
  });

  it('routing and notifications listen to conversation.created itself, whoever publishes it', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const visitor = await newVisitor(owner, { name: 'Otto Other' });
    const { conversationId } = await startConversation(visitor);
    await waitFor(async () => (await noticesFor(agent, conversationId)).length === 1, { what: 'the first notification' });
    // Published again (as another area opening a conversation would): the listeners run again, and only for it.
    const conversation = (await server.db.knex('conversations').where({ id: conversationId }).first()) as Conversation;
    const payload: DomainEvents['conversation.created'] = { conversation };
    server.events.publish('conversation.created', payload);
    await waitFor(async () => (await noticesFor(agent, conversationId)).length === 2, { what: 'the notification of the republished event' });
    expect(await noticesFor(owner, conversationId)).to.have.length(2);
  });
});

describe('a visitor reopening a resolved conversation', function () {
  this.timeout(60_000);
  let server: TestServer;
  before(async () => {
    server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: 'true' });
  });
  after(async () => {
    await server?.stop();
  });

  const statusUpdates = async (orgId: string) =>
    (await server.server.db.knex('webhook_deliveries').where({ organization_id: orgId, event_type: 'conversation.updated' }).orderBy('created_at').select('payload')).map(
      (d: { payload: any }) => ({ status: d.payload.conversation.status, changes: d.payload.changes }),
    );

  for (const subscribed of [['conversation.updated'], ['conversation.*', 'message.created']]) {
    it(`records conversation.updated for the reopening (webhook on ${subscribed.join(', ')}), as an explicit status change does`, async () => {
      const owner = await signUp(server.server, server.baseUrl);
      const hook = await owner.api.post('/webhooks', { url: 'http://127.0.0.1:9/hook', events: subscribed }, { token: owner.accessToken });
      expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
      const visitor = await newVisitor(owner);
      const { conversationId } = await startConversation(visitor, 'hello');
      expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'resolved' }, { token: owner.accessToken }), 200);
      expect(await statusUpdates(owner.orgId)).to.deep.equal([{ status: 'resolved', changes: ['status'] }]);

      // A plain visitor message: the batch would store it, but its reopening must be recorded with it.
      const sent = await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'it broke again' }, { token: visitor.token });
      expect(sent.status, JSON.stringify(sent.body)).to.equal(201);
      expect((await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken })).body.data.status).to.equal('open');
      expect(await statusUpdates(owner.orgId)).to.deep.equal([
        { status: 'resolved', changes: ['status'] },
        { status: 'open', changes: ['status'] },
      ]);
      // The message after it reopens nothing and records nothing more; the organization's other sends still batch.
      const before = { ...server.server.services.messages.batchStats };
      await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'hello?' }, { token: visitor.token });
      expect(server.server.services.messages.batchStats.appended - before.appended).to.equal(1);
      expect(await statusUpdates(owner.orgId)).to.have.length(2);
    });
  }
});
