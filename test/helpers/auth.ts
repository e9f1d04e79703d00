// Small helpers for the /auth tests: the response envelopes, mails by kind, signup steps and token forging.
import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import type { AppServer } from '../../server/server.js';
import { codeIn, latestMail } from './factories.js';
import type { Api, ApiResponse } from './http.js';
import { TEST_SECRETS } from './server.js';

/** The contract's error body: { success:false, message, error:{ code, details }, requestId }, requestId = X-Request-Id. */
export { expectError as expectApiError } from './tenancy.js';

/** The contract's success body with the given status; returns `data`. */
export function expectApiSuccess(res: ApiResponse, status: number): any {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(res.body.success).to.equal(true);
  expect(res.body.message).to.be.a('string').and.not.equal('');
  expect(res.headers.get('x-request-id')).to.be.a('string').and.not.equal('');
  return res.body.data;
}

/** A response body without its per-request id, to compare two answers that must be indistinguishable. */
export function withoutRequestId(body: any): any {
  const { requestId: _ignored, ...rest } = body;
  return rest;
}

/** Every mail of one kind written for an address, oldest first. */
export async function mailsTo(server: AppServer, to: string, kind: string) {
  return server.db.models.OutboxEmail.query().where('toAddress', to.toLowerCase()).where('kind', kind).orderBy('createdAt', 'asc');
}

/** The code of the newest mail of a kind for an address. */
export async function latestCode(server: AppServer, to: string, kind: 'signup_code' | 'password_reset'): Promise<string> {
  const mail = await latestMail(server, to, kind);
  expect(mail, `a ${kind} mail for ${to}`).to.not.equal(undefined);
  return codeIn(mail!.textBody);
}

/** Step 1 of signup; returns the emailed code. */
export async function initiateSignup(server: AppServer, api: Api, email: string, name = 'Sam Signup'): Promise<string> {
  const res = await api.post('/auth/initiate-signup', { name, email });
  expect(res.status, JSON.stringify(res.body)).to.equal(202);
  return latestCode(server, email, 'signup_code');
}

/** Makes the open OTP challenge of (email, type) expire, as if its 10 minutes had passed. */
export async function expireOtp(server: AppServer, email: string, type: 'email_verification' | 'password_reset'): Promise<void> {
  const updated = await server.db.knex('otp_challenges').where({ email: email.toLowerCase(), type }).update({ expires_at: new Date(Date.now() - 1000) });
  expect(updated, 'one challenge expired').to.equal(1);
}

/** Signs an access-token-like JWT; defaults are a valid access token for the given claims. */
export function forgeAccessToken(
  claims: Record<string, unknown>,
  opts: { secret?: string; audience?: string; issuer?: string; expiresInSeconds?: number } = {},
): string {
  const now = Math.floor(Date.now() / 1000);
  return jwt.sign({ typ: 'access', iat: now, exp: now + (opts.expiresInSeconds ?? 900), ...claims }, opts.secret ?? TEST_SECRETS.JWT_ACCESS_SECRET, {
    algorithm: 'HS256',
    audience: opts.audience ?? 'support-platform:operator',
    issuer: opts.issuer ?? 'support-platform',
  });
}

/** The payload of a JWT, without verifying it. */
import { decodeJwt } from './tenancy.js';
export { decodeJwt as jwtPayload };

/** Signs in with email and password; asserts 200 and returns the data. */
export async function login(api: Api, email: string, password: string): Promise<any> {
  const res = await api.post('/auth/login', { email, password });
  return expectApiSuccess(res, 200);
}

/** Signs with a kind's own secret, keeping the claims of a real token and replacing (or, with undefined, dropping) some. */
export function resignToken(token: string, secret: string, change: Record<string, unknown>, opts: { audience?: string } = {}): string {
  const { aud, iss: _iss, iat: _iat, ...claims } = decodeJwt(token);
  const payload: Record<string, unknown> = { ...claims, ...change };
  for (const [k, v] of Object.entries(payload)) if (v === undefined) delete payload[k];
  return jwt.sign(payload, secret, { algorithm: 'HS256', audience: opts.audience ?? aud, issuer: 'support-platform' });
}
