// /auth signup, codes and login: initiate-signup, resend-otp, verify-otp, complete-signup, login, and the OTP rules.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { addMember, PASSWORD, signUp, uniqueEmail } from './helpers/factories.js';
import {
  expectApiError,
  expectApiSuccess,
  expireOtp,
  initiateSignup,
  jwtPayload,
  latestCode,
  login,
  mailsTo,
  withoutRequestId,
} from './helpers/auth.js';

const wrongCodeFor = (code: string) => (code === '000000' ? '111111' : '000000');

describe('auth: signup and login', () => {
  describe('POST /auth/initiate-signup', () => {
    it('answers 202 with {} and mails a 6-digit email_verification code', async () => {
      const { server, baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      const email = uniqueEmail('init');
      const res = await api.post('/auth/initiate-signup', { name: 'Ina Init', email });
      expect(expectApiSuccess(res, 202)).to.deep.equal({});
      const mails = await mailsTo(server, email, 'signup_code');
      expect(mails).to.have.length(1);
      expect(mails[0]!.textBody).to.match(/\b\d{6}\b/);
      const challenge = await server.db.knex('otp_challenges').where({ email }).first();
      expect(challenge.type).to.equal('email_verification');
      expect(challenge.codeHash, 'the code is stored hashed').to.not.include(await latestCode(server, email, 'signup_code'));
    });

    it('answers a registered email exactly like a new one and mails it an account notice without a code', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const api = new Api(baseUrl);
      const fresh = await api.post('/auth/initiate-signup', { name: 'Nora New', email: uniqueEmail('fresh') });
      const taken = await api.post('/auth/initiate-signup', { name: 'Nora New', email: owner.email.toUpperCase() });
      expect(taken.status).to.equal(fresh.status).and.equal(202);
      expect(taken.body).to.deep.equal(fresh.body);
      const notice = await mailsTo(server, owner.email, 'account_exists');
      expect(notice).to.have.length(1);
      expect(notice[0]!.textBody).to.not.match(/\b\d{6}\b/);
      // Only the signup of the owner itself ever mailed this address a code.
      expect(await mailsTo(server, owner.email, 'signup_code')).to.have.length(1);
    });

    it('rejects a missing name, a malformed email and unknown fields with 400 validation_failed', async () => {
      const { baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      expectApiError(await api.post('/auth/initiate-signup', { email: uniqueEmail() }), 400, 'validation_failed');
      expectApiError(await api.post('/auth/initiate-signup', { name: 'X', email: `not-an-email-${randomUUID()}` }), 400, 'validation_failed');
      const extra = await api.post('/auth/initiate-signup', { name: 'X', email: uniqueEmail(), role: 'owner' });
      expectApiError(extra, 400, 'validation_failed');
      expect(extra.body.error.details.map((d: any) => d.field)).to.include('role');
    });
  });

  describe('POST /auth/resend-otp', () => {
    it('replaces the code: the old one then fails with invalid_otp and the new one works', async () => {
      const { server, baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      const email = uniqueEmail('resend');
      const first = await initiateSignup(server, api, email);
      expect(expectApiSuccess(await api.post('/auth/resend-otp', { email, type: 'email_verification' }), 202)).to.deep.equal({});
      const mails = await mailsTo(server, email, 'signup_code');
      expect(mails).to.have.length(2);
      const second = await latestCode(server, email, 'signup_code');
      expectApiError(await api.post('/auth/verify-otp', { email, code: first, type: 'email_verification' }), 400, 'invalid_otp');
      expect(expectApiSuccess(await api.post('/auth/verify-otp', { email, code: second, type: 'email_verification' }), 200)).to.deep.equal({ verified: true });
    });

    it('answers the same 202 when nothing is open or the email is registered, and mails nothing', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const api = new Api(baseUrl);
      const nobody = uniqueEmail('nobody');
      const none = await api.post('/auth/resend-otp', { email: nobody, type: 'email_verification' });
      const registered = await api.post('/auth/resend-otp', { email: owner.email, type: 'email_verification' });
      expectApiSuccess(none, 202);
      expect(registered.status).to.equal(202);
      expect(registered.body).to.deep.equal(none.body);
      expect(await mailsTo(server, nobody, 'signup_code')).to.have.length(0);
      expect(await mailsTo(server, owner.email, 'signup_code')).to.have.length(1);
    });

    it('sends a new password_reset code that replaces the old one', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      expectApiSuccess(await owner.api.post('/auth/forgot-password', { email: owner.email }), 200);
      const first = await latestCode(server, owner.email, 'password_reset');
      expectApiSuccess(await owner.api.post('/auth/resend-otp', { email: owner.email, type: 'password_reset' }), 202);
      expect(await mailsTo(server, owner.email, 'password_reset')).to.have.length(2);
      const second = await latestCode(server, owner.email, 'password_reset');
      expectApiError(await owner.api.post('/auth/verify-otp', { email: owner.email, code: first, type: 'password_reset' }), 400, 'invalid_otp');
      expectApiSuccess(await owner.api.post('/auth/verify-otp', { email: owner.email, code: second, type: 'password_reset' }), 200);
    });

    it('rejects an unknown type with 400 validation_failed', async () => {
      const { baseUrl } = sharedServer();
      expectApiError(await new Api(baseUrl).post('/auth/resend-otp', { email: uniqueEmail(), type: 'login' }), 400, 'validation_failed');
    });
  });

  describe('POST /auth/verify-otp and POST /auth/complete-signup', () => {
    it('verifies email_verification, then completes without a code; the code is single use', async () => {
      const { server, baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      const email = uniqueEmail('verify');
      const code = await initiateSignup(server, api, email, 'Vera Verified');
      const verified = expectApiSuccess(await api.post('/auth/verify-otp', { email, code, type: 'email_verification' }), 200);
      expect(verified).to.deep.equal({ verified: true });
      expectApiError(await api.post('/auth/verify-otp', { email, code, type: 'email_verification' }), 400, 'invalid_otp');
      const done = expectApiSuccess(await api.post('/auth/complete-signup', { email, organizationName: 'Verified Org', password: PASSWORD }), 201);
      expect(done.user.email).to.equal(email);
      expect(done.user.name).to.equal('Vera Verified');
      expect(done.role).to.equal('owner');
    });

    it('answers 201 with the user, organization, owner role, organization list and working tokens', async () => {
      const { server, baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      const email = uniqueEmail('complete');
      const code = await initiateSignup(server, api, email.toUpperCase(), 'Cora Complete');
      const res = await api.post('/auth/complete-signup', { email, organizationName: 'Cora Corp', password: PASSWORD, domain: 'cora.example', code });
      const data = expectApiSuccess(res, 201);
      expect(data).to.include.all.keys('user', 'organization', 'role', 'organizations', 'accessToken', 'refreshToken');
      expect(data.user).to.include({ email, name: 'Cora Complete', emailVerified: true, avatarUrl: null });
      expect(data.user).to.not.have.any.keys('passwordHash', 'password', 'password_hash');
      expect(data.organization).to.include({ name: 'Cora Corp', domain: 'cora.example' });
      expect(data.role).to.equal('owner');
      expect(data.organizations).to.deep.equal([{ id: data.organization.id, name: 'Cora Corp', slug: data.organization.slug, role: 'owner', plan: data.organization.plan }]);
      const claims = jwtPayload(data.accessToken);
      expect(claims).to.include({ sub: data.user.id, email, orgId: data.organization.id, typ: 'access' });
      expect(claims.sid).to.be.a('string');
      expect(jwtPayload(data.refreshToken)).to.include({ sub: data.user.id, sid: claims.sid, typ: 'refresh' });
      const profile = expectApiSuccess(await api.get('/auth/profile', { token: data.accessToken }), 200);
      expect(profile.role).to.equal('owner');
      expect(profile.organization.id).to.equal(data.organization.id);
      const membership = await server.db.models.Membership.acrossOrgs().findOne({ userId: data.user.id, organizationId: data.organization.id });
      expect(membership).to.include({ role: 'owner', status: 'accepted' });
    });

    it('refuses to complete without a verified code, or with a wrong one (400 invalid_otp)', async () => {
      const { server, baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      const email = uniqueEmail('noverify');
      const code = await initiateSignup(server, api, email);
      expectApiError(await api.post('/auth/complete-signup', { email, organizationName: 'Nope', password: PASSWORD }), 400, 'invalid_otp');
      expectApiError(await api.post('/auth/complete-signup', { email, organizationName: 'Nope', password: PASSWORD, code: wrongCodeFor(code) }), 400, 'invalid_otp');
      expect(await server.db.models.User.query().findOne({ email })).to.equal(undefined);
      // Never initiated at all.
      expectApiError(await api.post('/auth/complete-signup', { email: uniqueEmail('never'), organizationName: 'Nope', password: PASSWORD, code }), 400, 'invalid_otp');
    });

    it('rejects a short password and unknown fields with 400 validation_failed, without using up the code', async () => {
      const { server, baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      const email = uniqueEmail('shortpw');
      const code = await initiateSignup(server, api, email);
      const short = await api.post('/auth/complete-signup', { email, organizationName: 'Shorty', password: 'seven77', code });
      expectApiError(short, 400, 'validation_failed');
      expect(short.body.error.details.map((d: any) => d.field)).to.include('password');
      const extra = await api.post('/auth/complete-signup', { email, organizationName: 'Shorty', password: PASSWORD, code, role: 'admin' });
      expectApiError(extra, 400, 'validation_failed');
      expect(extra.body.error.details.map((d: any) => d.field)).to.include('role');
      expectApiError(await api.post('/auth/complete-signup', { email, organizationName: 'Shorty', password: 'x'.repeat(129), code }), 400, 'validation_failed');
      expect(await server.db.models.User.query().findOne({ email })).to.equal(undefined);
      expectApiSuccess(await api.post('/auth/complete-signup', { email, organizationName: 'Shorty', password: '8chars!!', code }), 201);
    });

    it('refuses a second completion for the same email', async () => {
      const { server, baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      const email = uniqueEmail('twice');
      const code = await initiateSignup(server, api, email);
      expectApiSuccess(await api.post('/auth/complete-signup', { email, organizationName: 'First', password: PASSWORD, code }), 201);
      expectApiError(await api.post('/auth/complete-signup', { email, organizationName: 'Second', password: PASSWORD, code }), 400, 'invalid_otp');
      expectApiError(await api.post('/auth/complete-signup', { email, organizationName: 'Second', password: PASSWORD }), 400, 'invalid_otp');
      // Even with a verified challenge for the registered email (initiate issues one), the account is not created twice.
      expectApiSuccess(await api.post('/auth/initiate-signup', { name: 'Again', email }), 202);
      await server.db.knex('otp_challenges').where({ email, type: 'email_verification' }).update({ verified_at: new Date(), expires_at: new Date(Date.now() + 600_000) });
      expectApiError(await api.post('/auth/complete-signup', { email, organizationName: 'Second', password: PASSWORD }), 409, 'conflict');
      expect(await server.db.models.User.query().where({ email })).to.have.length(1);
    });

    it('trades a password_reset code for a resetToken usable once at /auth/reset-password', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      expectApiSuccess(await owner.api.post('/auth/forgot-password', { email: owner.email }), 200);
      const code = await latestCode(server, owner.email, 'password_reset');
      const data = expectApiSuccess(await owner.api.post('/auth/verify-otp', { email: owner.email, code, type: 'password_reset' }), 200);
      expect(data.verified).to.equal(true);
      expect(data.resetToken).to.be.a('string').with.length.greaterThan(20);
      expectApiError(await owner.api.post('/auth/verify-otp', { email: owner.email, code, type: 'password_reset' }), 400, 'invalid_otp');
      expectApiSuccess(await owner.api.post('/auth/reset-password', { token: data.resetToken, newPassword: 'via verify-otp 1' }), 200);
      expectApiError(await owner.api.post('/auth/reset-password', { token: data.resetToken, newPassword: 'via verify-otp 2' }), 400, 'invalid_otp');
      await login(owner.api, owner.email, 'via verify-otp 1');
    });

    it('rejects a code that is not six digits and an unknown type with 400 validation_failed', async () => {
      const { baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      const email = uniqueEmail();
      expectApiError(await api.post('/auth/verify-otp', { email, code: '12345', type: 'email_verification' }), 400, 'validation_failed');
      expectApiError(await api.post('/auth/verify-otp', { email, code: '12345a', type: 'email_verification' }), 400, 'validation_failed');
      expectApiError(await api.post('/auth/verify-otp', { email, code: '123456', type: 'signup' }), 400, 'validation_failed');
    });
  });

  describe('OTP rules', () => {
    it('locks the challenge after 5 wrong codes: the right code then fails until a new one is sent', async () => {
      const { server, baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      const email = uniqueEmail('lock');
      const code = await initiateSignup(server, api, email);
      for (let i = 0; i < 5; i++) {
        expectApiError(await api.post('/auth/verify-otp', { email, code: wrongCodeFor(code), type: 'email_verification' }), 400, 'invalid_otp');
      }
      expectApiError(await api.post('/auth/verify-otp', { email, code, type: 'email_verification' }), 400, 'invalid_otp');
      expectApiError(await api.post('/auth/complete-signup', { email, organizationName: 'Locked', password: PASSWORD, code }), 400, 'invalid_otp');
      expectApiSuccess(await api.post('/auth/resend-otp', { email, type: 'email_verification' }), 202);
      const fresh = await latestCode(server, email, 'signup_code');
      expectApiSuccess(await api.post('/auth/complete-signup', { email, organizationName: 'Unlocked', password: PASSWORD, code: fresh }), 201);
    });

    it('keeps the lock under bursts of concurrent wrong guesses', async () => {
      const { server, baseUrl } = sharedServer();
      // A few rounds: the first burst may only warm up the database pool (PostgreSQL) and serialize by accident.
      for (let round = 0; round < 3; round++) {
        const api = new Api(baseUrl);
        const email = uniqueEmail('burst');
        const code = await initiateSignup(server, api, email);
        // complete-signup takes an inline code and has no rate limit: the lock is all that stops guessing.
        const body = (c: string) => ({ email, organizationName: 'Burst', password: PASSWORD, code: c });
        const guesses = Array.from({ length: 20 }, () => api.post('/auth/complete-signup', body(wrongCodeFor(code))));
        guesses.push(api.post('/auth/complete-signup', body(code)));
        const answers = await Promise.all(guesses);
        for (const res of answers) expectApiError(res, 400, 'invalid_otp');
        expect(await server.db.models.User.query().findOne({ email }), 'no account from a locked challenge').to.equal(undefined);
      }
    });

    it('rejects an expired code, and a verified signup that was not completed in time', async () => {
      const { server, baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      const email = uniqueEmail('expired');
      const code = await initiateSignup(server, api, email);
      await expireOtp(server, email, 'email_verification');
      expectApiError(await api.post('/auth/verify-otp', { email, code, type: 'email_verification' }), 400, 'invalid_otp');
      expectApiError(await api.post('/auth/complete-signup', { email, organizationName: 'Late', password: PASSWORD, code }), 400, 'invalid_otp');

      const other = uniqueEmail('expired-verified');
      const otherCode = await initiateSignup(server, api, other);
      expectApiSuccess(await api.post('/auth/verify-otp', { email: other, code: otherCode, type: 'email_verification' }), 200);
      await expireOtp(server, other, 'email_verification');
      expectApiError(await api.post('/auth/complete-signup', { email: other, organizationName: 'Late', password: PASSWORD }), 400, 'invalid_otp');
      expect(await server.db.models.User.query().whereIn('email', [email, other])).to.have.length(0);
    });

    it('rejects an expired password_reset code', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      expectApiSuccess(await owner.api.post('/auth/forgot-password', { email: owner.email }), 200);
      const code = await latestCode(server, owner.email, 'password_reset');
      await expireOtp(server, owner.email, 'password_reset');
      expectApiError(await owner.api.post('/auth/reset-password-otp', { email: owner.email, code, newPassword: 'too late for this' }), 400, 'invalid_otp');
      await login(owner.api, owner.email, PASSWORD);
    });
  });

  describe('POST /auth/login', () => {
    it('answers 200 with the user, active organization, role, organization list and working tokens', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl, { organizationName: 'Login Ltd' });
      const data = await login(new Api(baseUrl), owner.email.toUpperCase(), PASSWORD);
      expect(data).to.include.all.keys('user', 'organization', 'role', 'organizations', 'accessToken', 'refreshToken');
      expect(data.user).to.include({ id: owner.userId, email: owner.email });
      expect(data.user).to.not.have.any.keys('passwordHash', 'password', 'password_hash');
      expect(data.organization).to.include({ id: owner.orgId, name: 'Login Ltd' });
      expect(data.role).to.equal('owner');
      expect(data.organizations).to.have.length(1);
      expect(data.organizations[0]).to.include({ id: owner.orgId, name: 'Login Ltd', role: 'owner' });
      expect(jwtPayload(data.accessToken)).to.include({ sub: owner.userId, orgId: owner.orgId, typ: 'access' });
      expect(jwtPayload(data.accessToken).sid, 'a new session').to.not.equal(jwtPayload(owner.accessToken).sid);
      expectApiSuccess(await owner.api.get('/auth/profile', { token: data.accessToken }), 200);
    });

    it('gives a member their role from the membership', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl, { organizationName: 'Member Org' });
      const agent = await addMember(server, owner, 'agent');
      const data = await login(new Api(baseUrl), agent.email, PASSWORD);
      expect(data.role).to.equal('agent');
      expect(data.organization.id).to.equal(owner.orgId);
      expect(data.organizations.map((o: any) => [o.id, o.name, o.role])).to.deep.equal([[owner.orgId, 'Member Org', 'agent']]);
    });

    it('answers a wrong password and an unknown email with the same 401 and body', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const api = new Api(baseUrl);
      const wrong = await api.post('/auth/login', { email: owner.email, password: 'not the password' });
      const unknown = await api.post('/auth/login', { email: uniqueEmail('ghost'), password: 'not the password' });
      expectApiError(wrong, 401, 'unauthorized');
      expectApiError(unknown, 401, 'unauthorized');
      expect(withoutRequestId(wrong.body)).to.deep.equal(withoutRequestId(unknown.body));
      expect(wrong.body.requestId).to.not.equal(unknown.body.requestId);
    });

    it('rejects a missing password and unknown fields with 400 validation_failed', async () => {
      const { baseUrl } = sharedServer();
      const api = new Api(baseUrl);
      expectApiError(await api.post('/auth/login', { email: uniqueEmail() }), 400, 'validation_failed');
      expectApiError(await api.post('/auth/login', { email: uniqueEmail(), password: PASSWORD, orgId: 'x' }), 400, 'validation_failed');
    });
  });
});
