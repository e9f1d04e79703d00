// /auth passwords: change-password, forgot-password, reset-password-otp and reset-password (link token).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { linkTokenIn, PASSWORD, signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { expectApiError, expectApiSuccess, latestCode, login, mailsTo, withoutRequestId } from './helpers/auth.js';
import type { AppServer } from '../server/server.js';

/** forgot-password for a signed-up user; returns the code and the link token of the mail. */
async function forgot(server: AppServer, owner: SignedUp): Promise<{ code: string; token: string }> {
  expectApiSuccess(await owner.api.post('/auth/forgot-password', { email: owner.email }), 200);
  const mails = await mailsTo(server, owner.email, 'password_reset');
  const mail = mails[mails.length - 1]!;
  return { code: await latestCode(server, owner.email, 'password_reset'), token: linkTokenIn(mail.textBody) };
}

/** Both sessions are signed out: access tokens and refresh tokens answer 401. */
async function expectSignedOut(api: Api, ...sessions: { accessToken: string; refreshToken: string }[]) {
  for (const s of sessions) {
    expectApiError(await api.get('/auth/profile', { token: s.accessToken }), 401, 'unauthorized');
    expectApiError(await api.post('/auth/refresh-token', { refreshToken: s.refreshToken }), 401, 'unauthorized');
  }
}

async function expectLoginFails(api: Api, email: string, password: string) {
  expectApiError(await api.post('/auth/login', { email, password }), 401, 'unauthorized');
}

