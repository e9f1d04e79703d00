// Rules of the message service that the other message tests do not reach: a channel conversation opened by its
// contact (filed with its channel and address, the transactional path) and what of it leaves through the channel
// (agents' and the AI's public replies; never an internal note, never the customer's own words), a retried file
// message answered with its files, and the refusals a caller reads (missing conversation, closed chat).
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, TEST_AI_SECRET, type TestServer } from './helpers/server.js';
import { PDF, PNG, upload } from './helpers/storage.js';
import { waitFor } from './helpers/wait.js';
import { settle } from './helpers/sockets.js';
import { expectError } from './helpers/tenancy.js';
import { ok } from './helpers/tickets.js';
import { inboundEvents, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';

/** A Telegram Bot API on loopback: answers every call, records what was sent. */
async function fakeTelegram(): Promise<{ url: string; sent: { path: string; body: any }[]; close(): Promise<void> }> {
  const sent: { path: string; body: any }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const path = req.url ?? '';
      sent.push({ path, body: text ? JSON.parse(text) : {} });
      const result = path.endsWith('/getMe') ? { id: 777, is_bot: true, username: 'rules_bot' } : path.endsWith('/setWebhook') ? true : { message_id: 4242 };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, result }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, sent, close: () => new Promise((r) => server.close(() => r())) };
}

describe('message service: a channel conversation', function () {
  this.timeout(120_000);
  let test: TestServer;
  let telegram: Awaited<ReturnType<typeof fakeTelegram>>;

  before(async () => {
    telegram = await fakeTelegram();
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, TELEGRAM_API_URL: telegram.url });
  });
  after(async () => {
    await test?.stop();
    await telegram?.close();
  });

  it('is filed with its channel by the contact\'s first message; only agents\' and the AI\'s public replies leave through it', async () => {
    const owner = await signUp(test.server, test.baseUrl);
    const botToken = `rules-${randomUUID().slice(0, 8)}`;
    const channel = ok(await owner.api.post('/channels/telegram', { name: 'Rules bot', botToken }, { token: owner.accessToken }), 201);
    const secret = telegram.sent.filter((c) => c.path === `/bot${botToken}/setWebhook`).at(-1)!.body.secret_token;
    const inbound = (id: number, text: string) =>
      owner.api.post(`/channels/telegram/inbound/${channel.id}`, { update_id: id, message: { message_id: id, chat: { id: 321 }, from: { id: 321, first_name: 'Cara' }, text } }, { headers: { 'x-telegram-bot-api-secret-token': secret } });
    ok(await inbound(1, 'Hello, my order is late'), 200);
    await quiesce(test.server, owner.orgId);
    const [event] = await inboundEvents(test.server, channel.id);
    const conversationId = event!.conversationId!;
    const conversation = ok(await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken }), 200);
    expect(conversation).to.include({ status: 'open', priority: 'medium', channel: 'telegram' });
    expect(conversation.contactId).to.be.a('string');
    const row = await test.server.db.knex('conversations').where({ id: conversationId }).first();
    expect(row).to.include({ channelId: channel.id, channelAddress: '321', visitorSessionId: null });

    const t = { token: owner.accessToken };
    ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Looking into it now' }, t), 201);
    ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Internal: courier lost it', private: true }, t), 201);
    ok(await inbound(2, 'Any news?'), 200);
    const ai = { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } };
    ok(await owner.api.post(`/channels/${channel.id}/send`, { organizationId: owner.orgId, conversationId, content: 'The AI says: tomorrow', clientMessageId: 'ai-rules-1' }, ai), 201);
    await quiesce(test.server, owner.orgId);
    const texts = telegram.sent.filter((c) => c.path === `/bot${botToken}/sendMessage`).map((c) => c.body.text);
    expect(texts).to.deep.equal(['Looking into it now', 'The AI says: tomorrow']);
    // The customer's second message joined the same conversation.
    const messages = ok(await owner.api.get(`/conversations/${conversationId}/messages`, t), 200);
    expect(messages.map((m: any) => m.content)).to.include('Any news?');
  });
});

describe('message service: retries and refusals', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('answers a retried file message with the stored message and its files', async () => {
    const { baseUrl } = sharedServer();
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const up = await upload(owner.api, owner.accessToken, baseUrl, { name: 'label.pdf', type: 'application/pdf', bytes: PDF });
    const body = { content: 'Your return label', attachments: [up.objectId], clientMessageId: `file-${randomUUID()}` };
    const first = await owner.api.post(`/conversations/${conversationId}/messages`, body, { token: owner.accessToken });
    expect(first.status, JSON.stringify(first.body)).to.equal(201);
    const retry = await owner.api.post(`/conversations/${conversationId}/messages`, body, { token: owner.accessToken });
    expect(retry.status).to.equal(200);
    expect(retry.body.data.id).to.equal(first.body.data.id);
    expect(retry.body.data.type).to.equal('file');
    expect(retry.body.data.attachments.map((a: any) => a.objectId)).to.deep.equal([up.objectId]);
  });

  it('keeps a file sent as an image an image; text with files becomes a file message', async () => {
    const { baseUrl } = sharedServer();
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const png = await upload(owner.api, owner.accessToken, baseUrl, { name: 'shot.png', type: 'image/png', bytes: PNG });
    const image = ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Screenshot', type: 'image', attachments: [png.objectId] }, { token: owner.accessToken }), 201);
    expect(image.type).to.equal('image');
    const pdf = await upload(owner.api, owner.accessToken, baseUrl, { name: 'x.pdf', type: 'application/pdf', bytes: PDF });
    const file = ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Invoice', attachments: [pdf.objectId] }, { token: owner.accessToken }), 201);
    expect(file.type).to.equal('file');
  });

  it('announces a new conversation once: later messages of either side notify no one of a new chat', async () => {
    const { server } = sharedServer();
    const agent = await addMember(server, owner, 'agent');
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'first words');
    const notices = async () => ok(await agent.api.get('/notifications?limit=200', { token: agent.accessToken }), 200).filter((n: any) => n.type === 'new_conversation' && n.data.conversationId === conversationId);
    await waitFor(async () => (await notices()).length === 1, { what: 'the new-conversation notification' });
    ok(await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'second words' }, { token: visitor.token }), 201);
    ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'an answer' }, { token: owner.accessToken }), 201);
    await settle(300);
    expect(await notices()).to.have.length(1);
  });

  it('says which conversation is missing, and that a closed chat takes no more agent messages', async () => {
    const t = { token: owner.accessToken };
    const missing = await owner.api.post(`/conversations/${randomUUID()}/messages`, { content: 'anyone?' }, t);
    expectError(missing, 404, 'not_found');
    expect(missing.body.message).to.equal('Conversation not found');
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    ok(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'closed' }, t), 200);
    const closed = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'one more thing' }, t);
    expectError(closed, 400, 'invalid_transition');
    expect(closed.body.message).to.equal('This conversation is closed');
  });
});
