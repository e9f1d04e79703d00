// SES mail through SNS, beyond the main tests: the signing certificate is fetched without following redirects, once
// per URL, and a failed fetch is tried again next time; a confirmation that fails is refused; what is acknowledged
// without being stored (an unsubscription, other SES notifications, a disabled channel's mail); a notification
// without a Subject signs without it; recipients are tried in order, in any case; malformed content is 400.
import { createSign, generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { ok } from './helpers/tickets.js';
import { expectError } from './helpers/tenancy.js';
import { inboundEvents, mime, TEST_ENCRYPTION_KEY } from './helpers/channels.js';

const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const publicPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();

type Sns = Record<string, string>;

function signed(message: Sns, certUrl: string): Sns {
  const keys = message.Type === 'Notification'
    ? ['Message', 'MessageId', ...(message.Subject !== undefined ? ['Subject'] : []), 'Timestamp', 'TopicArn', 'Type']
    : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  const canonical = keys.map((k) => `${k}\n${message[k]}\n`).join('');
  return { ...message, SignatureVersion: '2', Signature: createSign('RSA-SHA256').update(canonical).sign(privateKey, 'base64'), SigningCertURL: certUrl };
}

describe('Channels: SES through SNS, the edges', function () {
  this.timeout(60_000);
  let fake: Server;
  let fakeUrl: string;
  let outside: Server;
  let outsideUrl: string;
  let outsideCalls: string[];
  let calls: string[];
  let failNext: Set<string>;
  let test: TestServer;
  let owner: SignedUp;
  let channel: { id: string; smtpAddress: string };
  const topic = 'arn:aws:sns:eu-west-1:123456789012:ses-edges';

  before(async () => {
    calls = [];
    failNext = new Set();
    fake = createServer((req, res) => {
      const url = req.url ?? '';
      calls.push(url);
      if (failNext.delete(url)) return void res.writeHead(500).end();
      if (url.startsWith('/failing-with-key')) return void res.writeHead(500, { 'content-type': 'application/x-pem-file' }).end(publicPem);
      if (url.startsWith('/moved')) return void res.writeHead(302, { location: `${fakeUrl}/target.pem` }).end();
      if (url.endsWith('.pem')) return void res.writeHead(200, { 'content-type': 'application/x-pem-file' }).end(publicPem);
      if (url.startsWith('/confirm')) return void res.writeHead(200, { 'content-type': 'text/xml' }).end('<ConfirmSubscriptionResponse/>');
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', () => r()));
    fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
    // Reachable, but not at a URL SNS_CERT_URL_PATTERN allows.
    outsideCalls = [];
    outside = createServer((req, res) => {
      outsideCalls.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'text/xml' }).end('<ConfirmSubscriptionResponse/>');
    });
    await new Promise<void>((r) => outside.listen(0, '127.0.0.1', () => r()));
    outsideUrl = `http://127.0.0.1:${(outside.address() as AddressInfo).port}`;
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, EMAIL_INBOUND_SNS: 'true', SNS_CERT_URL_PATTERN: `^${fakeUrl.replace(/\./g, '\\.')}/`, INBOUND_EMAIL_DOMAIN: 'in.sns-edges.test', SNS_TOPIC_ARNS: topic });
    owner = await signUp(test.server, test.baseUrl);
    const created = ok(await owner.api.post('/channels/email', { name: 'SES', address: `support@edges-${randomUUID().slice(0, 8)}.test` }, { token: owner.accessToken }), 201);
    channel = { id: created.channel.id, smtpAddress: created.inbound.smtpAddress };
  });

  after(async () => {
    await test?.stop();
    await new Promise((r) => fake?.close(r));
    await new Promise((r) => outside?.close(r));
  });

  const post = (body: unknown) => owner.api.request('POST', '/channels/inbound', { rawBody: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': 'text/plain; charset=UTF-8' } });
  const ses = (content: Record<string, unknown>, extra: Partial<Sns> = {}): Sns => ({
    Type: 'Notification', MessageId: randomUUID(), TopicArn: topic, Subject: 'Amazon SES Email Receipt Notification', Timestamp: new Date().toISOString(), Message: JSON.stringify(content), ...extra,
  });
  const received = (to: string[], raw: string, destination: string[] = []) => ({ notificationType: 'Received', mail: { destination }, receipt: { recipients: to, action: { type: 'SNS', encoding: 'UTF8' } }, content: raw });
  const mail = (messageId = `<${randomUUID()}@customer.test>`) => ({ messageId, raw: mime({ from: uniqueEmail('edge'), subject: 'Edge', text: 'Hello', messageId }) });
  const storedIds = async () => (await inboundEvents(test.server, channel.id)).map((e) => e.providerId);

  it('does not follow a redirect from an allowed certificate URL', async () => {
    const m = mail();
    expectError(await post(signed(ses(received([channel.smtpAddress], m.raw)), `${fakeUrl}/moved.pem`)), 401, 'unauthorized');
    expect(calls).to.include('/moved.pem');
    expect(calls).not.to.include('/target.pem');
    expect(await storedIds()).not.to.include(m.messageId);
  });

  it('fetches a certificate once per URL, and tries a failed fetch again on the next message', async () => {
    const url = `${fakeUrl}/once-${randomUUID()}.pem`;
    const path = new URL(url).pathname;
    failNext.add(path);
    const first = mail();
    expectError(await post(signed(ses(received([channel.smtpAddress], first.raw)), url)), 401, 'unauthorized');
    const second = mail();
    expect(ok(await post(signed(ses(received([channel.smtpAddress], second.raw)), url)), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    const third = mail();
    expect(ok(await post(signed(ses(received([channel.smtpAddress], third.raw)), url)), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    expect(calls.filter((c) => c === path)).to.have.length(2);
    expect(await storedIds()).to.include.members([second.messageId, third.messageId]).and.not.include(first.messageId);
  });

  it('refuses a body that is not JSON with 401, and an SES Message that is not JSON with 400', async () => {
    expectError(await post('not json at all'), 401, 'unauthorized');
    expectError(await post(signed(ses({}, { Message: '{not json' }), `${fakeUrl}/cert.pem`)), 400, 'validation_failed');
  });

  it('refuses a subscription whose confirmation fails (400), and acknowledges an unsubscription without calling anything', async () => {
    const token = `tok-${randomUUID()}`;
    failNext.add(`/confirm?Token=${token}`);
    const confirm = signed({ Type: 'SubscriptionConfirmation', MessageId: randomUUID(), Token: token, TopicArn: topic, Message: 'Subscribe', SubscribeURL: `${fakeUrl}/confirm?Token=${token}`, Timestamp: new Date().toISOString() }, `${fakeUrl}/cert.pem`);
    const failed = await post(confirm);
    expectError(failed, 400, 'validation_failed');
    expect(failed.body.message).to.equal('Confirming the subscription answered 500');
    // A SubscribeURL that redirects fails the confirmation the same way (its target is never called).
    const moved = `tok-${randomUUID()}`;
    const redirected = await post(signed({ Type: 'SubscriptionConfirmation', MessageId: randomUUID(), Token: moved, TopicArn: topic, Message: 'Subscribe', SubscribeURL: `${fakeUrl}/moved-confirm?Token=${moved}`, Timestamp: new Date().toISOString() }, `${fakeUrl}/cert.pem`));
    expectError(redirected, 400, 'validation_failed');
    expect(redirected.body.message).to.equal('Confirming the subscription failed: its SubscribeURL could not be reached');
    expect(calls).to.include(`/moved-confirm?Token=${moved}`);
    expect(calls).not.to.include('/target.pem');
    const bye = `tok-${randomUUID()}`;
    const unsubscribe = signed({ Type: 'UnsubscribeConfirmation', MessageId: randomUUID(), Token: bye, TopicArn: topic, Message: 'Unsubscribed', SubscribeURL: `${fakeUrl}/confirm?Token=${bye}`, Timestamp: new Date().toISOString() }, `${fakeUrl}/cert.pem`);
    expect(ok(await post(unsubscribe), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
    expect(calls).not.to.include(`/confirm?Token=${bye}`);
  });

  it('acknowledges without storing: other SES notifications, a notification without content, a disabled channel\'s mail', async () => {
    const cert = `${fakeUrl}/cert.pem`;
    const bounce = mail();
    expect(ok(await post(signed(ses({ ...received([channel.smtpAddress], bounce.raw), notificationType: 'Bounce' }), cert)), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
    expect(ok(await post(signed(ses({ ...received([channel.smtpAddress], ''), content: undefined }), cert)), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
    const other = await signUp(test.server, test.baseUrl);
    const off = ok(await other.api.post('/channels/email', { name: 'Off', address: `off@off-${randomUUID().slice(0, 8)}.test` }, { token: other.accessToken }), 201);
    ok(await other.api.patch(`/channels/${off.channel.id}`, { enabled: false }, { token: other.accessToken }), 200);
    expect(ok(await post(signed(ses(received([off.inbound.smtpAddress], mail().raw)), cert)), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
    expect(await inboundEvents(test.server, off.channel.id)).to.deep.equal([]);
    expect(await storedIds()).not.to.include(bounce.messageId);
  });

  it('verifies a notification without a Subject, tries each recipient in order in any case, and refuses a mail without sender (400)', async () => {
    const cert = `${fakeUrl}/cert.pem`;
    const { Subject: _subject, ...noSubject } = ses(received([], ''));
    void _subject;
    const m = mail();
    const body = signed({ ...noSubject, Message: JSON.stringify(received(['nobody@nowhere.test'], m.raw, [channel.smtpAddress.toUpperCase()])) }, cert);
    expect(body.Subject).to.equal(undefined);
    expect(ok(await post(body), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    expect(await storedIds()).to.include(m.messageId);
    const anonymous = 'Subject: No sender\r\nMessage-ID: <anon@x.test>\r\n\r\nHello\r\n';
    expectError(await post(signed(ses(received([channel.smtpAddress], anonymous)), cert)), 400, 'validation_failed');
  });

  const confirmation = (url: (token: string) => string, extra: Partial<Sns> = {}) => {
    const token = `tok-${randomUUID()}`;
    return { token, body: signed({ Type: 'SubscriptionConfirmation', MessageId: randomUUID(), Token: token, TopicArn: topic, Message: 'Subscribe', SubscribeURL: url(token), Timestamp: new Date().toISOString(), ...extra }, `${fakeUrl}/cert.pem`) };
  };
  const refusal = (res: Awaited<ReturnType<typeof post>>, message: string, details: unknown[]) => {
    expectError(res, 400, 'validation_failed');
    expect(res.body.message).to.equal(message);
    expect(res.body.error.details).to.deep.equal(details);
  };

  it('says a subscription was confirmed, and names the SubscribeURL in each refused confirmation', async () => {
    const good = confirmation((t) => `${fakeUrl}/confirm?Token=${t}`);
    const confirmed = await post(good.body);
    expect(ok(confirmed, 200)).to.deep.equal({ stored: 0, duplicates: 0 });
    expect(confirmed.body.message).to.equal('Subscription confirmed');
    // A SubscribeURL that is reachable but not allowed is never called.
    const elsewhere = confirmation((t) => `${outsideUrl}/confirm?Token=${t}`);
    refusal(await post(elsewhere.body), 'The SubscribeURL is not an SNS URL', [{ field: 'SubscribeURL', message: 'not allowed' }]);
    expect(outsideCalls).to.deep.equal([]);
    const answering500 = confirmation((t) => `${fakeUrl}/confirm?Token=${t}`);
    failNext.add(`/confirm?Token=${answering500.token}`);
    refusal(await post(answering500.body), 'Confirming the subscription answered 500', [{ field: 'SubscribeURL', message: 'confirmation failed' }]);
    const moved = confirmation((t) => `${fakeUrl}/moved-confirm?Token=${t}`);
    refusal(await post(moved.body), 'Confirming the subscription failed: its SubscribeURL could not be reached', [{ field: 'SubscribeURL', message: 'confirmation failed' }]);
  });

  it('refuses a message whose signed keys are incomplete or whose Type SNS does not sign, with 401, calling nothing', async () => {
    // Signed over the word "undefined" where the Token should be: the canonical string needs every key.
    const { Token: _token, ...withoutToken } = confirmation((t) => `${fakeUrl}/confirm?Token=${t}-no-token`).body;
    void _token;
    const incomplete = signed(withoutToken, `${fakeUrl}/cert.pem`);
    const res = await post(incomplete);
    expectError(res, 401, 'unauthorized');
    expect(res.body.message).to.equal('The SNS signature is missing or not verifiable');
    expect(calls.filter((c) => c.endsWith('-no-token'))).to.deep.equal([]);
    // Any other Type, signed as a confirmation would be.
    const other = signed({ ...ses({}), Type: 'SomethingElse', Token: 'tok', SubscribeURL: `${fakeUrl}/confirm?Token=other` }, `${fakeUrl}/cert.pem`);
    const refused = await post(other);
    expectError(refused, 401, 'unauthorized');
    expect(refused.body.message).to.equal('The SNS signature is missing or not verifiable');
  });

  it('names the field of an SES Message that is not JSON and of a mail without sender', async () => {
    const cert = `${fakeUrl}/cert.pem`;
    refusal(await post(signed(ses({}, { Message: '{not json' }), cert)), 'The SNS message is not an SES notification', [{ field: 'Message', message: 'invalid JSON' }]);
    const anonymous = `Subject: No sender\r\nMessage-ID: <anon-${randomUUID()}@x.test>\r\n\r\nHello\r\n`;
    refusal(await post(signed(ses(received([channel.smtpAddress], anonymous)), cert)), 'The mail has no sender address', [{ field: 'from', message: 'is required' }]);
  });

  it('acknowledges a notification with empty content without storing it', async () => {
    expect(ok(await post(signed(ses(received([channel.smtpAddress], '')), `${fakeUrl}/cert.pem`)), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
  });

  it('stores mail from a notification without receipt, or whose receipt has no action, as UTF-8', async () => {
    const cert = `${fakeUrl}/cert.pem`;
    const first = mail();
    expect(ok(await post(signed(ses({ notificationType: 'Received', mail: { destination: [channel.smtpAddress] }, content: first.raw }), cert)), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    const second = mail();
    expect(ok(await post(signed(ses({ notificationType: 'Received', receipt: { recipients: [channel.smtpAddress] }, content: second.raw }), cert)), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    expect(await storedIds()).to.include.members([first.messageId, second.messageId]);
  });

  it('stores mail on the first recipient that names a channel, skipping recipients that are not addresses', async () => {
    const cert = `${fakeUrl}/cert.pem`;
    const m = mail();
    // Malformed recipients (not strings, empty) are skipped rather than failing the notification; the search
    // stops at the first channel, whatever later recipients name.
    const content = { notificationType: 'Received', mail: { destination: ['nobody@nowhere.test'] }, receipt: { recipients: [null, 42, '', channel.smtpAddress], action: { type: 'SNS', encoding: 'UTF8' } }, content: m.raw };
    expect(ok(await post(signed(ses(content), cert)), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    expect(await storedIds()).to.include(m.messageId);
  });

  it('does not trust a certificate served with an error status', async () => {
    const m = mail();
    expectError(await post(signed(ses(received([channel.smtpAddress], m.raw)), `${fakeUrl}/failing-with-key-${randomUUID()}.pem`)), 401, 'unauthorized');
    expect(await storedIds()).not.to.include(m.messageId);
  });

  it('keeps up to 100 certificates: a second URL does not push out the first, the 101st starts the memory afresh', async function () {
    this.timeout(180_000);
    const run = randomUUID().slice(0, 8);
    const url = (name: string) => `${fakeUrl}/many-${run}-${name}.pem`;
    const fetches = (name: string) => calls.filter((c) => c === `/many-${run}-${name}.pem`).length;
    // Acknowledged without storing: only the certificate matters here.
    const send = async (name: string) => expect(ok(await post(signed(ses({ notificationType: 'Bounce' }), url(name))), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
    await send('a');
    await send('b');
    await send('a');
    expect(fetches('a')).to.equal(1);
    // Earlier tests left an unknown number in the memory: add new URLs until "a" has to be fetched again; the
    // memory then holds exactly that last URL and "a".
    let n = 0;
    while (fetches('a') === 1) {
      expect(n, 'the memory of certificates never starts afresh').to.be.below(150);
      await send(String(n));
      n += 1;
      await send('a');
    }
    expect(fetches('a')).to.equal(2);
    // 98 more make 100, "a" still among them; the next one starts afresh.
    for (let i = 0; i < 98; i += 1) await send(`fill-${i}`);
    await send('a');
    expect(fetches('a')).to.equal(2);
    await send('last');
    await send('a');
    expect(fetches('a')).to.equal(3);
  });
});
