// The whole operator journey with mail delivered over real SMTP: signup, login, invitation, second org, password reset.
import { expect } from 'chai';
import { codeIn, linkTokenIn, PASSWORD, uniqueEmail } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { startSmtpSink, type SmtpSink } from './helpers/smtp.js';
import { waitFor } from './helpers/wait.js';

const PUBLIC_URL = 'https://support.example.test';
const MAIL_FROM = 'Support Journey <support@example.test>';

/** The claims of a JWT (tests read them; the server verifies them). */
function claims(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

describe('journey over real SMTP', () => {
  let smtp: SmtpSink;
  let test: TestServer;
  let api: Api;

  before(async function () {
    this.timeout(60_000);
    smtp = await startSmtpSink({ user: 'journey-mailer', pass: 'journey-secret' });
    test = await startTestServer({ SMTP_URL: smtp.url, MAIL_FROM, PUBLIC_URL });
    api = new Api(test.baseUrl);
  });

  after(async function () {
    this.timeout(30_000);
    await test?.stop();
    await smtp?.close();
  });

  it('signs up, invites an agent, works in a second organization and resets a password, all mail over SMTP', async function () {
    this.timeout(30_000);
    expect(test.server.services.mailer.delivers).to.equal(true);
    const ownerEmail = uniqueEmail('owner');
    const agentEmail = uniqueEmail('agent');

    // 1. Signup: the code arrives at the SMTP server, not only in the outbox.
    const init = await api.post('/auth/initiate-signup', { name: 'Olivia Owner', email: ownerEmail });
    expect(init.status, JSON.stringify(init.body)).to.equal(202);
    const signupMail = await smtp.waitForMail(ownerEmail, (m) => /verification code/i.test(m.subject));
    expect(signupMail.user, 'the client authenticated with the credentials of SMTP_URL').to.equal('journey-mailer');
    expect(signupMail.mailFrom).to.equal('support@example.test');
    expect(signupMail.parsed.from?.text).to.include('Support Journey');
    expect(signupMail.parsed.to && !Array.isArray(signupMail.parsed.to) ? signupMail.parsed.to.text : '').to.include(ownerEmail);
    const code = codeIn(signupMail.text);

    const verified = await api.post('/auth/verify-otp', { email: ownerEmail, code, type: 'email_verification' });
    expect(verified.status, JSON.stringify(verified.body)).to.equal(200);
    expect(verified.body.data.verified).to.equal(true);

    const signup = await api.post('/auth/complete-signup', { email: ownerEmail, organizationName: 'Journey Org', password: PASSWORD });
    expect(signup.status, JSON.stringify(signup.body)).to.equal(201);
    expect(signup.body.data.user.email).to.equal(ownerEmail);
    expect(signup.body.data.role).to.equal('owner');
    const firstOrgId: string = signup.body.data.organization.id;
    expect(claims(signup.body.data.accessToken).orgId).to.equal(firstOrgId);

    // 2. Login.
    const login = await api.post('/auth/login', { email: ownerEmail, password: PASSWORD });
    expect(login.status, JSON.stringify(login.body)).to.equal(200);
    expect(login.body.data.organization.id).to.equal(firstOrgId);
    expect(login.body.data.organizations.map((o: any) => [o.id, o.name, o.role])).to.deep.equal([[firstOrgId, 'Journey Org', 'owner']]);
    const ownerToken: string = login.body.data.accessToken;

    // 3. Invite an agent: with SMTP configured the link only travels by mail.
    const invite = await api.post(`/memberships/organizations/${firstOrgId}/members/invite`, { email: agentEmail, role: 'agent' }, { token: ownerToken });
    expect(invite.status, JSON.stringify(invite.body)).to.equal(201);
    expect(invite.body.data).not.to.have.property('inviteLink');
    expect(JSON.stringify(invite.body)).not.to.match(/token=/);
    expect(invite.body.data.status).to.equal('pending');
    expect(invite.body.data.role).to.equal('agent');

    const inviteMail = await smtp.waitForMail(agentEmail, (m) => /invited/i.test(m.subject));
    expect(inviteMail.subject).to.include('Journey Org');
    const link = inviteMail.text.match(/https?:\/\/\S+/)?.[0];
    expect(link, inviteMail.text).to.be.a('string');
    expect(link!.startsWith(`${PUBLIC_URL}/`), link).to.equal(true);
    expect(new URL(link!).searchParams.get('token')).to.be.a('string').with.length.greaterThan(20);
    const inviteToken = linkTokenIn(inviteMail.text);

    // 4. verify-invite, then accept as a new user.
    const check = await api.get(`/memberships/verify-invite/${encodeURIComponent(inviteToken)}`);
    expect(check.status, JSON.stringify(check.body)).to.equal(200);
    expect(check.body.data.email).to.equal(agentEmail);
    expect(check.body.data.organization).to.deep.equal({ id: firstOrgId, name: 'Journey Org' });
    expect(check.body.data.role).to.equal('agent');
    expect(check.body.data.requiresPassword).to.equal(true);

    const agentApi = new Api(test.baseUrl);
    const accepted = await agentApi.post('/memberships/accept-invite', { token: inviteToken, name: 'Adam Agent', password: PASSWORD });
    expect(accepted.status, JSON.stringify(accepted.body)).to.equal(200);
    expect(accepted.body.data.user.email).to.equal(agentEmail);
    expect(accepted.body.data.organization.id).to.equal(firstOrgId);
    expect(accepted.body.data.role).to.equal('agent');
    const agentToken: string = accepted.body.data.accessToken;
    expect(claims(agentToken).orgId).to.equal(firstOrgId);

    const reused = await new Api(test.baseUrl).post('/memberships/accept-invite', { token: inviteToken, name: 'Someone Else', password: PASSWORD });
    expect(reused.status, 'the link works once').to.equal(410);

    // 5. The owner creates a second organization and switches to it.
    const created = await api.post('/organizations', { name: 'Journey Second Org' }, { token: ownerToken });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const secondOrgId: string = created.body.data.id;
    expect(secondOrgId).not.to.equal(firstOrgId);

    const switched = await api.post(`/organizations/${secondOrgId}/switch`, undefined, { token: ownerToken });
    expect(switched.status, JSON.stringify(switched.body)).to.equal(200);
    expect(switched.body.data.organization.id).to.equal(secondOrgId);
    expect(switched.body.data.role).to.equal('owner');
    expect(claims(switched.body.data.accessToken)).to.include({ orgId: secondOrgId, typ: 'access' });
    expect(claims(switched.body.data.refreshToken)).to.include({ orgId: secondOrgId, typ: 'refresh' });
    const profile = await api.get('/auth/profile', { token: switched.body.data.accessToken });
    expect(profile.status).to.equal(200);
    expect(profile.body.data.organization.id).to.equal(secondOrgId);
    expect(profile.body.data.organizations.map((o: any) => o.id).sort()).to.deep.equal([firstOrgId, secondOrgId].sort());

    // 6. The agent lists the members of the first organization.
    const members = await agentApi.get(`/memberships/organizations/${firstOrgId}/members`, { token: agentToken });
    expect(members.status, JSON.stringify(members.body)).to.equal(200);
    expect(members.body.data.map((m: any) => [m.email, m.role, m.status]).sort()).to.deep.equal(
      [[agentEmail, 'agent', 'accepted'], [ownerEmail, 'owner', 'accepted']].sort(),
    );
    expect(members.body.pagination).to.deep.equal({ limit: 50, offset: 0, total: 2 });
    // ...and is no member of the second.
    const notMember = await agentApi.get(`/memberships/organizations/${secondOrgId}/members`, { token: agentToken });
    expect(notMember.status).to.equal(403);

    // 7. Forgot password: code and link arrive over SMTP; the link's token sets a new password.
    const forgot = await api.post('/auth/forgot-password', { email: agentEmail });
    expect(forgot.status, JSON.stringify(forgot.body)).to.equal(200);
    const resetMail = await smtp.waitForMail(agentEmail, (m) => /reset/i.test(m.subject));
    codeIn(resetMail.text);
    const resetLink = resetMail.text.match(/https?:\/\/\S+/)?.[0];
    expect(resetLink!.startsWith(`${PUBLIC_URL}/`), resetLink).to.equal(true);
    const reset = await api.post('/auth/reset-password', { token: linkTokenIn(resetMail.text), newPassword: 'a brand new passphrase' });
    expect(reset.status, JSON.stringify(reset.body)).to.equal(200);
    expect((await api.post('/auth/login', { email: agentEmail, password: PASSWORD })).status).to.equal(401);
    expect((await api.post('/auth/login', { email: agentEmail, password: 'a brand new passphrase' })).status).to.equal(200);

    // 8. Every mail of the journey is in the outbox as sent, and each reached the SMTP server exactly once.
    const { OutboxEmail } = test.server.db.models;
    const rows = await waitFor(
      async () => {
        const all = await OutboxEmail.query().whereIn('toAddress', [ownerEmail, agentEmail]);
        return all.length === 3 && all.every((r) => r.status === 'sent') ? all : null;
      },
      { timeoutMs: 10_000, what: 'three outbox rows with status sent' },
    );
    expect(rows.map((r) => r.kind).sort()).to.deep.equal(['invitation', 'password_reset', 'signup_code']);
    for (const row of rows) expect(row.sentAt, row.kind).to.be.instanceOf(Date);
    const delivered = smtp.received.filter((m) => m.rcptTo.includes(ownerEmail) || m.rcptTo.includes(agentEmail));
    expect(delivered.map((m) => m.subject).sort()).to.deep.equal(rows.map((r) => r.subject).sort());
  });
});

