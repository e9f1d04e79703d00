// The policy layer: a conversation rule changed in one place changes REST and the socket alike, and the roles rule
// is the same on both surfaces (a suspended agent is refused by both at once).
import { expect } from 'chai';
import { addMember, signUp, type SignedUp, type Member } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { ackData, closeAfterEach, expectAckError } from './helpers/socket-acks.js';
import { connectOk, refusal, request } from './helpers/sockets.js';
import { expectError } from './helpers/tenancy.js';

/** An organization with an owner, an agent and a conversation, on the given server. */
async function team(server: TestServer): Promise<{ owner: SignedUp; agent: Member; conversationId: string }> {
  const owner = await signUp(server.server, server.baseUrl);
  const agent = await addMember(server.server, owner, 'agent');
  const { conversationId } = await startConversation(await newVisitor(owner));
  return { owner, agent, conversationId };
}

describe('policies: one rule for REST and sockets', function () {
  this.timeout(120_000);
  const track = closeAfterEach();

  describe('replying needs the admin role on a server whose conversation policy says so', () => {
    let strict: TestServer;
    before(async () => {
      strict = await startTestServer({}, { policies: { conversation: { reply: { role: 'admin' } } } });
    });
    after(async () => {
      await strict?.stop();
    });

    it('refuses the agent on REST and on the socket, and still lets an owner reply on both', async () => {
      const { owner, agent, conversationId } = await team(strict);
      const path = `/conversations/${conversationId}/messages`;
      expectError(await agent.api.post(path, { content: 'agent on REST' }, { token: agent.accessToken }), 403, 'forbidden');
      const agentSocket = track(await connectOk(strict.baseUrl, owner.orgId, agent.accessToken));
      expectAckError(await request(agentSocket, 'send_message', { conversationId, content: 'agent on the socket' }), 'forbidden');
      // Reading is still the agent's (its rule did not change).
      expect((await agent.api.get(`/conversations/${conversationId}`, { token: agent.accessToken })).status).to.equal(200);
      expect((await request(agentSocket, 'sync', { conversationId, afterSeq: 0 })).success).to.equal(true);

      expect((await owner.api.post(path, { content: 'owner on REST' }, { token: owner.accessToken })).status).to.equal(201);
      const ownerSocket = track(await connectOk(strict.baseUrl, owner.orgId, owner.accessToken));
      ackData(await request(ownerSocket, 'send_message', { conversationId, content: 'owner on the socket' }));
      const history = (await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken })).body.data.messages.map((m: { content: string }) => m.content);
      expect(history).to.deep.equal(['Hello, I need help', 'owner on REST', 'owner on the socket']);
      const doc = (await owner.api.get('/openapi.json')).body;
      expect(doc.paths['/api/v1/conversations/{conversationId}/messages'].post['x-required-role']).to.equal('admin');
    });
  });

  describe('reading needs the admin role on a server whose conversation policy says so', () => {
    let strict: TestServer;
    before(async () => {
      strict = await startTestServer({}, { policies: { conversation: { read: { role: 'admin' } } } });
    });
    after(async () => {
      await strict?.stop();
    });

    it('refuses the agent the inbox on REST and the agent socket at the handshake', async () => {
      const { owner, agent, conversationId } = await team(strict);
      expectError(await agent.api.get('/conversations', { token: agent.accessToken }), 403, 'forbidden');
      expectError(await agent.api.get(`/conversations/${conversationId}`, { token: agent.accessToken }), 403, 'forbidden');
      expect(await refusal(strict.baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
      expect((await owner.api.get('/conversations', { token: owner.accessToken })).status).to.equal(200);
      track(await connectOk(strict.baseUrl, owner.orgId, owner.accessToken));
    });
  });

  it('with the default rules, lets the agent reply on both surfaces; once suspended, both refuse at once', async () => {
    const shared = sharedServer();
    const { owner, agent, conversationId } = await team(shared);
    const path = `/conversations/${conversationId}/messages`;
    expect((await agent.api.post(path, { content: 'agent on REST' }, { token: agent.accessToken })).status).to.equal(201);
    const agentSocket = track(await connectOk(shared.baseUrl, owner.orgId, agent.accessToken));
    ackData(await request(agentSocket, 'send_message', { conversationId, content: 'agent on the socket' }));

    const suspend = await owner.api.patch(`/memberships/organizations/${owner.orgId}/members/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken });
    expect(suspend.status, JSON.stringify(suspend.body)).to.equal(200);
    expectError(await agent.api.post(path, { content: 'after suspension' }, { token: agent.accessToken }), 403, 'forbidden');
    expect(await refusal(shared.baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
  });
});
