// The REST path remembers an access token's caller for a moment; ending access must still take effect on the very
// next request, on this instance and on every other one sharing the database.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, PASSWORD, signUp } from './helpers/factories.js';
import { expectApiError, expectApiSuccess, login } from './helpers/auth.js';
import { Api, type ApiResponse } from './helpers/http.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

const members = (orgId: string) => `/memberships/organizations/${orgId}/members`;

/**
 * The other instance hears a revocation when PostgreSQL hands it the notice sent at commit: normally before any
 * later request reaches it, but on a starved machine its listening connection may be read a few milliseconds late.
 * (Without the notice the refusal would take the full two seconds.)
 */
async function refusedWithin(ms: number, request: () => Promise<ApiResponse>, status: number): Promise<void> {
  const deadline = Date.now() + ms;
  let res = await request();
  while (res.status !== status && Date.now() < deadline) res = await request();
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
}

/** Several reads with one token, so its caller is remembered if it is going to be. */
async function warm(api: Api, token: string): Promise<void> {
  for (let i = 0; i < 3; i++) expectApiSuccess(await api.get('/contacts', { token }), 200);
}

describe('auth: remembered callers', () => {
  it('remembers callers on this instance', async () => {
    const { server } = sharedServer();
    await waitFor(() => server.services.callers.live, { what: 'the caller cache to hear revocations' });
  });

  it('a suspended agent is refused on the next request, and let in again at once when reactivated', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    await warm(agent.api, agent.accessToken);
    expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
    expectApiError(await agent.api.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
    expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'active' }, { token: owner.accessToken }), 200);
    expectApiSuccess(await agent.api.get('/contacts', { token: agent.accessToken }), 200);
  });

  it('a role change applies to the next request, both ways', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    await warm(agent.api, agent.accessToken);
    expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/role`, { role: 'admin' }, { token: owner.accessToken }), 200);
    const asAdmin = await owner.api.post('/contacts/attribute-definitions', { key: `k${Date.now()}`, label: 'Plan', type: 'text' }, { token: agent.accessToken });
    expect(asAdmin.status, JSON.stringify(asAdmin.body)).to.equal(201);
    expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/role`, { role: 'agent' }, { token: owner.accessToken }), 200);
    expectApiError(await owner.api.post('/contacts/attribute-definitions', { key: `k${Date.now()}b`, label: 'Plan', type: 'text' }, { token: agent.accessToken }), 403, 'forbidden');
  });

  it('a removed agent and a logged-out session are refused on the next request', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    await warm(agent.api, agent.accessToken);
    expectApiSuccess(await owner.api.delete(`${members(owner.orgId)}/${agent.membershipId}`, { token: owner.accessToken }), 200);
    expectApiError(await agent.api.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');

    const session = await login(new Api(baseUrl), owner.email, PASSWORD);
    await warm(owner.api, session.accessToken);
    expectApiSuccess(await owner.api.post('/auth/logout', {}, { token: session.accessToken }), 200);
    expectApiError(await owner.api.get('/contacts', { token: session.accessToken }), 401, 'unauthorized');
    // The owner's other session is not affected.
    expectApiSuccess(await owner.api.get('/contacts', { token: owner.accessToken }), 200);
  });

  describe('across instances (PostgreSQL)', function () {
    let a: TestServer;
    let b: TestServer;

    before(async function () {
      if (!process.env.DATABASE_URL) this.skip();
      a = await startTestServer();
      b = await startTestServer();
      await waitFor(() => a.server.services.callers.live && b.server.services.callers.live, { what: 'both instances to listen for revocations' });
    });

    after(async () => {
      await a?.stop();
      await b?.stop();
    });

    it('suspension, removal and logout on one instance are refused by the other as the change commits', async () => {
      const owner = await signUp(a.server, a.baseUrl);
      const onB = new Api(b.baseUrl);
      const agent = await addMember(a.server, owner, 'agent');
      await warm(onB, agent.accessToken);
      expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
      await refusedWithin(250, () => onB.get('/contacts', { token: agent.accessToken }), 403);
      expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'active' }, { token: owner.accessToken }), 200);
      await warm(onB, agent.accessToken);
      expectApiSuccess(await owner.api.delete(`${members(owner.orgId)}/${agent.membershipId}`, { token: owner.accessToken }), 200);
      await refusedWithin(250, () => onB.get('/contacts', { token: agent.accessToken }), 403);

      const session = await login(new Api(a.baseUrl), owner.email, PASSWORD);
      await warm(onB, session.accessToken);
      expectApiSuccess(await owner.api.post('/auth/logout', {}, { token: session.accessToken }), 200);
      await refusedWithin(250, () => onB.get('/contacts', { token: session.accessToken }), 401);
      expectApiSuccess(await onB.get('/contacts', { token: owner.accessToken }), 200);
    });

    it('a password changed on one instance ends the other sessions on the other instance at once', async () => {
      const owner = await signUp(a.server, a.baseUrl);
      const other = await login(new Api(b.baseUrl), owner.email, PASSWORD);
      const onB = new Api(b.baseUrl);
      await warm(onB, other.accessToken);
      expectApiSuccess(await owner.api.post('/auth/change-password', { currentPassword: PASSWORD, newPassword: `${PASSWORD}-new` }, { token: owner.accessToken }), 200);
      await refusedWithin(250, () => onB.get('/contacts', { token: other.accessToken }), 401);
    });
  });
});