describe('auth: passwords', () => {
  describe('POST /auth/change-password', () => {
    it('keeps the current session, signs out every other one, and the new password is the one that works', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const other = await login(owner.api, owner.email, PASSWORD);
      const res = await owner.api.post('/auth/change-password', { currentPassword: PASSWORD, newPassword: 'a brand new secret' }, { token: owner.accessToken });
      expectApiSuccess(res, 200);
      expectApiSuccess(await owner.api.get('/auth/profile', { token: owner.accessToken }), 200);
      await expectSignedOut(owner.api, other);
      expectApiSuccess(await owner.api.post('/auth/refresh-token', { refreshToken: owner.refreshToken }), 200);
      await expectLoginFails(owner.api, owner.email, PASSWORD);
      await login(owner.api, owner.email, 'a brand new secret');
    });

    it('answers a wrong current password with 400 and changes nothing', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const other = await login(owner.api, owner.email, PASSWORD);
      const res = await owner.api.post('/auth/change-password', { currentPassword: 'not my password', newPassword: 'a brand new secret' }, { token: owner.accessToken });
      expectApiError(res, 400, 'validation_failed');
      expect(res.body.error.details.map((d: any) => d.field)).to.include('currentPassword');
      expectApiSuccess(await owner.api.get('/auth/profile', { token: other.accessToken }), 200);
      await expectLoginFails(owner.api, owner.email, 'a brand new secret');
      await login(owner.api, owner.email, PASSWORD);
    });

    it('rejects a short new password, unknown fields and a missing token', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const auth = { token: owner.accessToken };
      expectApiError(await owner.api.post('/auth/change-password', { currentPassword: PASSWORD, newPassword: 'short' }, auth), 400, 'validation_failed');
      expectApiError(await owner.api.post('/auth/change-password', { currentPassword: PASSWORD, newPassword: 'long enough now', userId: owner.userId }, auth), 400, 'validation_failed');
      expectApiError(await owner.api.post('/auth/change-password', { currentPassword: PASSWORD, newPassword: 'long enough now' }), 401, 'unauthorized');
      await login(owner.api, owner.email, PASSWORD);
    });
  });

  describe('POST /auth/forgot-password', () => {
    it('answers known and unknown emails alike; only the known one gets a mail with a code and a ?token= link', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const api = new Api(baseUrl);
      const unknownEmail = uniqueEmail('unknown');
      const known = await api.post('/auth/forgot-password', { email: owner.email });
      const unknown = await api.post('/auth/forgot-password', { email: unknownEmail });
      expectApiSuccess(known, 200);
      expect(known.body.message).to.equal('Password reset email sent');
      expect(unknown.status).to.equal(200);
      expect(unknown.body).to.deep.equal(known.body);
      expect(await mailsTo(server, unknownEmail, 'password_reset')).to.have.length(0);
      const mails = await mailsTo(server, owner.email, 'password_reset');
      expect(mails).to.have.length(1);
      expect(mails[0]!.textBody).to.match(/\b\d{6}\b/);
      expect(mails[0]!.textBody).to.match(/https?:\/\/\S+\/reset-password\?token=\S+/);
      expect(linkTokenIn(mails[0]!.textBody)).to.have.length.greaterThan(20);
    });

    it('rejects a malformed email with 400 validation_failed', async () => {
      const { baseUrl } = sharedServer();
      expectApiError(await new Api(baseUrl).post('/auth/forgot-password', { email: `nope-${randomUUID()}` }), 400, 'validation_failed');
    });
  });

  describe('POST /auth/reset-password-otp', () => {
    it('resets once with the code, signs out every session and retires the mailed link', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const other = await login(new Api(baseUrl), owner.email, PASSWORD);
      const { code, token } = await forgot(server, owner);
      const api = new Api(baseUrl);
      const res = await api.post('/auth/reset-password-otp', { email: owner.email.toUpperCase(), code, newPassword: 'reset by code 1' });
      expectApiSuccess(res, 200);
      expectApiError(await api.post('/auth/reset-password-otp', { email: owner.email, code, newPassword: 'reset by code 2' }), 400, 'invalid_otp');
      await expectSignedOut(api, owner, other);
      expectApiError(await api.post('/auth/reset-password', { token, newPassword: 'reset by link' }), 400, 'invalid_otp');
      await expectLoginFails(api, owner.email, PASSWORD);
      await expectLoginFails(api, owner.email, 'reset by code 2');
      await login(api, owner.email, 'reset by code 1');
    });

    it('rejects a wrong code, an email that never asked and a short password; the password stays', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const { code } = await forgot(server, owner);
      const api = new Api(baseUrl);
      const wrong = code === '000000' ? '111111' : '000000';
      expectApiError(await api.post('/auth/reset-password-otp', { email: owner.email, code: wrong, newPassword: 'not happening' }), 400, 'invalid_otp');
      expectApiError(await api.post('/auth/reset-password-otp', { email: uniqueEmail('stranger'), code, newPassword: 'not happening' }), 400, 'invalid_otp');
      expectApiError(await api.post('/auth/reset-password-otp', { email: owner.email, code, newPassword: 'short' }), 400, 'validation_failed');
      expectApiSuccess(await owner.api.get('/auth/profile', { token: owner.accessToken }), 200);
      await login(api, owner.email, PASSWORD);
      // None of that used the code up.
      expectApiSuccess(await api.post('/auth/reset-password-otp', { email: owner.email, code, newPassword: 'finally reset' }), 200);
    });

    it('locks the code after 5 wrong tries', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const { code } = await forgot(server, owner);
      const api = new Api(baseUrl);
      const wrong = code === '000000' ? '111111' : '000000';
      for (let i = 0; i < 5; i++) {
        expectApiError(await api.post('/auth/reset-password-otp', { email: owner.email, code: wrong, newPassword: 'guessing game' }), 400, 'invalid_otp');
      }
      expectApiError(await api.post('/auth/reset-password-otp', { email: owner.email, code, newPassword: 'guessing game' }), 400, 'invalid_otp');
      await login(api, owner.email, PASSWORD);
    });
  });

  describe('POST /auth/reset-password', () => {
    it('resets once with the link token and signs out every session', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const other = await login(new Api(baseUrl), owner.email, PASSWORD);
      const { code, token } = await forgot(server, owner);
      const api = new Api(baseUrl);
      expectApiSuccess(await api.post('/auth/reset-password', { token, newPassword: 'reset by link 1' }), 200);
      expectApiError(await api.post('/auth/reset-password', { token, newPassword: 'reset by link 2' }), 400, 'invalid_otp');
      await expectSignedOut(api, owner, other);
      await expectLoginFails(api, owner.email, PASSWORD);
      await login(api, owner.email, 'reset by link 1');
      // The code mailed with the link is a second way in, not a second reset after the first.
      const second = await api.post('/auth/reset-password-otp', { email: owner.email, code, newPassword: 'reset by code' });
      if (second.status === 200) expect.fail('the code of a mail whose link was used must not reset again');
      expectApiError(second, 400, 'invalid_otp');
    });

    it('rejects an unknown, an expired and a short-password request; a validation failure keeps the token usable', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const api = new Api(baseUrl);
      expectApiError(await api.post('/auth/reset-password', { token: 'no-such-token-0123456789abcdef', newPassword: 'whatever works' }), 400, 'invalid_otp');
      const { token } = await forgot(server, owner);
      expectApiError(await api.post('/auth/reset-password', { token, newPassword: 'short' }), 400, 'validation_failed');
      expectApiError(await api.post('/auth/reset-password', { token, newPassword: 'whatever works', email: owner.email }), 400, 'validation_failed');
      const expired = await forgot(server, owner);
      await server.db.knex('password_resets').where({ user_id: owner.userId }).update({ expires_at: new Date(Date.now() - 1000) });
      expectApiError(await api.post('/auth/reset-password', { token: expired.token, newPassword: 'whatever works' }), 400, 'invalid_otp');
      await login(api, owner.email, PASSWORD);
      await server.db.knex('password_resets').where({ user_id: owner.userId }).update({ expires_at: new Date(Date.now() + 3_600_000) });
      expectApiSuccess(await api.post('/auth/reset-password', { token, newPassword: 'whatever works' }), 200);
      await login(api, owner.email, 'whatever works');
    });
  });

  it('keeps the error bodies of forgot/reset indistinguishable for known and unknown accounts', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const api = new Api(baseUrl);
    const nobody = uniqueEmail('nobody');
    expectApiSuccess(await api.post('/auth/forgot-password', { email: owner.email }), 200);
    expectApiSuccess(await api.post('/auth/forgot-password', { email: nobody }), 200);
    const code = await latestCode(server, owner.email, 'password_reset');
    const wrong = code === '000000' ? '111111' : '000000';
    const known = await api.post('/auth/reset-password-otp', { email: owner.email, code: wrong, newPassword: 'doesnt matter' });
    const unknown = await api.post('/auth/reset-password-otp', { email: nobody, code: wrong, newPassword: 'doesnt matter' });
    expectApiError(known, 400, 'invalid_otp');
    expectApiError(unknown, 400, 'invalid_otp');
    expect(withoutRequestId(known.body)).to.deep.equal(withoutRequestId(unknown.body));
  });
});
