// Invitations, held to what they promise: a link good for 7 days (a resent one too), the invitee's name as typed
// without surrounding spaces, and one invitation per email.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { addMember, latestMail, linkTokenIn, signUp, uniqueEmail } from './helpers/factories.js';
import { expectError, invite } from './helpers/tenancy.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { connectOk, request, settle } from './helpers/sockets.js';

const members = (orgId: string) => `/memberships/organizations/${orgId}/members`;
const DAY_MS = 24 * 60 * 60 * 1000;

/** The stored expiry of an invitation, as milliseconds from now (the API does not show it). */
async function expiresInMs(membershipId: string): Promise<number> {
  const { server } = sharedServer();
  const row = await server.db.knex('memberships').where({ id: membershipId }).first('invite_expires_at');
  const [expiresAt] = Object.values(row as Record<string, unknown>); // the column, however the database layer names it
  return new Date(expiresAt as string).getTime() - Date.now();
}

describe('invitations (mutants)', () => {
  const track = closeAfterEach();

  it('keeps an invitation link valid for 7 days', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const inv = await invite(server, owner, 'agent');
    // Within an hour of 7 days from now: the bound is the promise, not the machine's speed.
    expect(await expiresInMs(inv.membershipId)).to.be.within(7 * DAY_MS - 60 * 60 * 1000, 7 * DAY_MS);
  });

  it('gives a resent invitation a fresh 7 days, even after the first link expired', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const inv = await invite(server, owner, 'agent');
    await server.db.knex('memberships').update({ invite_expires_at: new Date(Date.now() - DAY_MS) }).where({ id: inv.membershipId });
    const anon = new Api(baseUrl);
    expectError(await anon.get(`/memberships/verify-invite/${inv.token}`), 410, 'gone');

    const res = await owner.api.post(`${members(owner.orgId)}/${inv.membershipId}/resend-invite`, undefined, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(await expiresInMs(inv.membershipId)).to.be.within(7 * DAY_MS - 60 * 60 * 1000, 7 * DAY_MS);
    const fresh = linkTokenIn((await latestMail(server, inv.email, 'invitation'))!.textBody);
    expect((await anon.get(`/memberships/verify-invite/${fresh}`)).status).to.equal(200);
  });

  it("stores the invitee's name without surrounding spaces, and no name when none is given", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const named = await owner.api.post(`${members(owner.orgId)}/invite`, { email: uniqueEmail(), role: 'agent', name: '  Ivy Invitee \t' }, { token: owner.accessToken });
    expect(named.status, JSON.stringify(named.body)).to.equal(201);
    expect(named.body.data.name).to.equal('Ivy Invitee');
    const listed = await owner.api.get(`${members(owner.orgId)}?q=Ivy`, { token: owner.accessToken });
    expect(listed.body.data.map((m: any) => m.name)).to.deep.equal(['Ivy Invitee']);

    const unnamed = await owner.api.post(`${members(owner.orgId)}/invite`, { email: uniqueEmail(), role: 'agent' }, { token: owner.accessToken });
    expect(unnamed.status, JSON.stringify(unnamed.body)).to.equal(201);
    expect(unnamed.body.data.name).to.equal(null);
  });

  it('says why an email cannot be invited twice', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const inv = await invite(server, owner, 'agent');
    const again = await owner.api.post(`${members(owner.orgId)}/invite`, { email: inv.email, role: 'agent' }, { token: owner.accessToken });
    expectError(again, 409, 'conflict');
    expect(again.body.message).to.equal('This email is already a member or invited');
  });

  it('takes no seat to mark an active member active again, even with every seat taken', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    await server.services.organizations.changePlan(owner.orgId, 'free');
    const a = await addMember(server, owner, 'agent');
    await addMember(server, owner, 'agent'); // 3 of the free plan's 3 seats
    const res = await owner.api.patch(`${members(owner.orgId)}/${a.membershipId}/status`, { status: 'active' }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.data).to.include({ id: a.membershipId, status: 'accepted' });
  });

  it('keeps the socket of an active member marked active again connected', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const member = await addMember(server, owner, 'agent');
    const socket = track(await connectOk(baseUrl, owner.orgId, member.accessToken));
    const res = await owner.api.patch(`${members(owner.orgId)}/${member.membershipId}/status`, { status: 'active' }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    await settle(150);
    expect(socket.connected, 'still connected').to.equal(true);
    const ack = await request(socket, 'sync', { conversationId: '00000000-0000-4000-8000-000000000000', afterSeq: 0 }, 2000);
    expect(ack.error!.code).to.equal('not_found');
  });

  it('names what was not found when a member id names no member', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const res = await owner.api.delete(`${members(owner.orgId)}/00000000-0000-4000-8000-000000000000`, { token: owner.accessToken });
    expectError(res, 404, 'not_found');
    expect(res.body.message).to.equal('Member not found');
  });

});
