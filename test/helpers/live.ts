// Live-support factories: a widget visitor with a token, and a conversation started by that visitor.
import { expect } from 'chai';
import { Api } from './http.js';
import type { AppServer } from '../../server/server.js';
import { addMember, signUp, type Member, type SignedUp } from './factories.js';

export interface Visitor {
  api: Api;
  token: string;
  sessionId: string;
  orgId: string;
  publicKey: string;
}

export async function widgetKey(owner: SignedUp): Promise<string> {
  const res = await owner.api.get('/widget/manage', { token: owner.accessToken });
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
  return res.body.data.publicKey;
}

export async function newVisitor(owner: SignedUp, opts: { name?: string; email?: string; origin?: string } = {}): Promise<Visitor> {
  const publicKey = await widgetKey(owner);
  const api = new Api(owner.api.baseUrl);
  const res = await api.post('/widget/auth/token', { publicKey, visitor: { name: opts.name ?? 'Vera Visitor', ...(opts.email ? { email: opts.email } : {}) } }, { headers: opts.origin ? { origin: opts.origin } : {} });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return { api, token: res.body.data.token, sessionId: res.body.data.sessionId, orgId: res.body.data.organizationId, publicKey };
}

export async function startConversation(visitor: Visitor, message = 'Hello, I need help'): Promise<{ conversationId: string; body: any }> {
  const res = await visitor.api.post('/widget/conversations', { message }, { token: visitor.token });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return { conversationId: res.body.data.conversation.id, body: res.body };
}

/** The usual scene of a live-support test: an organization with an agent, and a visitor's open conversation. */
export interface SupportScene {
  owner: SignedUp;
  agent: Member;
  visitor: Visitor;
  conversationId: string;
}

export async function supportScene(at: { server: AppServer; baseUrl: string }): Promise<SupportScene> {
  const owner = await signUp(at.server, at.baseUrl);
  const agent = await addMember(at.server, owner, 'agent', 'Alex Agent');
  const visitor = await newVisitor(owner);
  const { conversationId } = await startConversation(visitor, 'first');
  return { owner, agent, visitor, conversationId };
}
