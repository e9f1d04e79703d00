// Files customers send through channels land in storage and show as message attachments like agents' uploads: a
// mail's attachments, WhatsApp media (Graph API media URL, then the bytes) and Telegram files (getFile, then the file
// host), all from fakes this test starts. A file that is refused or cannot be fetched leaves a note, never a lost message.
import { createHmac, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { connectOk, nextEvent, type ClientSocket } from './helpers/sockets.js';
import { createTicket, ok } from './helpers/tickets.js';
import { expectError } from './helpers/tenancy.js';
import { download, PDF, PNG } from './helpers/storage.js';
import type { TelegramSecrets } from '../server/services/channels/index.js';
import { inboundEvents, postSignedMail, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';

/** Serves `files` by path (404 for anything else) and answers Graph media lookups and Telegram getFile. */
async function fakeMediaHost(): Promise<{ url: string; files: Map<string, { type: string; bytes: Buffer }>; paths: string[]; close(): Promise<void> }> {
  const files = new Map<string, { type: string; bytes: Buffer }>();
  const paths: string[] = [];
  let base = '';
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '';
    paths.push(`${req.method} ${path} ${req.headers.authorization ?? ''}`);
    req.resume();
    req.on('end', () => {
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (path.endsWith('/getMe')) return json(200, { ok: true, result: { id: 1, username: 'media_bot' } });
      if (path.endsWith('/setWebhook')) return json(200, { ok: true, result: true });
      if (path.endsWith('/getFile')) return json(200, { ok: true, result: { file_id: 'x', file_path: 'photos/file_1.jpg' } });
      const graphMedia = /^\/(media-[\w-]+)$/.exec(path);
      if (graphMedia) {
        if (req.headers.authorization !== 'Bearer wa-media-token') return json(401, { error: { message: 'bad token' } });
        const file = files.get(`/files/${graphMedia[1]}`);
        return file ? json(200, { url: `${base}/files/${graphMedia[1]}`, mime_type: file.type, file_size: file.bytes.length, id: graphMedia[1] }) : json(404, { error: { message: 'no such media' } });
      }
      const file = files.get(path);
      if (!file) return json(404, { error: 'not found' });
      res.writeHead(200, { 'content-type': file.type, 'content-length': String(file.bytes.length) });
      res.end(file.bytes);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url: base, files, paths, close: () => new Promise((r) => server.close(() => r())) };
}

describe('Channels: inbound files', function () {
  this.timeout(120_000);
  let host: Awaited<ReturnType<typeof fakeMediaHost>>;
  let test: TestServer;
  let owner: SignedUp;
  let socket: ClientSocket;

  before(async () => {
    host = await fakeMediaHost();
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, WHATSAPP_GRAPH_URL: host.url, TELEGRAM_API_URL: host.url });
    owner = await signUp(test.server, test.baseUrl);
    await test.server.services.organizations.changePlan(owner.orgId, 'enterprise');
    socket = await connectOk(test.baseUrl, owner.orgId, owner.accessToken);
  });

  after(async () => {
    socket?.disconnect();
    await test?.stop();
    await host?.close();
  });

  const messageOf = async (channelId: string, providerId: string) => {
    const event = (await inboundEvents(test.server, channelId)).find((e) => e.providerId === providerId)!;
    expect(event.status).to.equal('processed');
    const page = ok(await owner.api.get(`/conversations/${event.conversationId}/messages`, { token: owner.accessToken }), 200);
    return page.at(-1);
  };

  it('stores a mail\'s attachments and shows them on the message; a refused type becomes a note', async () => {
    const { channel, inbound } = ok(await owner.api.post('/channels/email', { name: 'Support', address: 'support@media.test' }, { token: owner.accessToken }), 201);
    const messageId = `<${randomUUID()}@customer.test>`;
    const raw = await new MailComposer({
      from: uniqueEmail('mailer'), to: 'support@media.test', subject: 'Invoice attached', text: 'See the attached invoice', messageId,
      attachments: [{ filename: 'invoice.pdf', content: PDF, contentType: 'application/pdf' }, { filename: 'tool.exe', content: Buffer.from('MZ binary'), contentType: 'application/x-msdownload' }],
    }).compile().build();
    const live = nextEvent(socket, 'new_message', (p) => p.message.content.includes('See the attached invoice'), 15_000);
    ok(await postSignedMail(owner.api, channel.id, inbound.secret, raw.toString('utf8')), 200);
    await quiesce(test.server, owner.orgId);
    const heard = (await live).message;
    expect(heard.type).to.equal('file');
    expect(heard.attachments).to.have.length(1);
    expect(heard.attachments[0]).to.include({ fileName: 'invoice.pdf', mimeType: 'application/pdf', sizeBytes: PDF.length });
    expect((await download(heard.attachments[0].url, test.baseUrl)).bytes.equals(PDF)).to.equal(true);
    expect(heard.content).to.match(/tool\.exe was not stored: application\/x-msdownload is not allowed/);
    const message = await messageOf(channel.id, messageId);
    expect(message.attachments.map((a: { objectId: string }) => a.objectId)).to.deep.equal(heard.attachments.map((a: { objectId: string }) => a.objectId));
    const object = ok(await owner.api.get(`/storage/metadata/${heard.attachments[0].objectId}`, { token: owner.accessToken }), 200);
    expect(object).to.include({ purpose: 'channel_media', status: 'uploaded' });
  });

  it('stores the files of a mail that lands on a ticket and shows them on the ticket\'s reply, like a conversation\'s', async () => {
    const { channel, inbound } = ok(await owner.api.post('/channels/email', { name: 'Tickets', address: 'tickets@media.test' }, { token: owner.accessToken }), 201);
    const requester = uniqueEmail('ticket-files');
    const ticket = await createTicket(owner, { title: 'Printer jam', requester: { name: 'Jo', email: requester } });
    const messageId = `<${randomUUID()}@customer.test>`;
    const raw = await new MailComposer({
      from: requester, to: 'tickets@media.test', subject: `Re: [#${ticket.number}] Printer jam`, text: 'A photo of the jam', messageId,
      attachments: [{ filename: 'jam.png', content: PNG, contentType: 'image/png' }, { filename: 'tool.exe', content: Buffer.from('MZ binary'), contentType: 'application/x-msdownload' }],
    }).compile().build();
    ok(await postSignedMail(owner.api, channel.id, inbound.secret, raw.toString('utf8')), 200);
    await quiesce(test.server, owner.orgId);
    const event = (await inboundEvents(test.server, channel.id)).find((e) => e.providerId === messageId)!;
    expect(event).to.include({ status: 'processed', ticketId: ticket.id, conversationId: null });
    const timeline = ok(await owner.api.get(`/tickets/${ticket.id}/events`, { token: owner.accessToken }), 200);
    const reply = timeline.find((e: { type: string; actorType: string }) => e.type === 'reply' && e.actorType === 'contact');
    expect(reply.content).to.match(/^A photo of the jam\n\n\[tool\.exe was not stored: application\/x-msdownload is not allowed/);
    expect(reply.attachments).to.have.length(1);
    expect(reply.attachments[0]).to.include({ fileName: 'jam.png', mimeType: 'image/png', sizeBytes: PNG.length });
    expect((await download(reply.attachments[0].url, test.baseUrl)).bytes.equals(PNG)).to.equal(true);
    expect(timeline.filter((e: { type: string }) => e.type !== 'reply').every((e: { attachments: unknown[] }) => e.attachments.length === 0)).to.equal(true);
    // A file shown on a ticket stays as long as the ticket shows it.
    expectError(await owner.api.delete(`/storage/${reply.attachments[0].objectId}`, { token: owner.accessToken }), 409, 'conflict');
  });

  it('stores ten files of a mail and leaves a note for each one past ten; a picture with a document is a file message', async () => {
    const { channel, inbound } = ok(await owner.api.post('/channels/email', { name: 'Many', address: 'many@media.test' }, { token: owner.accessToken }), 201);
    const messageId = `<${randomUUID()}@customer.test>`;
    const attachments = [
      { filename: 'page-1.png', content: PNG, contentType: 'image/png' },
      ...Array.from({ length: 11 }, (_, i) => ({ filename: `page-${i + 2}.pdf`, content: PDF, contentType: 'application/pdf' })),
    ];
    const raw = await new MailComposer({ from: uniqueEmail('many'), to: 'many@media.test', subject: 'Scans', text: 'All pages', messageId, attachments }).compile().build();
    ok(await postSignedMail(owner.api, channel.id, inbound.secret, raw.toString('utf8')), 200);
    await quiesce(test.server, owner.orgId);
    const message = await messageOf(channel.id, messageId);
    expect(message.type).to.equal('file');
    expect(message.attachments.map((a: { fileName: string }) => a.fileName)).to.deep.equal(attachments.slice(0, 10).map((a) => a.filename));
    expect(message.content).to.equal('Scans\n\nAll pages\n\n[page-11.pdf was not stored: at most 10 files per message]\n\n[page-12.pdf was not stored: at most 10 files per message]');
  });

  describe('WhatsApp', () => {
    const appSecret = 'wa-media-secret';
    let channelId: string;
    const post = (value: unknown) => {
      const raw = JSON.stringify({ object: 'whatsapp_business_account', entry: [{ id: 'W', changes: [{ field: 'messages', value }] }] });
      return owner.api.request('POST', `/channels/whatsapp/inbound/${channelId}`, { rawBody: raw, headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${createHmac('sha256', appSecret).update(raw).digest('hex')}` } });
    };
    const media = (id: string, type: string, ref: Record<string, unknown>) => ({ messaging_product: 'whatsapp', contacts: [{ wa_id: '4915100000001', profile: { name: 'Pia' } }], messages: [{ id, from: '4915100000001', type, [type]: ref }] });

    before(async () => {
      const created = ok(await owner.api.post('/channels/whatsapp', { name: 'WA', phoneNumberId: '4711', wabaId: '1', accessToken: 'wa-media-token', appSecret }, { token: owner.accessToken }), 201);
      channelId = created.channel.id;
    });

    it('fetches an image through the Graph API with the access token and attaches it, with its caption', async () => {
      host.files.set('/files/media-photo', { type: 'image/png', bytes: PNG });
      ok(await post(media('wamid.IMG1', 'image', { id: 'media-photo', mime_type: 'image/png', caption: 'My broken screen' })), 200);
      await quiesce(test.server, owner.orgId);
      const message = await messageOf(channelId, 'wamid.IMG1');
      expect(message).to.include({ type: 'image', content: 'My broken screen' });
      expect(message.attachments).to.have.length(1);
      expect(message.attachments[0]).to.include({ mimeType: 'image/png', sizeBytes: PNG.length });
      expect((await download(message.attachments[0].url, test.baseUrl)).bytes.equals(PNG)).to.equal(true);
      expect(host.paths).to.include('GET /files/media-photo Bearer wa-media-token');
    });

    it('shows an image without caption or name as "file"', async () => {
      host.files.set('/files/media-bare', { type: 'image/png', bytes: PNG });
      ok(await post(media('wamid.BARE', 'image', { id: 'media-bare', mime_type: 'image/png' })), 200);
      await quiesce(test.server, owner.orgId);
      const message = await messageOf(channelId, 'wamid.BARE');
      expect(message).to.include({ type: 'image', content: 'file' });
      expect(message.attachments).to.have.length(1);
    });

    it('names a file without a name by its source, its place and the type the Graph API gives when the webhook gives none', async () => {
      host.files.set('/files/media-untyped', { type: 'image/png', bytes: PNG });
      ok(await post(media('wamid.UNTYPED', 'image', { id: 'media-untyped', caption: 'No type given' })), 200);
      await quiesce(test.server, owner.orgId);
      const message = await messageOf(channelId, 'wamid.UNTYPED');
      expect(message).to.include({ type: 'image', content: 'No type given' });
      expect(message.attachments[0]).to.include({ fileName: 'whatsapp-1.png', mimeType: 'image/png', sizeBytes: PNG.length });
    });

    it('keeps the message with a note when the media cannot be downloaded', async () => {
      ok(await post(media('wamid.DOC404', 'document', { id: 'media-missing', mime_type: 'application/pdf', filename: 'contract.pdf' })), 200);
      await quiesce(test.server, owner.orgId);
      const message = await messageOf(channelId, 'wamid.DOC404');
      expect(message.attachments).to.deep.equal([]);
      expect(message.content).to.match(/contract\.pdf was not stored: the Graph API answered 404/);
    });

    it('refuses a file whose bytes are not its declared type (a note, nothing stored)', async () => {
      host.files.set('/files/media-fake', { type: 'application/pdf', bytes: Buffer.from('not a pdf at all') });
      ok(await post(media('wamid.FAKE', 'document', { id: 'media-fake', mime_type: 'application/pdf', filename: 'fake.pdf', caption: 'Here' })), 200);
      await quiesce(test.server, owner.orgId);
      const message = await messageOf(channelId, 'wamid.FAKE');
      expect(message.attachments).to.deep.equal([]);
      expect(message.content).to.match(/^Here\n\n\[fake\.pdf was not stored: The file's content is not application\/pdf\]$/);
    });
  });

  it('fetches a Telegram photo with getFile and the file host', async () => {
    const channel = ok(await owner.api.post('/channels/telegram', { name: 'Bot', botToken: 'media-token' }, { token: owner.accessToken }), 201);
    const setWebhook = host.paths.find((p) => p.startsWith('POST /botmedia-token/setWebhook'));
    expect(setWebhook).to.not.equal(undefined);
    host.files.set('/file/botmedia-token/photos/file_1.jpg', { type: 'image/jpeg', bytes: Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(60, 1)]) });
    const row = await test.server.db.knex('channels').where({ id: channel.id }).first();
    const { webhookSecret } = test.server.services.channels.provisioning.secretsOf<TelegramSecrets>(row);
    const update = { update_id: 777, message: { message_id: 777, chat: { id: 42 }, from: { id: 42, first_name: 'Tim' }, photo: [{ file_id: 'small' }, { file_id: 'large' }] } };
    ok(await owner.api.post(`/channels/telegram/inbound/${channel.id}`, update, { headers: { 'x-telegram-bot-api-secret-token': webhookSecret } }), 200);
    await quiesce(test.server, owner.orgId);
    const message = await messageOf(channel.id, '777');
    expect(message.type).to.equal('image');
    expect(message.attachments[0]).to.include({ fileName: 'photo.jpg', mimeType: 'image/jpeg', sizeBytes: 64 });
    expect(host.paths.some((p) => p.startsWith('POST /botmedia-token/getFile'))).to.equal(true);
  });

  it("takes a Telegram document's type from its name when Telegram gives none, and notes one it cannot type by its place", async () => {
    const channel = ok(await owner.api.post('/channels/telegram', { name: 'Docs', botToken: 'media-docs' }, { token: owner.accessToken }), 201);
    host.files.set('/file/botmedia-docs/photos/file_1.jpg', { type: 'application/octet-stream', bytes: PDF });
    const row = await test.server.db.knex('channels').where({ id: channel.id }).first();
    const { webhookSecret } = test.server.services.channels.provisioning.secretsOf<TelegramSecrets>(row);
    const send = async (id: number, document: Record<string, unknown>, caption: string) => {
      const update = { update_id: id, message: { message_id: id, chat: { id: 43 }, from: { id: 43, first_name: 'Tia' }, caption, document: { file_id: `doc-${id}`, ...document } } };
      ok(await owner.api.post(`/channels/telegram/inbound/${channel.id}`, update, { headers: { 'x-telegram-bot-api-secret-token': webhookSecret } }), 200);
      await quiesce(test.server, owner.orgId);
      return messageOf(channel.id, String(id));
    };
    const manual = await send(901, { file_name: 'Manual.PDF' }, 'The manual');
    expect(manual).to.include({ type: 'file', content: 'The manual' });
    expect(manual.attachments[0]).to.include({ fileName: 'Manual.PDF', mimeType: 'application/pdf', sizeBytes: PDF.length });
    const unnamed = await send(902, {}, 'No name');
    expect(unnamed.attachments).to.deep.equal([]);
    expect(unnamed.content).to.equal('No name\n\n[file 1 was not stored: application/octet-stream is not allowed for channel_media files]');
  });
});
