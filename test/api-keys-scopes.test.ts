// The scope a key needs for each organization route (its area from the path, read for GET and write otherwise, as
// the OpenAPI document states it), write implying read on admin routes too, and the routes no key may call: admin
// routes of the organization and its members, and owner routes, whatever the key holds.
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { expectError } from './helpers/tenancy.js';

async function createKey(owner: SignedUp, scopes: string[]): Promise<string> {
  const res = await owner.api.post('/api-keys', { name: 'Scopes bot', scopes }, { token: owner.accessToken });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return res.body.data.token;
}

describe('API key scopes', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('admin routes accept their area\'s write scope (which implies read); a read scope reads only', async () => {
    const reader = { token: await createKey(owner, ['webhooks:read']) };
    const writer = { token: await createKey(owner, ['webhooks:write']) };
    expect((await owner.api.get('/webhooks', reader)).status).to.equal(200);
    const refused = await owner.api.post('/webhooks', { url: 'https://example.com/hook', events: ['message.created'] }, reader);
    expectError(refused, 403, 'forbidden');
    expect(refused.body.message).to.include('API keys need the `webhooks:write` scope.');
    expect((await owner.api.get('/webhooks', writer)).status).to.equal(200);
    const templatesOnly = await owner.api.get('/webhooks', { token: await createKey(owner, ['templates:write']) });
    expectError(templatesOnly, 403, 'forbidden');
    expect(templatesOnly.body.message).to.include('API keys need the `webhooks:read` scope (or `webhooks:write`).');
  });

  it('no key changes the organization or its members, nor calls owner routes, whatever it holds; it may read them', async () => {
    const token = await createKey(owner, ['organization:write', 'members:write']);
    const t = { token };
    expect((await owner.api.get(`/organizations/${owner.orgId}`, t)).status).to.equal(200);
    expect((await owner.api.get(`/memberships/organizations/${owner.orgId}/members`, t)).status).to.equal(200);
    const rename = await owner.api.patch(`/organizations/${owner.orgId}`, { name: 'Renamed by a bot' }, t);
    expectError(rename, 403, 'forbidden');
    expect(rename.body.message).to.include('API keys cannot call this route.');
    expectError(await owner.api.post(`/memberships/organizations/${owner.orgId}/members/invite`, { email: `bot-invite-${Date.now()}@example.com`, role: 'agent' }, t), 403, 'forbidden');
    expectError(await owner.api.delete(`/organizations/${owner.orgId}`, t), 403, 'forbidden');
    expect((await owner.api.get(`/organizations/${owner.orgId}`, { token: owner.accessToken })).body.data.name).to.not.equal('Renamed by a bot');
    const readOnly = { token: await createKey(owner, ['organization:read', 'members:read']) };
    expect((await owner.api.get(`/organizations/${owner.orgId}`, readOnly)).status).to.equal(200);
    expect((await owner.api.get(`/memberships/organizations/${owner.orgId}/members`, readOnly)).status).to.equal(200);
    expectError(await owner.api.get(`/organizations/${owner.orgId}`, { token: await createKey(owner, ['members:read']) }), 403, 'forbidden');
  });

  it('states in the OpenAPI document the scope each organization route needs: its area, read for GET, write otherwise', async () => {
    const doc = (await owner.api.get('/openapi.json')).body;
    const areaOf: Record<string, string> = {
      conversations: 'conversations', contacts: 'contacts', tickets: 'tickets', templates: 'templates', knowledge: 'knowledge',
      analytics: 'analytics', observability: 'analytics', webhooks: 'webhooks', notifications: 'notifications', channels: 'channels',
      email: 'email', storage: 'storage', widget: 'widget', agent: 'agent', organizations: 'organization', memberships: 'members',
    };
    const scoped = new Set<string>();
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      const segment = path.replace(/^\/api\/v1\//, '').split('/')[0]!;
      for (const [method, op] of Object.entries<any>(ops)) {
        if (!op['x-required-role']) continue;
        const scope = op['x-required-scope'];
        const where = `${method} ${path}`;
        if (scope === null) {
          expect(op.description, where).to.include('API keys cannot call this route.');
          continue;
        }
        scoped.add(segment);
        expect(scope, where).to.equal(`${areaOf[segment]}:${method === 'get' ? 'read' : 'write'}`);
        if (method === 'get') expect(op.description, where).to.include(`API keys need the \`${scope}\` scope (or \`${areaOf[segment]}:write\`).`);
        else expect(op.description, where).to.include(`API keys need the \`${scope}\` scope.`).and.not.include('(or `');
        // Admin routes of the organization and its members are for people only.
        if (op['x-required-role'] === 'owner' || (op['x-required-role'] === 'admin' && ['organizations', 'memberships'].includes(segment))) expect.fail(`${where} accepts keys`);
      }
    }
    // Every area has routes a key may call: an area that lost its path segment would leave them to no key.
    expect([...scoped].sort()).to.deep.equal(Object.keys(areaOf).sort());
  });
});
