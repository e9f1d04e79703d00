// Factories: every test builds its own users and organizations through the public API.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { AppServer } from '../../server/server.js';
import { Api } from './http.js';

export const PASSWORD = 'correct horse battery';

export function uniqueEmail(prefix = 'user'): string {
  return `${prefix}-${randomUUID().slice(0, 12)}@example.test`;
}

/** The newest mail the server wrote for an address (the outbox holds every mail, sent or only logged). */
export async function latestMail(server: AppServer, to: string, kind?: string) {
  const query = server.db.models.OutboxEmail.query().where('toAddress', to.toLowerCase()).orderBy('createdAt', 'desc').first();
  if (kind) query.where('kind', kind);
  return query;
}

/** The only 6-digit number in a mail's text. */
export function codeIn(text: string): string {
  const codes = text.match(/\b\d{6}\b/g) ?? [];
  expect(codes, `one 6-digit code in: ${text}`).to.have.length(1);
  return codes[0]!;
}

/** The `token` query parameter of the first link in a mail's text. */
export function linkTokenIn(text: string): string {
  const url = text.match(/https?:\/\/\S+/)?.[0];
  expect(url, `a link in: ${text}`).to.be.a('string');
  const token = new URL(url!).searchParams.get('token');
  expect(token).to.be.a('string');
  return token!;
}

export interface SignedUp {
  api: Api;
  email: string;
  password: string;
  userId: string;
  orgId: string;
  accessToken: string;
  refreshToken: string;
  body: any;
}

/** initiate -> code from the outbox -> complete (code inline). */
export async function signUp(server: AppServer, baseUrl: string, opts: { email?: string; name?: string; organizationName?: string } = {}): Promise<SignedUp> {
  const api = new Api(baseUrl);
  const email = opts.email ?? uniqueEmail('owner');
  const init = await api.post('/auth/initiate-signup', { name: opts.name ?? 'Olivia Owner', email });
  expect(init.status, JSON.stringify(init.body)).to.equal(202);
  const mail = await latestMail(server, email, 'signup_code');
  const code = codeIn(mail!.textBody);
  const res = await api.post('/auth/complete-signup', { email, organizationName: opts.organizationName ?? `Org ${randomUUID().slice(0, 6)}`, password: PASSWORD, code });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  const data = res.body.data;
  return { api, email, password: PASSWORD, userId: data.user.id, orgId: data.organization.id, accessToken: data.accessToken, refreshToken: data.refreshToken, body: res.body };
}

export interface Member {
  api: Api;
  email: string;
  userId: string;
  membershipId: string;
  accessToken: string;
  refreshToken: string;
}

/** Invites a new person into the owner's organization and accepts with a fresh account. */
export async function addMember(server: AppServer, owner: SignedUp, role: 'admin' | 'agent' | 'owner' = 'agent', name = 'Mia Member'): Promise<Member> {
  const email = uniqueEmail(role);
  const invite = await owner.api.post(`/memberships/organizations/${owner.orgId}/members/invite`, { email, role }, { token: owner.accessToken });
  expect(invite.status, JSON.stringify(invite.body)).to.equal(201);
  const mail = await latestMail(server, email, 'invitation');
  const token = linkTokenIn(mail!.textBody);
  const api = new Api(owner.api.baseUrl);
  const accepted = await api.post('/memberships/accept-invite', { token, name, password: PASSWORD });
  expect(accepted.status, JSON.stringify(accepted.body)).to.equal(200);
  return { api, email, userId: accepted.body.data.user.id, membershipId: invite.body.data.id, accessToken: accepted.body.data.accessToken, refreshToken: accepted.body.data.refreshToken };
}
