// How a mail becomes a message and how a reply leaves, beyond the email channel tests: a JSON mail's fields trimmed,
// its sender's name and address, HTML without its styles and scripts, its files; a MIME mail's the same, inline images
// not taken as files; a mail without a Message-ID known by its bytes; and an SMTP server's answers to a reply
// (4xx and trouble reaching it tried again, 5xx final, a refused login failing the channel).
import { createHash, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import MailComposer from 'nodemailer/lib/mail-composer/index.js';
import { SMTPServer } from 'smtp-server';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { ok } from './helpers/tickets.js';
import { inboundEvents, mime, postSignedMail, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';

const composed = (mail: ConstructorParameters<typeof MailComposer>[0]) =>
  new Promise<string>((resolve, reject) => new MailComposer(mail).compile().build((err, raw) => (err ? reject(err) : resolve(raw.toString('utf8')))));
const contentId = (raw: string) => `<sha256-${createHash('sha256').update(raw).digest('hex')}@inbound>`;

/** What the SMTP server does with the next session: take the mail, refuse the login, refuse at MAIL FROM or after DATA with a code, or hang up. */
type Answer = { kind: 'take' } | { kind: 'auth'; code: number } | { kind: 'mailFrom'; code: number; message?: string } | { kind: 'data'; code: number; message?: string } | { kind: 'hangUp' };

describe('Channels: reading mail and sending replies over SMTP', function () {
  this.timeout(120_000);
  let test: TestServer;
  let owner: SignedUp;
  let smtp: SMTPServer;
  let answers: Answer[] = [];
  const taken: string[] = [];
  const next = (): Answer => answers.shift() ?? { kind: 'take' };
  const refusal = (code: number, message = `refused with ${code}`) => Object.assign(new Error(message), { responseCode: code });

  before(async () => {
    let current: Answer = { kind: 'take' };
    smtp = new SMTPServer({
      disabledCommands: ['STARTTLS'],
      allowInsecureAuth: true,
      logger: false,
      onConnect(_session, callback) {
        current = next();
        if (current.kind === 'hangUp') return callback(Object.assign(new Error('closing'), { responseCode: 421 }));
        callback();
      },
      onAuth(auth, _session, callback) {
        if (current.kind === 'auth') return callback(refusal(current.code));
        callback(null, { user: auth.username });
      },
      onMailFrom(_address, _session, callback) {
        callback(current.kind === 'mailFrom' ? refusal(current.code, current.message) : undefined);
      },
      onData(stream, _session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          if (current.kind === 'data') return callback(refusal(current.code, current.message));
          taken.push(Buffer.concat(chunks).toString('utf8'));
          callback();
        });
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', () => resolve()));
    const { port } = smtp.server.address() as AddressInfo;
    test = await startTestServer({ SMTP_URL: `smtp://replies:replies-secret@127.0.0.1:${port}`, MAIL_FROM: 'Desk <desk@platform.test>', ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    owner = await signUp(test.server, test.baseUrl);
    await test.server.services.organizations.changePlan(owner.orgId, 'enterprise');
  });

  after(async () => {
    await test?.stop();
    await new Promise<void>((resolve) => (smtp ? smtp.close(() => resolve()) : resolve()));
  });

  const emailChannel = async () => {
    const created = ok(await owner.api.post('/channels/email', { name: 'Support', address: `support-${randomUUID().slice(0, 8)}@mail.test` }, { token: owner.accessToken }), 201);
    return { id: created.channel.id as string, secret: created.inbound.secret as string };
  };
  const payloadOf = async (channelId: string, providerId: string) =>
    ((await inboundEvents(test.server, channelId)).find((e) => e.providerId === providerId) as unknown as { payload: Record<string, unknown> } | undefined)?.payload;

  describe('a JSON mail', () => {
    let channel: { id: string; secret: string };
    before(async () => (channel = await emailChannel()));
    const post = (body: unknown) => {
      const raw = JSON.stringify(body);
      return { raw, sent: postSignedMail(owner.api, channel.id, channel.secret, raw, { contentType: 'application/json' }) };
    };

    it('takes its fields trimmed: the sender by name and address in lower case, the subject, the text, the thread', async () => {
      const { sent } = post({ from: '  " Ann Example " <Ann@Example.TEST>  ', subject: '  Invoice  ', text: '  It is wrong  ', html: '<p>ignored</p>', messageId: ' <j1@customer.test> ', inReplyTo: ' <ours@platform.test> ', references: ' <a@x.test>   <b@x.test> ' });
      ok(await sent, 200);
      expect(await payloadOf(channel.id, '<j1@customer.test>')).to.deep.equal({
        kind: 'message', from: 'ann@example.test', fromName: 'Ann Example', subject: 'Invoice', text: 'It is wrong',
        messageId: '<j1@customer.test>', inReplyTo: '<ours@platform.test>', references: ['<a@x.test>', '<b@x.test>'],
      });
      ok(await post({ from: 'Bob <BOB@x.test>', text: 't', messageId: '<j2@x.test>', references: ['<a@x.test>', 5, '  ', ' <b@x.test> '] }).sent, 200);
      expect(await payloadOf(channel.id, '<j2@x.test>')).to.deep.include({ from: 'bob@x.test', fromName: 'Bob', references: ['<a@x.test>', '<b@x.test>'], subject: null, inReplyTo: null });
      ok(await post({ from: ' <Cleo@X.test> ', subject: '   ', text: 't', messageId: '<j3@x.test>', inReplyTo: 7, references: 7 }).sent, 200);
      expect(await payloadOf(channel.id, '<j3@x.test>')).to.deep.include({ from: 'cleo@x.test', fromName: null, subject: null, inReplyTo: null, references: [] });
      ok(await post({ from: ' Dora@X.test ', text: 't', messageId: '<j4@x.test>' }).sent, 200);
      expect(await payloadOf(channel.id, '<j4@x.test>')).to.deep.include({ from: 'dora@x.test', fromName: null });
      // Quotes and comments in the name stay out of the address; a value with no address is no sender.
      ok(await post({ from: 'Sales "EU" <Sales@X.test> ', text: 't', messageId: '<j5@x.test>' }).sent, 200);
      expect(await payloadOf(channel.id, '<j5@x.test>')).to.deep.include({ from: 'sales@x.test', fromName: 'Sales EU' });
      ok(await post({ from: 'fay@x.test (Fay)', text: 't', messageId: '<j6@x.test>' }).sent, 200);
      expect(await payloadOf(channel.id, '<j6@x.test>')).to.deep.include({ from: 'fay@x.test', fromName: 'Fay' });
      expectError(await post({ from: 'Gus Nobody', text: 'no address' }).sent, 400, 'validation_failed');
      expectError(await post({ from: '   ', text: 'no sender' }).sent, 400, 'validation_failed');
      expectError(await post({ from: 42, text: 'no sender' }).sent, 400, 'validation_failed');
    });

    it('reads HTML as text without its styles, scripts and tags; a mail with neither says "(no text)"; one without a Message-ID is known by its bytes', async () => {
      const html = ' \n<style>p { color: red }</style><P>Hello</P><SCRIPT>alert( 1 )</SCRIPT><p>World<br/>again<BR>end</p>\n\n\n\n<b>bye</b></p> ';
      const first = post({ from: 'a@x.test', html });
      ok(await first.sent, 200);
      expect(await payloadOf(channel.id, contentId(first.raw))).to.include({ text: 'Hello\nWorld\nagain\nend\n\nbye', messageId: contentId(first.raw) });
      const empty = post({ from: 'a@x.test', text: '   ', html: '  ' });
      ok(await empty.sent, 200);
      expect(await payloadOf(channel.id, contentId(empty.raw))).to.include({ text: '(no text)' });
    });

    it('takes its files with their names and types, "attachment-N" and octet-stream without them, and skips entries without content', async () => {
      const files = post({ from: 'a@x.test', messageId: '<files@x.test>', attachments: [null, { fileName: 'empty.txt', content: '' }, { fileName: ' a.txt ', mimeType: ' text/plain ', content: ' aGk= ' }, { content: 'aGk=' }, 'x'] });
      ok(await files.sent, 200);
      expect(await payloadOf(channel.id, '<files@x.test>')).to.deep.include({
        text: '',
        media: [{ source: 'inline', fileName: 'a.txt', mimeType: 'text/plain', data: 'aGk=' }, { source: 'inline', fileName: 'attachment-4', mimeType: 'application/octet-stream', data: 'aGk=' }],
      });
      ok(await post({ from: 'a@x.test', text: 'no files', messageId: '<nofiles@x.test>', attachments: { content: 'aGk=' } }).sent, 200);
      const none = await payloadOf(channel.id, '<nofiles@x.test>');
      expect(none).to.include({ text: 'no files' });
      expect(none!.media).to.equal(undefined);
    });
  });

  describe('a MIME mail', () => {
    let channel: { id: string; secret: string };
    before(async () => (channel = await emailChannel()));
    const post = (raw: string) => postSignedMail(owner.api, channel.id, channel.secret, raw);

    it('takes the sender in lower case with its name, the subject, the trimmed text and the thread', async () => {
      ok(await post(mime({ from: '"Carla Client" <Carla@Example.TEST>', subject: 'Printer', text: '\r\n  It jams  \r\n', messageId: '<m1@x.test>', inReplyTo: '<ours@platform.test>', references: '<a@x.test> <b@x.test>' })), 200);
      expect(await payloadOf(channel.id, '<m1@x.test>')).to.deep.equal({
        kind: 'message', from: 'carla@example.test', fromName: 'Carla Client', subject: 'Printer', text: 'It jams',
        messageId: '<m1@x.test>', inReplyTo: '<ours@platform.test>', references: ['<a@x.test>', '<b@x.test>'],
      });
      ok(await post(mime({ from: 'dan@x.test', subject: 'x', text: 'Hi', messageId: '<m2@x.test>' }).replace(/^Subject: x\r\n/m, '')), 200);
      expect(await payloadOf(channel.id, '<m2@x.test>')).to.deep.include({ from: 'dan@x.test', fromName: null, subject: null, inReplyTo: null, references: [] });
      expectError(await post(mime({ from: 'undisclosed-recipients:;', subject: 'x', text: 'no sender', messageId: '<m3@x.test>' })), 400, 'validation_failed');
    });

    it('reads an HTML-only mail as text; a mail without text says "(no text)"; one without a Message-ID is known by its bytes', async () => {
      const html = await composed({ from: 'eve@x.test', to: 'support@mail.test', subject: 'html', messageId: '<h1@x.test>', html: '<style>b{}</style><p>Hello</p><p>World<br>again</p>' });
      ok(await post(html), 200);
      // The parser's own text of the HTML (paragraphs apart).
      expect(await payloadOf(channel.id, '<h1@x.test>')).to.include({ text: 'Hello\n\nWorld\nagain' });
      const bare = mime({ from: 'eve@x.test', subject: 'empty', text: '   ', messageId: 'x' }).replace(/^Message-ID: x\r\n/m, '');
      ok(await post(bare), 200);
      expect(await payloadOf(channel.id, contentId(bare))).to.include({ text: '(no text)', messageId: contentId(bare) });
    });

    it('takes attached files, named "attachment-N" without a name, but not the images its HTML shows inline', async () => {
      const raw = await composed({
        from: 'fay@x.test', to: 'support@mail.test', subject: 'files', messageId: '<f1@x.test>', text: 'See the files', html: '<p>See <img src="cid:logo@x"></p>',
        attachments: [
          { cid: 'logo@x', filename: 'logo.png', content: Buffer.from('inline image'), contentType: 'image/png' },
          { filename: 'report.pdf', content: Buffer.from('%PDF-1.4 report'), contentType: 'application/pdf' },
          { filename: false, content: Buffer.from('no name'), contentType: 'text/plain', contentDisposition: 'attachment' },
        ],
      });
      ok(await post(raw), 200);
      // Files only: no text, and no "(no text)" either.
      const only = await composed({ from: 'fay@x.test', to: 'support@mail.test', subject: 'only', messageId: '<f2@x.test>', attachments: [{ filename: 'a.pdf', content: Buffer.from('%PDF-1.4 a'), contentType: 'application/pdf' }] });
      ok(await post(only), 200);
      expect(await payloadOf(channel.id, '<f2@x.test>')).to.deep.include({ text: '', media: [{ source: 'inline', fileName: 'a.pdf', mimeType: 'application/pdf', data: Buffer.from('%PDF-1.4 a').toString('base64') }] });
      const payload = await payloadOf(channel.id, '<f1@x.test>');
      expect(payload).to.include({ text: 'See the files' });
      expect(payload!.media).to.deep.equal([
        { source: 'inline', fileName: 'report.pdf', mimeType: 'application/pdf', data: Buffer.from('%PDF-1.4 report').toString('base64') },
        { source: 'inline', fileName: 'attachment-2', mimeType: 'text/plain', data: Buffer.from('no name').toString('base64') },
      ]);
    });
  });

  describe('a reply over SMTP', () => {
    let channel: { id: string; secret: string };
    let conversationId: string;
    let customer: string;
    before(async () => {
      channel = await emailChannel();
      customer = uniqueEmail('smtp-answers');
      ok(await postSignedMail(owner.api, channel.id, channel.secret, mime({ from: customer, subject: 'Help', text: 'Please', messageId: `<${randomUUID()}@x.test>` })), 200);
      await quiesce(test.server, owner.orgId);
      conversationId = (await inboundEvents(test.server, channel.id))[0]!.conversationId!;
    });
    /** A reply the SMTP server answers with `answer` first: its delivery after that attempt. */
    const reply = async (answer: Answer) => {
      answers = [answer];
      const message = ok(await owner.api.post(`/conversations/${conversationId}/messages`, { content: `reply ${randomUUID().slice(0, 8)}` }, { token: owner.accessToken }), 201);
      await quiesce(test.server, owner.orgId);
      answers = [];
      return test.server.db.knex('channel_deliveries').where({ channelId: channel.id, messageId: message.id }).first();
    };
    const channelNow = async () => ok(await owner.api.get(`/channels/${channel.id}`, { token: owner.accessToken }), 200);

    it('sends it, and tries it again after a 4xx or when the server hangs up, in its words cut to 200 characters', async () => {
      const sent = await reply({ kind: 'take' });
      expect(sent).to.include({ status: 'sent', attempts: 1 });
      expect(taken.at(-1)).to.match(/^References: /m);
      const later = await reply({ kind: 'data', code: 451, message: 'Try again later' });
      expect(later).to.include({ status: 'queued', attempts: 1 });
      expect(later.lastError).to.match(/^SMTP: .*451 Try again later$/);
      const long = await reply({ kind: 'data', code: 452, message: 'x'.repeat(400) });
      expect(long.status).to.equal('queued');
      expect(long.lastError).to.have.length(206);
      const gone = await reply({ kind: 'hangUp' });
      expect(gone).to.include({ status: 'queued', attempts: 1 });
      expect(gone.lastError).to.match(/^SMTP: /);
      expect((await channelNow()).status).to.equal('active');
    });

    it('tries it again when the SMTP server cannot be reached at all (no SMTP code)', async () => {
      const { port } = smtp.server.address() as AddressInfo;
      // The listening socket closed (not the SMTP server's own close, after which it refuses every session).
      await new Promise<void>((resolve) => smtp.server.close(() => resolve()));
      try {
        const unreachable = await reply({ kind: 'take' });
        expect(unreachable).to.include({ status: 'queued', attempts: 1 });
        expect(unreachable.lastError).to.match(/^SMTP: .*ECONNREFUSED/);
      } finally {
        await new Promise<void>((resolve) => smtp.server.listen(port, '127.0.0.1', () => resolve()));
      }
    });

    it('fails it at once for a 5xx, the channel still active', async () => {
      const refused = await reply({ kind: 'data', code: 554, message: 'Spam' });
      expect(refused).to.include({ status: 'failed', attempts: 1 });
      expect(refused.lastError).to.match(/^SMTP: .*554 Spam$/);
      expect(await reply({ kind: 'data', code: 500, message: 'Syntax error' })).to.include({ status: 'failed', attempts: 1 });
      expect((await channelNow()).status).to.equal('active');
    });

    for (const [what, answer] of [
      ['a refused login (535)', { kind: 'auth', code: 535 }],
      ['a login the server cannot take now (454: EAUTH)', { kind: 'auth', code: 454 }],
      ['530 at MAIL FROM (authentication required)', { kind: 'mailFrom', code: 530, message: 'Authentication required' }],
      ['535 at MAIL FROM (credentials invalid)', { kind: 'mailFrom', code: 535, message: 'Authentication credentials invalid' }],
    ] as const) {
      it(`fails it and the channel at once for ${what}`, async () => {
        await test.server.db.knex('channels').where({ id: channel.id }).update({ status: 'active', lastError: null, consecutiveFailures: 0 });
        const refused = await reply(answer);
        expect(refused).to.include({ status: 'failed', attempts: 1 });
        expect((await channelNow()).status).to.equal('failed');
        await test.server.db.knex('channels').where({ id: channel.id }).update({ status: 'active', lastError: null, consecutiveFailures: 0 });
      });
    }
  });
});
