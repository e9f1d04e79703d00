// The sender identity, rule by rule: what a PUT changes (only the fields given; '' and null clear; addresses in lower
// case, the name as written), the TXT lookup (a record in chunks, another organization's token, a failing lookup:
// unverified, never an error; no address, no lookup), the SPF record naming MAIL_FROM's domain in lower case, a DKIM
// rotation whose record is published with spaces or not at all (a lookup that fails), a key that cannot be opened
// (the mail goes unsigned), and who mail is From and where replies go in every case of `senderOf`.
import { randomUUID } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { getServers, setServers } from 'node:dns/promises';
import { expect } from 'chai';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startSmtpSink, type SmtpSink } from './helpers/smtp.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { createTicket, ok } from './helpers/tickets.js';
import { TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { senderOf } from '../server/services/email/index.js';

// MAIL_FROM as an operator may write it: the domain in capitals.
const MAIL_FROM = 'Helpdesk Platform <Desk@Platform-Upper.TEST>';

/** A TXT lookup as DNS answers: the records published for a host, and an error (ENOTFOUND) for a host with none. */
function zoneResolver(zone: Map<string, string[][]>, asked: string[]) {
  return async (host: string) => {
    asked.push(host);
    const records = zone.get(host);
    if (!records) throw Object.assign(new Error(`queryTxt ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return records;
  };
}

describe('Email: the sender identity, rule by rule', function () {
  this.timeout(90_000);
  let smtp: SmtpSink;
  let test: TestServer;
  let owner: SignedUp;
  let bystander: SignedUp;
  let bystanderView: unknown;
  const zone = new Map<string, string[][]>();
  const asked: string[] = [];
  const as = () => ({ token: owner.accessToken });
  const record = (data: { dnsRecords: { purpose: string; name: string; value: string }[] }, purpose: string) => data.dnsRecords.find((r) => r.purpose === purpose)!;

  before(async () => {
    smtp = await startSmtpSink({ user: 'identity-rules', pass: 'identity-rules-secret' });
    test = await startTestServer({ SMTP_URL: smtp.url, MAIL_FROM, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    test.server.services.email.lookupTxt = zoneResolver(zone, asked);
    owner = await signUp(test.server, test.baseUrl);
    // Another organization, verified, with its own key: nothing done to the owner's identity may change it.
    bystander = await signUp(test.server, test.baseUrl);
    const put = ok(await bystander.api.put('/email/identity', { fromName: 'Bystander', fromAddress: `help@bystander-${randomUUID().slice(0, 6)}.test`, replyTo: null, signature: 'Theirs' }, { token: bystander.accessToken }), 200);
    zone.set(record(put, 'verification').name, [[record(put, 'verification').value]]);
    bystanderView = ok(await bystander.api.post('/email/identity/verify', {}, { token: bystander.accessToken }), 200);
    expect(bystanderView).to.include({ domainVerified: true });
  });

  /** The other organization's identity as it was. */
  async function bystanderUnchanged(): Promise<void> {
    expect(ok(await bystander.api.get('/email/identity', { token: bystander.accessToken }), 200)).to.deep.equal(bystanderView);
  }

  after(async () => {
    await test?.stop();
    await smtp?.close();
  });

  it('changes only the fields given: addresses in lower case, the name as written; \'\' and null clear a field', async () => {
    const domain = `put-${randomUUID().slice(0, 6)}.test`;
    const first = ok(await owner.api.put('/email/identity', { fromName: 'ACME Support', fromAddress: `Help@${domain.toUpperCase()}`, replyTo: `Replies@${domain.toUpperCase()}`, signature: 'The ACME team' }, as()), 200);
    expect(first).to.include({ fromName: 'ACME Support', fromAddress: `help@${domain}`, replyTo: `replies@${domain}`, signature: 'The ACME team', domain, domainVerified: false, domainVerifiedAt: null });
    // SPF names MAIL_FROM's domain, in lower case.
    expect(record(first, 'spf')).to.deep.equal({ type: 'TXT', name: domain, value: 'v=spf1 include:platform-upper.test ~all', purpose: 'spf' });
    expect(record(first, 'verification')).to.include({ type: 'TXT', name: `_support-verification.${domain}` });
    // An empty PUT changes nothing.
    expect(ok(await owner.api.put('/email/identity', {}, as()), 200)).to.deep.equal(first);
    const second = ok(await owner.api.put('/email/identity', { signature: '', replyTo: null }, as()), 200);
    expect(second).to.include({ fromName: 'ACME Support', fromAddress: `help@${domain}`, replyTo: null, signature: null });
    const third = ok(await owner.api.put('/email/identity', { fromName: 'Acme' }, as()), 200);
    expect(third).to.include({ fromName: 'Acme', fromAddress: `help@${domain}`, replyTo: null, signature: null });
    await bystanderUnchanged();
  });

  it('verifies by the token\'s TXT record, in chunks too; another token, or a lookup that fails, leaves it unverified (200)', async () => {
    const domain = `verify-${randomUUID().slice(0, 6)}.test`;
    // No from address: nothing to look up.
    const other = await signUp(test.server, test.baseUrl);
    asked.length = 0;
    expect(ok(await other.api.post('/email/identity/verify', {}, { token: other.accessToken }), 200)).to.deep.include({ domain: null, domainVerified: false, domainVerifiedAt: null, dnsRecords: [] });
    expect(asked).to.deep.equal([]);

    const put = ok(await owner.api.put('/email/identity', { fromAddress: `help@${domain}` }, as()), 200);
    const token = record(put, 'verification');
    // The other organization's token on this domain proves nothing.
    const otherToken = record(ok(await other.api.put('/email/identity', { fromAddress: `help@${domain}` }, { token: other.accessToken }), 200), 'verification');
    expect(otherToken.value).to.not.equal(token.value);
    zone.set(token.name, [[otherToken.value]]);
    expect(ok(await owner.api.post('/email/identity/verify', {}, as()), 200).domainVerified).to.equal(false);
    // No record at all: the lookup fails, the answer is still 200.
    zone.delete(token.name);
    expect(ok(await owner.api.post('/email/identity/verify', {}, as()), 200)).to.include({ domainVerified: false, domainVerifiedAt: null });

    zone.set(token.name, [['v=spf1 -all'], [token.value.slice(0, 10), token.value.slice(10)]]);
    const before = Date.now();
    asked.length = 0;
    const verified = ok(await owner.api.post('/email/identity/verify', {}, as()), 200);
    expect(verified.domainVerified).to.equal(true);
    // No rotation waiting: the token's host is the only one looked up.
    expect(asked).to.deep.equal([token.name]);
    const row = await test.server.db.knex('email_identities').where({ organizationId: owner.orgId }).first();
    expect(row.verifiedDomain).to.equal(domain);
    expect(verified.domainVerifiedAt).to.equal(new Date(row.domainVerifiedAt).toISOString());
    expect(new Date(verified.domainVerifiedAt).getTime()).to.be.at.least(before - 1000);
    expect(ok(await owner.api.get('/email/identity', as()), 200)).to.include({ domainVerified: true, domainVerifiedAt: verified.domainVerifiedAt });

    // The record gone: the next check unverifies.
    zone.delete(token.name);
    expect(ok(await owner.api.post('/email/identity/verify', {}, as()), 200)).to.include({ domainVerified: false, domainVerifiedAt: null });
    await bystanderUnchanged();
  });

  it('finishes a rotation only when the next key is published (spaces inside the record are fine); its lookup failing is no error', async () => {
    const domain = `rotate-${randomUUID().slice(0, 6)}.test`;
    const put = ok(await owner.api.put('/email/identity', { fromAddress: `help@${domain}` }, as()), 200);
    zone.set(record(put, 'verification').name, [[record(put, 'verification').value]]);
    const rotating = ok(await owner.api.post('/email/identity/dkim/rotate', {}, as()), 200);
    const current = record(rotating, 'dkim');
    const next = record(rotating, 'dkim_next');
    // Not published: the lookup of the next record fails; the domain is verified all the same.
    const waiting = ok(await owner.api.post('/email/identity/verify', {}, as()), 200);
    expect(waiting.domainVerified).to.equal(true);
    expect(record(waiting, 'dkim')).to.deep.equal(current);
    expect(record(waiting, 'dkim_next')).to.deep.equal(next);
    // Published with another key: still waiting.
    zone.set(next.name, [[current.value]]);
    expect(record(ok(await owner.api.post('/email/identity/verify', {}, as()), 200), 'dkim_next')).to.deep.equal(next);
    // Published as some DNS consoles write it: spaces in the key, in chunks.
    const key = next.value.split('p=')[1]!;
    zone.set(next.name, [[`v=DKIM1; k=rsa; p=${key.slice(0, 100)} `, ` ${key.slice(100)}`]]);
    const done = ok(await owner.api.post('/email/identity/verify', {}, as()), 200);
    expect(done.dnsRecords.filter((r: { purpose: string }) => r.purpose.startsWith('dkim'))).to.deep.equal([{ ...next, purpose: 'dkim' }]);
    await bystanderUnchanged();
  });

  it('sends the mail unsigned when the key cannot be opened (sealed under another ENCRYPTION_KEY)', async () => {
    const domain = `sealed-${randomUUID().slice(0, 6)}.test`;
    const put = ok(await owner.api.put('/email/identity', { fromName: 'Sealed', fromAddress: `help@${domain}` }, as()), 200);
    zone.set(record(put, 'verification').name, [[record(put, 'verification').value]]);
    expect(ok(await owner.api.post('/email/identity/verify', {}, as()), 200).domainVerified).to.equal(true);
    await test.server.db.knex('email_identities').where({ organizationId: owner.orgId }).update({ dkimPrivateKey: 'v1.not-a-key-sealed-here' });
    const requester = uniqueEmail('unsigned');
    await createTicket(owner, { title: 'Unreadable key', requester: { email: requester } });
    const mail = await smtp.waitForMail(requester);
    expect(mail.parsed.from?.value[0]).to.deep.equal({ name: 'Sealed', address: `help@${domain}` });
    expect(mail.parsed.headers.has('dkim-signature')).to.equal(false);
  });

  it('does not sign a mail queued From a domain that is no longer the verified one', async () => {
    // An organization of its own: the one above has an unreadable key now.
    const org = await signUp(test.server, test.baseUrl);
    const domain = `moved-${randomUUID().slice(0, 6)}.test`;
    const put = ok(await org.api.put('/email/identity', { fromName: 'Moved', fromAddress: `help@${domain}` }, { token: org.accessToken }), 200);
    zone.set(record(put, 'verification').name, [[record(put, 'verification').value]]);
    expect(ok(await org.api.post('/email/identity/verify', {}, { token: org.accessToken }), 200).domainVerified).to.equal(true);
    // Signed From the verified domain...
    const now = uniqueEmail('now-verified');
    await test.server.services.mailer.queue({ kind: 'ticket_created', to: now, subject: 'Verified', text: 'Signed', headers: { from: { name: 'Moved', address: `help@${domain}` }, organizationId: org.orgId } });
    expect((await smtp.waitForMail(now)).parsed.headers.has('dkim-signature')).to.equal(true);
    // ...not From the domain verified before (a mail queued then, delivered now).
    const earlier = uniqueEmail('earlier');
    await test.server.services.mailer.queue({ kind: 'ticket_created', to: earlier, subject: 'Queued earlier', text: 'Unsigned', headers: { from: { name: 'Earlier', address: 'help@earlier-domain.test' }, organizationId: org.orgId } });
    expect((await smtp.waitForMail(earlier)).parsed.headers.has('dkim-signature')).to.equal(false);
  });

  it('gives an identity made before DKIM its own key, leaving other such identities theirs to get', async () => {
    const [first, second] = [await signUp(test.server, test.baseUrl), await signUp(test.server, test.baseUrl)];
    // Two identities as they were stored before DKIM keys existed.
    await test.server.db.knex('email_identities').insert([first, second].map((o) => ({ organizationId: o.orgId, verificationToken: randomUUID().replace(/-/g, ''), fromAddress: `help@legacy-${randomUUID().slice(0, 6)}.test` })));
    const firstKey = record(ok(await first.api.get('/email/identity', { token: first.accessToken }), 200), 'dkim');
    expect((await test.server.db.knex('email_identities').where({ organizationId: second.orgId }).first()).dkimPrivateKey).to.equal(null);
    const secondKey = record(ok(await second.api.get('/email/identity', { token: second.accessToken }), 200), 'dkim');
    expect(secondKey.value).to.not.equal(firstKey.value);
  });

  it('says who mail is from in every case: verified or not, with or without a name, a Reply-To, a platform name', () => {
    const verifiedAt = new Date();
    const base = { fromName: null, fromAddress: null, replyTo: null, verifiedDomain: null, domainVerifiedAt: null };
    const platform = { name: 'Acme via Desk', address: 'desk@platform.test' };
    expect(senderOf('Acme', 'Desk <desk@platform.test>', undefined)).to.deep.equal({ from: platform });
    expect(senderOf('Acme', 'desk@platform.test', undefined)).to.deep.equal({ from: { name: 'Acme', address: 'desk@platform.test' } });
    expect(senderOf('Acme', 'Desk <desk@platform.test>', base)).to.deep.equal({ from: platform });
    // Unverified: Reply-To the organization's Reply-To, else its From address.
    expect(senderOf('Acme', 'Desk <desk@platform.test>', { ...base, fromAddress: 'help@acme.test' })).to.deep.equal({ from: platform, replyTo: 'help@acme.test' });
    expect(senderOf('Acme', 'Desk <desk@platform.test>', { ...base, fromAddress: 'help@acme.test', replyTo: 'r@acme.test' })).to.deep.equal({ from: platform, replyTo: 'r@acme.test' });
    // Verified at another time but not the domain: still the platform's From; verified without a date: not verified.
    expect(senderOf('Acme', 'Desk <desk@platform.test>', { ...base, fromAddress: 'help@acme.test', verifiedDomain: 'acme.test' })).to.deep.equal({ from: platform, replyTo: 'help@acme.test' });
    // Verified: its own From, named by the organization when it set no name, Reply-To its From address by default.
    expect(senderOf('Acme', 'Desk <desk@platform.test>', { ...base, fromAddress: 'help@acme.test', verifiedDomain: 'acme.test', domainVerifiedAt: verifiedAt })).to.deep.equal({ from: { name: 'Acme', address: 'help@acme.test' }, replyTo: 'help@acme.test' });
  });
});

describe('Email: the sender identity under a MAIL_FROM without a domain', function () {
  this.timeout(60_000);
  let test: TestServer;

  before(async () => {
    test = await startTestServer({ MAIL_FROM: 'Desk <desk>' });
  });

  after(async () => {
    await test?.stop();
  });

  it('names localhost in the SPF record', async () => {
    const owner = await signUp(test.server, test.baseUrl);
    const put = ok(await owner.api.put('/email/identity', { fromAddress: 'help@no-domain.test' }, { token: owner.accessToken }), 200);
    expect(put.dnsRecords.find((r: { purpose: string }) => r.purpose === 'spf').value).to.equal('v=spf1 include:localhost ~all');
  });
});

/** A DNS server on a loopback UDP port answering TXT questions from `zone` (NXDOMAIN for any other name). */
async function startTxtServer(zone: Map<string, string[][]>): Promise<{ address: string; close(): Promise<void> }> {
  const socket = createSocket('udp4');
  socket.on('message', (query, peer) => {
    // The question: labels from byte 12 to the empty label, then QTYPE and QCLASS.
    const labels: string[] = [];
    let at = 12;
    while (query[at]! > 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]!).toString('latin1'));
      at += 1 + query[at]!;
    }
    const question = query.subarray(12, at + 5);
    const records = zone.get(labels.join('.').toLowerCase()) ?? [];
    const answers = records.map((chunks) => {
      const data = Buffer.concat(chunks.map((c) => Buffer.concat([Buffer.from([Buffer.byteLength(c, 'latin1')]), Buffer.from(c, 'latin1')])));
      const fixed = Buffer.alloc(12);
      fixed.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      fixed.writeUInt16BE(16, 2); // TXT
      fixed.writeUInt16BE(1, 4); // IN
      fixed.writeUInt32BE(60, 6);
      fixed.writeUInt16BE(data.length, 10);
      return Buffer.concat([fixed, data]);
    });
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2);
    header.writeUInt16BE(records.length ? 0x8180 : 0x8183, 2);
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    socket.send(Buffer.concat([header, question, ...answers]), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  return { address: `127.0.0.1:${socket.address().port}`, close: () => new Promise<void>((resolve) => socket.close(() => resolve())) };
}

describe('Email: the sender identity verified through the system\'s DNS resolver', function () {
  this.timeout(60_000);
  let test: TestServer;
  let dns: { address: string; close(): Promise<void> };
  let servers: string[];
  const zone = new Map<string, string[][]>();

  before(async () => {
    dns = await startTxtServer(zone);
    servers = getServers();
    setServers([dns.address]);
    test = await startTestServer();
  });

  after(async () => {
    await test?.stop();
    if (servers) setServers(servers);
    await dns?.close();
  });

  it('finds the token published in DNS (no resolver given to the server)', async () => {
    const owner = await signUp(test.server, test.baseUrl);
    const domain = `dns-${randomUUID().slice(0, 6)}.test`;
    const put = ok(await owner.api.put('/email/identity', { fromAddress: `help@${domain}` }, { token: owner.accessToken }), 200);
    expect(ok(await owner.api.post('/email/identity/verify', {}, { token: owner.accessToken }), 200).domainVerified).to.equal(false);
    const token = put.dnsRecords.find((r: { purpose: string }) => r.purpose === 'verification');
    zone.set(token.name, [[token.value]]);
    expect(ok(await owner.api.post('/email/identity/verify', {}, { token: owner.accessToken }), 200).domainVerified).to.equal(true);
  });
});
