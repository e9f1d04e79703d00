// DKIM for an organization's own domain: the identity lists the `<selector>._domainkey` record with its public key,
// the private key is stored sealed, and once the domain is verified its mail (ticket mail through the outbox, channel
// replies by SMTP) carries a DKIM-Signature that verifies against the published key; before that, none.
import { createHash, createPublicKey, createVerify, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { addMember, signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startSmtpSink, type ReceivedMail, type SmtpSink } from './helpers/smtp.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { createTicket, ok } from './helpers/tickets.js';
import { mime, postSignedMail, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { expectError } from './helpers/tenancy.js';

const MAIL_FROM = 'Helpdesk Platform <desk@platform.test>';

/** The header fields of a raw message, unfolded, in order. */
function headerFields(raw: Buffer): { name: string; field: string }[] {
  const head = raw.toString('latin1').split('\r\n\r\n')[0]!;
  return head.split(/\r\n(?![ \t])/).map((field) => ({ name: field.slice(0, field.indexOf(':')).trim().toLowerCase(), field }));
}

const relaxedHeader = (field: string) => {
  const i = field.indexOf(':');
  return `${field.slice(0, i).trim().toLowerCase()}:${field.slice(i + 1).replace(/\r\n/g, '').replace(/[ \t]+/g, ' ').trim()}`;
};

function relaxedBody(raw: Buffer): string {
  const body = raw.toString('latin1').split('\r\n\r\n').slice(1).join('\r\n\r\n');
  const lines = body.split('\r\n').map((l) => l.replace(/[ \t]+/g, ' ').replace(/ $/, ''));
  while (lines.length && lines[lines.length - 1] === '') lines.pop();
  return lines.length ? `${lines.join('\r\n')}\r\n` : '';
}

/** Checks a relaxed/relaxed rsa-sha256 DKIM-Signature against a public key as DNS publishes it (RFC 6376). */
function dkimOf(mail: ReceivedMail, publicKeyBase64: string): { d: string; s: string; valid: boolean; bodyHashMatches: boolean } {
  const fields = headerFields(mail.raw);
  const signature = fields.find((f) => f.name === 'dkim-signature');
  if (!signature) throw new Error('no DKIM-Signature');
  const tags = new Map(signature.field.slice(signature.field.indexOf(':') + 1).split(';').map((t) => t.trim()).filter(Boolean).map((t) => [t.slice(0, t.indexOf('=')).trim(), t.slice(t.indexOf('=') + 1).replace(/\s+/g, '')] as [string, string]));
  expect(tags.get('a')).to.equal('rsa-sha256');
  expect(tags.get('c')).to.equal('relaxed/relaxed');
  const bodyHashMatches = createHash('sha256').update(relaxedBody(mail.raw), 'latin1').digest('base64') === tags.get('bh');
  // Each signed name takes the last not-yet-used field of that name.
  const used = new Map<string, number>();
  const signedLines = tags.get('h')!.split(':').map((n) => n.trim().toLowerCase()).flatMap((name) => {
    const all = fields.filter((f) => f.name === name && f !== signature);
    const k = (used.get(name) ?? 0) + 1;
    used.set(name, k);
    const field = all[all.length - k];
    return field ? [`${relaxedHeader(field.field)}\r\n`] : [];
  });
  const unsigned = relaxedHeader(signature.field).replace(/b=[^;]*$/, 'b=').replace(/b=[^;]*;/, 'b=;');
  const verifier = createVerify('RSA-SHA256');
  verifier.update(signedLines.join('') + unsigned, 'latin1');
  const key = createPublicKey({ key: Buffer.from(publicKeyBase64, 'base64'), format: 'der', type: 'spki' });
  return { d: tags.get('d')!, s: tags.get('s')!, valid: verifier.verify(key, tags.get('b')!, 'base64'), bodyHashMatches };
}

describe('Email: DKIM for verified organization domains', function () {
  this.timeout(60_000);
  let smtp: SmtpSink;
  let test: TestServer;
  let owner: SignedUp;
  let selector: string;
  let publicKey: string;
  let identity: any;

  before(async () => {
    smtp = await startSmtpSink({ user: 'dkim', pass: 'dkim-secret' });
    test = await startTestServer({ SMTP_URL: smtp.url, MAIL_FROM, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    owner = await signUp(test.server, test.baseUrl);
    // The identity is set here, not by the first test: every test of this file must be able to run on its own.
    identity = ok(await owner.api.put('/email/identity', { fromName: 'Acme Support', fromAddress: 'help@acme-dkim.test' }, { token: owner.accessToken }), 200);
    const record = identity.dnsRecords.find((r: { purpose: string }) => r.purpose === 'dkim');
    selector = record.name.split('.')[0];
    publicKey = record.value.split('p=')[1];
  });

  after(async () => {
    await test?.stop();
    await smtp?.close();
  });

  it('lists the DKIM record to publish and keeps the private key sealed', async () => {
    const record = identity.dnsRecords.find((r: { purpose: string }) => r.purpose === 'dkim');
    expect(record.type).to.equal('TXT');
    expect(record.name).to.match(/^sp[0-9a-f]{8}\._domainkey\.acme-dkim\.test$/);
    expect(record.value).to.match(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]{300,}$/);
    expect(record.name).to.equal(`${selector}._domainkey.acme-dkim.test`);
    // The same key on every read.
    expect(ok(await owner.api.get('/email/identity', { token: owner.accessToken }), 200).dnsRecords.find((r: { purpose: string }) => r.purpose === 'dkim').value).to.equal(record.value);
    const row = await test.server.db.knex('email_identities').where({ organizationId: owner.orgId }).first();
    expect(row.dkimPrivateKey).to.match(/^v1\./);
    expect(row.dkimPrivateKey).not.to.contain('PRIVATE KEY');
  });

  it('does not sign with the organization\'s key while its domain is unverified', async () => {
    const requester = uniqueEmail('unsigned');
    await createTicket(owner, { title: 'Before verification', requester: { email: requester } });
    const mail = await smtp.waitForMail(requester);
    expect(mail.parsed.from?.value[0]?.address).to.equal('desk@platform.test');
    expect(mail.parsed.headers.has('dkim-signature')).to.equal(false);
  });

  it('signs ticket mail and channel replies from the verified domain; the signature verifies with the published key', async () => {
    // Stands in for the TXT lookup of POST /email/identity/verify (the test cannot publish DNS records).
    await test.server.db.knex('email_identities').where({ organizationId: owner.orgId }).update({ verifiedDomain: 'acme-dkim.test', domainVerifiedAt: new Date() });
    const requester = uniqueEmail('signed');
    await createTicket(owner, { title: 'After verification', requester: { email: requester } });
    const mail = await smtp.waitForMail(requester);
    expect(mail.parsed.from?.value[0]?.address).to.equal('help@acme-dkim.test');
    const dkim = dkimOf(mail, publicKey);
    expect(dkim).to.deep.equal({ d: 'acme-dkim.test', s: selector, valid: true, bodyHashMatches: true });

    const { channel, inbound } = ok(await owner.api.post('/channels/email', { name: 'Support', address: 'help@acme-dkim.test' }, { token: owner.accessToken }), 201);
    const customer = uniqueEmail('customer');
    ok(await postSignedMail(owner.api, channel.id, inbound.secret, mime({ from: customer, subject: 'Question', text: 'Hello?', messageId: `<${randomUUID()}@customer.test>` })), 200);
    await quiesce(test.server, owner.orgId);
    const event = await test.server.db.knex('inbound_events').where({ channelId: channel.id }).first();
    ok(await owner.api.post(`/conversations/${event.conversationId}/messages`, { content: 'Signed answer' }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    const reply = await smtp.waitForMail(customer);
    expect(dkimOf(reply, publicKey)).to.deep.equal({ d: 'acme-dkim.test', s: selector, valid: true, bodyHashMatches: true });

    // Another organization's key does not verify it: the check above can fail.
    const other = await signUp(test.server, test.baseUrl);
    const otherKey = ok(await other.api.put('/email/identity', { fromAddress: 'x@other-dkim.test' }, { token: other.accessToken }), 200).dnsRecords.find((r: { purpose: string }) => r.purpose === 'dkim').value.split('p=')[1];
    expect(otherKey).to.not.equal(publicKey);
    expect(dkimOf(mail, otherKey).valid).to.equal(false);
  });

  it('rotates the key: the new selector is listed to publish, the old key signs until the new record is found, then it is retired', async () => {
    // The organization's DNS zone: what it has published, answered to the server's TXT lookups.
    const zone = new Map<string, string[][]>();
    test.server.services.email.lookupTxt = async (host) => zone.get(host) ?? [];
    const token = ok(await owner.api.get('/email/identity', { token: owner.accessToken }), 200).dnsRecords.find((r: { purpose: string }) => r.purpose === 'verification');
    zone.set(token.name, [[token.value]]);
    expect(ok(await owner.api.post('/email/identity/verify', {}, { token: owner.accessToken }), 200).domainVerified).to.equal(true);

    const agent = await addMember(test.server, owner, 'agent');
    expectError(await agent.api.post('/email/identity/dkim/rotate', {}, { token: agent.accessToken }), 403, 'forbidden');
    const rotating = ok(await owner.api.post('/email/identity/dkim/rotate', {}, { token: owner.accessToken }), 200);
    const current = rotating.dnsRecords.find((r: { purpose: string }) => r.purpose === 'dkim');
    const next = rotating.dnsRecords.find((r: { purpose: string }) => r.purpose === 'dkim_next');
    expect(current.name).to.equal(`${selector}._domainkey.acme-dkim.test`);
    expect(next.name).to.match(/^sp[0-9a-f]{8}\._domainkey\.acme-dkim\.test$/);
    expect(next.name).not.to.equal(current.name);
    const nextSelector = next.name.split('.')[0];
    const nextKey = next.value.split('p=')[1];
    expect(nextKey).not.to.equal(publicKey);
    expectError(await owner.api.post('/email/identity/dkim/rotate', {}, { token: owner.accessToken }), 409, 'conflict');

    // Not published yet: the old key keeps signing, and verifying changes nothing.
    const waiting = ok(await owner.api.post('/email/identity/verify', {}, { token: owner.accessToken }), 200);
    expect(waiting.dnsRecords.map((r: { purpose: string }) => r.purpose)).to.deep.equal(['verification', 'spf', 'dkim', 'dkim_next']);
    const before = uniqueEmail('rotating');
    await createTicket(owner, { title: 'During the rotation', requester: { email: before } });
    expect(dkimOf(await smtp.waitForMail(before), publicKey)).to.deep.equal({ d: 'acme-dkim.test', s: selector, valid: true, bodyHashMatches: true });

    // Published (a long TXT record comes in chunks of up to 255 characters): the new key signs, the old is gone.
    const value = `v=DKIM1; k=rsa; p=${nextKey}`;
    zone.set(next.name, [[value.slice(0, 255), value.slice(255)]]);
    const done = ok(await owner.api.post('/email/identity/verify', {}, { token: owner.accessToken }), 200);
    expect(done.domainVerified).to.equal(true);
    expect(done.dnsRecords.filter((r: { purpose: string }) => r.purpose.startsWith('dkim'))).to.deep.equal([{ type: 'TXT', name: next.name, value, purpose: 'dkim' }]);
    const after = uniqueEmail('rotated');
    await createTicket(owner, { title: 'After the rotation', requester: { email: after } });
    const mail = await smtp.waitForMail(after);
    expect(dkimOf(mail, nextKey)).to.deep.equal({ d: 'acme-dkim.test', s: nextSelector, valid: true, bodyHashMatches: true });
    expect(dkimOf(mail, publicKey).valid).to.equal(false);
    const row = await test.server.db.knex('email_identities').where({ organizationId: owner.orgId }).first();
    expect(row).to.include({ dkimSelector: nextSelector, dkimPublicKey: nextKey, dkimNextSelector: null, dkimNextPrivateKey: null, dkimNextPublicKey: null });
    // A new rotation may start again.
    ok(await owner.api.post('/email/identity/dkim/rotate', {}, { token: owner.accessToken }), 200);
  });
});
