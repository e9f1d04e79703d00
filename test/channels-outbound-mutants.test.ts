// What leaves through a channel, beyond the provider tests: a delivery is retried only when it failed, a channel
// disabled while a reply waits for its retry fails that reply (admins told), a row naming an internal note never
// sends it (nobody told), WhatsApp statuses never step back, and a mailed reply carries the organization's
// signature, a subject when the conversation has none, and the whole thread in order.
import { createHmac, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startSmtpSink, type SmtpSink } from './helpers/smtp.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { ok } from './helpers/tickets.js';
import { inboundEvents, mime, postSignedMail, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { fakeProvider, type FakeProvider } from './helpers/providers.js';
import { DELIVERY_QUEUE } from '../server/services/channels/index.js';

describe('Channels: outbound deliveries', function () {
  this.timeout(120_000);
  let test: TestServer;
  let telegram: FakeProvider;
  let graph: FakeProvider;
  let smtp: SmtpSink;

  before(async () => {
    telegram = await fakeProvider((path) => {
      if (path.endsWith('/getMe')) return { status: 200, body: { ok: true, result: { id: 1, is_bot: true, username: 'out_bot' } } };
      if (path.endsWith('/setWebhook')) return { status: 200, body: { ok: true, result: true } };
      return { status: 200, body: { ok: true, result: { message_id: 1 } } };
    });
    graph = await fakeProvider(() => ({ status: 200, body: { messaging_product: 'whatsapp', messages: [{ id: `wamid.OUT-${randomUUID()}` }] } }));
    smtp = await startSmtpSink({ user: 'outbound', pass: 'outbound-secret' });
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, TELEGRAM_API_URL: telegram.url, WHATSAPP_GRAPH_URL: graph.url, SMTP_URL: smtp.url, MAIL_FROM: 'Desk <desk@platform.test>' });
  });

  after(async () => {
    await test?.stop();
    await telegram?.close();
    await graph?.close();
    await smtp?.close();
  });

  /** An organization with a Telegram channel and one customer's conversation on it. */
  const telegramConversation = async () => {
    const owner = await signUp(test.server, test.baseUrl);
    const token = `out-${randomUUID().slice(0, 8)}`;
    const channelId = ok(await owner.api.post('/channels/telegram', { name: 'Bot', botToken: token }, { token: owner.accessToken }), 201).id as string;
    const secret = telegram.calls.filter((c) => c.path === `/bot${token}/setWebhook`).at(-1)!.body.secret_token;
    const update = { update_id: 1, message: { message_id: 1, chat: { id: 7 }, from: { id: 7, first_name: 'Ute' }, text: 'Hello' } };
    ok(await owner.api.post(`/channels/telegram/inbound/${channelId}`, update, { headers: { 'x-telegram-bot-api-secret-token': secret } }), 200);
    await quiesce(test.server, owner.orgId);
    const conversationId = (await inboundEvents(test.server, channelId))[0]!.conversationId!;
    return { owner, token, channelId, conversationId };
  };
  const deliveries = async (owner: SignedUp, channelId: string) => ok(await owner.api.get(`/channels/${channelId}/deliveries`, { token: owner.accessToken }), 200);
  const channelFailedNotices = async (owner: SignedUp) =>
    (ok(await owner.api.get('/notifications', { token: owner.accessToken }), 200) as { type: string; body: string | null; data: Record<string, unknown> }[]).filter((n) => n.type === 'channel_failed');

  it('retries only a failed delivery: an unknown one is 404, a sent one 400 in its own words', async () => {
    const { owner, channelId, conversationId } = await telegramConversation();
    expectError(await owner.api.post(`/channels/deliveries/${randomUUID()}/retry`, {}, { token: owner.accessToken }), 404, 'not_found');
    const missing = await owner.api.post(`/channels/deliveries/${randomUUID()}/retry`, {}, { token: owner.accessToken });
    expect(missing.body.message).to.equal('Delivery not found');
    ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Sent at once' }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    const [sent] = await deliveries(owner, channelId);
    expect(sent.status).to.equal('sent');
    const refused = await owner.api.post(`/channels/deliveries/${sent.id}/retry`, {}, { token: owner.accessToken });
    expectError(refused, 400, 'invalid_transition');
    expect(refused.body.message).to.equal('A sent delivery cannot be retried');
  });

  it('fails a reply whose channel was disabled while it waited for its retry, and tells the admins', async () => {
    const { owner, token, channelId, conversationId } = await telegramConversation();
    telegram.queue.set(`/bot${token}/sendMessage`, [{ status: 500, body: { ok: false, description: 'Internal Server Error' } }]);
    ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Waiting for its retry' }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    let [delivery] = await deliveries(owner, channelId);
    expect(delivery).to.include({ status: 'queued', attempts: 1 });
    ok(await owner.api.patch(`/channels/${channelId}`, { enabled: false }, { token: owner.accessToken }), 200);
    await test.server.db.knex('jobs').where({ queue: DELIVERY_QUEUE, status: 'pending', organization_id: owner.orgId }).update({ run_at: test.server.db.knex.fn.now() });
    await quiesce(test.server, owner.orgId);
    [delivery] = await deliveries(owner, channelId);
    expect(delivery).to.include({ status: 'failed', attempts: 1, lastError: 'the channel is disabled or removed' });
    const notices = await channelFailedNotices(owner);
    expect(notices).to.have.length(1);
    expect(notices[0]).to.deep.include({ body: 'the channel is disabled or removed' });
    expect(notices[0]!.data).to.include({ deliveryId: delivery.id, status: 'failed' });
    expect(telegram.calls.filter((c) => c.path === `/bot${token}/sendMessage`)).to.have.length(1);
    // Enabled again, the failed reply may be sent again, from the start.
    ok(await owner.api.patch(`/channels/${channelId}`, { enabled: true }, { token: owner.accessToken }), 200);
    const again = await owner.api.post(`/channels/deliveries/${delivery.id}/retry`, {}, { token: owner.accessToken });
    expect(again.status, JSON.stringify(again.body)).to.equal(202);
    await quiesce(test.server, owner.orgId);
    [delivery] = await deliveries(owner, channelId);
    expect(delivery).to.include({ status: 'sent', lastError: null });
    expect(telegram.calls.filter((c) => c.path === `/bot${token}/sendMessage`)).to.have.length(2);
  });

  it('keeps a reply in a conversation whose channel was removed, with nothing to deliver', async () => {
    const { owner, channelId, conversationId } = await telegramConversation();
    expect(ok(await owner.api.delete(`/channels/${channelId}`, { token: owner.accessToken }), 200)).to.not.equal(undefined);
    const reply = ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Still answered here' }, { token: owner.accessToken }), 201);
    expect(reply.content).to.equal('Still answered here');
    expect(await test.server.db.knex('channel_deliveries').where({ conversationId })).to.deep.equal([]);
  });

  it("lists a channel's deliveries newest first with their total, and a delivery's job run again sends nothing again", async () => {
    const { owner, token, channelId, conversationId } = await telegramConversation();
    for (const content of ['First answer', 'Second answer']) {
      ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content }, { token: owner.accessToken }), 201);
      await quiesce(test.server, owner.orgId);
    }
    const page = await owner.api.get(`/channels/${channelId}/deliveries?limit=1`, { token: owner.accessToken });
    expect(page.status).to.equal(200);
    const messages = await test.server.db.knex('messages').where({ conversationId }).whereIn('content', ['First answer', 'Second answer']).orderBy('seq');
    expect(page.body.data.map((d: { messageId: string }) => d.messageId)).to.deep.equal([messages[1].id]);
    expect(page.body.pagination).to.include({ limit: 1, offset: 0, total: 2 });
    // A job that runs again (its lease ran out while it sent) finds its delivery sent and leaves it.
    const sent = page.body.data[0];
    await test.server.jobs.enqueue(DELIVERY_QUEUE, { deliveryId: sent.id }, { organizationId: owner.orgId });
    // And the job of a delivery that no longer exists ends quietly.
    await test.server.jobs.enqueue(DELIVERY_QUEUE, { deliveryId: randomUUID() }, { organizationId: owner.orgId });
    await quiesce(test.server, owner.orgId);
    expect(telegram.calls.filter((c) => c.path === `/bot${token}/sendMessage`)).to.have.length(2);
    expect((await deliveries(owner, channelId))[0]).to.include({ id: sent.id, status: 'sent', attempts: 1 });
    const goneJob = await test.server.db.knex('jobs').where({ queue: DELIVERY_QUEUE, organization_id: owner.orgId }).whereRaw(`payload->>'deliveryId' not in (select id::text from channel_deliveries)`).first();
    expect(goneJob).to.include({ status: 'done', attempts: 1 });
  });

  it('retries a failing reply until its sixth attempt, then fails it and tells the admins, the other deliveries untouched', async () => {
    const { owner, token, channelId, conversationId } = await telegramConversation();
    ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Sent at once' }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    const failure = { status: 500, body: { ok: false, description: `Internal Server Error ${'x'.repeat(600)}` } };
    telegram.queue.set(`/bot${token}/sendMessage`, Array.from({ length: 6 }, () => failure));
    ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Keeps failing' }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    let [failing, sent] = await deliveries(owner, channelId);
    expect(failing).to.include({ status: 'queued', attempts: 1 });
    expect(failing.lastError).to.match(/^HTTP 500: Internal Server Error x+$/);
    expect(sent).to.include({ status: 'sent', lastError: null });
    const job = () => test.server.db.knex('jobs').where({ queue: DELIVERY_QUEUE, organization_id: owner.orgId }).whereRaw(`payload->>'deliveryId' = ?`, [failing.id]).first();
    const runAttempt = async (attempts: number) => {
      await test.server.db.knex('jobs').where({ id: (await job()).id }).update({ attempts, run_at: test.server.db.knex.fn.now() });
      await quiesce(test.server, owner.orgId);
      return (await deliveries(owner, channelId))[0];
    };
    // The fifth attempt still has a retry after it.
    failing = await runAttempt(4);
    expect(failing.status).to.equal('queued');
    expect((await job()).status).to.equal('pending');
    expect(await channelFailedNotices(owner)).to.deep.equal([]);
    // The sixth is the last: the delivery fails, and the admins hear it.
    failing = await runAttempt(5);
    expect(failing.status).to.equal('failed');
    expect(failing.lastError).to.match(/^HTTP 500: Internal Server Error x+$/);
    const notices = (ok(await owner.api.get('/notifications', { token: owner.accessToken }), 200) as { type: string; title: string; data: Record<string, unknown> }[]).filter((n) => n.type === 'channel_failed');
    expect(notices).to.have.length(1);
    expect(notices[0]).to.include({ title: 'A channel message could not be delivered' });
    expect(notices[0]!.data).to.include({ deliveryId: failing.id, status: 'failed' });
    [, sent] = await deliveries(owner, channelId);
    expect(sent).to.include({ status: 'sent', lastError: null, attempts: 1 });
  });

  it('waits to retry a reply whose channel credentials cannot be read, saying so', async () => {
    const { owner, token, channelId, conversationId } = await telegramConversation();
    await test.server.db.knex('channels').where({ id: channelId }).update({ secrets: 'v1.unreadable' });
    ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Cannot be sent yet' }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    const [delivery] = await deliveries(owner, channelId);
    expect(delivery).to.include({ status: 'queued', attempts: 1, lastError: 'unreadable sealed secret' });
    expect(telegram.calls.filter((c) => c.path === `/bot${token}/sendMessage`)).to.have.length(0);
    expect(await channelFailedNotices(owner)).to.deep.equal([]);
  });

  it('never sends an internal note, whatever wrote its delivery row, and tells nobody', async () => {
    const { owner, token, channelId, conversationId } = await telegramConversation();
    ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Internal only', private: true }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    expect(await deliveries(owner, channelId)).to.deep.equal([]);
    const note = await test.server.db.knex('messages').where({ conversationId, content: 'Internal only' }).first();
    const [row] = await test.server.db.knex('channel_deliveries').insert({ organizationId: owner.orgId, channelId, conversationId, messageId: note.id, recipient: '7' }).returning('id');
    await test.server.jobs.enqueue(DELIVERY_QUEUE, { deliveryId: row.id }, { organizationId: owner.orgId });
    await quiesce(test.server, owner.orgId);
    const [delivery] = await deliveries(owner, channelId);
    expect(delivery).to.include({ id: row.id, status: 'failed', lastError: 'not a public message', attempts: 0 });
    expect(telegram.calls.filter((c) => c.path === `/bot${token}/sendMessage`)).to.deep.equal([]);
    expect(await channelFailedNotices(owner)).to.deep.equal([]);
  });

  it('follows WhatsApp statuses forward only: a late "delivered" after "read", or the same status again, changes nothing', async () => {
    const owner = await signUp(test.server, test.baseUrl);
    const appSecret = 'outbound-app-secret';
    const data = ok(await owner.api.post('/channels/whatsapp', { name: 'WA', phoneNumberId: '5550001', wabaId: '1', accessToken: 'wa-out-token', appSecret }, { token: owner.accessToken }), 201);
    const channelId = data.channel.id as string;
    const post = (value: unknown) => {
      const raw = JSON.stringify({ object: 'whatsapp_business_account', entry: [{ id: 'W', changes: [{ field: 'messages', value }] }] });
      return owner.api.request('POST', `/channels/whatsapp/inbound/${channelId}`, { rawBody: raw, headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${createHmac('sha256', appSecret).update(raw).digest('hex')}` } });
    };
    ok(await post({ messaging_product: 'whatsapp', contacts: [{ wa_id: '4915100000077', profile: { name: 'Olga' } }], messages: [{ id: 'wamid.OUT-IN', from: '4915100000077', type: 'text', text: { body: 'Hallo' } }] }), 200);
    await quiesce(test.server, owner.orgId);
    const [event] = await inboundEvents(test.server, channelId);
    ok(await owner.api.post(`/conversations/${event!.conversationId}/messages`, { content: 'Guten Tag' }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    const [sent] = await deliveries(owner, channelId);
    expect(sent.status).to.equal('sent');
    const wamid = (await test.server.db.knex('channel_deliveries').where({ id: sent.id }).first()).providerMessageId;
    const status = async (s: string, id: string) => {
      ok(await post({ messaging_product: 'whatsapp', statuses: [{ id: `${wamid}`, status: s, recipient_id: '4915100000077', timestamp: id }] }), 200);
      await quiesce(test.server, owner.orgId);
      return (await test.server.db.knex('channel_deliveries').where({ id: sent.id }).first()) as { status: string; updatedAt: Date };
    };
    expect((await status('read', '1')).status).to.equal('read');
    const read = await test.server.db.knex('channel_deliveries').where({ id: sent.id }).first();
    const late = await status('delivered', '2');
    expect(late.status).to.equal('read');
    const again = await status('read', '3');
    expect(again.updatedAt.getTime()).to.equal(new Date(read.updatedAt).getTime());
    expect(await channelFailedNotices(owner)).to.deep.equal([]);
    // Meta reporting a sent message failed: the delivery fails and the admins hear why.
    ok(await post({ messaging_product: 'whatsapp', statuses: [{ id: `${wamid}`, status: 'failed', recipient_id: '4915100000077', errors: [{ code: 131051, title: 'Unsupported message type' }] }] }), 200);
    await quiesce(test.server, owner.orgId);
    expect(await test.server.db.knex('channel_deliveries').where({ id: sent.id }).first()).to.include({ status: 'failed', lastError: '131051 Unsupported message type' });
    const notices = await channelFailedNotices(owner);
    expect(notices).to.have.length(1);
    expect(notices[0]!.body).to.equal('131051 Unsupported message type');
  });

  describe('mail', () => {
    let owner: SignedUp;
    let channelId: string;
    let secret: string;

    before(async () => {
      owner = await signUp(test.server, test.baseUrl, { organizationName: `Outbound ${randomUUID().slice(0, 6)}` });
      const created = ok(await owner.api.post('/channels/email', { name: 'Support', address: 'support@outbound.test' }, { token: owner.accessToken }), 201);
      channelId = created.channel.id;
      secret = created.inbound.secret;
    });

    const receive = async (m: { from: string; subject?: string; text: string; inReplyTo?: string }) => {
      const messageId = `<${randomUUID()}@customer.test>`;
      const raw = m.subject === undefined
        ? mime({ from: m.from, subject: 'x', text: m.text, messageId, inReplyTo: m.inReplyTo }).replace(/^Subject: x\r\n/m, '')
        : mime({ from: m.from, subject: m.subject, text: m.text, messageId, inReplyTo: m.inReplyTo });
      ok(await postSignedMail(owner.api, channelId, secret, raw), 200);
      await quiesce(test.server, owner.orgId);
      const event = (await inboundEvents(test.server, channelId)).find((e) => e.providerId === messageId)!;
      return { messageId, conversationId: event.conversationId! };
    };
    const answer = async (conversationId: string, content: string, to: string) => {
      ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content }, { token: owner.accessToken }), 201);
      await quiesce(test.server, owner.orgId);
      return smtp.waitForMail(to, (m) => m.text.includes(content));
    };

    it('threads each reply after every earlier mail of the conversation, in the order they were written', async () => {
      const customer = uniqueEmail('thread');
      const first = await receive({ from: customer, subject: 'Printer', text: 'It jams' });
      const ours = await answer(first.conversationId, 'Which model?', customer);
      expect(ours.parsed.inReplyTo).to.equal(first.messageId);
      // Our Message-ID names the conversation, under MAIL_FROM's domain.
      expect(ours.parsed.messageId).to.match(new RegExp(`^<conversation-${first.conversationId}\\.[0-9a-f]{16}@platform\\.test>$`));
      const second = await receive({ from: customer, subject: 'Re: Printer', text: 'Model 7', inReplyTo: ours.parsed.messageId! });
      expect(second.conversationId).to.equal(first.conversationId);
      const next = await answer(first.conversationId, 'Try this', customer);
      expect(next.parsed.inReplyTo).to.equal(second.messageId);
      expect(next.parsed.references).to.deep.equal([first.messageId, ours.parsed.messageId, second.messageId]);
      expect(next.subject).to.equal('Re: Printer');
      // Each of our mails keeps its own Message-ID: the third reply names both earlier ones.
      const third = await answer(first.conversationId, 'Did it work?', customer);
      expect(third.parsed.references).to.deep.equal([first.messageId, ours.parsed.messageId, second.messageId, next.parsed.messageId]);
    });

    it("names the organization in the subject of a reply to a mail without one, and signs replies with the organization's signature", async () => {
      const customer = uniqueEmail('nosubject');
      const first = await receive({ from: customer, text: 'No subject here' });
      const org = ok(await owner.api.get(`/organizations/${owner.orgId}`, { token: owner.accessToken }), 200);
      const plain = await answer(first.conversationId, 'An answer without signature', customer);
      expect(plain.subject).to.equal(`Your conversation with ${org.name}`);
      expect(plain.text.trim()).to.equal('An answer without signature');
      ok(await owner.api.put('/email/identity', { signature: 'Acme Support Team' }, { token: owner.accessToken }), 200);
      const signed = await answer(first.conversationId, 'A signed answer', customer);
      expect(signed.text).to.equal('A signed answer\n\n-- \nAcme Support Team\n');
    });
  });
});
