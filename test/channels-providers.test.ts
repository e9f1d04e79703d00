// Telegram and WhatsApp channels against fake provider APIs on loopback: provisioning (getMe + setWebhook, the
// WhatsApp handshake), authenticated inbound (wrong secrets 401, redeliveries stored once), and outbound replies
// retried after 500 and after 429 with Retry-After (driven by jobs.drain and run_at), statuses and the 24-hour rule.
import { createHmac, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { startTestServer, TEST_AI_SECRET, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { connectOk, nextEvent, type ClientSocket } from './helpers/sockets.js';
import { ok } from './helpers/tickets.js';
import { inboundEvents, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { fakeProvider } from './helpers/providers.js';
import { DELIVERY_QUEUE, INBOUND_QUEUE } from '../server/services/channels/index.js';
import { whatsappEvents } from '../server/services/channels/providers/whatsapp.js';
import { refuseWrites } from './helpers/refusals.js';

describe('Channels: Telegram and WhatsApp', function () {
  this.timeout(120_000);
  let test: TestServer;
  let telegram: Awaited<ReturnType<typeof fakeProvider>>;
  let graph: Awaited<ReturnType<typeof fakeProvider>>;
  let socket: ClientSocket | null = null;

  before(async () => {
    telegram = await fakeProvider((path) => {
      if (path.startsWith('/botbad-token/')) return { status: 401, body: { ok: false, error_code: 401, description: 'Unauthorized' } };
      if (path.endsWith('/getMe')) return { status: 200, body: { ok: true, result: { id: 777, is_bot: true, username: 'acme_bot' } } };
      if (path.endsWith('/setWebhook')) return { status: 200, body: { ok: true, result: true } };
      return { status: 200, body: { ok: true, result: { message_id: 4242 } } };
    });
    graph = await fakeProvider(() => ({ status: 200, body: { messaging_product: 'whatsapp', messages: [{ id: `wamid.OUT-${randomUUID()}` }] } }));
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, TELEGRAM_API_URL: telegram.url, WHATSAPP_GRAPH_URL: graph.url });
  });

  after(async () => {
    socket?.disconnect();
    await test?.stop();
    await telegram?.close();
    await graph?.close();
  });

  const deliveryJob = (orgId: string) => test.server.db.knex('jobs').where({ queue: DELIVERY_QUEUE, organization_id: orgId }).orderBy('createdAt', 'desc').first();
  /** Makes the waiting retry due now (instead of sleeping through its delay) and runs it. */
  const runRetryNow = async (orgId: string) => {
    // Settle first: a retry the poller is still running would miss the update below and wait out its delay.
    await quiesce(test.server, orgId);
    await test.server.db.knex('jobs').where({ queue: DELIVERY_QUEUE, status: 'pending', organization_id: orgId }).update({ run_at: test.server.db.knex.fn.now() });
    await quiesce(test.server, orgId);
  };

  describe('Telegram', () => {
    let owner: SignedUp;
    let channelId: string;
    let webhookSecret: string;
    const update = (id: number, text: string) => ({ update_id: id, message: { message_id: id, from: { id: 99, first_name: 'Tom', last_name: 'Tester' }, chat: { id: 99, type: 'private' }, date: 1, text } });

    let data: any;

    // The channel is made here, not by the first test: every test of this file must be able to run on its own.
    before(async () => {
      owner = await signUp(test.server, test.baseUrl);
      data = ok(await owner.api.post('/channels/telegram', { name: 'Bot', botToken: 'good-token' }, { token: owner.accessToken }), 201);
      channelId = data.id;
      webhookSecret = telegram.calls.filter((c) => c.path === '/botgood-token/setWebhook').at(-1)!.body.secret_token;
    });

    it('refuses a bot token Telegram refuses (400), and sets the webhook with a secret token for a good one', async () => {
      expectError(await owner.api.post('/channels/telegram', { name: 'Bot', botToken: 'bad-token' }, { token: owner.accessToken }), 400, 'validation_failed');
      expect(data).to.include({ type: 'telegram', status: 'active' });
      expect(data.config.botUsername).to.equal('acme_bot');
      expect(JSON.stringify(data)).not.to.contain('good-token');
      const set = telegram.calls.filter((c) => c.path === '/botgood-token/setWebhook').at(-1)!;
      expect(set.body.url).to.match(new RegExp(`/api/v1/channels/telegram/inbound/${channelId}$`));
      expect(set.body.secret_token).to.equal(webhookSecret);
      expect(webhookSecret).to.have.length.greaterThan(20);
    });

    it('takes updates with the secret token only, once per update_id, as a live conversation', async () => {
      const path = `/channels/telegram/inbound/${channelId}`;
      expectError(await owner.api.post(path, update(1, 'Hi'), { headers: { 'x-telegram-bot-api-secret-token': 'wrong' } }), 401, 'unauthorized');
      expectError(await owner.api.post(path, update(1, 'Hi')), 401, 'unauthorized');
      expect(await inboundEvents(test.server, channelId)).to.deep.equal([]);
      socket = await connectOk(test.baseUrl, owner.orgId, owner.accessToken);
      const live = nextEvent(socket, 'new_message', (p) => p.message.content === 'Hello from Telegram', 15_000);
      const headers = { 'x-telegram-bot-api-secret-token': webhookSecret };
      expect(ok(await owner.api.post(path, update(1001, 'Hello from Telegram'), { headers }), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
      expect(ok(await owner.api.post(path, update(1001, 'Hello from Telegram'), { headers }), 200)).to.deep.equal({ stored: 0, duplicates: 1 });
      const event = (await live) as any;
      const conversation = await test.server.db.knex('conversations').where({ id: event.message.conversationId }).first();
      expect(conversation).to.include({ channel: 'telegram', channelId, channelAddress: '99' });
      socket.disconnect();
      socket = null;
    });

    it('retries a reply after 500 and after 429 with Retry-After, then sends it', async () => {
      ok(await owner.api.post(`/channels/telegram/inbound/${channelId}`, update(2001, 'Any news?'), { headers: { 'x-telegram-bot-api-secret-token': webhookSecret } }), 200);
      await quiesce(test.server, owner.orgId);
      const event = (await inboundEvents(test.server, channelId)).find((e) => e.providerId === '2001');
      const conversationId = event!.conversationId!;
      telegram.queue.set('/sendMessage', [
        { status: 500, body: { ok: false, description: 'Internal Server Error' } },
        { status: 429, body: { ok: false, error_code: 429, description: 'Too Many Requests', parameters: { retry_after: 7 } }, headers: { 'retry-after': '7' } },
      ]);
      ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'We are on it' }, { token: owner.accessToken }), 201);
      await quiesce(test.server, owner.orgId);
      let [delivery] = ok(await owner.api.get(`/channels/${channelId}/deliveries`, { token: owner.accessToken }), 200);
      expect(delivery).to.include({ status: 'queued', attempts: 1 });
      let job = await deliveryJob(owner.orgId);
      expect(job.status).to.equal('pending');
      const wait1 = (new Date(job.runAt).getTime() - Date.now()) / 1000;
      expect(wait1).to.be.within(20, 31);
      await runRetryNow(owner.orgId);
      job = await deliveryJob(owner.orgId);
      const wait2 = (new Date(job.runAt).getTime() - Date.now()) / 1000;
      expect(wait2, 'Retry-After honoured').to.be.within(3, 8);
      await runRetryNow(owner.orgId);
      [delivery] = ok(await owner.api.get(`/channels/${channelId}/deliveries`, { token: owner.accessToken }), 200);
      expect(delivery).to.include({ status: 'sent', attempts: 3 });
      const sends = telegram.calls.filter((c) => c.path === '/botgood-token/sendMessage');
      expect(sends).to.have.length(3);
      expect(sends[2]!.body).to.deep.equal({ chat_id: '99', text: 'We are on it' });
    });
  });

  it('lets the AI service reply in a channel conversation of its organization only (no free recipient)', async () => {
    const owner = await signUp(test.server, test.baseUrl);
    const channel = ok(await owner.api.post('/channels/telegram', { name: 'AI bot', botToken: 'ai-token' }, { token: owner.accessToken }), 201);
    const secretToken = telegram.calls.filter((c) => c.path === '/botai-token/setWebhook').at(-1)!.body.secret_token;
    ok(await owner.api.post(`/channels/telegram/inbound/${channel.id}`, { update_id: 5, message: { message_id: 5, chat: { id: 555 }, from: { id: 555, first_name: 'Ada' }, text: 'Hi bot' } }, { headers: { 'x-telegram-bot-api-secret-token': secretToken } }), 200);
    await quiesce(test.server, owner.orgId);
    const [event] = await inboundEvents(test.server, channel.id);
    const ai = { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } };
    const body = { organizationId: owner.orgId, conversationId: event!.conversationId, content: 'Hello from the AI', clientMessageId: 'ai-1' };
    const other = await signUp(test.server, test.baseUrl);
    expectError(await owner.api.post(`/channels/${channel.id}/send`, { ...body, organizationId: other.orgId }, ai), 404, 'not_found');
    expectError(await owner.api.post(`/channels/${channel.id}/send`, { ...body, to: '123' }, ai), 400, 'validation_failed');
    expect(ok(await owner.api.post(`/channels/${channel.id}/send`, body, ai), 201).status).to.equal('queued');
    expect((await owner.api.post(`/channels/${channel.id}/send`, body, ai)).status).to.equal(200);
    await quiesce(test.server, owner.orgId);
    const sends = telegram.calls.filter((c) => c.path === '/botai-token/sendMessage');
    expect(sends.map((c) => c.body)).to.deep.equal([{ chat_id: '555', text: 'Hello from the AI' }]);
  });

  describe('WhatsApp', () => {
    let owner: SignedUp;
    let channelId: string;
    let verifyToken: string;
    const appSecret = 'whatsapp-app-secret-for-tests';
    const sign = (raw: string) => `sha256=${createHmac('sha256', appSecret).update(raw).digest('hex')}`;
    const webhook = (value: unknown) => JSON.stringify({ object: 'whatsapp_business_account', entry: [{ id: 'WABA', changes: [{ field: 'messages', value }] }] });
    const post = (raw: string, signature = sign(raw)) => owner.api.request('POST', `/channels/whatsapp/inbound/${channelId}`, { rawBody: raw, headers: { 'content-type': 'application/json', 'x-hub-signature-256': signature } });

    let data: any;

    // The channel is made here, not by the first test: every test of this file must be able to run on its own.
    before(async () => {
      owner = await signUp(test.server, test.baseUrl);
      data = ok(await owner.api.post('/channels/whatsapp', { name: 'WA', phoneNumberId: '1234567890', wabaId: '555', accessToken: 'wa-access-token', appSecret }, { token: owner.accessToken }), 201);
      channelId = data.channel.id;
      verifyToken = data.webhook.verifyToken;
    });

    it('starts pending and becomes active with Meta\'s handshake (a wrong verify token is 403)', async () => {
      expect(data.channel.status).to.equal('pending');
      expect(JSON.stringify(data.channel)).not.to.contain('wa-access-token');
      const base = `${test.baseUrl}/api/v1/channels/whatsapp/inbound/${channelId}`;
      expect((await fetch(`${base}?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=123`)).status).to.equal(403);
      const res = await fetch(`${base}?hub.mode=subscribe&hub.verify_token=${encodeURIComponent(verifyToken)}&hub.challenge=8675309`);
      expect(res.status).to.equal(200);
      expect(await res.text()).to.equal('8675309');
      expect(ok(await owner.api.get(`/channels/${channelId}`, { token: owner.accessToken }), 200).status).to.equal('active');
    });

    it('takes signed messages once per wamid; a wrong signature is 401 and stores nothing', async () => {
      const raw = webhook({ messaging_product: 'whatsapp', contacts: [{ wa_id: '4915112345678', profile: { name: 'Wanda' } }], messages: [{ id: 'wamid.IN1', from: '4915112345678', type: 'text', text: { body: 'Hallo' } }] });
      expectError(await post(raw, sign(raw + ' ')), 401, 'unauthorized');
      expectError(await post(raw, ''), 401, 'unauthorized');
      expect(await inboundEvents(test.server, channelId)).to.deep.equal([]);
      expect(ok(await post(raw), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
      expect(ok(await post(raw), 200)).to.deep.equal({ stored: 0, duplicates: 1 });
      await quiesce(test.server, owner.orgId);
      const [event] = await inboundEvents(test.server, channelId);
      expect(event!.status).to.equal('processed');
      const conversation = await test.server.db.knex('conversations').where({ id: event!.conversationId }).first();
      expect(conversation).to.include({ channel: 'whatsapp', channelAddress: '4915112345678' });
    });

    it('keeps the message of a customer whose profile name is longer than a contact\'s name holds (cut to 200)', async () => {
      const name = 'N'.repeat(300);
      const raw = webhook({ messaging_product: 'whatsapp', contacts: [{ wa_id: '4915187654321', profile: { name } }], messages: [{ id: 'wamid.LONGNAME', from: '4915187654321', type: 'text', text: { body: 'Hello with a long name' } }] });
      expect(ok(await post(raw), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
      await quiesce(test.server, owner.orgId);
      const event = (await inboundEvents(test.server, channelId)).find((e) => e.conversationId && e.status === 'processed' && e.providerId === 'wamid.LONGNAME');
      expect(event, JSON.stringify(await inboundEvents(test.server, channelId))).to.not.equal(undefined);
      const conversation = await test.server.db.knex('conversations').where({ id: event!.conversationId }).first();
      expect(conversation.visitorName).to.equal(name.slice(0, 200));
      const contact = await test.server.db.knex('contacts').where({ id: conversation.contactId }).first();
      expect(contact.name).to.equal(name.slice(0, 200));
    });

    it('stores webhooks arriving together in one statement, each answered for its own events; a bad one fails alone', async () => {
      const { inbound, provisioning } = test.server.services.channels;
      const channel = (await provisioning.byId(channelId))!;
      const events = (n: number) => whatsappEvents(JSON.parse(webhook({ messaging_product: 'whatsapp', messages: [{ id: `wamid.TOGETHER-${n}`, from: '4915122222222', type: 'text', text: { body: `t${n}` } }] })));
      const inserts: string[] = [];
      const count = (q: { sql: string }) => void (/insert into "inbound_events"/.test(q.sql) && inserts.push(q.sql));
      test.server.db.knex.on('query', count);
      try {
        // Webhooks of one turn, two of them the same event (a redelivery racing the first delivery).
        const answers = await Promise.all([0, 1, 2, 3, 4, 2].map((n) => inbound.store(channel, events(n))));
        expect(answers).to.deep.equal([...Array(5).fill({ stored: 1, duplicates: 0 }), { stored: 0, duplicates: 1 }]);
        expect(inserts).to.have.length(1);
        // A webhook whose rows cannot be stored (its channel is gone) fails on its own; the others of its batch are stored.
        inserts.length = 0;
        const settled = await Promise.allSettled([5, 6, 7].map((n) => inbound.store(n === 6 ? { ...channel, id: randomUUID() } : channel, events(n))));
        expect(settled.map((r) => r.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
        expect(inserts.length).to.be.above(1);
      } finally {
        test.server.db.knex.off('query', count);
      }
      await quiesce(test.server, owner.orgId);
      const stored = (await inboundEvents(test.server, channelId)).filter((e) => e.providerId.startsWith('wamid.TOGETHER-'));
      expect(stored.map((e) => e.providerId).sort()).to.deep.equal([0, 1, 2, 3, 4, 5, 7].map((n) => `wamid.TOGETHER-${n}`));
      expect(stored.map((e) => e.status)).to.deep.equal(Array(7).fill('processed'));
      const conversations = await test.server.db.knex('conversations').where({ channelId, channelAddress: '4915122222222' });
      expect(conversations).to.have.length(1);
      // The events stored together are processed by one job.
      const first = stored.find((e) => e.providerId === 'wamid.TOGETHER-0')!;
      const jobs = await test.server.db.knex('jobs').whereRaw(`payload->'eventIds' @> ?::jsonb`, [JSON.stringify([first.id])]);
      expect(jobs).to.have.length(1);
      expect(jobs[0].status).to.equal('done');
      expect(new Set(jobs[0].payload.eventIds)).to.deep.equal(new Set(stored.filter((e) => /-[0-4]$/.test(e.providerId)).map((e) => e.id)));
      // A job of the earlier shape, one event by `eventId`, is still processed.
      const [legacy] = await test.server.db.knex('inbound_events').insert({ organizationId: channel.organizationId, channelId, providerId: 'wamid.TOGETHER-legacy', kind: 'message', payload: JSON.stringify(events(8)[0]!.payload) }).returning('id');
      await test.server.jobs.enqueue(INBOUND_QUEUE, { eventId: legacy.id }, { organizationId: channel.organizationId });
      await quiesce(test.server, owner.orgId);
      expect(await test.server.db.knex('inbound_events').where({ id: legacy.id }).first()).to.include({ status: 'processed', conversationId: conversations[0].id });
    });

    it('processes the messages of one webhook together, in batches: one conversation per new customer, in order, each once', async () => {
      const { messages: service } = test.server.services;
      const customers = ['4915100000001', '4915100000002', '4915100000003'];
      const burst = [0, 1, 2, 3, 4, 5, 6, 7].flatMap((n) => customers.map((from) => ({ id: `wamid.BURST-${from}-${n}`, from, type: 'text', text: { body: `${from.slice(-1)}:${n}` } })));
      const before = { ...service.batchStats };
      // Customers are processed side by side (each one's messages in order): their sends overlap, so the batcher can
      // put several customers' messages in one statement. Whether two sends land in the same turn depends on the
      // machine's timing, so what is held is the overlap, not a count of statements.
      const send = service.send;
      let inFlight = 0;
      let mostInFlight = 0;
      service.send = async function (this: typeof service, ...args: Parameters<typeof send>) {
        mostInFlight = Math.max(mostInFlight, ++inFlight);
        try {
          return await send.apply(this, args);
        } finally {
          inFlight--;
        }
      } as typeof send;
      try {
        expect(ok(await post(webhook({ messaging_product: 'whatsapp', contacts: customers.map((wa_id) => ({ wa_id, profile: { name: `C${wa_id.slice(-1)}` } })), messages: burst })), 200)).to.deep.equal({ stored: 24, duplicates: 0 });
        await quiesce(test.server, owner.orgId);
      } finally {
        service.send = send;
      }
      expect(mostInFlight).to.be.above(1);
      // The first message of each customer opens its conversation (a transaction); the 21 others were appended by
      // the message path's batches, never more statements than messages.
      expect(service.batchStats.appended - before.appended).to.equal(21);
      expect(service.batchStats.batches - before.batches).to.be.within(1, 21);
      const events = (await inboundEvents(test.server, channelId)).filter((e) => e.providerId.startsWith('wamid.BURST-'));
      expect(events.map((e) => e.status)).to.deep.equal(Array(24).fill('processed'));
      for (const from of customers) {
        const conversations = await test.server.db.knex('conversations').where({ channelId, channelAddress: from });
        expect(conversations).to.have.length(1);
        const messages = await test.server.db.knex('messages').where({ conversationId: conversations[0].id }).orderBy('seq');
        expect(messages.map((m) => m.content)).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7].map((n) => `${from.slice(-1)}:${n}`));
        expect(messages.map((m) => m.seq)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8]);
        expect(new Set(events.filter((e) => e.providerId.includes(from)).map((e) => e.conversationId))).to.deep.equal(new Set([conversations[0].id]));
      }
    });

    it('processes one sender\'s messages one after another while another sender\'s go on', async () => {
      const { messages: service } = test.server.services;
      const [ann, ben] = ['4915100000011', '4915100000012'];
      // Ann's first message is held until Ben's is sent, or until Ann's second one reaches the send path (which it
      // must not before her first is done): each sender's messages in order, not the whole job in one line.
      let releaseFirst!: () => void;
      const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
      const running = new Map<string, number>();
      const overlapped: string[] = [];
      const send = service.send;
      service.send = async function (this: typeof service, ...args: Parameters<typeof send>) {
        const { content } = args[1] as { content: string };
        const from = content.startsWith('ann') ? ann : ben;
        if (running.get(from)) overlapped.push(content);
        running.set(from, (running.get(from) ?? 0) + 1);
        if (content === 'ann:2') releaseFirst();
        try {
          if (content === 'ann:1') await firstHeld;
          const sent = await send.apply(this, args);
          if (content === 'ben:1') releaseFirst();
          return sent;
        } finally {
          running.set(from, running.get(from)! - 1);
        }
      } as typeof send;
      try {
        const messages = [{ from: ann, n: 1 }, { from: ann, n: 2 }, { from: ben, n: 1 }].map(({ from, n }) => ({ id: `wamid.LINE-${from}-${n}`, from, type: 'text', text: { body: `${from === ann ? 'ann' : 'ben'}:${n}` } }));
        expect(ok(await post(webhook({ messaging_product: 'whatsapp', contacts: [ann, ben].map((wa_id) => ({ wa_id, profile: { name: wa_id } })), messages })), 200)).to.deep.equal({ stored: 3, duplicates: 0 });
        await quiesce(test.server, owner.orgId);
      } finally {
        service.send = send;
      }
      expect(overlapped).to.deep.equal([]);
      const conversation = await test.server.db.knex('conversations').where({ channelId, channelAddress: ann }).first();
      const stored = await test.server.db.knex('messages').where({ conversationId: conversation.id }).orderBy('seq');
      expect(stored.map((m) => m.content)).to.deep.equal(['ann:1', 'ann:2']);
    });

    it('tries a job of several events again when one of them fails; each message is stored once', async () => {
      const { knex } = test.server.db;
      const tag = randomUUID().slice(0, 8);
      const [kept, refused] = [`kept ${tag}`, `refused ${tag}`];
      const refusal = await refuseWrites(knex, { table: 'messages', on: 'insert', when: `new.content = '${refused}'` });
      let job: { id: string; status: string; attempts: number };
      try {
        const messages = [{ id: `wamid.KEPT-${tag}`, from: '4915100000021', body: kept }, { id: `wamid.REFUSED-${tag}`, from: '4915100000022', body: refused }].map((m) => ({ id: m.id, from: m.from, type: 'text', text: { body: m.body } }));
        expect(ok(await post(webhook({ messaging_product: 'whatsapp', messages })), 200)).to.deep.equal({ stored: 2, duplicates: 0 });
        await quiesce(test.server, owner.orgId);
        const events = (await inboundEvents(test.server, channelId)).filter((e) => e.providerId.endsWith(tag)).sort((a, b) => a.providerId.localeCompare(b.providerId));
        expect(events.map((e) => [e.providerId, e.status])).to.deep.equal([[`wamid.KEPT-${tag}`, 'processed'], [`wamid.REFUSED-${tag}`, 'pending']]);
        [job] = await knex('jobs').whereRaw(`payload->'eventIds' @> ?::jsonb`, [JSON.stringify([events[0]!.id])]);
        expect(job).to.include({ status: 'pending', attempts: 1 });
      } finally {
        await refusal.lift();
      }
      await knex('jobs').where({ id: job.id }).update({ run_at: knex.fn.now() });
      await quiesce(test.server, owner.orgId);
      expect(await knex('jobs').where({ id: job.id }).first()).to.include({ status: 'done', attempts: 2 });
      const events = (await inboundEvents(test.server, channelId)).filter((e) => e.providerId.endsWith(tag)).sort((a, b) => a.providerId.localeCompare(b.providerId));
      expect(events.map((e) => e.status)).to.deep.equal(['processed', 'processed']);
      for (const [event, content] of [[events[0]!, kept], [events[1]!, refused]] as const) {
        expect((await knex('messages').where({ conversationId: event.conversationId })).map((m: { content: string }) => m.content)).to.deep.equal([content]);
      }
    });

    it('sends replies through the Graph API, follows their statuses live, and stops at the 24-hour window', async () => {
      ok(await post(webhook({ messaging_product: 'whatsapp', contacts: [{ wa_id: '4915112345678', profile: { name: 'Wanda' } }], messages: [{ id: 'wamid.IN-REPLY', from: '4915112345678', type: 'text', text: { body: 'Noch da?' } }] })), 200);
      await quiesce(test.server, owner.orgId);
      const event = (await inboundEvents(test.server, channelId)).find((e) => e.providerId === 'wamid.IN-REPLY');
      const conversationId = event!.conversationId!;
      ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Wie können wir helfen?' }, { token: owner.accessToken }), 201);
      ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'note only', private: true }, { token: owner.accessToken }), 201);
      await quiesce(test.server, owner.orgId);
      // By text: on a shared database another run's leftover job may also reach this fake.
      const sent = graph.calls.filter((c) => c.path === '/1234567890/messages' && c.body.text?.body === 'Wie können wir helfen?');
      expect(sent).to.have.length(1);
      expect(sent[0]!.headers.authorization).to.equal('Bearer wa-access-token');
      expect(sent[0]!.body).to.include({ to: '4915112345678', type: 'text' });
      const [delivery] = ok(await owner.api.get(`/channels/${channelId}/deliveries`, { token: owner.accessToken }), 200);
      expect(delivery.status).to.equal('sent');
      const wamid = (await test.server.db.knex('channel_deliveries').where({ id: delivery.id }).first()).providerMessageId;

      socket = await connectOk(test.baseUrl, owner.orgId, owner.accessToken);
      const live = nextEvent(socket, 'message_delivery_updated', (p) => p.delivery.id === delivery.id, 15_000);
      ok(await post(webhook({ messaging_product: 'whatsapp', statuses: [{ id: wamid, status: 'delivered', recipient_id: '4915112345678' }] })), 200);
      await quiesce(test.server, owner.orgId);
      expect(((await live) as any).delivery.status).to.equal('delivered');
      socket.disconnect();
      socket = null;

      graph.queue.set('/messages', [{ status: 400, body: { error: { code: 131047, message: 'Re-engagement message', type: 'OAuthException' } } }]);
      ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Are you still there?' }, { token: owner.accessToken }), 201);
      await quiesce(test.server, owner.orgId);
      const latest = ok(await owner.api.get(`/channels/${channelId}/deliveries?status=outside_window`, { token: owner.accessToken }), 200);
      expect(latest, JSON.stringify(ok(await owner.api.get(`/channels/${channelId}/deliveries`, { token: owner.accessToken }), 200))).to.have.length(1);
      const notifications = ok(await owner.api.get('/notifications', { token: owner.accessToken }), 200);
      expect(notifications.some((n: { type: string }) => n.type === 'channel_failed')).to.equal(true);
      // An admin may send it again (it fails again here, final at once).
      expect((await owner.api.post(`/channels/deliveries/${latest[0].id}/retry`, {}, { token: owner.accessToken })).status).to.equal(202);
      graph.queue.set('/messages', [{ status: 400, body: { error: { code: 131047, message: 'Re-engagement message' } } }]);
      await quiesce(test.server, owner.orgId);
    });
  });
});
