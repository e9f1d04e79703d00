// /auth rate limits (server/ratelimit.ts RATE_LIMIT_RULES): per email across IPs and per IP across emails.
import { expect } from 'chai';
import { RATE_LIMIT_RULES } from '../server/ratelimit.js';
import { sharedServer } from './helpers/hooks.js';
import { Api, randomIp, type ApiResponse } from './helpers/http.js';
import { PASSWORD, signUp, uniqueEmail } from './helpers/factories.js';
import { expectApiError, expectApiSuccess } from './helpers/auth.js';

function expectRateLimited(res: ApiResponse, windowSeconds: number): void {
  expectApiError(res, 429, 'rate_limited');
  const retryAfter = res.headers.get('retry-after');
  expect(retryAfter, 'a Retry-After header').to.match(/^\d+$/);
  expect(Number(retryAfter)).to.be.within(1, windowSeconds);
}

describe('auth: rate limits', () => {
  it('limits initiate-signup per email, whatever the IP and the letter case', async () => {
    const { baseUrl } = sharedServer();
    const rule = RATE_LIMIT_RULES['initiate-signup'];
    const email = uniqueEmail('flood');
    for (let i = 0; i < rule.perEmail; i++) {
      const variant = i % 2 ? email.toUpperCase() : email;
      expectApiSuccess(await new Api(baseUrl).post('/auth/initiate-signup', { name: 'Flo Flood', email: variant }), 202);
    }
    expectRateLimited(await new Api(baseUrl).post('/auth/initiate-signup', { name: 'Flo Flood', email }), rule.windowSeconds);
    // Another email is not affected.
    expectApiSuccess(await new Api(baseUrl).post('/auth/initiate-signup', { name: 'Flo Flood', email: uniqueEmail('calm') }), 202);
  });

  it('limits forgot-password per IP across emails; another IP is not affected', async () => {
    const { baseUrl } = sharedServer();
    const rule = RATE_LIMIT_RULES['forgot-password'];
    const api = new Api(baseUrl, randomIp());
    for (let i = 0; i < rule.perIp; i++) {
      expectApiSuccess(await api.post('/auth/forgot-password', { email: uniqueEmail('ip') }), 200);
    }
    expectRateLimited(await api.post('/auth/forgot-password', { email: uniqueEmail('ip') }), rule.windowSeconds);
    expectApiSuccess(await new Api(baseUrl, randomIp()).post('/auth/forgot-password', { email: uniqueEmail('ip') }), 200);
  });

  it('limits login attempts per email across IPs, even with the right password after the limit', async () => {
    const { server, baseUrl } = sharedServer();
    const rule = RATE_LIMIT_RULES.login;
    const owner = await signUp(server, baseUrl);
    for (let i = 0; i < rule.perEmail; i++) {
      expectApiError(await new Api(baseUrl).post('/auth/login', { email: owner.email, password: `guess number ${i}` }), 401, 'unauthorized');
    }
    expectRateLimited(await new Api(baseUrl).post('/auth/login', { email: owner.email, password: PASSWORD }), rule.windowSeconds);
    // The existing session is not touched by the limit.
    expectApiSuccess(await owner.api.get('/auth/profile', { token: owner.accessToken }), 200);
  });

  it('limits verify-otp per IP across emails', async () => {
    const { baseUrl } = sharedServer();
    const rule = RATE_LIMIT_RULES['verify-otp'];
    const api = new Api(baseUrl, randomIp());
    const attempts = Array.from({ length: rule.perIp }, () => api.post('/auth/verify-otp', { email: uniqueEmail('v'), code: '123456', type: 'email_verification' }));
    for (const res of await Promise.all(attempts)) expectApiError(res, 400, 'invalid_otp');
    expectRateLimited(await api.post('/auth/verify-otp', { email: uniqueEmail('v'), code: '123456', type: 'email_verification' }), rule.windowSeconds);
  });
});
