// The account flows rule by rule (server/services/auth.ts): the name a signup carries into its mails and its account,
// the mail an existing account's email gets instead of a code, a reset code that gives one reset token, and the words
// of a wrong current password, an account made by an invitation while its signup was open, a reset link used twice at
// once, and why a reset ended the sessions.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { addMember, latestMail, linkTokenIn, PASSWORD, signUp, uniqueEmail } from './helpers/factories.js';
import { expectApiError, expectApiSuccess, latestCode } from './helpers/auth.js';
import { invite } from './helpers/tenancy.js';

describe('auth: the account flows, rule by rule', () => {
  it('carries the signup\'s name, trimmed, into the code mail, a resent code and the account', async () => {
    const { server, baseUrl } = sharedServer();
    const api = new Api(baseUrl);
    const email = uniqueEmail('named');
    expect((await api.post('/auth/initiate-signup', { name: '  Nia Newcomer  ', email })).status).to.equal(202);
    const first = await latestMail(server, email, 'signup_code');
    expect(first!.textBody).to.match(/^Hello Nia Newcomer,\n/);

    expectApiSuccess(await api.post('/auth/resend-otp', { email, type: 'email_verification' }), 202);
    const resent = await latestMail(server, email, 'signup_code');
    expect(resent!.id, 'a second mail').to.not.equal(first!.id);
    expect(resent!.textBody).to.match(/^Hello Nia Newcomer,\n/);

    const code = await latestCode(server, email, 'signup_code');
    const done = expectApiSuccess(await api.post('/auth/complete-signup', { email, organizationName: 'Named Co', password: PASSWORD, code }), 201);
    expect(done.user.name).to.equal('Nia Newcomer');
  });

  it('sends an existing account\'s email the way to sign in, not a code', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const api = new Api(baseUrl);
    expect((await api.post('/auth/initiate-signup', { name: 'Someone Else', email: owner.email })).status).to.equal(202);
    const mail = await latestMail(server, owner.email);
    expect(mail!.kind).to.equal('account_exists');
    expect(mail!.textBody).to.include(`Sign in at ${server.config.appUrl}/login `);
    expect(mail!.textBody).to.not.match(/\b\d{6}\b/);
  });

  it('gives one reset token per reset code: the code is spent by the first check', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const api = new Api(baseUrl);
    expect((await api.post('/auth/forgot-password', { email: owner.email })).status).to.equal(200);
    const code = await latestCode(server, owner.email, 'password_reset');
    const first = expectApiSuccess(await api.post('/auth/verify-otp', { email: owner.email, code, type: 'password_reset' }), 200);
    expect(first.resetToken).to.be.a('string');
    expectApiError(await api.post('/auth/verify-otp', { email: owner.email, code, type: 'password_reset' }), 400, 'invalid_otp');
    // The token the first check gave still works, once.
    expectApiSuccess(await api.post('/auth/reset-password', { token: first.resetToken, newPassword: `${PASSWORD}-reset` }), 200);
    expectApiError(await api.post('/auth/reset-password', { token: first.resetToken, newPassword: `${PASSWORD}-again` }), 400, 'invalid_otp');
  });

  it('says which field was wrong when the current password is not correct', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const res = await owner.api.post('/auth/change-password', { currentPassword: `${PASSWORD}-wrong`, newPassword: `${PASSWORD}-new` }, { token: owner.accessToken });
    expectApiError(res, 400, 'validation_failed');
    expect(res.body.message).to.equal('The current password is not correct');
    expect(res.body.error.details).to.deep.equal([{ field: 'currentPassword', message: 'is not correct' }]);
  });

  it('refuses to complete a signup whose email got an account meanwhile, from an invitation (409), and keeps that account', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const api = new Api(baseUrl);
    const email = uniqueEmail('both-ways');
    expect((await api.post('/auth/initiate-signup', { name: 'Bo Both', email })).status).to.equal(202);
    const code = await latestCode(server, email, 'signup_code');
    expectApiSuccess(await api.post('/auth/verify-otp', { email, code, type: 'email_verification' }), 200);
    // Invited and accepted before the signup is completed: the invitation made the account.
    expect((await owner.api.post(`/memberships/organizations/${owner.orgId}/members/invite`, { email, role: 'agent' }, { token: owner.accessToken })).status).to.equal(201);
    const token = linkTokenIn((await latestMail(server, email, 'invitation'))!.textBody);
    const accepted = expectApiSuccess(await api.post('/memberships/accept-invite', { token, name: 'Bo Invited', password: PASSWORD }), 200);
    const res = await api.post('/auth/complete-signup', { email, organizationName: 'Second Co', password: `${PASSWORD}-other` });
    expectApiError(res, 409, 'conflict');
    expect(res.body.message).to.equal('An account with this email already exists');
    const users = await server.db.models.User.query().where('email', email);
    expect(users.map((u) => u.id)).to.deep.equal([accepted.user.id]);
    expect(users[0]!.name).to.equal('Bo Invited');
  });

  it('resets once with a link used twice at once', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const api = new Api(baseUrl);
    expect((await api.post('/auth/forgot-password', { email: owner.email })).status).to.equal(200);
    const token = linkTokenIn((await latestMail(server, owner.email, 'password_reset'))!.textBody);
    const answers = await Promise.all([`${PASSWORD}-one`, `${PASSWORD}-two`].map((newPassword) => api.post('/auth/reset-password', { token, newPassword })));
    expect(answers.map((r) => r.status).sort()).to.deep.equal([200, 400]);
    // The reset ended every session, and says why.
    const sessions = await server.db.models.AuthSession.query().where('userId', owner.userId);
    expect(sessions.map((x) => x.revokedReason)).to.deep.equal(['password_reset']);
  });

  it('lands a login in the organization it last used: one that was out of reach at the last login does not win back', async () => {
    const { server, baseUrl } = sharedServer();
    const user = await signUp(server, baseUrl, { organizationName: 'Own Co' });
    const other = await signUp(server, baseUrl, { organizationName: 'Other Co' });
    const inv = await invite(server, other, 'agent', { email: user.email });
    expectApiSuccess(await user.api.post('/memberships/accept-invite', { token: inv.token }, { token: user.accessToken }), 200);
    const status = (value: 'suspended' | 'active') =>
      other.api.patch(`/memberships/organizations/${other.orgId}/members/${inv.membershipId}/status`, { status: value }, { token: other.accessToken });
    const login = async () => expectApiSuccess(await user.api.post('/auth/login', { email: user.email, password: user.password }), 200).organization.id as string;

    expect(await login(), 'the organization joined last').to.equal(other.orgId);
    expectApiSuccess(await status('suspended'), 200);
    expect(await login(), 'suspended there: the first one left').to.equal(user.orgId);
    expectApiSuccess(await status('active'), 200);
    expect(await login(), 'the one used last, not the one reachable again').to.equal(user.orgId);
  });

  it('answers the profile in the session\'s own organization, or none for a session without one', async () => {
    const { server, baseUrl } = sharedServer();
    const user = await signUp(server, baseUrl, { organizationName: 'Profile First' });
    const second = expectApiSuccess(await user.api.post('/organizations', { name: 'Profile Second' }, { token: user.accessToken }), 201);
    const other = expectApiSuccess(await user.api.post('/auth/login', { email: user.email, password: user.password }), 200);
    expectApiSuccess(await user.api.post(`/organizations/${second.id}/switch`, undefined, { token: other.accessToken }), 200);
    // The first session still works in the first organization, whatever was used last.
    const first = expectApiSuccess(await user.api.get('/auth/profile', { token: user.accessToken }), 200);
    expect(first.organization.id).to.equal(user.orgId);

    // Removed from their only organization, a member signs in to none; joining one later does not put that session in it.
    const owner = await signUp(server, baseUrl);
    const member = await addMember(server, owner, 'agent');
    expect((await owner.api.delete(`/memberships/organizations/${owner.orgId}/members/${member.membershipId}`, { token: owner.accessToken })).status).to.equal(200);
    const outside = expectApiSuccess(await member.api.post('/auth/login', { email: member.email, password: PASSWORD }), 200);
    expect(outside.organization).to.equal(null);
    const inv = await invite(server, owner, 'agent', { email: member.email });
    expectApiSuccess(await member.api.post('/memberships/accept-invite', { token: inv.token }, { token: outside.accessToken }), 200);
    const profile = expectApiSuccess(await member.api.get('/auth/profile', { token: outside.accessToken }), 200);
    expect(profile.organization).to.equal(null);
    expect(profile.organizations.map((o: { id: string }) => o.id)).to.deep.equal([owner.orgId]);
  });
});
