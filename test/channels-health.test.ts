// A channel whose deliveries keep failing is `failed`: at once when the provider refuses its credentials, after
// CHANNEL_FAILURE_THRESHOLD final failures in a row otherwise. Agents hear `channel_status_changed` each way; the
// next delivery that goes out, or a passing verification, makes it active again. Against a fake Telegram Bot API.
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { collect, connectOk, nextEvent, settle, type ClientSocket } from './helpers/sockets.js';
import { ok } from './helpers/tickets.js';
import { inboundEvents, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { fakeProvider, type FakeProvider } from './helpers/providers.js';
import { CHANNEL_FAILURE_THRESHOLD } from '../server/services/channels/provisioning.js';

describe('Channels: a channel whose deliveries keep failing', function () {
  this.timeout(120_000);
  let test: TestServer;
  let telegram: FakeProvider;
  let owner: SignedUp;
  let socket: ClientSocket;
  let channelId: string;
  let conversationId: string;

  before(async () => {
    telegram = await fakeProvider((path) => {
      if (path.endsWith('/getMe')) return { status: 200, body: { ok: true, result: { id: 1, is_bot: true, username: 'health_bot' } } };
      if (path.endsWith('/setWebhook')) return { status: 200, body: { ok: true, result: true } };
      return { status: 200, body: { ok: true, result: { message_id: 1 } } };
    });
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, TELEGRAM_API_URL: telegram.url });
    owner = await signUp(test.server, test.baseUrl);
    channelId = ok(await owner.api.post('/channels/telegram', { name: 'Bot', botToken: 'health-token' }, { token: owner.accessToken }), 201).id;
    const secret = telegram.calls.find((c) => c.path === '/bothealth-token/setWebhook')!.body.secret_token;
    const update = { update_id: 1, message: { message_id: 1, chat: { id: 7 }, from: { id: 7, first_name: 'Ute' }, text: 'Hello' } };
    ok(await owner.api.post(`/channels/telegram/inbound/${channelId}`, update, { headers: { 'x-telegram-bot-api-secret-token': secret } }), 200);
    await quiesce(test.server, owner.orgId);
    conversationId = (await inboundEvents(test.server, channelId))[0]!.conversationId!;
    socket = await connectOk(test.baseUrl, owner.orgId, owner.accessToken);
  });

  after(async () => {
    socket?.disconnect();
    await test?.stop();
    await telegram?.close();
  });

  const reply = async (content: string) => {
    ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
  };
  const channel = async () => ok(await owner.api.get(`/channels/${channelId}`, { token: owner.accessToken }), 200);
  const statusChange = (status: string) => nextEvent(socket, 'channel_status_changed', (p) => p.channel.id === channelId && p.channel.status === status, 30_000);

  it('fails at once when Telegram refuses the bot token, and a passing verification makes it active again', async () => {
    telegram.queue.set('/sendMessage', [{ status: 401, body: { ok: false, error_code: 401, description: 'Unauthorized' } }]);
    const failed = statusChange('failed');
    await reply('First answer');
    const heard = await failed;
    expect(heard.previousStatus).to.equal('active');
    expect(JSON.stringify(heard)).not.to.contain('health-token');
    expect(await channel()).to.include({ status: 'failed', lastError: 'HTTP 401: Unauthorized' });
    const [delivery] = ok(await owner.api.get(`/channels/${channelId}/deliveries`, { token: owner.accessToken }), 200);
    expect(delivery).to.include({ status: 'failed', attempts: 1 });

    const active = statusChange('active');
    const verified = ok(await owner.api.post(`/channels/${channelId}/verify`, {}, { token: owner.accessToken }), 200);
    expect(verified.status).to.equal('active');
    expect((await active).previousStatus).to.equal('failed');
    expect(await channel()).to.include({ status: 'active', lastError: null });
  });

  it(`fails after ${CHANNEL_FAILURE_THRESHOLD} final failures in a row, and the next delivery that goes out makes it active again`, async () => {
    const heard = collect(socket, 'channel_status_changed');
    const refused = { status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: chat not found' } };
    telegram.queue.set('/sendMessage', Array.from({ length: CHANNEL_FAILURE_THRESHOLD - 1 }, () => refused));
    for (let n = 1; n < CHANNEL_FAILURE_THRESHOLD; n++) await reply(`Answer ${n}`);
    await settle();
    expect(heard).to.deep.equal([]);
    expect((await channel()).status).to.equal('active');

    // A delivery that goes out in between starts the count again.
    await reply('This one goes out');
    telegram.queue.set('/sendMessage', Array.from({ length: CHANNEL_FAILURE_THRESHOLD }, () => refused));
    for (let n = 1; n < CHANNEL_FAILURE_THRESHOLD; n++) await reply(`Again ${n}`);
    await settle();
    expect(heard).to.deep.equal([]);
    const failed = statusChange('failed');
    await reply('The last straw');
    expect((await failed).previousStatus).to.equal('active');
    expect(await channel()).to.include({ status: 'failed', lastError: 'HTTP 400: Bad Request: chat not found' });

    const active = statusChange('active');
    await reply('Back again');
    expect((await active).previousStatus).to.equal('failed');
    expect(await channel()).to.include({ status: 'active', lastError: null });
    const statuses = ok(await owner.api.get(`/channels/${channelId}/deliveries`, { token: owner.accessToken }), 200).map((d: { status: string }) => d.status);
    expect(statuses.filter((s: string) => s === 'sent')).to.have.length(2);
    expect(statuses.filter((s: string) => s === 'failed')).to.have.length(1 + 2 * CHANNEL_FAILURE_THRESHOLD - 1);
  });

  it('answers 503 when Telegram cannot answer while a bot is added, 400 when it refuses the token; nothing is created', async () => {
    const before = ok(await owner.api.get('/channels', { token: owner.accessToken }), 200).length;
    telegram.queue.set('/getMe', [{ status: 502, body: { ok: false, error_code: 502, description: 'Bad Gateway' } }]);
    const busy = await owner.api.post('/channels/telegram', { name: 'Busy', botToken: '123:busy-token' }, { token: owner.accessToken });
    expect(busy.status, JSON.stringify(busy.body)).to.equal(503);
    expect(busy.body.error.code).to.equal('service_unavailable');
    telegram.queue.set('/getMe', [{ status: 401, body: { ok: false, error_code: 401, description: 'Unauthorized' } }]);
    const refused = await owner.api.post('/channels/telegram', { name: 'Refused', botToken: '123:bad-token' }, { token: owner.accessToken });
    expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
    expect(refused.body.error.code).to.equal('validation_failed');
    expect(ok(await owner.api.get('/channels', { token: owner.accessToken }), 200)).to.have.length(before);
  });

  it('leaves a healthy channel untouched by a delivery that goes out, and makes one failed by its verification active again', async () => {
    const { updatedAt } = await channel();
    await reply('All good');
    expect((await channel()).updatedAt, 'no write for a healthy channel').to.equal(updatedAt);

    // getMe refused: the verification fails the channel (no failed delivery counted).
    telegram.queue.set('/getMe', [{ status: 401, body: { ok: false, error_code: 401, description: 'Unauthorized' } }]);
    expect(ok(await owner.api.post(`/channels/${channelId}/verify`, {}, { token: owner.accessToken }), 200).status).to.equal('failed');
    const active = statusChange('active');
    await reply('Still reaching you');
    expect((await active).previousStatus).to.equal('failed');
    expect(await channel()).to.include({ status: 'active', lastError: null });
  });
});

