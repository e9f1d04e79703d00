import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp } from './helpers/factories.js';

describe('smoke', () => {
  it('signs up, invites and lists members', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const list = await agent.api.get(`/memberships/organizations/${owner.orgId}/members`, { token: agent.accessToken });
    expect(list.status).to.equal(200);
    expect(list.body.data.map((m: any) => m.role).sort()).to.deep.equal(['agent', 'owner']);
    expect(list.body.pagination).to.deep.equal({ limit: 50, offset: 0, total: 2 });
  });
});
