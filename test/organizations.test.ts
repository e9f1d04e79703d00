// /organizations: list, create, get, patch, delete, switch, entitlements and usage, driven over HTTP.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { decodeJwt, expectError, invite } from './helpers/tenancy.js';

const ORG_KEYS = ['id', 'name', 'slug', 'domain', 'logoUrl', 'plan', 'settings', 'createdAt', 'updatedAt'];

describe('organizations', () => {
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl, { organizationName: 'Acme Support' });
  });

  describe('GET /organizations', () => {
    it('lists each accepted organization with the caller role and plan', async () => {
      const { server, baseUrl } = sharedServer();
      const acme = await signUp(server, baseUrl, { organizationName: 'Acme Support' });
      const other = await signUp(server, baseUrl, { organizationName: 'Other Co' });
      const agent = await addMember(server, other, 'agent');
      // The agent also gets an admin seat in Acme, with the same account.
      const inv = await invite(server, acme, 'admin', { email: agent.email });
      const acc = await agent.api.post('/memberships/accept-invite', { token: inv.token }, { token: agent.accessToken });
      expect(acc.status, JSON.stringify(acc.body)).to.equal(200);

      const res = await agent.api.get('/organizations', { token: agent.accessToken });
      expect(res.status).to.equal(200);
      expect(res.body.success).to.equal(true);
      const byId = Object.fromEntries(res.body.data.map((o: any) => [o.id, o]));
      expect(Object.keys(byId)).to.have.members([other.orgId, acme.orgId]);
      expect(byId[other.orgId]).to.deep.equal({ id: other.orgId, name: 'Other Co', slug: byId[other.orgId].slug, role: 'agent', plan: 'unlimited' });
      expect(byId[acme.orgId]).to.include({ name: 'Acme Support', role: 'admin', plan: 'unlimited' });
      expect(byId[acme.orgId].slug).to.match(/^acme-support/);
    });

    it('leaves out pending invitations and needs a bearer token', async () => {
      const { server, baseUrl } = sharedServer();
      const someone = await signUp(server, baseUrl);
      await invite(server, owner, 'agent', { email: someone.email });
      const res = await someone.api.get('/organizations', { token: someone.accessToken });
      expect(res.body.data.map((o: any) => o.id)).to.deep.equal([someone.orgId]);
      expectError(await someone.api.get('/organizations'), 401, 'unauthorized');
    });
  });

  describe('POST /organizations', () => {
    it('creates an organization whose owner is the caller', async () => {
      const { server, baseUrl } = sharedServer();
      const user = await signUp(server, baseUrl);
      const res = await user.api.post('/organizations', { name: '  Second Org  ', domain: 'second.example' }, { token: user.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      const org = res.body.data;
      expect(org).to.have.all.keys(...ORG_KEYS);
      expect(org).to.include({ name: 'Second Org', domain: 'second.example', plan: 'unlimited', logoUrl: null });
      expect(org.slug).to.match(/^second-org/);
      expect(org.settings).to.deep.equal({});
      expect(org.id).to.not.equal(user.orgId);

      const list = await user.api.get('/organizations', { token: user.accessToken });
      expect(list.body.data.find((o: any) => o.id === org.id)).to.deep.include({ role: 'owner', plan: 'unlimited' });
      const members = await user.api.get(`/memberships/organizations/${org.id}/members`, { token: user.accessToken });
      expect(members.status).to.equal(200);
      expect(members.body.data).to.have.length(1);
      expect(members.body.data[0]).to.include({ userId: user.userId, role: 'owner', status: 'accepted' });
    });

    it('gives a taken name its own slug', async () => {
      const a = await owner.api.post('/organizations', { name: 'Same Name' }, { token: owner.accessToken });
      const b = await owner.api.post('/organizations', { name: 'Same Name' }, { token: owner.accessToken });
      expect(a.status).to.equal(201);
      expect(b.status).to.equal(201);
      expect(a.body.data.slug).to.not.equal(b.body.data.slug);
    });

    it('rejects fields a client does not own and a missing name', async () => {
      const res = await owner.api.post('/organizations', { name: 'X', plan: 'enterprise' }, { token: owner.accessToken });
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details.map((d: any) => d.field)).to.include('plan');
      expectError(await owner.api.post('/organizations', { domain: 'x.example' }, { token: owner.accessToken }), 400, 'validation_failed');
      expectError(await owner.api.post('/organizations', { name: 'X' }), 401, 'unauthorized');
    });
  });

  describe('GET /organizations/:orgId', () => {
    it('answers a member, and 403 to a non-member, an unknown and a malformed id', async () => {
      const { server, baseUrl } = sharedServer();
      const agent = await addMember(server, owner, 'agent');
      const res = await agent.api.get(`/organizations/${owner.orgId}`, { token: agent.accessToken });
      expect(res.status).to.equal(200);
      expect(res.body.data).to.have.all.keys(...ORG_KEYS);
      expect(res.body.data).to.include({ id: owner.orgId, name: 'Acme Support', plan: 'unlimited' });

      const stranger = await signUp(server, baseUrl);
      expectError(await stranger.api.get(`/organizations/${owner.orgId}`, { token: stranger.accessToken }), 403, 'forbidden');
      expectError(await stranger.api.get(`/organizations/${randomUUID()}`, { token: stranger.accessToken }), 403, 'forbidden');
      expectError(await stranger.api.get('/organizations/not-a-uuid', { token: stranger.accessToken }), 403, 'forbidden');
      expectError(await stranger.api.get(`/organizations/${owner.orgId}`), 401, 'unauthorized');
    });
  });

  describe('PATCH /organizations/:orgId', () => {
    it('lets an admin change it and merges settings key by key', async () => {
      const { server, baseUrl } = sharedServer();
      const own = await signUp(server, baseUrl);
      const admin = await addMember(server, own, 'admin');
      const path = `/organizations/${own.orgId}`;
      const first = await admin.api.patch(path, { settings: { timezone: 'Europe/Berlin', autoAssignment: true } }, { token: admin.accessToken });
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      expect(first.body.data.settings).to.deep.equal({ timezone: 'Europe/Berlin', autoAssignment: true });

      const second = await admin.api.patch(path, { name: 'Renamed', logoUrl: 'https://cdn.example/logo.png', settings: { locale: 'de-DE', autoAssignment: false } }, { token: admin.accessToken });
      expect(second.status).to.equal(200);
      expect(second.body.data.settings).to.deep.equal({ timezone: 'Europe/Berlin', autoAssignment: false, locale: 'de-DE' });
      expect(second.body.data.logoUrl).to.equal('https://cdn.example/logo.png');

      expect(second.body.data.name).to.equal('Renamed');
      const read = await own.api.get(path, { token: own.accessToken });
      expect(read.body.data.settings).to.deep.equal({ timezone: 'Europe/Berlin', autoAssignment: false, locale: 'de-DE' });
      expect(read.body.data.logoUrl).to.equal('https://cdn.example/logo.png');
    });

    it('changes the name for the owner and keeps it for everyone', async () => {
      const { server, baseUrl } = sharedServer();
      const own = await signUp(server, baseUrl, { organizationName: 'Before' });
      const res = await own.api.patch(`/organizations/${own.orgId}`, { name: 'After', domain: 'after.example' }, { token: own.accessToken });
      expect(res.status).to.equal(200);
      expect(res.body.data).to.include({ name: 'After', domain: 'after.example' });
      const list = await own.api.get('/organizations', { token: own.accessToken });
      expect(list.body.data.find((o: any) => o.id === own.orgId).name).to.equal('After');
    });

    it('refuses an agent (403) and leaves the organization unchanged', async () => {
      const { server, baseUrl } = sharedServer();
      const own = await signUp(server, baseUrl, { organizationName: 'Kept Name' });
      const agent = await addMember(server, own, 'agent');
      expectError(await agent.api.patch(`/organizations/${own.orgId}`, { name: 'Hijacked' }, { token: agent.accessToken }), 403, 'forbidden');
      expectError(await agent.api.patch(`/organizations/${own.orgId}`, { settings: { locale: 'fr' } }, { token: agent.accessToken }), 403, 'forbidden');
      const read = await own.api.get(`/organizations/${own.orgId}`, { token: own.accessToken });
      expect(read.body.data.name).to.equal('Kept Name');
      expect(read.body.data.settings).to.deep.equal({});
    });

    it('rejects unknown fields, unknown settings keys and an empty body with 400 validation_failed', async () => {
      const path = `/organizations/${owner.orgId}`;
      const unknown = await owner.api.patch(path, { name: 'Ok', plan: 'enterprise' }, { token: owner.accessToken });
      expectError(unknown, 400, 'validation_failed');
      expect(unknown.body.error.details.map((d: any) => d.field)).to.include('plan');
      const badSetting = await owner.api.patch(path, { settings: { theme: 'dark' } }, { token: owner.accessToken });
      expectError(badSetting, 400, 'validation_failed');
      expect(badSetting.body.error.details.map((d: any) => d.field)).to.include('settings.theme');
      expectError(await owner.api.patch(path, { settings: { autoAssignment: 'yes' } }, { token: owner.accessToken }), 400, 'validation_failed');
      expectError(await owner.api.patch(path, {}, { token: owner.accessToken }), 400, 'validation_failed');
      const badZone = await owner.api.patch(path, { settings: { timezone: 'Mars/Olympus_Mons' } }, { token: owner.accessToken });
      expectError(badZone, 400, 'validation_failed');
      expect(badZone.body.error.details.map((d: any) => d.field)).to.deep.equal(['settings.timezone']);
      const read = await owner.api.get(path, { token: owner.accessToken });
      expect(read.body.data.plan).to.equal('unlimited');
      expect(read.body.data.name).to.equal('Acme Support');
      expect(read.body.data.settings).to.not.have.property('theme');
      expect(read.body.data.settings).to.not.have.property('timezone');
    });

    it('answers 403 for an organization the caller is not in', async () => {
      const { server, baseUrl } = sharedServer();
      const stranger = await signUp(server, baseUrl);
      expectError(await stranger.api.patch(`/organizations/${owner.orgId}`, { name: 'Mine' }, { token: stranger.accessToken }), 403, 'forbidden');
    });
  });

  describe('DELETE /organizations/:orgId', () => {
    it('is for the owner only; afterwards members get 403 and it leaves every list', async () => {
      const { server, baseUrl } = sharedServer();
      const own = await signUp(server, baseUrl);
      const admin = await addMember(server, own, 'admin');
      const agent = await addMember(server, own, 'agent');
      const path = `/organizations/${own.orgId}`;

      expectError(await admin.api.delete(path, { token: admin.accessToken }), 403, 'forbidden');
      expectError(await agent.api.delete(path, { token: agent.accessToken }), 403, 'forbidden');
      expect((await agent.api.get(path, { token: agent.accessToken })).status).to.equal(200);

      const res = await own.api.delete(path, { token: own.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.success).to.equal(true);

      for (const m of [own, admin, agent]) {
        expectError(await m.api.get(path, { token: m.accessToken }), 403, 'forbidden');
        expectError(await m.api.get(`/memberships/organizations/${own.orgId}/members`, { token: m.accessToken }), 403, 'forbidden');
        // Their tokens still name the deleted organization: tenant routes of the token refuse too.
        expectError(await m.api.get('/organizations/billing/usage', { token: m.accessToken }), 403, 'forbidden');
        const list = await m.api.get('/organizations', { token: m.accessToken });
        expect(list.status).to.equal(200);
        expect(list.body.data.map((o: any) => o.id)).to.not.include(own.orgId);
      }
      expectError(await own.api.post(`${path}/switch`, undefined, { token: own.accessToken }), 403, 'forbidden');
    });
  });

  describe('POST /organizations/:orgId/switch', () => {
    it('returns tokens whose orgId is the selection, and they work on that organization', async () => {
      const { server, baseUrl } = sharedServer();
      const user = await signUp(server, baseUrl);
      await invite(server, user, 'agent'); // the first organization now holds 2 seats
      const created = await user.api.post('/organizations', { name: 'Second' }, { token: user.accessToken });
      const secondId = created.body.data.id;

      const res = await user.api.post(`/organizations/${secondId}/switch`, undefined, { token: user.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.data.role).to.equal('owner');
      expect(res.body.data.organization).to.include({ id: secondId, name: 'Second' });
      const access = decodeJwt(res.body.data.accessToken);
      const refresh = decodeJwt(res.body.data.refreshToken);
      expect(access).to.include({ orgId: secondId, sub: user.userId, typ: 'access' });
      expect(refresh).to.include({ orgId: secondId, sub: user.userId, typ: 'refresh' });
      expect(access.sid).to.equal(refresh.sid);
      expect(decodeJwt(user.accessToken).orgId).to.equal(user.orgId);

      const usageNew = await user.api.get('/organizations/billing/usage', { token: res.body.data.accessToken });
      expect(usageNew.status).to.equal(200);
      expect(usageNew.body.data.usage.humanAgents).to.equal(1);
      const usageOld = await user.api.get('/organizations/billing/usage', { token: user.accessToken });
      expect(usageOld.body.data.usage.humanAgents).to.equal(2);
      const profile = await user.api.get('/auth/profile', { token: res.body.data.accessToken });
      expect(profile.body.data.organization.id).to.equal(secondId);
    });

    it('puts the membership role in the body', async () => {
      const { server, baseUrl } = sharedServer();
      const own = await signUp(server, baseUrl);
      const agent = await addMember(server, own, 'agent');
      const res = await agent.api.post(`/organizations/${own.orgId}/switch`, undefined, { token: agent.accessToken });
      expect(res.status).to.equal(200);
      expect(res.body.data.role).to.equal('agent');
      expect(decodeJwt(res.body.data.accessToken).orgId).to.equal(own.orgId);
    });

    it('answers 403 to a non-member, another organization, a malformed id and no token 401', async () => {
      const { server, baseUrl } = sharedServer();
      const stranger = await signUp(server, baseUrl);
      expectError(await stranger.api.post(`/organizations/${owner.orgId}/switch`, undefined, { token: stranger.accessToken }), 403, 'forbidden');
      expectError(await stranger.api.post(`/organizations/${randomUUID()}/switch`, undefined, { token: stranger.accessToken }), 403, 'forbidden');
      expectError(await stranger.api.post('/organizations/nope/switch', undefined, { token: stranger.accessToken }), 403, 'forbidden');
      expectError(await stranger.api.post(`/organizations/${owner.orgId}/switch`), 401, 'unauthorized');
    });

    it('answers 403 while the membership is pending or suspended', async () => {
      const { server, baseUrl } = sharedServer();
      const own = await signUp(server, baseUrl);
      const person = await signUp(server, baseUrl);
      const inv = await invite(server, own, 'agent', { email: person.email });
      const path = `/organizations/${own.orgId}/switch`;
      expectError(await person.api.post(path, undefined, { token: person.accessToken }), 403, 'forbidden');

      const acc = await person.api.post('/memberships/accept-invite', { token: inv.token }, { token: person.accessToken });
      expect(acc.status).to.equal(200);
      expect((await person.api.post(path, undefined, { token: person.accessToken })).status).to.equal(200);

      const sus = await own.api.patch(`/memberships/organizations/${own.orgId}/members/${inv.membershipId}/status`, { status: 'suspended' }, { token: own.accessToken });
      expect(sus.status).to.equal(200);
      expectError(await person.api.post(path, undefined, { token: person.accessToken }), 403, 'forbidden');
    });

    it('takes no body', async () => {
      expectError(await owner.api.post(`/organizations/${owner.orgId}/switch`, { orgId: owner.orgId }, { token: owner.accessToken }), 400, 'validation_failed');
    });
  });

  describe('billing', () => {
    it('entitlements: a new organization is on the default plan, unlimited (DEFAULT_PLAN)', async () => {
      const { server, baseUrl } = sharedServer();
      const own = await signUp(server, baseUrl);
      const res = await own.api.get('/organizations/billing/entitlements', { token: own.accessToken });
      expect(res.status).to.equal(200);
      expect(res.body.data.plan).to.equal('unlimited');
      expect(res.body.data.limits).to.deep.equal({ humanAgents: null, aiCallsPerMonth: null, knowledgeSources: null, widgets: null, channels: null, storageMb: null });
      expect(res.body.data.features).to.include.members(['live_chat', 'widget', 'templates', 'ai_assist']);
    });

    it('entitlements: a plan the configuration no longer defines is 503 with a clear message, not a 500', async () => {
      const { server, baseUrl } = sharedServer();
      const own = await signUp(server, baseUrl);
      // An operator removed the plan from PLANS_FILE after organizations were put on it.
      await server.db.knex('organizations').where('id', own.orgId).update({ plan: 'retired' });
      const res = await own.api.get('/organizations/billing/entitlements', { token: own.accessToken });
      expectError(res, 503, 'service_unavailable');
      expect(res.body.message).to.contain('"retired"').and.to.contain('PLANS_FILE');
      const invite = await own.api.post(`/memberships/organizations/${own.orgId}/members/invite`, { email: `retired-${Date.now()}@example.com`, role: 'agent' }, { token: own.accessToken });
      expectError(invite, 503, 'service_unavailable');
      const members = await own.api.get(`/memberships/organizations/${own.orgId}/members`, { token: own.accessToken });
      expect(members.body.data, 'no invitation half-written').to.have.length(1);
    });

    it('entitlements: the free plan limits and features, for any member', async () => {
      const { server, baseUrl } = sharedServer();
      const own = await signUp(server, baseUrl);
      await server.services.organizations.changePlan(own.orgId, 'free');
      const agent = await addMember(server, own, 'agent');
      const res = await agent.api.get('/organizations/billing/entitlements', { token: agent.accessToken });
      expect(res.status).to.equal(200);
      expect(res.body.data.plan).to.equal('free');
      expect(res.body.data.limits).to.deep.equal({ humanAgents: 3, aiCallsPerMonth: 1000, knowledgeSources: 5, widgets: 1, channels: 1, storageMb: 500 });
      expect(res.body.data.features).to.include.members(['live_chat', 'widget', 'templates']);
      expect(res.body.data.features).to.not.include('ai_assist');
      expectError(await agent.api.get('/organizations/billing/entitlements'), 401, 'unauthorized');
    });

    it('usage: humanAgents counts accepted and pending members, in this calendar month', async () => {
      const { server, baseUrl } = sharedServer();
      const own = await signUp(server, baseUrl);
      const before = await own.api.get('/organizations/billing/usage', { token: own.accessToken });
      expect(before.status).to.equal(200);
      expect(before.body.data.usage.humanAgents).to.equal(1);
      const agent = await addMember(server, own, 'agent');
      await invite(server, own, 'agent');
      const res = await agent.api.get('/organizations/billing/usage', { token: agent.accessToken });
      expect(res.body.data.usage.humanAgents).to.equal(3);
      const now = new Date();
      expect(res.body.data.periodStart).to.equal(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString());
      expect(res.body.data.periodEnd).to.equal(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString());
    });
  });
});
