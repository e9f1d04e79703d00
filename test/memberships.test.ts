// /memberships: the members list, invitations (invite, resend, verify, accept) and the plan's seat limit.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { addMember, latestMail, linkTokenIn, PASSWORD, signUp, uniqueEmail } from './helpers/factories.js';
import { decodeJwt, expectError, invite } from './helpers/tenancy.js';

const MEMBER_KEYS = ['id', 'organizationId', 'userId', 'name', 'email', 'role', 'status', 'invitedAt', 'activatedAt'];
const members = (orgId: string) => `/memberships/organizations/${orgId}/members`;

describe('memberships', () => {
  describe('GET /memberships/organizations/:orgId/members', () => {
    it('pages with limit and offset and filters by q, role and status', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl, { name: 'Olivia Owner' });
      const agent = await addMember(server, owner, 'agent', 'Zed Zebra');
      const pending = await invite(server, owner, 'admin', { name: 'Pat Pending' });
      const path = members(owner.orgId);
      const opts = { token: agent.accessToken };

      const all = await agent.api.get(path, opts);
      expect(all.status).to.equal(200);
      expect(all.body.pagination).to.deep.equal({ limit: 50, offset: 0, total: 3 });
      expect(all.body.data).to.have.length(3);
      for (const m of all.body.data) expect(m).to.have.all.keys(...MEMBER_KEYS);
      expect(all.body.data.map((m: any) => m.email)).to.deep.equal([owner.email, agent.email, pending.email]);
      expect(all.body.data[0]).to.include({ userId: owner.userId, name: 'Olivia Owner', role: 'owner', status: 'accepted', organizationId: owner.orgId });
      expect(all.body.data[1]).to.include({ id: agent.membershipId, userId: agent.userId, name: 'Zed Zebra', role: 'agent', status: 'accepted' });
      expect(all.body.data[1].activatedAt).to.be.a('string');
      expect(all.body.data[2]).to.include({ id: pending.membershipId, userId: null, name: 'Pat Pending', role: 'admin', status: 'pending', activatedAt: null });
      expect(all.body.data[2].invitedAt).to.be.a('string');

      const page = await agent.api.get(`${path}?limit=1&offset=1`, opts);
      expect(page.body.pagination).to.deep.equal({ limit: 1, offset: 1, total: 3 });
      expect(page.body.data.map((m: any) => m.id)).to.deep.equal([agent.membershipId]);
      const past = await agent.api.get(`${path}?limit=2&offset=3`, opts);
      expect(past.body.data).to.deep.equal([]);
      expect(past.body.pagination.total).to.equal(3);

      const byName = await agent.api.get(`${path}?q=zebra`, opts);
      expect(byName.body.data.map((m: any) => m.id)).to.deep.equal([agent.membershipId]);
      expect(byName.body.pagination.total).to.equal(1);
      const byEmail = await agent.api.get(`${path}?q=${encodeURIComponent(pending.email.toUpperCase())}`, opts);
      expect(byEmail.body.data.map((m: any) => m.id)).to.deep.equal([pending.membershipId]);
      const literal = await agent.api.get(`${path}?q=${encodeURIComponent('%')}`, opts);
      expect(literal.body.data).to.deep.equal([]);

      const admins = await agent.api.get(`${path}?role=admin`, opts);
      expect(admins.body.data.map((m: any) => m.id)).to.deep.equal([pending.membershipId]);
      const accepted = await agent.api.get(`${path}?status=accepted`, opts);
      expect(accepted.body.data.map((m: any) => m.email)).to.deep.equal([owner.email, agent.email]);
      expect(accepted.body.pagination.total).to.equal(2);
      const both = await agent.api.get(`${path}?status=accepted&role=owner`, opts);
      expect(both.body.data.map((m: any) => m.userId)).to.deep.equal([owner.userId]);
    });

    it('rejects bad query values with 400 validation_failed', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const path = members(owner.orgId);
      for (const q of ['limit=0', 'limit=201', 'offset=-1', 'limit=abc', 'status=active', 'role=boss', 'sort=name']) {
        expectError(await owner.api.get(`${path}?${q}`, { token: owner.accessToken }), 400, 'validation_failed');
      }
      expect((await owner.api.get(`${path}?limit=200`, { token: owner.accessToken })).body.pagination.limit).to.equal(200);
    });

    it('answers 403 to non-members, pending invitees and malformed ids; 401 without a token', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const stranger = await signUp(server, baseUrl);
      await invite(server, owner, 'agent', { email: stranger.email });
      expectError(await stranger.api.get(members(owner.orgId), { token: stranger.accessToken }), 403, 'forbidden');
      expectError(await stranger.api.get(members('123'), { token: stranger.accessToken }), 403, 'forbidden');
      expectError(await stranger.api.get(members(randomUUID()), { token: stranger.accessToken }), 403, 'forbidden');
      expectError(await stranger.api.get(members(owner.orgId)), 401, 'unauthorized');
    });
  });

  describe('POST .../members/invite', () => {
    it('creates a pending membership and mails a single-use link (returned as inviteLink without SMTP)', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl, { organizationName: 'Invite Co' });
      const email = uniqueEmail('Invitee');
      const res = await owner.api.post(`${members(owner.orgId)}/invite`, { email, role: 'admin', name: 'Ivy Invitee' }, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      expect(res.body.data).to.include({ email: email.toLowerCase(), role: 'admin', status: 'pending', userId: null, name: 'Ivy Invitee', organizationId: owner.orgId, activatedAt: null });
      expect(res.body.data.invitedAt).to.be.a('string');

      const mail = await latestMail(server, email, 'invitation');
      expect(mail).to.not.equal(undefined);
      expect(mail!.textBody).to.include('Invite Co');
      const token = linkTokenIn(mail!.textBody);
      expect(res.body.data.inviteLink).to.be.a('string');
      expect(new URL(res.body.data.inviteLink).searchParams.get('token')).to.equal(token);
      expect(mail!.textBody).to.include(res.body.data.inviteLink);

      const verify = await new Api(baseUrl).get(`/memberships/verify-invite/${token}`);
      expect(verify.status).to.equal(200);
      expect(verify.body.data.role).to.equal('admin');
    });

    it('answers 409 for an email already invited or a member (any case)', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const inv = await invite(server, owner, 'agent');
      const path = `${members(owner.orgId)}/invite`;
      expectError(await owner.api.post(path, { email: inv.email, role: 'agent' }, { token: owner.accessToken }), 409, 'conflict');
      expectError(await owner.api.post(path, { email: inv.email.toUpperCase(), role: 'admin' }, { token: owner.accessToken }), 409, 'conflict');
      expectError(await owner.api.post(path, { email: owner.email, role: 'agent' }, { token: owner.accessToken }), 409, 'conflict');
      const list = await owner.api.get(members(owner.orgId), { token: owner.accessToken });
      expect(list.body.pagination.total).to.equal(2);
    });

    it('lets no agent invite, and only an owner invite an owner', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const admin = await addMember(server, owner, 'admin');
      const agent = await addMember(server, owner, 'agent');
      const path = `${members(owner.orgId)}/invite`;
      expectError(await agent.api.post(path, { email: uniqueEmail(), role: 'agent' }, { token: agent.accessToken }), 403, 'forbidden');
      expectError(await admin.api.post(path, { email: uniqueEmail(), role: 'owner' }, { token: admin.accessToken }), 403, 'forbidden');
      const total = (await owner.api.get(members(owner.orgId), { token: owner.accessToken })).body.pagination.total;
      expect(total).to.equal(3);
    });

    it('lets an admin invite an agent and an owner invite an owner', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const admin = await addMember(server, owner, 'admin');
      await invite(server, { api: admin.api, orgId: owner.orgId, accessToken: admin.accessToken }, 'agent');
      const co = await signUp(server, baseUrl);
      expect((await invite(server, co, 'owner')).body.data.role).to.equal('owner');
    });

    it('rejects bad bodies: unknown fields, a bad email, a bad role, a missing role', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const path = `${members(owner.orgId)}/invite`;
      const o = { token: owner.accessToken };
      const extra = await owner.api.post(path, { email: uniqueEmail(), role: 'agent', status: 'accepted' }, o);
      expectError(extra, 400, 'validation_failed');
      expect(extra.body.error.details.map((d: any) => d.field)).to.include('status');
      expectError(await owner.api.post(path, { email: 'not-an-email', role: 'agent' }, o), 400, 'validation_failed');
      expectError(await owner.api.post(path, { email: uniqueEmail(), role: 'superuser' }, o), 400, 'validation_failed');
      const missing = await owner.api.post(path, { email: uniqueEmail() }, o);
      expectError(missing, 400, 'validation_failed');
      expect(missing.body.error.details.map((d: any) => d.field)).to.include('role');
    });

    it('on the default plan (unlimited) a 4th and a 5th seat are invited', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      await addMember(server, owner, 'agent');
      await invite(server, owner, 'agent');
      for (const n of [4, 5]) {
        const res = await owner.api.post(`${members(owner.orgId)}/invite`, { email: uniqueEmail(`seat${n}`), role: 'agent' }, { token: owner.accessToken });
        expect(res.status, JSON.stringify(res.body)).to.equal(201);
      }
      expect((await owner.api.get(members(owner.orgId), { token: owner.accessToken })).body.pagination.total).to.equal(5);
    });

    it("caps accepted + pending members at the free plan's humanAgents (3): the 4th seat is 403 plan_limit_reached", async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      await server.services.organizations.changePlan(owner.orgId, 'free');
      await addMember(server, owner, 'agent'); // seat 2, accepted
      const pending = await invite(server, owner, 'agent'); // seat 3, pending
      const email = uniqueEmail('fourth');
      const path = `${members(owner.orgId)}/invite`;
      const res = await owner.api.post(path, { email, role: 'agent' }, { token: owner.accessToken });
      expectError(res, 403, 'plan_limit_reached');
      expect(await latestMail(server, email, 'invitation')).to.equal(undefined);
      expect((await owner.api.get(members(owner.orgId), { token: owner.accessToken })).body.pagination.total).to.equal(3);

      // Withdrawing the pending invitation frees its seat.
      expect((await owner.api.delete(`${members(owner.orgId)}/${pending.membershipId}`, { token: owner.accessToken })).status).to.equal(200);
      expect((await owner.api.post(path, { email, role: 'agent' }, { token: owner.accessToken })).status).to.equal(201);
    });

    it('gives the last seat to exactly one of two invitations sent at once', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      await server.services.organizations.changePlan(owner.orgId, 'free');
      await invite(server, owner, 'agent');
      const path = `${members(owner.orgId)}/invite`;
      const results = await Promise.all([1, 2].map(() => owner.api.post(path, { email: uniqueEmail('race'), role: 'agent' }, { token: owner.accessToken })));
      expect(results.map((r) => r.status).sort(), JSON.stringify(results.map((r) => r.body))).to.deep.equal([201, 403]);
      expectError(results.find((r) => r.status === 403)!, 403, 'plan_limit_reached');
      expect((await owner.api.get(members(owner.orgId), { token: owner.accessToken })).body.pagination.total).to.equal(3);
    });

    it('does not let a suspended member come back past the seat limit, and takes no seat to suspend them again', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      await server.services.organizations.changePlan(owner.orgId, 'free');
      const a = await addMember(server, owner, 'agent');
      await addMember(server, owner, 'agent');
      const status = `${members(owner.orgId)}/${a.membershipId}/status`;
      expect((await owner.api.patch(status, { status: 'suspended' }, { token: owner.accessToken })).status).to.equal(200);
      await invite(server, owner, 'agent'); // the suspended seat is free again, and now taken
      expectError(await owner.api.patch(status, { status: 'active' }, { token: owner.accessToken }), 403, 'plan_limit_reached');
      const again = await owner.api.patch(status, { status: 'suspended' }, { token: owner.accessToken });
      expect(again.status, JSON.stringify(again.body)).to.equal(200);
      expect(again.body.data).to.include({ id: a.membershipId, status: 'suspended' });
      const usage = await owner.api.get('/organizations/billing/usage', { token: owner.accessToken });
      expect(usage.body.data.usage.humanAgents).to.equal(3);
    });
  });

  describe('POST .../members/:memberId/resend-invite', () => {
    it('replaces the link: the old one is 404 at verify-invite, the new one works', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const inv = await invite(server, owner, 'agent');
      const res = await owner.api.post(`${members(owner.orgId)}/${inv.membershipId}/resend-invite`, undefined, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.data).to.include({ id: inv.membershipId, status: 'pending', email: inv.email });
      const mail = await latestMail(server, inv.email, 'invitation');
      const fresh = linkTokenIn(mail!.textBody);
      expect(fresh).to.not.equal(inv.token);
      expect(new URL(res.body.data.inviteLink).searchParams.get('token')).to.equal(fresh);

      const anon = new Api(baseUrl);
      expectError(await anon.get(`/memberships/verify-invite/${inv.token}`), 404, 'not_found');
      expectError(await anon.post('/memberships/accept-invite', { token: inv.token, name: 'Late', password: PASSWORD }), 404, 'not_found');
      expect((await anon.get(`/memberships/verify-invite/${fresh}`)).status).to.equal(200);
      expect((await anon.post('/memberships/accept-invite', { token: fresh, name: 'On Time', password: PASSWORD })).status).to.equal(200);
    });

    it('answers 409 for an accepted member and 403 for an agent', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const agent = await addMember(server, owner, 'agent');
      const inv = await invite(server, owner, 'agent');
      expectError(await owner.api.post(`${members(owner.orgId)}/${agent.membershipId}/resend-invite`, undefined, { token: owner.accessToken }), 409, 'conflict');
      expectError(await agent.api.post(`${members(owner.orgId)}/${inv.membershipId}/resend-invite`, undefined, { token: agent.accessToken }), 403, 'forbidden');
      // The agent's refused attempt changed nothing: the original link still works.
      expect((await agent.api.get(`/memberships/verify-invite/${inv.token}`)).status).to.equal(200);
    });
  });

  describe('GET /memberships/verify-invite/:token', () => {
    it('describes the invitation; requiresPassword is true for a new email, false for an account', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl, { organizationName: 'Verify Org' });
      const fresh = await invite(server, owner, 'agent');
      const existing = await signUp(server, baseUrl);
      const forExisting = await invite(server, owner, 'admin', { email: existing.email });
      const anon = new Api(baseUrl);

      const a = await anon.get(`/memberships/verify-invite/${fresh.token}`);
      expect(a.status).to.equal(200);
      expect(a.body.data).to.deep.include({ email: fresh.email, organization: { id: owner.orgId, name: 'Verify Org' }, role: 'agent', requiresPassword: true });
      const b = await anon.get(`/memberships/verify-invite/${forExisting.token}`);
      expect(b.body.data).to.deep.include({ email: existing.email, organization: { id: owner.orgId, name: 'Verify Org' }, role: 'admin', requiresPassword: false });
    });

    it('answers 404 for an unknown token and 410 for a used or expired one', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const anon = new Api(baseUrl);
      expectError(await anon.get(`/memberships/verify-invite/${'x'.repeat(43)}`), 404, 'not_found');

      const used = await invite(server, owner, 'agent');
      expect((await anon.post('/memberships/accept-invite', { token: used.token, name: 'U', password: PASSWORD })).status).to.equal(200);
      expectError(await anon.get(`/memberships/verify-invite/${used.token}`), 410, 'gone');

      const expired = await invite(server, owner, 'agent');
      await server.db.knex('memberships').update({ invite_expires_at: new Date(Date.now() - 1000) }).where({ id: expired.membershipId });
      expectError(await anon.get(`/memberships/verify-invite/${expired.token}`), 410, 'gone');
      expectError(await anon.post('/memberships/accept-invite', { token: expired.token, name: 'E', password: PASSWORD }), 410, 'gone');
    });
  });

  describe('POST /memberships/accept-invite', () => {
    it('creates the account of a new person and signs them in to the organization', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const inv = await invite(server, owner, 'admin');
      const anon = new Api(baseUrl);
      const res = await anon.post('/memberships/accept-invite', { token: inv.token, name: 'New Person', password: PASSWORD });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      const data = res.body.data;
      expect(data.user).to.include({ email: inv.email, name: 'New Person' });
      expect(data.organization.id).to.equal(owner.orgId);
      expect(data.role).to.equal('admin');
      expect(decodeJwt(data.accessToken)).to.include({ orgId: owner.orgId, sub: data.user.id });
      expect(decodeJwt(data.refreshToken).orgId).to.equal(owner.orgId);

      // The token works at once, with the admin role, and the membership is accepted.
      const list = await anon.get(members(owner.orgId), { token: data.accessToken });
      expect(list.status).to.equal(200);
      expect(list.body.data.find((m: any) => m.id === inv.membershipId)).to.include({ userId: data.user.id, status: 'accepted', name: 'New Person' });
      expect((await anon.patch(`/organizations/${owner.orgId}`, { settings: { locale: 'en' } }, { token: data.accessToken })).status).to.equal(200);
      expect((await anon.post('/auth/login', { email: inv.email, password: PASSWORD })).status).to.equal(200);

      expectError(await anon.post('/memberships/accept-invite', { token: inv.token, name: 'Again', password: PASSWORD }), 410, 'gone');
    });

    it('asks a new person for both name and password (400)', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const inv = await invite(server, owner, 'agent');
      const anon = new Api(baseUrl);
      const noName = await anon.post('/memberships/accept-invite', { token: inv.token, password: PASSWORD });
      expectError(noName, 400, 'validation_failed');
      expect(noName.body.error.details.map((d: any) => d.field)).to.include('name');
      const noPassword = await anon.post('/memberships/accept-invite', { token: inv.token, name: 'Nia' });
      expectError(noPassword, 400, 'validation_failed');
      expect(noPassword.body.error.details.map((d: any) => d.field)).to.include('password');
      expectError(await anon.post('/memberships/accept-invite', { token: inv.token, name: 'Nia', password: 'short' }), 400, 'validation_failed');
      expectError(await anon.post('/memberships/accept-invite', { name: 'Nia', password: PASSWORD }), 400, 'validation_failed');
      // Nothing was used up.
      expect((await anon.get(`/memberships/verify-invite/${inv.token}`)).body.data.requiresPassword).to.equal(true);
    });

    it('lets an existing user accept with their password; a wrong one is 401 and leaves the invitation open', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const existing = await signUp(server, baseUrl, { name: 'Ellen Existing' });
      const inv = await invite(server, owner, 'agent', { email: existing.email });
      const anon = new Api(baseUrl);
      expectError(await anon.post('/memberships/accept-invite', { token: inv.token, password: 'wrong password!' }), 401, 'unauthorized');
      expectError(await anon.post('/memberships/accept-invite', { token: inv.token }), 400, 'validation_failed');
      expect((await anon.get(`/memberships/verify-invite/${inv.token}`)).status).to.equal(200);

      const res = await anon.post('/memberships/accept-invite', { token: inv.token, password: PASSWORD });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.data.user).to.include({ id: existing.userId, name: 'Ellen Existing' });
      expect(res.body.data.role).to.equal('agent');
      expect(decodeJwt(res.body.data.accessToken).orgId).to.equal(owner.orgId);
      const orgs = await anon.get('/organizations', { token: existing.accessToken });
      expect(orgs.body.data.map((o: any) => o.id)).to.have.members([existing.orgId, owner.orgId]);
    });

    it('lets an existing user accept with their bearer token and no password; another account is refused', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const existing = await signUp(server, baseUrl);
      const someoneElse = await signUp(server, baseUrl);
      const inv = await invite(server, owner, 'admin', { email: existing.email });
      expectError(await someoneElse.api.post('/memberships/accept-invite', { token: inv.token }, { token: someoneElse.accessToken }), 403, 'forbidden');

      const res = await existing.api.post('/memberships/accept-invite', { token: inv.token }, { token: existing.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.data.user.id).to.equal(existing.userId);
      expect(res.body.data.role).to.equal('admin');
      expect(decodeJwt(res.body.data.accessToken).orgId).to.equal(owner.orgId);
      expectError(await existing.api.post('/memberships/accept-invite', { token: inv.token }, { token: existing.accessToken }), 410, 'gone');
    });

    it('accepts one link once however many requests race', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const inv = await invite(server, owner, 'agent');
      const results = await Promise.all(
        [1, 2, 3].map((i) => new Api(baseUrl).post('/memberships/accept-invite', { token: inv.token, name: `Racer ${i}`, password: PASSWORD })),
      );
      const statuses = results.map((r) => r.status).sort();
      expect(statuses.filter((s) => s === 200), JSON.stringify(statuses)).to.have.length(1);
      for (const r of results.filter((x) => x.status !== 200)) expect(r.status, JSON.stringify(r.body)).to.be.oneOf([409, 410]);
      const list = await owner.api.get(`${members(owner.orgId)}?status=accepted`, { token: owner.accessToken });
      expect(list.body.pagination.total).to.equal(2);
    });
  });
});
