// Contacts test helpers: a tenant with an owner, an admin and an agent, and short calls for contacts.
import { expect } from 'chai';
import { sharedServer } from './hooks.js';
import { addMember, signUp, type Member, type SignedUp } from './factories.js';
import type { ApiResponse } from './http.js';

export interface ContactsTenant {
  owner: SignedUp;
  admin: Member;
  agent: Member;
  agent2: Member;
}

export async function contactsTenant(): Promise<ContactsTenant> {
  const { server, baseUrl } = sharedServer();
  const owner = await signUp(server, baseUrl);
  const [admin, agent, agent2] = [await addMember(server, owner, 'admin', 'Ada Admin'), await addMember(server, owner, 'agent', 'Alex Agent'), await addMember(server, owner, 'agent', 'Bo Agent')];
  return { owner, admin, agent, agent2 };
}

export function ok(res: ApiResponse, status: number): any {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(res.body.success).to.equal(true);
  return res.body.data;
}

type Caller = { api: SignedUp['api']; accessToken: string };

/** Calls as a member: c(m).get('/contacts') etc. */
export function as(m: Caller) {
  const t = { token: m.accessToken };
  return {
    get: (path: string) => m.api.get(path, t),
    post: (path: string, body?: unknown) => m.api.post(path, body ?? {}, t),
    patch: (path: string, body: unknown) => m.api.patch(path, body, t),
    delete: (path: string, body?: unknown) => m.api.request('DELETE', path, { ...t, body }),
  };
}

export async function createContact(m: Caller, body: Record<string, unknown>): Promise<any> {
  return ok(await as(m).post('/contacts', body), 201);
}

export async function defineAttribute(m: Caller, body: Record<string, unknown>): Promise<any> {
  return ok(await as(m).post('/contacts/attribute-definitions', body), 201);
}
