// Inbound SMTP beyond the email channel's own test: which recipients it takes (in+<24 hex>@INBOUND_EMAIL_DOMAIN, in
// any case, nothing before or after), a mail to several of them stored once per channel, and a mail it could not
// store answered 451 so the sending server tries again.
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { expect } from 'chai';
import nodemailer from 'nodemailer';
import { signUp, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { ok } from './helpers/tickets.js';
import { inboundEvents, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { refuseWrites } from './helpers/refusals.js';

describe('Channels: inbound SMTP recipients and refusals', function () {
  this.timeout(120_000);
  let test: TestServer;
  let owner: SignedUp;

  before(async () => {
    // Inbound jobs stay queued: these tests look at what the SMTP session answers and stores.
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, SMTP_IN_PORT: '0', INBOUND_EMAIL_DOMAIN: 'in.platform.test', JOB_QUEUES: '-channel-inbound,-channel-delivery,-webhook-delivery' });
    owner = await signUp(test.server, test.baseUrl);
  });

  after(async () => {
    await test?.stop();
  });

  const emailChannel = async () => {
    const data = ok(await owner.api.post('/channels/email', { name: 'Mail', address: `support-${randomUUID().slice(0, 8)}@smtp.test` }, { token: owner.accessToken }), 201);
    return { id: data.channel.id as string, smtpAddress: data.inbound.smtpAddress as string };
  };
  /** Sends one mail over SMTP; answers the server's refusal (code and words) or null when it took the mail. */
  const send = async (to: string | string[], messageId = `<${randomUUID()}@customer.test>`): Promise<{ code: number | undefined; response: string } | null> => {
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: test.server.services.channels.smtpInPort!, secure: false, ignoreTLS: true });
    try {
      await transport.sendMail({ from: 'ada@customer.test', to, subject: 'Over SMTP', text: 'Hello over SMTP', messageId });
      return null;
    } catch (err) {
      const e = err as { responseCode?: number; response?: string };
      return { code: e.responseCode, response: e.response ?? '' };
    } finally {
      transport.close();
    }
  };
  /** What the server answers to EHLO: its extensions, one per line. */
  const ehlo = (): Promise<string[]> =>
    new Promise((resolve, reject) => {
      const socket = connect(test.server.services.channels.smtpInPort!, '127.0.0.1');
      let said = '';
      let greeted = false;
      socket.setTimeout(10_000, () => socket.destroy(new Error('no answer to EHLO')));
      socket.on('error', reject);
      socket.on('data', (chunk) => {
        said += chunk.toString('utf8');
        if (!greeted && said.includes('\r\n')) {
          greeted = true;
          said = '';
          socket.write('EHLO sender.test\r\n');
        } else if (greeted && /^250 .*\r\n/m.test(said)) {
          socket.end('QUIT\r\n');
          resolve(said.split('\r\n').filter(Boolean).slice(1).map((l) => l.slice(4)));
        }
      });
    });
  const token = (smtpAddress: string) => /^in\+([0-9a-f]{24})@/.exec(smtpAddress)![1]!;

  it('takes a channel address in any case, and refuses with 550 anything around or beside it', async () => {
    const channel = await emailChannel();
    const t = token(channel.smtpAddress);
    expect(await send(`IN+${t.toUpperCase()}@IN.PLATFORM.TEST`, `<upper-${randomUUID()}@customer.test>`)).to.equal(null);
    expect(await send(`  ${channel.smtpAddress}`, `<spaced-${randomUUID()}@customer.test>`)).to.equal(null);
    const stored = await inboundEvents(test.server, channel.id);
    expect(stored.map((e) => e.providerId.slice(1, 7)).sort()).to.deep.equal(['spaced', 'upper-']);
    for (const to of [`x${channel.smtpAddress}`, `in+${t}0@in.platform.test`, `in+${t}@in.platform.test.evil`, `in+${t}@other.test`, `support@in.platform.test`, `in-${t}@in.platform.test`]) {
      const refused = await send(to);
      expect(refused, to).to.not.equal(null);
      expect(refused!.code, to).to.equal(550);
      expect(refused!.response, to).to.contain('No such mailbox here');
    }
    expect(await inboundEvents(test.server, channel.id)).to.have.length(2);
  });

  it('offers neither AUTH nor STARTTLS, and says the largest mail it takes (25 MB)', async () => {
    const extensions = await ehlo();
    expect(extensions).to.include('SIZE 26214400');
    expect(extensions.filter((e) => /^(AUTH|STARTTLS)\b/.test(e))).to.deep.equal([]);
  });

  /** A raw session (no SIZE declared in MAIL FROM, so the size is known only as the data arrives): the last answer. */
  const rawSession = (rcpt: string, content: string): Promise<string> =>
    new Promise<string>((resolve, reject) => {
      const socket = connect(test.server.services.channels.smtpInPort!, '127.0.0.1');
      const steps = ['EHLO sender.test', 'MAIL FROM:<ada@customer.test>', `RCPT TO:<${rcpt}>`, 'DATA'];
      let buffered = '';
      socket.setTimeout(60_000, () => socket.destroy(new Error('no answer')));
      socket.on('error', reject);
      socket.on('data', (chunk) => {
        buffered += chunk.toString('utf8');
        const lines = buffered.split('\r\n');
        buffered = lines.pop()!;
        for (const line of lines) {
          if (/^\d{3}-/.test(line)) continue;
          if (line.startsWith('354')) {
            socket.write(content);
            socket.write('.\r\n');
          } else if (steps.length) {
            socket.write(`${steps.shift()}\r\n`);
          } else {
            socket.end('QUIT\r\n');
            resolve(line);
            return;
          }
        }
      });
    });
  const LIMIT = 25 * 1024 * 1024;
  /** A mail of exactly `bytes` bytes of data (the CRLF before the ending dot included): padding in a MIME preamble. */
  const mailOf = (bytes: number, messageId: string) => {
    const head = `From: ada@customer.test\r\nSubject: At the limit\r\nMessage-ID: ${messageId}\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="limit"\r\n\r\n`;
    const tail = '--limit\r\nContent-Type: text/plain\r\n\r\nExactly at the limit\r\n--limit--\r\n';
    let rest = bytes - head.length - tail.length;
    let lines = Math.floor(rest / 1000);
    rest -= lines * 1000;
    if (rest > 0 && rest < 3) {
      lines -= 1;
      rest += 1000;
    }
    const padding = `${'x'.repeat(998)}\r\n`.repeat(lines) + (rest ? `${'x'.repeat(rest - 2)}\r\n` : '');
    const mail = head + padding + tail;
    expect(Buffer.byteLength(mail)).to.equal(bytes);
    return mail;
  };

  it('refuses a mail over 25 MB with 552 and stores nothing, whatever its envelope said', async () => {
    const channel = await emailChannel();
    const reply = await rawSession(channel.smtpAddress, mailOf(LIMIT + 4096, `<big-${randomUUID()}@customer.test>`));
    expect(reply).to.match(/^552 /);
    expect(reply).to.contain('Message too large');
    expect(await inboundEvents(test.server, channel.id)).to.deep.equal([]);
  });

  it('takes a mail of exactly 25 MB, whole', async () => {
    const channel = await emailChannel();
    const messageId = `<limit-${randomUUID()}@customer.test>`;
    expect(await rawSession(channel.smtpAddress, mailOf(LIMIT, messageId))).to.match(/^250 /);
    const stored = await test.server.db.knex('inbound_events').where({ channelId: channel.id }).select('providerId', 'payload');
    expect(stored.map((e) => [e.providerId, e.payload.text])).to.deep.equal([[messageId, 'Exactly at the limit']]);
  });

  it('stores a mail to two channels on each, and to one channel twice once', async () => {
    const first = await emailChannel();
    const second = await emailChannel();
    const messageId = `<both-${randomUUID()}@customer.test>`;
    expect(await send([first.smtpAddress, second.smtpAddress, first.smtpAddress.toUpperCase()], messageId)).to.equal(null);
    for (const channel of [first, second]) expect((await inboundEvents(test.server, channel.id)).map((e) => e.providerId)).to.deep.equal([messageId]);
  });

  it("takes nothing for a disabled channel's address (the session still ends as for any address of ours)", async () => {
    const channel = await emailChannel();
    ok(await owner.api.patch(`/channels/${channel.id}`, { enabled: false }, { token: owner.accessToken }), 200);
    expect(await send(channel.smtpAddress)).to.equal(null);
    expect(await inboundEvents(test.server, channel.id)).to.deep.equal([]);
  });

  it('takes no mail for the inbound token of a channel that is not email', async () => {
    const wa = ok(await owner.api.post('/channels/whatsapp', { name: 'WA', phoneNumberId: String(Date.now()), wabaId: '1', accessToken: 'wa-token', appSecret: 'wa-app-secret' }, { token: owner.accessToken }), 201);
    const { inboundToken } = await test.server.db.knex('channels').where({ id: wa.channel.id }).first();
    expect(inboundToken).to.match(/^[0-9a-f]{24}$/);
    expect(await send(`in+${inboundToken}@in.platform.test`)).to.equal(null);
    expect(await inboundEvents(test.server, wa.channel.id)).to.deep.equal([]);
  });

  it('answers 451 (try again later) for a mail it could not store, and stores it when it comes again', async () => {
    const channel = await emailChannel();
    const { knex } = test.server.db;
    const refusal = await refuseWrites(knex, { table: 'inbound_events', on: 'insert', when: `new.channel_id = '${channel.id}'` });
    const messageId = `<again-${randomUUID()}@customer.test>`;
    try {
      const refused = await send(channel.smtpAddress, messageId);
      expect(refused?.code).to.equal(451);
      expect(refused!.response).to.contain('Try again later');
    } finally {
      await refusal.lift();
    }
    expect(await inboundEvents(test.server, channel.id)).to.deep.equal([]);
    expect(await send(channel.smtpAddress, messageId)).to.equal(null);
    expect((await inboundEvents(test.server, channel.id)).map((e) => e.providerId)).to.deep.equal([messageId]);
  });
});
