// The route registry's caller checks that hold for every route: an API key stays inside its own organization on
// routes that name the organization in their path, acts on organization routes only, and a malformed organization id
// is refused as one the caller does not belong to, whatever else in the path is malformed.
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { expectError } from './helpers/tenancy.js';

async function createKey(owner: SignedUp, scopes: string[]): Promise<string> {
  const res = await owner.api.post('/api-keys', { name: 'Registry bot', scopes }, { token: owner.accessToken });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.data.token;
}

describe('route registry: callers', () => {
  it("refuses a key on another organization's path routes, and reads its own", async () => {
    const { server, baseUrl } = sharedServer();
    const a = await signUp(server, baseUrl);
    const b = await signUp(server, baseUrl);
    const t = { token: await createKey(a, ['organization:read', 'members:read']) };
    const own = await a.api.get(`/organizations/${a.orgId}`, t);
    expect(own.status, JSON.stringify(own.body)).to.equal(200);
    expect(own.body.data.id).to.equal(a.orgId);
    for (const path of [`/organizations/${b.orgId}`, `/memberships/organizations/${b.orgId}/members`]) {
      const res = await a.api.get(path, t);
      expectError(res, 403, 'forbidden');
      expect(res.body.message, path).to.equal('You are not a member of this organization');
    }
  });

  it('refuses a key on routes of a person (profile, organization list, sign-out), naming it a key', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const t = { token: await createKey(owner, ['conversations:write', 'organization:write']) };
    for (const res of [await owner.api.get('/auth/profile', t), await owner.api.get('/organizations', t), await owner.api.post('/auth/logout', {}, t)]) {
      expectError(res, 403, 'forbidden');
      expect(res.body.message).to.equal('This API key may not call this route (API keys cannot call this route.)');
    }
    // The same routes answer the person.
    expect((await owner.api.get('/organizations', { token: owner.accessToken })).status).to.equal(200);
  });

  it('tells a caller without a bearer the same on visitor routes as on operator routes', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const operatorRoute = await owner.api.get('/auth/profile');
    expectError(operatorRoute, 401, 'unauthorized');
    const visitorRoute = await owner.api.post('/widget/auth/validate', undefined);
    expectError(visitorRoute, 401, 'unauthorized');
    expect(visitorRoute.body.message).to.equal(operatorRoute.body.message);
  });

  it('answers 403 for a malformed organization id even when another path parameter is malformed too', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const res = await owner.api.patch('/memberships/organizations/not-an-id/members/not-an-id-either/status', { status: 'suspended' }, { token: owner.accessToken });
    expectError(res, 403, 'forbidden');
    // Only the membership id malformed: it names nothing (404).
    expectError(await owner.api.patch(`/memberships/organizations/${owner.orgId}/members/not-an-id/status`, { status: 'suspended' }, { token: owner.accessToken }), 404, 'not_found');
  });
});
