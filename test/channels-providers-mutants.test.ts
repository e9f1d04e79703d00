// What the provider clients send and how they read the answers, beyond the provider tests: the Bot API and the Graph
// API called in JSON with what each documents, a provider's wait honoured however it is given (Retry-After in
// seconds or as a date, Telegram's retry_after) and the usual backoff when it cannot be read, a provider that cannot be
// reached retried, each refusal kept in the provider's words; and how a Telegram Update and a WhatsApp webhook become
// messages and statuses (names, captions, media, the kinds not taken).
import { createHmac, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { ok } from './helpers/tickets.js';
import { inboundEvents, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { fakeProvider, type FakeAnswer, type FakeProvider } from './helpers/providers.js';
import { DELIVERY_QUEUE } from '../server/services/channels/index.js';

describe('Channels: what the provider clients send and read', function () {
  this.timeout(120_000);
  let test: TestServer;
  let telegram: FakeProvider;
  let graph: FakeProvider;
  let owner: SignedUp;

  before(async () => {
    telegram = await fakeProvider((path) => {
      if (path.endsWith('/getMe')) return { status: 200, body: { ok: true, result: { id: 1, is_bot: true, username: 'wire_bot' } } };
      if (path.endsWith('/setWebhook')) return { status: 200, body: { ok: true, result: true } };
      if (path.endsWith('/getFile')) return { status: 200, body: { ok: true, result: {} } };
      return { status: 200, body: { ok: true, result: { message_id: 31 } } };
    });
    graph = await fakeProvider(() => ({ status: 200, body: { messaging_product: 'whatsapp', messages: [{ id: `wamid.OUT-${randomUUID()}` }] } }));
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, TELEGRAM_API_URL: telegram.url, WHATSAPP_GRAPH_URL: graph.url });
    owner = await signUp(test.server, test.baseUrl);
    await test.server.services.organizations.changePlan(owner.orgId, 'enterprise');
  });

  after(async () => {
    await test?.stop();
    await telegram?.close();
    await graph?.close();
  });

  const telegramChannel = async () => {
    const token = `wire-${randomUUID().slice(0, 8)}`;
    const id = ok(await owner.api.post('/channels/telegram', { name: 'Bot', botToken: token }, { token: owner.accessToken }), 201).id as string;
    const secret = telegram.calls.filter((c) => c.path === `/bot${token}/setWebhook`).at(-1)!.body.secret_token as string;
    const post = (update: unknown) => owner.api.post(`/channels/telegram/inbound/${id}`, update, { headers: { 'x-telegram-bot-api-secret-token': secret } });
    return { id, token, post };
  };
  const whatsappChannel = async () => {
    const appSecret = `app-${randomUUID()}`;
    const phoneNumberId = String(Date.now());
    const id = ok(await owner.api.post('/channels/whatsapp', { name: 'WA', phoneNumberId, wabaId: '1', accessToken: 'wire-token', appSecret }, { token: owner.accessToken }), 201).channel.id as string;
    const post = (body: unknown) => {
      const raw = JSON.stringify(body);
      return owner.api.request('POST', `/channels/whatsapp/inbound/${id}`, { rawBody: raw, headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${createHmac('sha256', appSecret).update(raw).digest('hex')}` } });
    };
    const webhook = (value: unknown) => post({ object: 'whatsapp_business_account', entry: [{ id: 'W', changes: [{ field: 'messages', value }] }] });
    return { id, phoneNumberId, post, webhook };
  };
  /** The payloads stored for a channel's events, by provider id. */
  const payloads = async (channelId: string) => Object.fromEntries((await inboundEvents(test.server, channelId)).map((e) => [e.providerId, (e as unknown as { payload: Record<string, unknown> }).payload]));
  const conversationOf = async (channelId: string) => {
    await quiesce(test.server, owner.orgId);
    return (await inboundEvents(test.server, channelId))[0]!.conversationId!;
  };
  const deliveryJob = (deliveryId: string) => test.server.db.knex('jobs').where({ queue: DELIVERY_QUEUE, organization_id: owner.orgId }).whereRaw(`payload->>'deliveryId' = ?`, [deliveryId]).first();
  /** Sends a reply the provider answers with `answer` first: the delivery after that attempt, and the seconds until its retry. */
  const replyAnswered = async (provider: FakeProvider, path: string, channelId: string, conversationId: string, answer: FakeAnswer) => {
    provider.queue.set(path, [answer]);
    const content = `reply ${randomUUID().slice(0, 8)}`;
    const message = ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    const delivery = await test.server.db.knex('channel_deliveries').where({ channelId, messageId: message.id }).first();
    const job = await deliveryJob(delivery.id);
    return { delivery, wait: (new Date(job.runAt).getTime() - Date.now()) / 1000, content };
  };

  describe('Telegram Bot API', () => {
    let tg: Awaited<ReturnType<typeof telegramChannel>>;
    let conversationId: string;
    before(async () => {
      tg = await telegramChannel();
      ok(await tg.post({ update_id: 1, message: { message_id: 1, chat: { id: 7 }, from: { id: 7, first_name: 'Ute' }, text: 'Hello' } }), 200);
      conversationId = await conversationOf(tg.id);
    });
    const reply = (answer: FakeAnswer) => replyAnswered(telegram, `/bot${tg.token}/sendMessage`, tg.id, conversationId, answer);

    it('calls it in JSON: getMe, setWebhook for message updates only, sendMessage with the chat and the text', async () => {
      const calls = telegram.calls.filter((c) => c.path.startsWith(`/bot${tg.token}/`));
      expect(calls.map((c) => c.path)).to.deep.equal([`/bot${tg.token}/getMe`, `/bot${tg.token}/setWebhook`]);
      expect(calls[0]!.body).to.deep.equal({});
      const set = calls[1]!.body;
      expect(set).to.deep.equal({ url: set.url, secret_token: set.secret_token, allowed_updates: ['message'] });
      const { delivery, content } = await reply({ status: 200, body: { ok: true, result: { message_id: 4711 } } });
      expect(delivery).to.include({ status: 'sent', providerMessageId: '4711' });
      const sent = telegram.calls.filter((c) => c.path === `/bot${tg.token}/sendMessage`).at(-1)!;
      expect(sent.body).to.deep.equal({ chat_id: '7', text: content });
      for (const call of [...calls, sent]) expect(call.headers['content-type']).to.equal('application/json');
    });

    it('waits as long as Telegram asks: Retry-After in seconds or as a date, or its retry_after', async () => {
      const inSeconds = await reply({ status: 429, body: { ok: false, description: 'Too Many Requests' }, headers: { 'retry-after': '45' } });
      expect(inSeconds.delivery).to.include({ status: 'queued', attempts: 1, lastError: 'HTTP 429: Too Many Requests' });
      expect(inSeconds.wait).to.be.within(42, 46);
      const byParameter = await reply({ status: 429, body: { ok: false, description: 'Too Many Requests', parameters: { retry_after: 50 } } });
      expect(byParameter.wait).to.be.within(47, 51);
      const asDate = await reply({ status: 503, body: { ok: false }, headers: { 'retry-after': new Date(Date.now() + 95_000).toUTCString() } });
      expect(asDate.wait).to.be.within(90, 96);
      // A date already past: tried again at once (and sent).
      const past = await reply({ status: 503, body: { ok: false }, headers: { 'retry-after': new Date(Date.now() - 60_000).toUTCString() } });
      expect(past.delivery).to.include({ status: 'sent', attempts: 2 });
    });

    it('waits the usual 30 seconds when Retry-After is neither seconds nor a date', async () => {
      for (const header of ['x7', '12abc', 'soon']) {
        const { delivery, wait } = await reply({ status: 503, body: { ok: false, description: 'Unavailable' }, headers: { 'retry-after': header } });
        expect(delivery, header).to.include({ status: 'queued', attempts: 1, lastError: 'HTTP 503: Unavailable' });
        expect(wait, header).to.be.within(27, 31);
      }
    });

    it('tries a reply again when Telegram cannot be reached', async () => {
      const { delivery, wait } = await reply({ status: 0, body: null, hangUp: true });
      expect(delivery).to.include({ status: 'queued', attempts: 1, lastError: 'request failed: TypeError' });
      expect(wait).to.be.within(27, 31);
    });

    it("fails a reply Telegram refuses in its words: 'not ok', a 4xx with or without a description, cut to 300 characters", async () => {
      const notOk = await reply({ status: 200, body: { ok: false, description: 'Bad Request: chat not found' } });
      expect(notOk.delivery).to.include({ status: 'failed', attempts: 1, lastError: 'Bad Request: chat not found' });
      const bare = await reply({ status: 200, body: { ok: false } });
      expect(bare.delivery).to.include({ status: 'failed', lastError: 'Telegram answered not ok' });
      const refused = await reply({ status: 400, body: {} });
      expect(refused.delivery).to.include({ status: 'failed', attempts: 1, lastError: 'HTTP 400: error' });
      const long = await reply({ status: 500, body: { ok: false, description: 'x'.repeat(600) } });
      expect(long.delivery).to.include({ status: 'queued', lastError: `HTTP 500: ${'x'.repeat(290)}` });
      // None of these is about the bot's token: the channel stays active.
      expect(ok(await owner.api.get(`/channels/${tg.id}`, { token: owner.accessToken }), 200).status).to.equal('active');
    });

    it('takes a 403 as the bot token refused: the channel fails at once, and not for another 4xx', async () => {
      const other = await telegramChannel();
      ok(await other.post({ update_id: 2, message: { message_id: 2, chat: { id: 8 }, text: 'Hi' } }), 200);
      const otherConversation = (await (async () => {
        await quiesce(test.server, owner.orgId);
        return (await inboundEvents(test.server, other.id))[0]!.conversationId!;
      })());
      const answer = (status: number, description = 'Nope') => replyAnswered(telegram, `/bot${other.token}/sendMessage`, other.id, otherConversation, { status, body: { ok: false, description } });
      expect((await answer(404)).delivery).to.include({ status: 'failed', lastError: 'HTTP 404: Nope' });
      expect((await answer(404, 'y'.repeat(600))).delivery).to.include({ status: 'failed', lastError: `HTTP 404: ${'y'.repeat(290)}` });
      // Only a 2xx is an answer: a 300 is refused with its status.
      expect((await answer(300, 'Multiple Choices')).delivery).to.include({ status: 'failed', lastError: 'HTTP 300: Multiple Choices' });
      expect(ok(await owner.api.get(`/channels/${other.id}`, { token: owner.accessToken }), 200).status).to.equal('active');
      expect((await answer(403)).delivery).to.include({ status: 'failed', lastError: 'HTTP 403: Nope' });
      expect(ok(await owner.api.get(`/channels/${other.id}`, { token: owner.accessToken }), 200)).to.include({ status: 'failed', lastError: 'HTTP 403: Nope' });
    });
  });

  describe('WhatsApp Graph API', () => {
    let wa: Awaited<ReturnType<typeof whatsappChannel>>;
    let conversationId: string;
    before(async () => {
      wa = await whatsappChannel();
      ok(await wa.webhook({ messaging_product: 'whatsapp', messages: [{ id: `wamid.${randomUUID()}`, from: '4915100000031', type: 'text', text: { body: 'Hallo' } }] }), 200);
      conversationId = await conversationOf(wa.id);
    });
    const reply = (answer: FakeAnswer) => replyAnswered(graph, `/${wa.phoneNumberId}/messages`, wa.id, conversationId, answer);

    it('sends a text as the Cloud API documents it, in JSON, and keeps its wamid', async () => {
      const { delivery, content } = await reply({ status: 200, body: { messages: [{ id: 'wamid.SENT-1' }] } });
      expect(delivery).to.include({ status: 'sent', providerMessageId: 'wamid.SENT-1' });
      const sent = graph.calls.filter((c) => c.path === `/${wa.phoneNumberId}/messages`).at(-1)!;
      expect(sent.body).to.deep.equal({ messaging_product: 'whatsapp', recipient_type: 'individual', to: '4915100000031', type: 'text', text: { body: content } });
      expect(sent.headers['content-type']).to.equal('application/json');
    });

    it("reads the Graph API's refusals: outside the 24-hour window (both codes), another error in its words, no message id", async () => {
      const window1 = await reply({ status: 400, body: { error: { code: 131026, message: 'Message undeliverable' } } });
      expect(window1.delivery).to.include({ status: 'outside_window', attempts: 1, lastError: 'outside the 24-hour window: Message undeliverable' });
      const window2 = await reply({ status: 400, body: { error: { code: 131047 } } });
      expect(window2.delivery).to.include({ status: 'outside_window', lastError: 'outside the 24-hour window:' });
      const other = await reply({ status: 400, body: { error: { code: 100, message: 'Invalid parameter' } } });
      expect(other.delivery).to.include({ status: 'failed', lastError: 'HTTP 400: Invalid parameter' });
      const bare = await reply({ status: 400, body: {} });
      expect(bare.delivery).to.include({ status: 'failed', lastError: 'HTTP 400: error' });
      const noId = await reply({ status: 200, body: { messages: [] } });
      expect(noId.delivery).to.include({ status: 'failed', lastError: 'the Graph API answered without a message id' });
      const limited = await reply({ status: 429, body: { error: { code: 130429, message: 'Rate limit hit' } }, headers: { 'retry-after': '40' } });
      expect(limited.delivery).to.include({ status: 'queued', lastError: 'HTTP 429: Rate limit hit' });
      expect(limited.wait).to.be.within(37, 41);
    });
  });

  describe('fetching a file', () => {
    const MAX = 25 * 1024 * 1024;
    /** The text of the message an inbound event became (its notes on files not stored included). */
    const contentOf = async (channelId: string, providerId: string) => {
      await quiesce(test.server, owner.orgId);
      const event = (await inboundEvents(test.server, channelId)).find((e) => e.providerId === providerId)!;
      return (await test.server.db.knex('messages').where({ conversationId: event.conversationId }).orderBy('seq', 'desc').first()).content as string;
    };

    it("notes a Telegram file without a path, announced or sent past 25 MB, or that the file host refuses, in Telegram's terms", async () => {
      const tg = await telegramChannel();
      const send = async (id: number, getFile: FakeAnswer, file?: FakeAnswer) => {
        telegram.queue.set('/getFile', [getFile]);
        if (file) telegram.queue.set(`/file/bot${tg.token}/docs/${id}.pdf`, [file]);
        ok(await tg.post({ update_id: id, message: { message_id: id, chat: { id: 66 }, document: { file_id: `f${id}`, file_name: `${id}.pdf`, mime_type: 'application/pdf' } } }), 200);
        return contentOf(tg.id, String(id));
      };
      const path = (id: number, extra: Record<string, unknown> = {}) => ({ status: 200, body: { ok: true, result: { file_path: `docs/${id}.pdf`, ...extra } } });
      expect(await send(1, { status: 200, body: { ok: true, result: { file_size: 10 } } })).to.equal('[1.pdf was not stored: Telegram gave no file path]');
      expect(await send(2, path(2, { file_size: MAX + 1 }))).to.equal(`[2.pdf was not stored: the file has ${MAX + 1} bytes, more than ${MAX}]`);
      expect(await send(3, path(3), { status: 404, body: {} })).to.equal('[3.pdf was not stored: the file download answered 404]');
      // Announced past the limit: refused before reading (the fake never sends the bytes it announces).
      expect(await send(4, path(4, { file_size: MAX }), { status: 200, body: {}, headers: { 'content-length': String(MAX + 1) } })).to.equal(`[4.pdf was not stored: the file is larger than ${MAX} bytes]`);
      // Sent past the limit without announcing it.
      expect(await send(5, path(5), { status: 200, body: 'x'.repeat(MAX), headers: { 'transfer-encoding': 'chunked' } })).to.equal(`[5.pdf was not stored: the file is larger than ${MAX} bytes]`);
      const getFiles = telegram.calls.filter((c) => c.path === `/bot${tg.token}/getFile`).map((c) => c.body);
      expect(getFiles).to.deep.equal([1, 2, 3, 4, 5].map((n) => ({ file_id: `f${n}` })));
    });

    it('notes a WhatsApp file the Graph API gives no URL for, or announces past 25 MB', async () => {
      const wa = await whatsappChannel();
      const send = async (id: string, meta: FakeAnswer) => {
        graph.queue.set(`/media-${id}`, [meta]);
        ok(await wa.webhook({ messages: [{ id, from: '4915100000041', type: 'document', document: { id: `media-${id}`, filename: `${id}.pdf`, mime_type: 'application/pdf' } }] }), 200);
        return contentOf(wa.id, id);
      };
      expect(await send('nourl', { status: 200, body: { mime_type: 'application/pdf' } })).to.equal('[nourl.pdf was not stored: the Graph API gave no media URL]');
      expect(await send('big', { status: 200, body: { url: `${graph.url}/files/big`, file_size: MAX + 1 } })).to.equal(`[big.pdf was not stored: the file has ${MAX + 1} bytes, more than ${MAX}]`);
      // Exactly 25 MB announced is fetched (the fake then serves something that is no PDF).
      expect(await send('limit', { status: 200, body: { url: `${graph.url}/files/limit`, file_size: MAX } })).to.equal("[limit.pdf was not stored: The file's content is not application/pdf]");
    });
  });

  describe('reading a Telegram Update', () => {
    it('takes the text or the caption, the sender by chat, the name they have, and the message id', async () => {
      const tg = await telegramChannel();
      const update = (id: number, message: Record<string, unknown>) => tg.post({ update_id: id, message: { chat: { id: 900 + id }, ...message } });
      ok(await update(1, { message_id: 11, from: { first_name: 'Tom', last_name: 'Tester', username: 'tt' }, text: 'text', caption: 'caption' }), 200);
      ok(await update(2, { message_id: 12, from: { last_name: 'Tester', username: 'tt' }, caption: 'only a caption' }), 200);
      ok(await update(3, { from: { username: 'tommy' }, text: 'no message id' }), 200);
      ok(await update(4, { message_id: 14, text: 'nobody' }), 200);
      // Nothing to take: no chat, or neither text nor a file.
      expect(ok(await tg.post({ update_id: 5, message: { message_id: 15, from: { first_name: 'A' }, text: 'no chat' } }), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
      expect(ok(await update(6, { message_id: 16, from: { first_name: 'A' }, text: '' }), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
      const got = await payloads(tg.id);
      expect(Object.keys(got).sort()).to.deep.equal(['1', '2', '3', '4']);
      const base = { kind: 'message', subject: null, inReplyTo: null, references: [] };
      expect(got['1']).to.deep.equal({ ...base, from: '901', fromName: 'Tom Tester', text: 'text', messageId: '11' });
      expect(got['2']).to.deep.equal({ ...base, from: '902', fromName: 'Tester', text: 'only a caption', messageId: '12' });
      expect(got['3']).to.deep.equal({ ...base, from: '903', fromName: 'tommy', text: 'no message id', messageId: null });
      expect(got['4']).to.deep.equal({ ...base, from: '904', fromName: null, text: 'nobody', messageId: '14' });
    });

    it('takes the largest size of a photo, a voice note as OGG, and a file with the name and type Telegram gives', async () => {
      const tg = await telegramChannel();
      const update = (id: number, message: Record<string, unknown>) => tg.post({ update_id: id, message: { message_id: id, chat: { id: 77 }, from: { first_name: 'Pia' }, ...message } });
      ok(await update(1, { photo: [{ file_id: 'small' }, { file_id: 'medium' }, { file_id: 'large' }] }), 200);
      ok(await update(2, { voice: { file_id: 'voice-1' } }), 200);
      ok(await update(3, { audio: { file_id: 'audio-1' }, caption: 'a song' }), 200);
      ok(await update(4, { video: { file_id: 'video-1', file_name: 'clip.mp4', mime_type: 'video/mp4' } }), 200);
      ok(await update(5, { photo: [{}], document: { file_id: 'doc-1', file_name: 'a.pdf', mime_type: 'application/pdf' } }), 200);
      ok(await update(6, { voice: { file_id: 'voice-2', file_name: 'note.oga', mime_type: 'audio/opus' } }), 200);
      expect(ok(await update(7, { document: { file_name: 'no-id.pdf' } }), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
      const got = await payloads(tg.id);
      const media = (id: string) => ({ text: got[id]!.text, media: got[id]!.media });
      const file = (fileId: string, fileName: string | null, mimeType: string | null) => ({ source: 'telegram', fileId, fileName, mimeType });
      expect(media('1')).to.deep.equal({ text: '', media: [file('large', 'photo.jpg', 'image/jpeg')] });
      expect(media('2')).to.deep.equal({ text: '', media: [file('voice-1', 'voice.ogg', 'audio/ogg')] });
      expect(media('3')).to.deep.equal({ text: 'a song', media: [file('audio-1', null, null)] });
      expect(media('4')).to.deep.equal({ text: '', media: [file('video-1', 'clip.mp4', 'video/mp4')] });
      expect(media('5')).to.deep.equal({ text: '', media: [file('doc-1', 'a.pdf', 'application/pdf')] });
      expect(media('6')).to.deep.equal({ text: '', media: [file('voice-2', 'note.oga', 'audio/opus')] });
      expect(got['7']).to.equal(undefined);
    });
  });

  describe('reading a WhatsApp webhook', () => {
    it('takes each message of every entry and change with its sender, the name its contact gives, and a kind it cannot show as a label', async () => {
      const wa = await whatsappChannel();
      const change = (value: unknown) => ({ field: 'messages', value });
      ok(await wa.post({ entry: [
        { changes: [change({ contacts: [{ wa_id: '491', profile: { name: 'Wanda' } }, { wa_id: '492' }], messages: [
          { id: 'w1', from: '491', type: 'text', text: { body: 'Hallo' } },
          { id: 'w2', from: '492', type: 'location', location: { latitude: 1 } },
          { id: 'w3', from: '493', text: { body: 'text without a type' } },
          { id: 'w4', from: '491' },
          { id: 'w5', from: '491', type: 'image', image: { mime_type: 'image/png' } },
          { from: '491', type: 'text', text: { body: 'no id' } },
          { id: 'w6', type: 'text', text: { body: 'no sender' } },
          { id: 'w7', from: '491', type: 'text', text: {} },
        ] })] },
        { changes: [change({ messages: [{ id: 'w8', from: '494', type: 'sticker', sticker: { id: 'st-1', mime_type: 'image/webp' } }] }), change({ messages: [{ id: 'w9', from: '495', type: 'document', document: { id: 'doc-9', filename: 'a.pdf', caption: 'the contract' } }] })] },
        {},
      ] }), 200);
      const got = await payloads(wa.id);
      expect(Object.keys(got).sort()).to.deep.equal(['w1', 'w2', 'w3', 'w4', 'w5', 'w8', 'w9']);
      const base = { kind: 'message', subject: null, inReplyTo: null, references: [] };
      expect(got.w1).to.deep.equal({ ...base, from: '491', fromName: 'Wanda', text: 'Hallo', messageId: 'w1' });
      expect(got.w2).to.deep.equal({ ...base, from: '492', fromName: null, text: '[location message]', messageId: 'w2' });
      expect(got.w3).to.deep.equal({ ...base, from: '493', fromName: null, text: 'text without a type', messageId: 'w3' });
      expect(got.w4).to.include({ text: '[unsupported message]' });
      expect(got.w5).to.include({ text: '[image message]' });
      expect(got.w5!.media).to.equal(undefined);
      expect(got.w8).to.deep.include({ text: '', media: [{ source: 'whatsapp', mediaId: 'st-1', fileName: null, mimeType: 'image/webp' }] });
      expect(got.w9).to.deep.include({ text: 'the contract', media: [{ source: 'whatsapp', mediaId: 'doc-9', fileName: 'a.pdf', mimeType: null }] });
    });

    it("takes the four statuses it follows, each once per status, with the first error's code and title", async () => {
      const wa = await whatsappChannel();
      ok(await wa.webhook({ statuses: [
        { id: 's1', status: 'sent' },
        { id: 's1', status: 'delivered' },
        { id: 's1', status: 'read' },
        { id: 's2', status: 'failed', errors: [{ code: 131051, title: 'Unsupported message type' }, { code: 1, title: 'second' }] },
        { id: 's3', status: 'failed', errors: [{ code: 131000 }] },
        { id: 's4', status: 'failed', errors: [{ title: 'Only a title' }] },
        { id: 's5', status: 'failed', errors: [] },
        { id: 's6', status: 'deleted' },
        { id: 's7' },
        { status: 'read' },
      ] }), 200);
      const got = await payloads(wa.id);
      const status = (id: string, s: string, error: string | null) => ({ kind: 'status', providerMessageId: id, status: s, error });
      expect(got).to.deep.equal({
        's1:sent': status('s1', 'sent', null),
        's1:delivered': status('s1', 'delivered', null),
        's1:read': status('s1', 'read', null),
        's2:failed': status('s2', 'failed', '131051 Unsupported message type'),
        's3:failed': status('s3', 'failed', '131000'),
        's4:failed': status('s4', 'failed', 'Only a title'),
        's5:failed': status('s5', 'failed', null),
      });
    });
  });
});
