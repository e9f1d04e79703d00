// What the inbound webhook endpoints check before they store anything, and how they store once: the channel (a
// malformed id, another type's channel, a disabled one: 404), the per-channel rate (429 with Retry-After), what each
// provider's body must hold (400), Meta's handshake, and one row per provider id (repeated ids, long ids).
import { createHmac, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { ok } from './helpers/tickets.js';
import { inboundEvents, mime, postSignedMail, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { fakeProvider } from './helpers/providers.js';
import { signInbound } from '../server/services/channels/index.js';

const RATE = 6;

describe('Channels: inbound checks and storing once', function () {
  this.timeout(120_000);
  let telegram: Awaited<ReturnType<typeof fakeProvider>>;
  let test: TestServer;
  let owner: SignedUp;

  before(async () => {
    telegram = await fakeProvider((path) => {
      if (path.endsWith('/getMe')) return { status: 200, body: { ok: true, result: { id: 777, is_bot: true, username: 'rules_bot' } } };
      return { status: 200, body: { ok: true, result: true } };
    });
    // Channel jobs stay queued: these tests look at what is stored, not at its processing.
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, TELEGRAM_API_URL: telegram.url, CHANNEL_INBOUND_RATE_LIMIT: String(RATE), JOB_QUEUES: '-channel-inbound,-channel-delivery,-webhook-delivery' });
    owner = await signUp(test.server, test.baseUrl);
  });
  after(async () => {
    await test?.stop();
    await telegram?.close();
  });

  const emailChannel = async () => {
    const data = ok(await owner.api.post('/channels/email', { name: 'Mail', address: `support-${randomUUID().slice(0, 8)}@rules.test` }, { token: owner.accessToken }), 201);
    return { id: data.channel.id as string, secret: data.inbound.secret as string };
  };
  const whatsappChannel = async () => {
    const appSecret = `app-secret-${randomUUID()}`;
    const data = ok(await owner.api.post('/channels/whatsapp', { name: 'WA', phoneNumberId: String(Date.now()), wabaId: '1', accessToken: 'wa-token', appSecret }, { token: owner.accessToken }), 201);
    return { id: data.channel.id as string, appSecret, verifyToken: data.webhook.verifyToken as string };
  };
  const telegramChannel = async () => {
    const data = ok(await owner.api.post('/channels/telegram', { name: 'Bot', botToken: `token-${randomUUID()}` }, { token: owner.accessToken }), 201);
    const set = telegram.calls.filter((c) => c.path.endsWith('/setWebhook')).at(-1)!;
    return { id: data.id as string, secret: set.body.secret_token as string };
  };
  const postWhatsApp = (channelId: string, appSecret: string, raw: string) =>
    owner.api.request('POST', `/channels/whatsapp/inbound/${channelId}`, { rawBody: raw, headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${createHmac('sha256', appSecret).update(raw).digest('hex')}` } });
  const postTelegram = (channelId: string, secret: string, body: unknown) =>
    owner.api.request('POST', `/channels/telegram/inbound/${channelId}`, { rawBody: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret } });
  const waText = (id: string, from = '4915100000009') => JSON.stringify({ entry: [{ changes: [{ value: { messages: [{ id, from, type: 'text', text: { body: `text of ${id}` } }] } }] }] });
  const mail = () => mime({ from: `someone-${randomUUID().slice(0, 6)}@customer.test`, subject: 'Hello', text: 'Hi', messageId: `<${randomUUID()}@customer.test>` });

  it('answers 404, not 500, for a malformed channel id, another type of channel, and a disabled channel, however well signed', async () => {
    const email = await emailChannel();
    const wa = await whatsappChannel();
    const tg = await telegramChannel();
    for (const path of ['email/inbound/not-a-uuid', 'telegram/inbound/not-a-uuid', 'whatsapp/inbound/not-a-uuid', 'whatsapp/inbound/12345']) {
      expectError(await owner.api.request('POST', `/channels/${path}`, { rawBody: '{}', headers: { 'content-type': 'application/json', 'x-inbound-signature': signInbound('x', '{}'), 'x-telegram-bot-api-secret-token': 'x', 'x-hub-signature-256': 'sha256=00' } }), 404, 'not_found');
    }
    // The service itself refuses a malformed id before any query (the routes' parameter check comes first over HTTP).
    const { inbound } = test.server.services.channels;
    for (const call of [inbound.whatsapp('not-a-uuid', 'sha256=00', Buffer.from('{}')), inbound.telegram('not-a-uuid', 'x', Buffer.from('{}')), inbound.email('not-a-uuid', signInbound('x', '{}'), Buffer.from('{}'), 'application/json')]) {
      const refused = await call.then(() => null, (err: unknown) => err as { status?: number });
      expect(refused?.status).to.equal(404);
    }
    // Each endpoint takes its own type only: another type's id with that channel's own secret is not found.
    expectError(await postSignedMail(owner.api, wa.id, email.secret, mail()), 404, 'not_found');
    expectError(await postTelegram(email.id, tg.secret, { update_id: 1, message: { message_id: 1, chat: { id: 1 }, text: 'x' } }), 404, 'not_found');
    expectError(await postWhatsApp(tg.id, wa.appSecret, waText('wamid.TYPE')), 404, 'not_found');
    expectError(await owner.api.request('GET', `/channels/whatsapp/inbound/${email.id}?hub.mode=subscribe&hub.verify_token=${wa.verifyToken}&hub.challenge=1`), 404, 'not_found');
    // Disabled: refused as unknown, and stored nothing.
    for (const id of [email.id, wa.id, tg.id]) ok(await owner.api.patch(`/channels/${id}`, { enabled: false }, { token: owner.accessToken }), 200);
    expectError(await postSignedMail(owner.api, email.id, email.secret, mail()), 404, 'not_found');
    expectError(await postTelegram(tg.id, tg.secret, { update_id: 2, message: { message_id: 2, chat: { id: 2 }, text: 'x' } }), 404, 'not_found');
    expectError(await postWhatsApp(wa.id, wa.appSecret, waText('wamid.DISABLED')), 404, 'not_found');
    expectError(await owner.api.request('GET', `/channels/whatsapp/inbound/${wa.id}?hub.mode=subscribe&hub.verify_token=${wa.verifyToken}&hub.challenge=1`), 404, 'not_found');
    for (const id of [email.id, wa.id, tg.id]) expect(await inboundEvents(test.server, id)).to.deep.equal([]);
  });

  it(`limits each channel to ${RATE} webhooks a minute on an instance (429 with Retry-After); other channels go on`, async () => {
    const busy = await whatsappChannel();
    const calm = await whatsappChannel();
    for (let i = 0; i < RATE; i++) expect(ok(await postWhatsApp(busy.id, busy.appSecret, waText(`wamid.RATE-${i}`)), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    const over = await postWhatsApp(busy.id, busy.appSecret, waText('wamid.RATE-over'));
    expectError(over, 429, 'rate_limited');
    const retryAfter = Number(over.headers.get('retry-after'));
    expect(retryAfter).to.be.within(1, 60);
    expect(ok(await postWhatsApp(calm.id, calm.appSecret, waText('wamid.RATE-calm')), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    // Mail and Telegram webhooks are limited the same way.
    const email = await emailChannel();
    for (let i = 0; i < RATE; i++) ok(await postSignedMail(owner.api, email.id, email.secret, mail()), 200);
    expectError(await postSignedMail(owner.api, email.id, email.secret, mail()), 429, 'rate_limited');
    const tg = await telegramChannel();
    for (let i = 0; i < RATE; i++) ok(await postTelegram(tg.id, tg.secret, { update_id: 100 + i, message: { message_id: i, chat: { id: 3 }, text: 'hi' } }), 200);
    expectError(await postTelegram(tg.id, tg.secret, { update_id: 200, message: { message_id: 200, chat: { id: 3 }, text: 'hi' } }), 429, 'rate_limited');
    // A refused signature spends nothing of the channel's rate: the check comes first.
    const fresh = await whatsappChannel();
    for (let i = 0; i < RATE + 2; i++) expectError(await owner.api.request('POST', `/channels/whatsapp/inbound/${fresh.id}`, { rawBody: waText('x'), headers: { 'content-type': 'application/json', 'x-hub-signature-256': 'sha256=00' } }), 401, 'unauthorized');
    expect(ok(await postWhatsApp(fresh.id, fresh.appSecret, waText('wamid.RATE-fresh')), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
  });

  it('reads mail as JSON when its type says JSON (in any case), else as MIME; a mail without a sender is 400', async () => {
    const email = await emailChannel();
    const json = JSON.stringify({ from: 'Jay Son <JAY@customer.test>', subject: 'As JSON', text: 'Posted by a mail provider', messageId: '<json-1@customer.test>' });
    expect(ok(await postSignedMail(owner.api, email.id, email.secret, json, { contentType: 'Application/JSON; charset=utf-8' }), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    const [event] = await test.server.db.knex('inbound_events').where({ channelId: email.id });
    expect(event.providerId).to.equal('<json-1@customer.test>');
    expect(event.payload).to.include({ kind: 'message', from: 'jay@customer.test', fromName: 'Jay Son', subject: 'As JSON', text: 'Posted by a mail provider' });
    // Each refusal names the field at fault in the error body's details.
    const nobody = await postSignedMail(owner.api, email.id, email.secret, JSON.stringify({ subject: 'nobody' }), { contentType: 'application/json' });
    expectError(nobody, 400, 'validation_failed');
    expect(nobody.body.error.details).to.deep.equal([{ field: 'from', message: 'is required' }]);
    const broken = await postSignedMail(owner.api, email.id, email.secret, '{"from": ', { contentType: 'application/json' });
    expectError(broken, 400, 'validation_failed');
    expect(broken.body.error.details).to.deep.equal([{ field: 'body', message: 'invalid JSON' }]);
    expectError(await postSignedMail(owner.api, email.id, email.secret, 'Subject: no sender\r\n\r\nbody'), 400, 'validation_failed');
    expect(await inboundEvents(test.server, email.id)).to.have.length(1);
  });

  it('takes a Telegram Update with its update_id only, and acknowledges the kinds it does not take without storing them', async () => {
    const tg = await telegramChannel();
    const noId = await postTelegram(tg.id, tg.secret, { message: { message_id: 1, chat: { id: 1 }, text: 'no update id' } });
    expectError(noId, 400, 'validation_failed');
    expect(noId.body.error.details).to.deep.equal([{ field: 'update_id', message: 'is required' }]);
    expectError(await postTelegram(tg.id, tg.secret, { update_id: '1', message: { message_id: 1, chat: { id: 1 }, text: 'a text id' } }), 400, 'validation_failed');
    expectError(await postTelegram(tg.id, tg.secret, 'not json'), 400, 'validation_failed');
    expect(ok(await postTelegram(tg.id, tg.secret, { update_id: 10, edited_message: { message_id: 1, chat: { id: 1 }, text: 'edited' } }), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
    expect(await inboundEvents(test.server, tg.id)).to.deep.equal([]);
    expect(ok(await postTelegram(tg.id, tg.secret, { update_id: 11, message: { message_id: 11, chat: { id: 5 }, text: 'taken' } }), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    expect((await inboundEvents(test.server, tg.id)).map((e) => e.providerId)).to.deep.equal(['11']);
  });

  it("answers Meta's handshake only for mode=subscribe with the channel's verify token, and keeps the first verification time", async () => {
    const wa = await whatsappChannel();
    const handshake = (query: string) => fetch(`${test.baseUrl}/api/v1/channels/whatsapp/inbound/${wa.id}?${query}`);
    expect((await handshake(`hub.mode=unsubscribe&hub.verify_token=${wa.verifyToken}&hub.challenge=1`)).status).to.equal(403);
    expect((await handshake('hub.mode=subscribe&hub.challenge=1')).status).to.equal(403);
    expect((await handshake('hub.mode=subscribe&hub.verify_token=&hub.challenge=1')).status).to.equal(403);
    expect(ok(await owner.api.get(`/channels/${wa.id}`, { token: owner.accessToken }), 200).status).to.equal('pending');
    const first = await handshake(`hub.mode=subscribe&hub.verify_token=${wa.verifyToken}&hub.challenge=4711`);
    expect([first.status, await first.text()]).to.deep.equal([200, '4711']);
    const verified = ok(await owner.api.get(`/channels/${wa.id}`, { token: owner.accessToken }), 200);
    expect(verified.status).to.equal('active');
    const at = verified.config.webhookVerifiedAt;
    expect(Date.parse(at)).to.be.a('number').and.not.NaN;
    // Meta repeats the handshake: the challenge is echoed again, the first time is kept.
    const again = await handshake(`hub.mode=subscribe&hub.verify_token=${wa.verifyToken}&hub.challenge=4712`);
    expect([again.status, await again.text()]).to.deep.equal([200, '4712']);
    expect(ok(await owner.api.get(`/channels/${wa.id}`, { token: owner.accessToken }), 200).config.webhookVerifiedAt).to.equal(at);
    // A channel that failed since is made active again by the handshake, with the same first time.
    const row = await test.server.services.channels.provisioning.byId(wa.id);
    await test.server.services.channels.provisioning.setStatus(row!, 'failed', 'deliveries failed', row!.config);
    expect((await handshake(`hub.mode=subscribe&hub.verify_token=${wa.verifyToken}`)).status).to.equal(200);
    const back = ok(await owner.api.get(`/channels/${wa.id}`, { token: owner.accessToken }), 200);
    expect([back.status, back.config.webhookVerifiedAt]).to.deep.equal(['active', at]);
  });

  it('stores one row per provider id: an id repeated within a webhook, and ids cut to 998 characters', async () => {
    const wa = await whatsappChannel();
    const { inbound, provisioning } = test.server.services.channels;
    const channel = (await provisioning.byId(wa.id))!;
    // WhatsApp lists a status twice in one webhook: one row, one duplicate.
    const statuses = JSON.stringify({ entry: [{ changes: [{ value: { statuses: [{ id: 'wamid.OUT-1', status: 'delivered' }, { id: 'wamid.OUT-1', status: 'delivered' }, { id: 'wamid.OUT-1', status: 'read' }] } }] }] });
    expect(ok(await postWhatsApp(wa.id, wa.appSecret, statuses), 200)).to.deep.equal({ stored: 2, duplicates: 1 });
    expect((await inboundEvents(test.server, wa.id)).map((e) => e.providerId).sort()).to.deep.equal(['wamid.OUT-1:delivered', 'wamid.OUT-1:read']);
    // An id past the column's width is cut; two ids that differ only after the cut are one event.
    const long = 'L'.repeat(998);
    const payload = { kind: 'message' as const, from: '1', fromName: null, subject: null, text: 'long', messageId: null, inReplyTo: null, references: [] };
    expect(await inbound.store(channel, [{ providerId: `${long}-a`, payload }, { providerId: `${long}-b`, payload }])).to.deep.equal({ stored: 1, duplicates: 1 });
    expect(await inbound.store(channel, [{ providerId: `${long}-c`, payload }])).to.deep.equal({ stored: 0, duplicates: 1 });
    const ids = (await inboundEvents(test.server, wa.id)).map((e) => e.providerId);
    expect(ids).to.include(long);
    expect(await inbound.store(channel, [])).to.deep.equal({ stored: 0, duplicates: 0 });
  });
});
