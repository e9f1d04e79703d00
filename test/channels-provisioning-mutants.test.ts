// Managing channels, beyond the main tests: the list (newest first, counted), the credentials a channel type takes
// (others 400, naming the field) and what changing them keeps, what enabling a disabled channel makes it, an email
// channel's addresses (lower-cased, once; other types 400), a removed channel gone at once, what a verification
// checks and says, and a Telegram bot refused while it is added (400 naming the step).
import { createHmac, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { ok } from './helpers/tickets.js';
import { inboundEvents, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { fakeProvider, type FakeProvider } from './helpers/providers.js';
import { connectOk, nextEvent } from './helpers/sockets.js';

describe('Channels: creating, changing, checking and removing', function () {
  this.timeout(120_000);
  let telegram: FakeProvider;
  let test: TestServer;
  let owner: SignedUp;

  before(async () => {
    telegram = await fakeProvider((path) => {
      if (path.endsWith('/getMe')) return { status: 200, body: { ok: true, result: { id: 4242, is_bot: true, username: 'provisioning_bot' } } };
      return { status: 200, body: { ok: true, result: true } };
    });
    // Channel jobs stay queued: these tests look at the channels, not at processing.
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, TELEGRAM_API_URL: telegram.url, JOB_QUEUES: '-channel-inbound,-channel-delivery,-webhook-delivery' });
    owner = await signUp(test.server, test.baseUrl);
  });
  after(async () => {
    await test?.stop();
    await telegram?.close();
  });

  const auth = () => ({ token: owner.accessToken });
  const email = async (address = `support-${randomUUID().slice(0, 8)}@provisioning.test`, extra: Record<string, unknown> = {}) =>
    ok(await owner.api.post('/channels/email', { name: 'Mail', address, ...extra }, auth()), 201);
  const whatsapp = async (appSecret = `app-${randomUUID()}`) => {
    const data = ok(await owner.api.post('/channels/whatsapp', { name: 'WA', phoneNumberId: String(Date.now()), wabaId: '1', accessToken: 'wa-token-1', appSecret }, auth()), 201);
    return { id: data.channel.id as string, appSecret, verifyToken: data.webhook.verifyToken as string };
  };
  const bot = async (botToken = `token-${randomUUID()}`) => {
    const data = ok(await owner.api.post('/channels/telegram', { name: 'Bot', botToken }, auth()), 201);
    const set = telegram.calls.filter((c) => c.path === `/bot${botToken}/setWebhook`).at(-1)!;
    return { id: data.id as string, botToken, secret: set.body.secret_token as string, data };
  };
  const get = async (id: string) => ok(await owner.api.get(`/channels/${id}`, auth()), 200);
  const patch = (id: string, body: Record<string, unknown>) => owner.api.patch(`/channels/${id}`, body, auth());
  const postWhatsApp = (channelId: string, appSecret: string, raw: string) =>
    owner.api.request('POST', `/channels/whatsapp/inbound/${channelId}`, { rawBody: raw, headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${createHmac('sha256', appSecret).update(raw).digest('hex')}` } });
  const postTelegram = (channelId: string, secret: string, body: unknown) =>
    owner.api.request('POST', `/channels/telegram/inbound/${channelId}`, { rawBody: JSON.stringify(body), headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret } });
  const waText = (id: string) => JSON.stringify({ entry: [{ changes: [{ value: { messages: [{ id, from: '4915100000042', type: 'text', text: { body: `text of ${id}` } }] } }] }] });

  it('lists the newest channel first, with the count of all of them', async () => {
    const other = await signUp(test.server, test.baseUrl);
    const first = ok(await other.api.post('/channels/email', { name: 'First', address: `first-${randomUUID().slice(0, 8)}@list.test` }, { token: other.accessToken }), 201);
    const second = ok(await other.api.post('/channels/email', { name: 'Second', address: `second-${randomUUID().slice(0, 8)}@list.test` }, { token: other.accessToken }), 201);
    const page = await other.api.get('/channels?limit=1', { token: other.accessToken });
    expect(page.status).to.equal(200);
    expect(page.body.data.map((c: { id: string }) => c.id)).to.deep.equal([second.channel.id]);
    expect(page.body.pagination).to.include({ limit: 1, offset: 0, total: 2 });
    const all = ok(await other.api.get('/channels', { token: other.accessToken }), 200);
    expect(all.map((c: { id: string }) => c.id)).to.deep.equal([second.channel.id, first.channel.id]);
  });

  it('keeps an email address in lower case, with the domain it was given or the address\'s own', async () => {
    const suffix = randomUUID().slice(0, 8);
    const plain = await email(`Help-${suffix}@Provisioning.TEST`);
    expect(plain.channel.config).to.include({ address: `help-${suffix}@provisioning.test`, domain: 'provisioning.test' });
    expect(plain.channel.config.emails).to.deep.equal([`help-${suffix}@provisioning.test`]);
    const named = await email(`desk-${suffix}@provisioning.test`, { domain: 'Mail.Provisioning.TEST' });
    expect(named.channel.config).to.include({ domain: 'mail.provisioning.test' });
  });

  it('takes only the credentials of the channel\'s type (others 400, naming the field), keeping the ones not given', async () => {
    const mail = await email();
    const refusedMail = await patch(mail.channel.id, { botToken: 'x' });
    expectError(refusedMail, 400, 'validation_failed');
    expect(refusedMail.body.message).to.equal('A email channel has no botToken');
    expect(refusedMail.body.error.details).to.deep.equal([{ field: 'botToken', message: 'not for this channel type' }]);
    expect((await patch(mail.channel.id, { accessToken: 'x' })).body.error.details).to.deep.equal([{ field: 'accessToken', message: 'not for this channel type' }]);
    const tg = await bot();
    const refusedBot = await patch(tg.id, { accessToken: 'x' });
    expectError(refusedBot, 400, 'validation_failed');
    expect(refusedBot.body.error.details).to.deep.equal([{ field: 'accessToken', message: 'not for this channel type' }]);
    const wa = await whatsapp();
    expectError(await patch(wa.id, { botToken: 'x' }), 400, 'validation_failed');
    // Nothing of a refused change is kept (the name given with it neither).
    expectError(await patch(wa.id, { name: 'Renamed', botToken: 'x' }), 400, 'validation_failed');
    expect((await get(wa.id)).name).to.equal('WA');

    // A new app secret signs the webhooks from now on; the verify token and access token stay.
    const newSecret = `app-${randomUUID()}`;
    const changed = ok(await patch(wa.id, { appSecret: newSecret }), 200);
    expect(Object.keys(changed.config.secrets).sort()).to.deep.equal(['accessToken', 'appSecret', 'verifyToken']);
    expect(changed.config.secrets.accessToken).to.equal((await get(wa.id)).config.secrets.accessToken);
    expect(changed.config).to.include({ wabaId: '1' }).and.to.have.property('phoneNumberId');
    // Its access token too, and the new one is what replies are sent with (masked here, its last four shown).
    const accessToken = `wa-token-${randomUUID()}`;
    expect(ok(await patch(wa.id, { accessToken }), 200).config.secrets.accessToken).to.equal(`••••${accessToken.slice(-4)}`);
    expectError(await postWhatsApp(wa.id, wa.appSecret, waText(`wamid.${randomUUID()}`)), 401, 'unauthorized');
    const wamid = `wamid.${randomUUID()}`;
    ok(await postWhatsApp(wa.id, newSecret, waText(wamid)), 200);
    expect((await inboundEvents(test.server, wa.id)).map((e) => e.providerId)).to.deep.equal([wamid]);
    const handshake = await fetch(`${test.baseUrl}/api/v1/channels/whatsapp/inbound/${wa.id}?hub.mode=subscribe&hub.verify_token=${encodeURIComponent(wa.verifyToken)}&hub.challenge=7`);
    expect(handshake.status).to.equal(200);

    // A new bot token keeps the webhook's secret: Telegram's updates still pass.
    ok(await patch(tg.id, { botToken: `token-${randomUUID()}` }), 200);
    ok(await postTelegram(tg.id, tg.secret, { update_id: 1, message: { message_id: 1, chat: { id: 9 }, from: { id: 9, first_name: 'Tom' }, text: 'Hi' } }), 200);
    expect(await inboundEvents(test.server, tg.id)).to.have.length(1);
  });

  it('makes an enabled channel active again, a WhatsApp channel pending (until Meta\'s handshake), and leaves other statuses alone', async () => {
    const mail = await email();
    expect(ok(await patch(mail.channel.id, { enabled: false }), 200)).to.include({ status: 'disabled', enabled: false });
    expect(ok(await patch(mail.channel.id, { enabled: true }), 200)).to.include({ status: 'active', enabled: true });
    // Renaming alone leaves the status, and marks the change.
    const before = await get(mail.channel.id);
    await new Promise((r) => setTimeout(r, 5));
    const renamed = ok(await patch(mail.channel.id, { name: 'Mail desk' }), 200);
    expect(renamed).to.include({ status: 'active', enabled: true, name: 'Mail desk' });
    expect(Date.parse(renamed.updatedAt)).to.be.above(Date.parse(before.updatedAt));
    // Enabling an enabled channel changes nothing; renaming neither.
    expect(ok(await patch(mail.channel.id, { enabled: true, name: 'Renamed' }), 200)).to.include({ status: 'active', name: 'Renamed' });
    const wa = await whatsapp();
    ok(await patch(wa.id, { enabled: false }), 200);
    expect(ok(await patch(wa.id, { enabled: true }), 200)).to.include({ status: 'pending', enabled: true });
    // A failed channel stays failed when it is "enabled" again: only a delivery or a verification clears it.
    const tg = await bot();
    await test.server.db.knex('channels').where({ id: tg.id }).update({ status: 'failed', lastError: 'HTTP 401: Unauthorized' });
    expect(ok(await patch(tg.id, { enabled: true }), 200)).to.include({ status: 'failed', lastError: 'HTTP 401: Unauthorized' });
  });

  it('keeps an email channel\'s addresses in lower case, each once; other channels have none (400)', async () => {
    const mail = await email();
    const suffix = randomUUID().slice(0, 8);
    const saved = ok(await owner.api.patch(`/channels/${mail.channel.id}/email/addresses`, { emails: [`Sales-${suffix}@Shop.test`, `sales-${suffix}@shop.test`, `help-${suffix}@shop.test`] }, auth()), 200);
    expect(saved.config.emails).to.deep.equal([`sales-${suffix}@shop.test`, `help-${suffix}@shop.test`]);
    expect(saved.config.address).to.equal(mail.channel.config.address);
    const tg = await bot();
    const refused = await owner.api.patch(`/channels/${tg.id}/email/addresses`, { emails: [`a-${suffix}@shop.test`] }, auth());
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.message).to.equal('Only an email channel has addresses');
    expect(refused.body.error.details).to.deep.equal([{ field: 'emails', message: 'not an email channel' }]);
  });

  it('forgets a removed channel at once: its webhooks are 404 even right after one was taken', async () => {
    const wa = await whatsapp();
    ok(await postWhatsApp(wa.id, wa.appSecret, waText(`wamid.${randomUUID()}`)), 200);
    const kept = await whatsapp();
    ok(await owner.api.delete(`/channels/${wa.id}`, auth()), 200);
    const gone = await owner.api.get(`/channels/${wa.id}`, auth());
    expectError(gone, 404, 'not_found');
    expect(gone.body.message).to.equal('Channel not found');
    // Only that one.
    expect((await get(kept.id)).id).to.equal(kept.id);
    expectError(await postWhatsApp(wa.id, wa.appSecret, waText(`wamid.${randomUUID()}`)), 404, 'not_found');
  });

  it('applies a change at once to the webhooks of a channel that was just used', async () => {
    const wa = await whatsapp();
    ok(await postWhatsApp(wa.id, wa.appSecret, waText(`wamid.${randomUUID()}`)), 200);
    ok(await patch(wa.id, { enabled: false }), 200);
    expectError(await postWhatsApp(wa.id, wa.appSecret, waText(`wamid.${randomUUID()}`)), 404, 'not_found');
  });

  it('checks a channel: what it looked at, the status it sets, and why it failed', async () => {
    const mail = await email();
    const good = ok(await owner.api.post(`/channels/${mail.channel.id}/verify`, {}, auth()), 200);
    expect(good.status).to.equal('active');
    expect(good.checks).to.deep.equal([{ name: 'enabled', ok: true }, { name: 'credentials_readable', ok: true }]);
    expect(good.channel).to.include({ status: 'active', lastError: null });

    ok(await patch(mail.channel.id, { enabled: false }), 200);
    const off = ok(await owner.api.post(`/channels/${mail.channel.id}/verify`, {}, auth()), 200);
    expect(off.status).to.equal('disabled');
    expect(off.checks).to.deep.equal([{ name: 'enabled', ok: false }, { name: 'credentials_readable', ok: true }]);
    expect(off.channel).to.include({ status: 'disabled', lastError: null });

    // WhatsApp before Meta's handshake: pending, with the reason, and no error recorded.
    const wa = await whatsapp();
    const waiting = ok(await owner.api.post(`/channels/${wa.id}/verify`, {}, auth()), 200);
    expect(waiting.status).to.equal('pending');
    expect(waiting.checks).to.deep.equal([
      { name: 'enabled', ok: true }, { name: 'credentials_readable', ok: true },
      { name: 'webhook_verified', ok: false, detail: 'Meta has not called the verification handshake yet' },
    ]);
    expect(waiting.channel.lastError).to.equal(null);
    // After the handshake it is active, and a failed delivery later does not undo that.
    expect((await fetch(`${test.baseUrl}/api/v1/channels/whatsapp/inbound/${wa.id}?hub.mode=subscribe&hub.verify_token=${encodeURIComponent(wa.verifyToken)}&hub.challenge=1`)).status).to.equal(200);
    await test.server.db.knex('channels').where({ id: wa.id }).update({ status: 'failed', consecutiveFailures: 3 });
    const shaken = ok(await owner.api.post(`/channels/${wa.id}/verify`, {}, auth()), 200);
    expect(shaken.status).to.equal('active');
    expect(shaken.checks.at(-1)).to.deep.equal({ name: 'webhook_verified', ok: true });

    // Telegram asks getMe with the channel's token; a refusal fails the channel and says which check.
    const tg = await bot();
    telegram.queue.set(`/bot${tg.botToken}/getMe`, [{ status: 401, body: { ok: false, error_code: 401, description: 'Unauthorized' } }]);
    const refused = ok(await owner.api.post(`/channels/${tg.id}/verify`, {}, auth()), 200);
    expect(refused.status).to.equal('failed');
    expect(refused.checks).to.deep.equal([{ name: 'enabled', ok: true }, { name: 'credentials_readable', ok: true }, { name: 'bot_token', ok: false }]);
    expect(refused.channel).to.include({ status: 'failed', lastError: 'check failed: bot_token' });
    const again = ok(await owner.api.post(`/channels/${tg.id}/verify`, {}, auth()), 200);
    expect(again.status).to.equal('active');
    expect(again.channel.lastError).to.equal(null);

    // Credentials sealed under another key cannot be read: failed, and said so.
    await test.server.db.knex('channels').where({ id: mail.channel.id }).update({ secrets: 'v1.AAAA.AAAA.AAAA' });
    ok(await patch(mail.channel.id, { enabled: true }), 200);
    const unreadable = ok(await owner.api.post(`/channels/${mail.channel.id}/verify`, {}, auth()), 200);
    expect(unreadable.status).to.equal('failed');
    expect(unreadable.checks).to.deep.equal([{ name: 'enabled', ok: true }, { name: 'credentials_readable', ok: false }]);
    expect(unreadable.channel.lastError).to.equal('check failed: credentials_readable');
  });

  it('starts the count of failed deliveries afresh only when a verification passes', async () => {
    const mail = await email();
    await test.server.db.knex('channels').where({ id: mail.channel.id }).update({ consecutiveFailures: 3 });
    ok(await patch(mail.channel.id, { enabled: false }), 200);
    ok(await owner.api.post(`/channels/${mail.channel.id}/verify`, {}, auth()), 200);
    expect((await test.server.db.knex('channels').where({ id: mail.channel.id }).first()).consecutiveFailures).to.equal(3);
    ok(await patch(mail.channel.id, { enabled: true }), 200);
    ok(await owner.api.post(`/channels/${mail.channel.id}/verify`, {}, auth()), 200);
    expect((await test.server.db.knex('channels').where({ id: mail.channel.id }).first()).consecutiveFailures).to.equal(0);
  });

  it('names the step Telegram refused while a bot is added, and creates nothing', async () => {
    const before = (ok(await owner.api.get('/channels', auth()), 200) as unknown[]).length;
    const refusedToken = `refused-${randomUUID()}`;
    telegram.queue.set(`/bot${refusedToken}/getMe`, [{ status: 401, body: { ok: false, error_code: 401, description: 'Unauthorized' } }]);
    const token = await owner.api.post('/channels/telegram', { name: 'Bot', botToken: refusedToken }, auth());
    expectError(token, 400, 'validation_failed');
    expect(token.body.error.details).to.deep.equal([{ field: 'botToken', message: 'refused by Telegram' }]);
    const hookToken = `hook-${randomUUID()}`;
    telegram.queue.set(`/bot${hookToken}/setWebhook`, [{ status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: bad webhook' } }]);
    const hook = await owner.api.post('/channels/telegram', { name: 'Bot', botToken: hookToken }, auth());
    expectError(hook, 400, 'validation_failed');
    expect(hook.body.message).to.match(/^Telegram refused the webhook: /);
    expect(hook.body.error.details).to.deep.equal([{ field: 'botToken', message: 'setWebhook failed' }]);
    const busyToken = `busy-${randomUUID()}`;
    telegram.queue.set(`/bot${busyToken}/getMe`, [{ status: 502, body: { ok: false, error_code: 502, description: 'Bad Gateway' } }]);
    const busy = await owner.api.post('/channels/telegram', { name: 'Bot', botToken: busyToken }, auth());
    expectError(busy, 503, 'service_unavailable');
    expect(busy.body.message).to.equal('Telegram could not be reached; try again in a moment');
    expect(ok(await owner.api.get('/channels', auth()), 200)).to.have.length(before);
    // A good one: its bot's id and name, and the webhook at this server's inbound URL for the new channel.
    const tg = await bot();
    expect(tg.data.config).to.include({ botId: 4242, botUsername: 'provisioning_bot' });
    const set = telegram.calls.filter((c) => c.path === `/bot${tg.botToken}/setWebhook`).at(-1)!;
    expect(set.body.url).to.equal(`${test.server.config.publicUrl}/api/v1/channels/telegram/inbound/${tg.id}`);
  });

  it('makes each secret 32 random bytes in base64url (what Telegram takes as a secret token)', async () => {
    const mail = await email();
    const wa = await whatsapp();
    const tg = await bot();
    for (const secret of [mail.inbound.secret, wa.verifyToken, tg.secret]) expect(secret).to.match(/^[A-Za-z0-9_-]{43}$/);
    expect(new Set([mail.inbound.secret, wa.verifyToken, tg.secret]).size).to.equal(3);
  });

  it('refuses a channel past the plan\'s limit in its words, before asking Telegram anything', async () => {
    const small = await signUp(test.server, test.baseUrl);
    await test.server.services.organizations.changePlan(small.orgId, 'free');
    ok(await small.api.post('/channels/email', { name: 'Only', address: `only-${randomUUID().slice(0, 8)}@plan.test` }, { token: small.accessToken }), 201);
    for (const [path, body] of [['/channels/email', { name: 'More', address: `more-${randomUUID().slice(0, 8)}@plan.test` }], ['/channels/whatsapp', { name: 'WA', phoneNumberId: '1', wabaId: '1', accessToken: 'a', appSecret: 's' }]] as const) {
      const refused = await small.api.post(path, body, { token: small.accessToken });
      expectError(refused, 403, 'plan_limit_reached');
      expect(refused.body.message).to.equal('The free plan allows 1 channels; upgrade to add more');
    }
    const botToken = `over-${randomUUID()}`;
    expectError(await small.api.post('/channels/telegram', { name: 'Bot', botToken }, { token: small.accessToken }), 403, 'plan_limit_reached');
    expect(telegram.calls.filter((c) => c.path.startsWith(`/bot${botToken}/`))).to.deep.equal([]);
    expect(ok(await small.api.get('/channels', { token: small.accessToken }), 200)).to.have.length(1);
  });

  it('shows a channel in channel_status_changed as GET shows it: its URLs, and its secrets masked', async () => {
    const socket = await connectOk(test.baseUrl, owner.orgId, owner.accessToken);
    try {
      const mail = await email();
      const tg = await bot();
      for (const id of [mail.channel.id, tg.id]) {
        const heard = nextEvent(socket, 'channel_status_changed', (p) => p.channel.id === id && p.channel.status === 'disabled');
        ok(await patch(id, { enabled: false }), 200);
        const event = await heard;
        const shown = await get(id);
        expect(event.channel.config).to.deep.equal(shown.config);
        expect(Object.keys(shown.config.secrets)).to.not.be.empty;
      }
    } finally {
      socket.disconnect();
    }
  });
});
