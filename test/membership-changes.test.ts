// Changing members: role, status and removal take effect on existing tokens at once; guard rules; tenancy.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { expectError, invite } from './helpers/tenancy.js';

const members = (orgId: string) => `/memberships/organizations/${orgId}/members`;
type Caller = Pick<SignedUp, 'api' | 'accessToken'>;

function setRole(by: Caller, orgId: string, memberId: string, role: string) {
  return by.api.patch(`${members(orgId)}/${memberId}/role`, { role }, { token: by.accessToken });
}
function setStatus(by: Caller, orgId: string, memberId: string, status: string) {
  return by.api.patch(`${members(orgId)}/${memberId}/status`, { status }, { token: by.accessToken });
}
function remove(by: Caller, orgId: string, memberId: string) {
  return by.api.delete(`${members(orgId)}/${memberId}`, { token: by.accessToken });
}

/** The owner's own membership id, from the list. */
async function ownMembershipId(owner: SignedUp): Promise<string> {
  const list = await owner.api.get(`${members(owner.orgId)}?role=owner`, { token: owner.accessToken });
  const mine = list.body.data.find((m: any) => m.userId === owner.userId);
  expect(mine, 'the owner membership').to.not.equal(undefined);
  return mine.id;
}

describe('membership changes', () => {
  describe('PATCH .../members/:memberId/role', () => {
    it('changes roles, and the change applies to an existing access token at once', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const agent = await addMember(server, owner, 'agent');
      const orgPath = `/organizations/${owner.orgId}`;
      expectError(await agent.api.patch(orgPath, { name: 'By Agent' }, { token: agent.accessToken }), 403, 'forbidden');

      const promoted = await setRole(owner, owner.orgId, agent.membershipId, 'admin');
      expect(promoted.status, JSON.stringify(promoted.body)).to.equal(200);
      expect(promoted.body.data).to.include({ id: agent.membershipId, role: 'admin', status: 'accepted', userId: agent.userId, email: agent.email });
      // Same token as before the promotion.
      const patched = await agent.api.patch(orgPath, { name: 'By Admin' }, { token: agent.accessToken });
      expect(patched.status, JSON.stringify(patched.body)).to.equal(200);
      expect(patched.body.data.name).to.equal('By Admin');

      expect((await setRole(owner, owner.orgId, agent.membershipId, 'agent')).body.data.role).to.equal('agent');
      expectError(await agent.api.patch(orgPath, { name: 'Demoted' }, { token: agent.accessToken }), 403, 'forbidden');
      expectError(await agent.api.post(`${members(owner.orgId)}/invite`, { email: 'x@example.test', role: 'agent' }, { token: agent.accessToken }), 403, 'forbidden');
      const list = await owner.api.get(`${members(owner.orgId)}?role=agent`, { token: owner.accessToken });
      expect(list.body.data.map((m: any) => m.id)).to.deep.equal([agent.membershipId]);
    });

    it('lets an admin move another admin down to agent and back; the demoted one loses admin rights at once', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const admin = await addMember(server, owner, 'admin');
      const other = await addMember(server, owner, 'admin');
      const demoted = await setRole(admin, owner.orgId, other.membershipId, 'agent');
      expect(demoted.status).to.equal(200);
      expect(demoted.body.data.role).to.equal('agent');
      expectError(await setRole(other, owner.orgId, admin.membershipId, 'agent'), 403, 'forbidden');
      expect((await setRole(admin, owner.orgId, other.membershipId, 'admin')).body.data.role).to.equal('admin');
      // Admin again, with the same token: now it may act on the first admin.
      expect((await setRole(other, owner.orgId, admin.membershipId, 'agent')).body.data.role).to.equal('agent');
    });

    it('rejects a bad role (400) and an agent caller (403)', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const agent = await addMember(server, owner, 'agent');
      const pending = await invite(server, owner, 'agent');
      expectError(await setRole(owner, owner.orgId, agent.membershipId, 'superadmin'), 400, 'validation_failed');
      expectError(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/role`, { role: 'admin', status: 'accepted' }, { token: owner.accessToken }), 400, 'validation_failed');
      expectError(await setRole(agent, owner.orgId, pending.membershipId, 'admin'), 403, 'forbidden');
      expectError(await setRole(owner, owner.orgId, randomUUID(), 'admin'), 404, 'not_found');
      expectError(await setRole(owner, owner.orgId, 'nope', 'admin'), 404, 'not_found');
      const changed = await setRole(owner, owner.orgId, pending.membershipId, 'admin');
      expect(changed.body.data).to.include({ role: 'admin', status: 'pending' });
    });
  });

  describe('PATCH .../members/:memberId/status', () => {
    it('suspension cuts an existing token off at once; reactivation restores it', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const agent = await addMember(server, owner, 'agent');
      const routes = [members(owner.orgId), `/organizations/${owner.orgId}`, '/organizations/billing/entitlements', '/organizations/billing/usage'];
      for (const r of routes) expect((await agent.api.get(r, { token: agent.accessToken })).status, r).to.equal(200);

      const sus = await setStatus(owner, owner.orgId, agent.membershipId, 'suspended');
      expect(sus.status, JSON.stringify(sus.body)).to.equal(200);
      expect(sus.body.data).to.include({ id: agent.membershipId, status: 'suspended', role: 'agent' });
      for (const r of routes) expectError(await agent.api.get(r, { token: agent.accessToken }), 403, 'forbidden');
      const orgs = await agent.api.get('/organizations', { token: agent.accessToken });
      expect(orgs.body.data.map((o: any) => o.id)).to.not.include(owner.orgId);
      // The record stays, listed as suspended.
      const listed = await owner.api.get(`${members(owner.orgId)}?status=suspended`, { token: owner.accessToken });
      expect(listed.body.data.map((m: any) => m.id)).to.deep.equal([agent.membershipId]);

      const back = await setStatus(owner, owner.orgId, agent.membershipId, 'active');
      expect(back.status).to.equal(200);
      expect(back.body.data.status).to.equal('accepted');
      for (const r of routes) expect((await agent.api.get(r, { token: agent.accessToken })).status, r).to.equal(200);
    });

    it('answers 409 for a pending invitation and 400 for an unknown status', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const pending = await invite(server, owner, 'agent');
      expectError(await setStatus(owner, owner.orgId, pending.membershipId, 'suspended'), 409, 'conflict');
      expectError(await setStatus(owner, owner.orgId, pending.membershipId, 'active'), 409, 'conflict');
      expectError(await setStatus(owner, owner.orgId, pending.membershipId, 'accepted'), 400, 'validation_failed');
      expectError(await setStatus(owner, owner.orgId, pending.membershipId, 'pending'), 400, 'validation_failed');
      const list = await owner.api.get(`${members(owner.orgId)}?status=pending`, { token: owner.accessToken });
      expect(list.body.data.map((m: any) => m.id)).to.deep.equal([pending.membershipId]);
    });
  });

  describe('DELETE .../members/:memberId', () => {
    it("removes a member: their token gets 403 on that organization and they leave the list", async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const admin = await addMember(server, owner, 'admin');
      const agent = await addMember(server, owner, 'agent');
      const res = await remove(admin, owner.orgId, agent.membershipId);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.success).to.equal(true);

      expectError(await agent.api.get(members(owner.orgId), { token: agent.accessToken }), 403, 'forbidden');
      expectError(await agent.api.get('/organizations/billing/usage', { token: agent.accessToken }), 403, 'forbidden');
      expectError(await agent.api.post(`/organizations/${owner.orgId}/switch`, undefined, { token: agent.accessToken }), 403, 'forbidden');
      const list = await owner.api.get(members(owner.orgId), { token: owner.accessToken });
      expect(list.body.data.map((m: any) => m.id)).to.not.include(agent.membershipId);
      expect(list.body.pagination.total).to.equal(2);
      expectError(await remove(owner, owner.orgId, agent.membershipId), 404, 'not_found');
    });

    it('withdraws a pending invitation: its link stops working', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const pending = await invite(server, owner, 'agent');
      expect((await remove(owner, owner.orgId, pending.membershipId)).status).to.equal(200);
      expectError(await owner.api.get(`/memberships/verify-invite/${pending.token}`), 404, 'not_found');
    });

    it('refuses an agent (403)', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const agent = await addMember(server, owner, 'agent');
      const pending = await invite(server, owner, 'agent');
      expectError(await remove(agent, owner.orgId, pending.membershipId), 403, 'forbidden');
    });
  });

  describe('guard rules', () => {
    let owner: SignedUp;
    let ownerMid: string;
    let admin: Member;
    let agent: Member;

    beforeEach(async () => {
      const { server, baseUrl } = sharedServer();
      owner = await signUp(server, baseUrl);
      ownerMid = await ownMembershipId(owner);
      admin = await addMember(server, owner, 'admin');
      agent = await addMember(server, owner, 'agent');
    });

    async function expectUnchanged() {
      const list = await owner.api.get(members(owner.orgId), { token: owner.accessToken });
      const roles = Object.fromEntries(list.body.data.map((m: any) => [m.id, `${m.role}/${m.status}`]));
      expect(roles).to.deep.equal({ [ownerMid]: 'owner/accepted', [admin.membershipId]: 'admin/accepted', [agent.membershipId]: 'agent/accepted' });
    }

    it('nobody changes their own role or status or removes themselves', async () => {
      for (const [who, mid] of [[owner, ownerMid], [admin, admin.membershipId]] as [Caller, string][]) {
        expectError(await setRole(who, owner.orgId, mid, 'agent'), 403, 'forbidden');
        expectError(await setStatus(who, owner.orgId, mid, 'suspended'), 403, 'forbidden');
        expectError(await remove(who, owner.orgId, mid), 403, 'forbidden');
      }
      expectError(await setRole(owner, owner.orgId, ownerMid, 'owner'), 403, 'forbidden');
      await expectUnchanged();
    });

    it('admins cannot change, suspend or remove owners, nor grant owner', async () => {
      expectError(await setRole(admin, owner.orgId, ownerMid, 'agent'), 403, 'forbidden');
      expectError(await setRole(admin, owner.orgId, ownerMid, 'admin'), 403, 'forbidden');
      expectError(await setStatus(admin, owner.orgId, ownerMid, 'suspended'), 403, 'forbidden');
      expectError(await remove(admin, owner.orgId, ownerMid), 403, 'forbidden');
      expectError(await setRole(admin, owner.orgId, agent.membershipId, 'owner'), 403, 'forbidden');
      await expectUnchanged();
    });

    it('owners can: grant owner, then demote, suspend, reactivate and remove that owner', async () => {
      const granted = await setRole(owner, owner.orgId, admin.membershipId, 'owner');
      expect(granted.status, JSON.stringify(granted.body)).to.equal(200);
      expect(granted.body.data.role).to.equal('owner');
      // The new owner acts on the first owner at once, with the old token.
      expect((await setRole(admin, owner.orgId, ownerMid, 'admin')).status).to.equal(200);
      expect((await setRole(admin, owner.orgId, ownerMid, 'owner')).status).to.equal(200);
      expect((await setStatus(owner, owner.orgId, admin.membershipId, 'suspended')).status).to.equal(200);
      expect((await setStatus(owner, owner.orgId, admin.membershipId, 'active')).status).to.equal(200);
      expect((await remove(owner, owner.orgId, admin.membershipId)).status).to.equal(200);
      expectError(await admin.api.get(members(owner.orgId), { token: admin.accessToken }), 403, 'forbidden');
    });

    it('the last owner is never demoted, suspended or removed, even when two owners act on each other at once', async () => {
      // Alone, the last owner can only be acted on by themselves or by admins: both refused.
      expectError(await setRole(owner, owner.orgId, ownerMid, 'admin'), 403, 'forbidden');
      expectError(await setRole(admin, owner.orgId, ownerMid, 'admin'), 403, 'forbidden');
      expectError(await setStatus(admin, owner.orgId, ownerMid, 'suspended'), 403, 'forbidden');
      expectError(await remove(admin, owner.orgId, ownerMid), 403, 'forbidden');

      expect((await setRole(owner, owner.orgId, admin.membershipId, 'owner')).status).to.equal(200);
      const [a, b] = await Promise.all([setRole(owner, owner.orgId, admin.membershipId, 'agent'), remove(admin, owner.orgId, ownerMid)]);
      const statuses = [a.status, b.status];
      expect(statuses.filter((s) => s === 200), JSON.stringify([a.body, b.body])).to.have.length(1);
      // The loser's caller is read again under the organization lock: demoted to agent, or no longer a member.
      const loser = a.status === 200 ? b : a;
      expectError(loser, 403, 'forbidden');
      const owners = await agent.api.get(`${members(owner.orgId)}?role=owner&status=accepted`, { token: agent.accessToken });
      expect(owners.body.pagination.total).to.equal(1);
    });
  });

  describe('tenancy', () => {
    it("another organization's memberId under this organization's path is 404, and nothing changes there", async () => {
      const { server, baseUrl } = sharedServer();
      const a = await signUp(server, baseUrl);
      const b = await signUp(server, baseUrl);
      const bAgent = await addMember(server, b, 'agent');
      const bPending = await invite(server, b, 'agent');
      const adminOfA = await addMember(server, a, 'admin');
      for (const caller of [a, adminOfA] as Caller[]) {
        expectError(await setRole(caller, a.orgId, bAgent.membershipId, 'admin'), 404, 'not_found');
        expectError(await setStatus(caller, a.orgId, bAgent.membershipId, 'suspended'), 404, 'not_found');
        expectError(await remove(caller, a.orgId, bAgent.membershipId), 404, 'not_found');
        expectError(await caller.api.post(`${members(a.orgId)}/${bPending.membershipId}/resend-invite`, undefined, { token: caller.accessToken }), 404, 'not_found');
      }
      const list = await b.api.get(members(b.orgId), { token: b.accessToken });
      expect(list.body.data.find((m: any) => m.id === bAgent.membershipId)).to.include({ role: 'agent', status: 'accepted' });
      expect((await b.api.get(`/memberships/verify-invite/${bPending.token}`)).status).to.equal(200);
    });

    it("an organization path the caller is not a member of is 403 on every member route, even with that org's ids", async () => {
      const { server, baseUrl } = sharedServer();
      const a = await signUp(server, baseUrl);
      const b = await signUp(server, baseUrl);
      const bAgent = await addMember(server, b, 'agent');
      const p = members(b.orgId);
      expectError(await a.api.get(p, { token: a.accessToken }), 403, 'forbidden');
      expectError(await a.api.post(`${p}/invite`, { email: 'z@example.test', role: 'agent' }, { token: a.accessToken }), 403, 'forbidden');
      expectError(await a.api.post(`${p}/${bAgent.membershipId}/resend-invite`, undefined, { token: a.accessToken }), 403, 'forbidden');
      expectError(await setRole(a, b.orgId, bAgent.membershipId, 'admin'), 403, 'forbidden');
      expectError(await setStatus(a, b.orgId, bAgent.membershipId, 'suspended'), 403, 'forbidden');
      expectError(await remove(a, b.orgId, bAgent.membershipId), 403, 'forbidden');
      expectError(await a.api.post(`/organizations/${b.orgId}/switch`, undefined, { token: a.accessToken }), 403, 'forbidden');
      expect((await b.api.get(p, { token: b.accessToken })).body.pagination.total).to.equal(2);
    });
  });
});
