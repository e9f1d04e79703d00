// The organization's sender identity: read by agents, written by admins, DNS records to publish, unverified until
// the TXT record is found; ticket mail then goes From "<Org> via <platform>" with Reply-To the organization's address.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { addMember, signUp, uniqueEmail, type Member, type SignedUp } from './helpers/factories.js';
import { startSmtpSink, type SmtpSink } from './helpers/smtp.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { createTicket } from './helpers/tickets.js';
import { senderOf } from '../server/services/email/index.js';

const MAIL_FROM = 'Helpdesk Platform <desk@platform.test>';

describe('Email: sender identity', function () {
  this.timeout(60_000);
  let smtp: SmtpSink;
  let test: TestServer;
  let owner: SignedUp;
  let agent: Member;
  const orgName = `Identity ${randomUUID().slice(0, 6)}`;

  before(async () => {
    smtp = await startSmtpSink({ user: 'identity', pass: 'identity-secret' });
    test = await startTestServer({ SMTP_URL: smtp.url, MAIL_FROM });
    owner = await signUp(test.server, test.baseUrl, { organizationName: orgName });
    agent = await addMember(test.server, owner, 'agent');
  });

  after(async () => {
    await test?.stop();
    await smtp?.close();
  });

  it('starts empty and unverified; agents read it, only admins change it', async () => {
    const res = await agent.api.get('/email/identity', { token: agent.accessToken });
    expect(res.status).to.equal(200);
    expect(res.body.data).to.deep.include({ fromAddress: null, domainVerified: false, dnsRecords: [] });
    expectError(await agent.api.put('/email/identity', { fromName: 'Nope' }, { token: agent.accessToken }), 403, 'forbidden');
    expectError(await owner.api.put('/email/identity', { fromAddress: 'not an address' }, { token: owner.accessToken }), 400, 'validation_failed');
    expectError(await owner.api.put('/email/identity', { unknown: 1 }, { token: owner.accessToken }), 400, 'validation_failed');
  });

  it('lists the TXT records to publish and stays unverified while they are missing', async () => {
    const put = await owner.api.put('/email/identity', { fromName: 'Acme Support', fromAddress: 'Help@Acme-Identity.invalid', signature: 'The Acme team' }, { token: owner.accessToken });
    expect(put.status).to.equal(200);
    const data = put.body.data;
    expect(data).to.include({ fromAddress: 'help@acme-identity.invalid', domain: 'acme-identity.invalid', domainVerified: false });
    expect(data.dnsRecords.map((r: { purpose: string }) => r.purpose)).to.deep.equal(['verification', 'spf', 'dkim']);
    expect(data.dnsRecords[0].name).to.equal('_support-verification.acme-identity.invalid');
    expect(data.dnsRecords[0].value).to.match(/^support-verification=[0-9a-f]{32}$/);
    expect(data.dnsRecords[1].value).to.equal('v=spf1 include:platform.test ~all');
    expectError(await agent.api.post('/email/identity/verify', {}, { token: agent.accessToken }), 403, 'forbidden');
    const verify = await owner.api.post('/email/identity/verify', {}, { token: owner.accessToken });
    expect(verify.status).to.equal(200);
    expect(verify.body.data.domainVerified).to.equal(false);
  });

  it('sends ticket mail from the platform as "<Org> via <platform>" with Reply-To the organization\'s address and its signature', async () => {
    const requester = uniqueEmail('requester');
    await createTicket(owner, { title: 'Identity check', requester: { name: 'Rosa', email: requester } });
    const mail = await smtp.waitForMail(requester, (m) => m.subject.endsWith('Identity check'));
    expect(mail.parsed.from?.value[0]).to.deep.equal({ name: `${orgName} via Helpdesk Platform`, address: 'desk@platform.test' });
    expect(mail.parsed.replyTo?.value[0]?.address).to.equal('help@acme-identity.invalid');
    expect(mail.text).to.contain('The Acme team');
  });

  it('uses the organization\'s own From once its domain is verified', () => {
    const identity = { fromName: 'Acme Support', fromAddress: 'help@acme.test', replyTo: 'replies@acme.test', verifiedDomain: 'acme.test', domainVerifiedAt: new Date() };
    expect(senderOf('Acme', MAIL_FROM, identity)).to.deep.equal({ from: { name: 'Acme Support', address: 'help@acme.test' }, replyTo: 'replies@acme.test' });
    // Verified for another domain than the current address: back to the platform's From.
    expect(senderOf('Acme', MAIL_FROM, { ...identity, verifiedDomain: 'other.test' }).from).to.deep.equal({ name: 'Acme via Helpdesk Platform', address: 'desk@platform.test' });
  });
});
