// Amazon SES inbound mail through SNS: signatures (versions 1 and 2) checked with the certificate fetched from an
// allowed URL only (a local fake here, through SNS_CERT_URL_PATTERN), the subscription confirmed, the mail stored
// once on the channel its recipient names; forged, tampered, stale and foreign-certificate messages 401 and other
// topics than SNS_TOPIC_ARNS 403, with nothing stored.
import { createSign, generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { ok } from './helpers/tickets.js';
import { expectError } from './helpers/tenancy.js';
import { inboundEvents, mime, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { SNS_URL_DEFAULT } from '../server/config.js';

const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const publicPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();

type Sns = Record<string, string>;

function signed(message: Sns, version: '1' | '2', certUrl: string): Sns {
  const keys = message.Type === 'Notification'
    ? ['Message', 'MessageId', ...(message.Subject !== undefined ? ['Subject'] : []), 'Timestamp', 'TopicArn', 'Type']
    : ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];
  const canonical = keys.map((k) => `${k}\n${message[k]}\n`).join('');
  const signature = createSign(version === '1' ? 'RSA-SHA1' : 'RSA-SHA256').update(canonical).sign(privateKey, 'base64');
  return { ...message, SignatureVersion: version, Signature: signature, SigningCertURL: certUrl };
}

describe('Channels: SES inbound through SNS', function () {
  this.timeout(60_000);
  let fake: Server;
  let fakeUrl: string;
  const calls: string[] = [];
  let test: TestServer;
  let owner: SignedUp;
  let channel: { id: string; config: { smtpAddress: string } };
  const acmeDomain = `acme-${randomUUID().slice(0, 8)}.sns.test`;
  const topic = 'arn:aws:sns:eu-west-1:123456789012:ses-inbound';

  before(async () => {
    fake = createServer((req, res) => {
      calls.push(req.url ?? '');
      if (req.url === '/cert.pem') return void res.writeHead(200, { 'content-type': 'application/x-pem-file' }).end(publicPem);
      if (req.url?.startsWith('/confirm')) return void res.writeHead(200, { 'content-type': 'text/xml' }).end('<ConfirmSubscriptionResponse/>');
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', () => r()));
    fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, EMAIL_INBOUND_SNS: 'true', SNS_CERT_URL_PATTERN: `^${fakeUrl.replace(/\./g, '\\.')}/`, INBOUND_EMAIL_DOMAIN: 'in.sns.test', SNS_TOPIC_ARNS: `arn:aws:sns:us-east-1:123456789012:other, ${topic}` });
    owner = await signUp(test.server, test.baseUrl);
    const created = ok(await owner.api.post('/channels/email', { name: 'SES', address: `support@${acmeDomain}` }, { token: owner.accessToken }), 201);
    channel = { id: created.channel.id, config: { smtpAddress: created.inbound.smtpAddress } };
    await domainVerified(owner.orgId, acmeDomain);
  });

  /** What a found DNS record makes of the organization's identity (the lookup itself is tested with the identity). */
  const domainVerified = (orgId: string, domain: string) =>
    test.server.db.knex('email_identities')
      .insert({ organizationId: orgId, verificationToken: randomUUID().replace(/-/g, ''), fromAddress: `support@${domain}`, verifiedDomain: domain, domainVerifiedAt: new Date() })
      .onConflict('organization_id').merge({ fromAddress: `support@${domain}`, verifiedDomain: domain, domainVerifiedAt: new Date() });

  after(async () => {
    await test?.stop();
    await new Promise((r) => fake.close(r));
  });

  const post = (body: unknown) => owner.api.request('POST', '/channels/inbound', { rawBody: JSON.stringify(body), headers: { 'content-type': 'text/plain; charset=UTF-8', 'x-amz-sns-message-type': 'Notification' } });
  const notification = (to: string, raw: string, encoding: 'UTF8' | 'BASE64' = 'UTF8'): Sns => ({
    Type: 'Notification', MessageId: randomUUID(), TopicArn: topic, Subject: 'Amazon SES Email Receipt Notification', Timestamp: new Date().toISOString(),
    Message: JSON.stringify({ notificationType: 'Received', mail: { destination: [to] }, receipt: { recipients: [to], action: { type: 'SNS', encoding } }, content: encoding === 'BASE64' ? Buffer.from(raw).toString('base64') : raw }),
  });

  it('only trusts certificates from https://sns.<region>.amazonaws.com/ by default', () => {
    expect(SNS_URL_DEFAULT.test('https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-abc.pem')).to.equal(true);
    for (const url of ['http://sns.eu-west-1.amazonaws.com/x.pem', 'https://sns.eu-west-1.amazonaws.com.evil.test/x.pem', 'https://evil.test/sns.eu-west-1.amazonaws.com/x.pem', `${fakeUrl}/cert.pem`]) {
      expect(SNS_URL_DEFAULT.test(url), url).to.equal(false);
    }
  });

  it('confirms a signed subscription (SignatureVersion 1) by calling its SubscribeURL', async () => {
    const confirm = signed({ Type: 'SubscriptionConfirmation', MessageId: randomUUID(), Token: 'tok-1', TopicArn: topic, Message: 'You have chosen to subscribe', SubscribeURL: `${fakeUrl}/confirm?Token=tok-1`, Timestamp: new Date().toISOString() }, '1', `${fakeUrl}/cert.pem`);
    ok(await post(confirm), 200);
    expect(calls).to.include('/confirm?Token=tok-1');
    // A SubscribeURL elsewhere is not called.
    const elsewhere = signed({ ...confirm, SubscribeURL: 'http://127.0.0.2:1/confirm', MessageId: randomUUID() }, '1', `${fakeUrl}/cert.pem`);
    expectError(await post(elsewhere), 400, 'validation_failed');
  });

  it('stores a signed notification\'s mail (SignatureVersion 2) on the channel its recipient names, once', async () => {
    const customer = uniqueEmail('ses');
    const messageId = `<${randomUUID()}@customer.test>`;
    const body = signed(notification(channel.config.smtpAddress, mime({ from: customer, subject: 'Via SES', text: 'Hello through SES', messageId })), '2', `${fakeUrl}/cert.pem`);
    expect(ok(await post(body), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    expect(ok(await post(body), 200)).to.deep.equal({ stored: 0, duplicates: 1 });
    await quiesce(test.server, owner.orgId);
    const event = (await inboundEvents(test.server, channel.id)).find((e) => e.providerId === messageId)!;
    expect(event.status).to.equal('processed');
    const messages = await test.server.db.knex('messages').where({ conversationId: event.conversationId });
    expect(messages.map((m: { content: string }) => m.content).join('\n')).to.contain('Hello through SES');

    // Base64 content to one of the channel's own addresses.
    const other = `<${randomUUID()}@customer.test>`;
    const encoded = signed(notification(`support@${acmeDomain}`, mime({ from: customer, subject: 'Again', text: 'Encoded', messageId: other }), 'BASE64'), '2', `${fakeUrl}/cert.pem`);
    expect(ok(await post(encoded), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    // Mail for an address no channel takes is acknowledged and dropped.
    const nobody = signed(notification('nobody@elsewhere.test', mime({ from: customer, subject: 'x', text: 'x', messageId: `<${randomUUID()}@c.test>` })), '2', `${fakeUrl}/cert.pem`);
    expect(ok(await post(nobody), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
  });

  it("delivers mail for a listed address only to the organization that verified the address's domain", async () => {
    // Unique per run: earlier runs on the same database left channels listing their own addresses.
    const victimDomain = `victim-${randomUUID().slice(0, 8)}.sns.test`;
    // Another organization lists the address first: listing proves nothing, so it must not receive the mail.
    const squatter = await signUp(test.server, test.baseUrl);
    const squatted = ok(await squatter.api.post('/channels/email', { name: 'Not theirs', address: `help@${victimDomain}` }, { token: squatter.accessToken }), 201);
    const victim = await signUp(test.server, test.baseUrl);
    const own = ok(await victim.api.post('/channels/email', { name: 'Help', address: `help@${victimDomain}` }, { token: victim.accessToken }), 201);
    const mail = () => {
      const messageId = `<${randomUUID()}@customer.test>`;
      return { messageId, body: signed(notification(`help@${victimDomain}`, mime({ from: uniqueEmail('victim'), subject: 'Help', text: 'Where is my order?', messageId })), '2', `${fakeUrl}/cert.pem`) };
    };
    const before = mail();
    expect(ok(await post(before.body), 200)).to.deep.equal({ stored: 0, duplicates: 0 });
    await domainVerified(victim.orgId, victimDomain);
    const after = mail();
    expect(ok(await post(after.body), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    await quiesce(test.server, [squatter.orgId, victim.orgId]);
    expect((await inboundEvents(test.server, own.channel.id)).map((e) => e.providerId)).to.deep.equal([after.messageId]);
    expect(await inboundEvents(test.server, squatted.channel.id)).to.deep.equal([]);
  });

  it('refuses tampered, unsigned, wrong-version and foreign-certificate messages with 401, storing nothing', async () => {
    const before = (await inboundEvents(test.server, channel.id)).length;
    const make = () => signed(notification(channel.config.smtpAddress, mime({ from: uniqueEmail('forged'), subject: 'Forged', text: 'x', messageId: `<${randomUUID()}@forged.test>` })), '2', `${fakeUrl}/cert.pem`);
    const tampered = make();
    tampered.Message = tampered.Message!.replace('Forged', 'Changed');
    expectError(await post(tampered), 401, 'unauthorized');
    const { Signature: _s, ...unsigned } = make();
    void _s;
    expectError(await post(unsigned), 401, 'unauthorized');
    expectError(await post({ ...make(), SignatureVersion: '3' }), 401, 'unauthorized');
    // Signed, but the certificate URL is not an allowed one: never fetched.
    const fetched = calls.length;
    expectError(await post(signed(notification(channel.config.smtpAddress, 'x'), '2', 'http://127.0.0.2:9/cert.pem')), 401, 'unauthorized');
    expect(calls.length).to.equal(fetched);
    // Version 1 over a version 2 signature does not verify.
    expectError(await post({ ...make(), SignatureVersion: '1' }), 401, 'unauthorized');
    expect(await inboundEvents(test.server, channel.id)).to.have.length(before);
  });

  it('takes only the topics of SNS_TOPIC_ARNS: another topic\'s signed messages are 403, stored and confirmed never', async () => {
    const before = (await inboundEvents(test.server, channel.id)).length;
    const foreign = 'arn:aws:sns:eu-west-1:999999999999:someone-elses';
    const mail = signed({ ...notification(channel.config.smtpAddress, mime({ from: uniqueEmail('foreign'), subject: 'Foreign', text: 'x', messageId: `<${randomUUID()}@f.test>` })), TopicArn: foreign }, '2', `${fakeUrl}/cert.pem`);
    expectError(await post(mail), 403, 'forbidden');
    const confirm = signed({ Type: 'SubscriptionConfirmation', MessageId: randomUUID(), Token: 'tok-foreign', TopicArn: foreign, Message: 'Subscribe', SubscribeURL: `${fakeUrl}/confirm?Token=tok-foreign`, Timestamp: new Date().toISOString() }, '2', `${fakeUrl}/cert.pem`);
    expectError(await post(confirm), 403, 'forbidden');
    expect(calls).not.to.include('/confirm?Token=tok-foreign');
    expect(await inboundEvents(test.server, channel.id)).to.have.length(before);
  });

  it('refuses a message older than SNS_MAX_AGE_SECONDS (300 s) or dated ahead, by its signed Timestamp, with 401', async () => {
    const before = (await inboundEvents(test.server, channel.id)).length;
    const at = (secondsAgo: number) => {
      const messageId = `<${randomUUID()}@age.test>`;
      return { messageId, body: signed({ ...notification(channel.config.smtpAddress, mime({ from: uniqueEmail('age'), subject: 'Age', text: 'x', messageId })), Timestamp: new Date(Date.now() - secondsAgo * 1000).toISOString() }, '2', `${fakeUrl}/cert.pem`) };
    };
    expectError(await post(at(310).body), 401, 'unauthorized');
    expectError(await post(at(-400).body), 401, 'unauthorized');
    expectError(await post({ ...at(0).body, Timestamp: 'yesterday' }), 401, 'unauthorized');
    expect(await inboundEvents(test.server, channel.id)).to.have.length(before);
    expect(ok(await post(at(240).body), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
  });
});
