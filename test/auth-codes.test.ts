// One-time codes at their edges: how long a code and a verified signup last, guesses counted per email, the shape
// of a code, what a password reset retires, and concurrent use of one code.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { latestMail, linkTokenIn, PASSWORD, signUp, uniqueEmail } from './helpers/factories.js';
import { generateOtpCode } from '../server/auth/secrets.js';
import { expectApiError, expectApiSuccess, initiateSignup, latestCode } from './helpers/auth.js';
import { withClockAhead } from './helpers/clock.js';

const wrongCodeFor = (code: string) => (code === '000000' ? '111111' : '000000');

describe('auth: one-time codes at their edges', () => {
  it('a code works for 10 minutes and not after', async () => {
    const { server, baseUrl } = sharedServer();
    const api = new Api(baseUrl);
    const early = uniqueEmail('otp-ttl');
    const earlyCode = await initiateSignup(server, api, early);
    await withClockAhead(9 * 60, async () => {
      expectApiSuccess(await api.post('/auth/complete-signup', { email: early, organizationName: 'In time', password: PASSWORD, code: earlyCode }), 201);
    });
    const late = uniqueEmail('otp-ttl');
    const lateCode = await initiateSignup(server, api, late);
    await withClockAhead(10 * 60 + 5, async () => {
      expectApiError(await api.post('/auth/complete-signup', { email: late, organizationName: 'Too late', password: PASSWORD, code: lateCode }), 400, 'invalid_otp');
    });
  });

  it('a verified signup may be completed for 30 minutes after the code was checked, past the code\'s own 10', async () => {
    const { server, baseUrl } = sharedServer();
    const api = new Api(baseUrl);
    const verify = async (email: string) => {
      const code = await initiateSignup(server, api, email);
      expectApiSuccess(await api.post('/auth/verify-otp', { email, code, type: 'email_verification' }), 200);
    };
    const inGrace = uniqueEmail('grace');
    await verify(inGrace);
    await withClockAhead(25 * 60, async () => {
      expectApiSuccess(await api.post('/auth/complete-signup', { email: inGrace, organizationName: 'Within grace', password: PASSWORD }), 201);
    });
    const pastGrace = uniqueEmail('grace');
    await verify(pastGrace);
    await withClockAhead(30 * 60 + 5, async () => {
      expectApiError(await api.post('/auth/complete-signup', { email: pastGrace, organizationName: 'Past grace', password: PASSWORD }), 400, 'invalid_otp');
    });
  });

  it('wrong codes count against their own email only; the fifth says to ask for a new code', async () => {
    const { server, baseUrl } = sharedServer();
    const api = new Api(baseUrl);
    const guessed = uniqueEmail('guessed');
    const guessedCode = await initiateSignup(server, api, guessed);
    const bystander = uniqueEmail('bystander');
    const bystanderCode = await initiateSignup(server, api, bystander);
    const body = (email: string, code: string) => ({ email, organizationName: 'Guessing', password: PASSWORD, code });
    for (let i = 1; i <= 5; i++) {
      const res = await api.post('/auth/complete-signup', body(guessed, wrongCodeFor(guessedCode)));
      expectApiError(res, 400, 'invalid_otp');
      if (i < 5) expect(res.body.message, `wrong code ${i}`).to.not.match(/new one/);
      else expect(res.body.message).to.match(/Too many wrong codes; ask for a new one/);
    }
    expectApiSuccess(await api.post('/auth/complete-signup', body(bystander, bystanderCode)), 201);
  });

  it('codes are six digits, leading zeros kept', () => {
    const codes = Array.from({ length: 5000 }, () => generateOtpCode());
    for (const code of codes) expect(code).to.match(/^\d{6}$/);
    expect(codes.some((c) => c.startsWith('0')), 'some codes start with 0').to.equal(true);
  });

  it("a password reset retires that user's reset codes only: another person's open codes still work", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const neighbour = await signUp(server, baseUrl);
    const api = new Api(baseUrl);
    expectApiSuccess(await api.post('/auth/forgot-password', { email: owner.email }), 200);
    const ownerCode = await latestCode(server, owner.email, 'password_reset');
    const mail = await latestMail(server, owner.email, 'password_reset');
    expectApiSuccess(await api.post('/auth/forgot-password', { email: neighbour.email }), 200);
    const neighbourCode = await latestCode(server, neighbour.email, 'password_reset');
    const signingUp = uniqueEmail('bystander');
    const signupCode = await initiateSignup(server, api, signingUp);

    expectApiSuccess(await api.post('/auth/reset-password', { token: linkTokenIn(mail!.textBody), newPassword: 'reset by the link' }), 200);
    // The owner's own code went with the reset; nobody else's did.
    expectApiError(await api.post('/auth/reset-password-otp', { email: owner.email, code: ownerCode, newPassword: 'reset again' }), 400, 'invalid_otp');
    expectApiSuccess(await api.post('/auth/reset-password-otp', { email: neighbour.email, code: neighbourCode, newPassword: 'neighbour resets' }), 200);
    expectApiSuccess(await api.post('/auth/complete-signup', { email: signingUp, organizationName: 'Unaffected', password: PASSWORD, code: signupCode }), 201);
  });

  it('of two concurrent uses of one reset code, one wins', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    for (let round = 0; round < 3; round++) {
      expectApiSuccess(await owner.api.post('/auth/forgot-password', { email: owner.email }), 200);
      const code = await latestCode(server, owner.email, 'password_reset');
      const answers = await Promise.all([1, 2, 3].map(() => owner.api.post('/auth/verify-otp', { email: owner.email, code, type: 'password_reset' })));
      expect(answers.filter((r) => r.status === 200), JSON.stringify(answers.map((r) => r.body))).to.have.length(1);
    }
  });

  it('two concurrent completions of one verified signup make one account', async () => {
    const { server, baseUrl } = sharedServer();
    const api = new Api(baseUrl);
    for (let round = 0; round < 3; round++) {
      const email = uniqueEmail('twice');
      const code = await initiateSignup(server, api, email);
      expectApiSuccess(await api.post('/auth/verify-otp', { email, code, type: 'email_verification' }), 200);
      const answers = await Promise.all([1, 2, 3].map(() => api.post('/auth/complete-signup', { email, organizationName: 'Twice', password: PASSWORD })));
      expect(answers.filter((r) => r.status === 201), JSON.stringify(answers.map((r) => r.body))).to.have.length(1);
      for (const res of answers.filter((r) => r.status !== 201)) expect(res.status).to.be.within(400, 499);
      expect(await server.db.models.User.query().where({ email })).to.have.length(1);
    }
  });
});
