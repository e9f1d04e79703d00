// Small helpers for organization and membership tests: the error envelope, JWT payloads, invitations.
import { expect } from 'chai';
import type { AppServer } from '../../server/server.js';
import type { ApiResponse } from './http.js';
import { latestMail, linkTokenIn, uniqueEmail, type SignedUp } from './factories.js';

/** Asserts the contract's error body: { success:false, message, error:{ code, details }, requestId }. */
export function expectError(res: ApiResponse, status: number, code: string): void {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(res.body).to.be.an('object');
  expect(res.body).to.have.all.keys('success', 'message', 'error', 'requestId');
  expect(res.body.success).to.equal(false);
  expect(res.body.message).to.be.a('string').and.not.equal('');
  expect(res.body.error).to.have.all.keys('code', 'details');
  expect(res.body.error.code).to.equal(code);
  expect(res.body.error.details).to.be.an('array');
  expect(res.body.requestId).to.be.a('string').and.not.equal('');
  expect(res.headers.get('x-request-id')).to.equal(res.body.requestId);
}

/** The payload of a JWT, without verifying it. */
export function decodeJwt(token: string): Record<string, any> {
  const parts = token.split('.');
  expect(parts, 'a JWT has three parts').to.have.length(3);
  return JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
}

export interface Invitation {
  email: string;
  membershipId: string;
  token: string;
  body: any;
}

/** Invites `email` (a fresh one by default) into the owner's organization; returns the link token from the mail. */
export async function invite(server: AppServer, by: Pick<SignedUp, 'api' | 'orgId' | 'accessToken'>, role: 'owner' | 'admin' | 'agent' = 'agent', opts: { email?: string; name?: string } = {}): Promise<Invitation> {
  const email = opts.email ?? uniqueEmail(`inv-${role}`);
  const res = await by.api.post(`/memberships/organizations/${by.orgId}/members/invite`, { email, role, ...(opts.name ? { name: opts.name } : {}) }, { token: by.accessToken });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  const mail = await latestMail(server, email, 'invitation');
  expect(mail, 'an invitation mail').to.not.equal(undefined);
  return { email, membershipId: res.body.data.id, token: linkTokenIn(mail!.textBody), body: res.body };
}
