// Every rule of the policy layer as the callers it is about meet it: each conversation action for an agent and for
// API keys, notes and files changed by their maker or an admin, visitors' message types, and who counts as a member.
import { expect } from 'chai';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import type { ApiResponse } from './helpers/http.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { PNG, upload } from './helpers/storage.js';
import { expectError } from './helpers/tenancy.js';

function ok(res: ApiResponse, status = 200): any {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  return res.body.data;
}

async function createKey(owner: SignedUp, scopes: string[]): Promise<string> {
  return ok(await owner.api.post('/api-keys', { name: 'Rules bot', scopes }, { token: owner.accessToken }), 201).token;
}

describe('policies: every rule, as each kind of caller meets it', () => {
  let owner: SignedUp;
  let admin: Member;
  let agent: Member;
  let agent2: Member;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    admin = await addMember(server, owner, 'admin', 'Ada Admin');
    agent = await addMember(server, owner, 'agent', 'Alex Agent');
    agent2 = await addMember(server, owner, 'agent', 'Bo Agent');
  });

  /** Each conversation action over REST, by the caller whose token is given; answers keyed by action. */
  async function everyAction(token: string): Promise<Record<string, ApiResponse>> {
    const { conversationId: id } = await startConversation(await newVisitor(owner));
    const t = { token };
    const api = owner.api;
    return {
      read: await api.get(`/conversations/${id}`, t),
      reply: await api.post(`/conversations/${id}/messages`, { content: 'From the rules test' }, t),
      update: await api.patch(`/conversations/${id}`, { priority: 'high' }, t),
      markRead: await api.post(`/conversations/${id}/read`, {}, t),
      linkContact: await api.post(`/conversations/${id}/contact`, { name: 'Rita Rules', email: `rules-${id}@example.test` }, t),
      assign: await api.post(`/conversations/${id}/route`, { assignedTo: agent.userId }, t),
      changeStatus: await api.patch(`/conversations/${id}/status`, { status: 'pending' }, t),
    };
  }

  it('an agent, and a key with conversations:write, may do every conversation action', async () => {
    for (const [who, token] of [['agent', agent.accessToken], ['key', await createKey(owner, ['conversations:write'])]] as const) {
      const answers = await everyAction(token);
      for (const [action, res] of Object.entries(answers)) expect(res.status, `${who} ${action}: ${JSON.stringify(res.body)}`).to.be.oneOf([200, 201]);
    }
  });

  it('a key with conversations:read reads, and is refused every change with 403', async () => {
    const answers = await everyAction(await createKey(owner, ['conversations:read']));
    expect(answers.read!.status).to.equal(200);
    for (const [action, res] of Object.entries(answers)) if (action !== 'read') expectError(res, 403, 'forbidden');
  });

  it('a contact note is changed and deleted by its author or an admin; another agent is refused', async () => {
    const as = (m: { accessToken: string }) => ({ token: m.accessToken });
    const contact = ok(await owner.api.post('/contacts', { name: 'Noted Person', email: `noted-${Date.now()}@example.test` }, as(agent)), 201);
    const note = ok(await owner.api.post(`/contacts/${contact.id}/notes`, { content: 'by Alex' }, as(agent)), 201);
    const path = `/contacts/${contact.id}/notes/${note.id}`;
    expectError(await owner.api.patch(path, { content: 'by Bo' }, as(agent2)), 403, 'forbidden');
    expectError(await owner.api.delete(path, as(agent2)), 403, 'forbidden');
    expect(ok(await owner.api.patch(path, { content: 'Alex again' }, as(agent))).content).to.equal('Alex again');
    expect(ok(await owner.api.patch(path, { content: 'Ada tidied it' }, as(admin))).content).to.equal('Ada tidied it');
    ok(await owner.api.delete(path, as(admin)));
    const mine = ok(await owner.api.post(`/contacts/${contact.id}/notes`, { content: 'Bo writes' }, as(agent2)), 201);
    ok(await owner.api.delete(`/contacts/${contact.id}/notes/${mine.id}`, as(agent2)));
  });

  it('a file is deleted by its uploader or an admin; another agent is refused', async () => {
    const { baseUrl } = sharedServer();
    const file = { name: 'notes.png', type: 'image/png', bytes: PNG };
    const byAlex = await upload(agent.api, agent.accessToken, baseUrl, file);
    expectError(await owner.api.delete(`/storage/${byAlex.objectId}`, { token: agent2.accessToken }), 403, 'forbidden');
    ok(await owner.api.delete(`/storage/${byAlex.objectId}`, { token: agent.accessToken }));
    const another = await upload(agent.api, agent.accessToken, baseUrl, file);
    ok(await owner.api.delete(`/storage/${another.objectId}`, { token: admin.accessToken }));
  });

  it('a visitor sends text, said so or not, and an image or file only as an attachment', async () => {
    const { baseUrl } = sharedServer();
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const send = (body: Record<string, unknown>) => visitor.api.post(`/widget/conversations/${conversationId}/messages`, body, { token: visitor.token });
    ok(await send({ content: 'plain' }), 201);
    ok(await send({ content: 'said so', type: 'text' }), 201);
    const refused = await send({ content: 'https://example.test/a.png', type: 'image', attachments: [] });
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.error.details).to.deep.equal([{ field: 'type', message: 'must be text unless the message has attachments', in: 'body' }]);
    expectError(await send({ content: 'https://example.test/a.pdf', type: 'file' }), 400, 'validation_failed');
    const shot = await upload(visitor.api, visitor.token, baseUrl, { name: 'shot.png', type: 'image/png', bytes: PNG }, { widget: true });
    expect(ok(await send({ content: 'See this', type: 'image', attachments: [shot.objectId] }), 201).attachments).to.have.length(1);
  });

  it('owner > admin > agent: an admin route refuses an agent and takes an admin; an owner route refuses an admin', async () => {
    const refusedAgent = await owner.api.get('/api-keys', { token: agent.accessToken });
    expectError(refusedAgent, 403, 'forbidden');
    expect(refusedAgent.body.message).to.equal('This needs the admin role');
    ok(await owner.api.get('/api-keys', { token: admin.accessToken }));
    ok(await owner.api.get('/api-keys', { token: owner.accessToken }));
    expectError(await owner.api.delete(`/organizations/${owner.orgId}`, { token: admin.accessToken }), 403, 'forbidden');
  });

  it('someone who is not an active member of the organization is refused, saying so', async () => {
    const { server, baseUrl } = sharedServer();
    const outsider = await signUp(server, baseUrl);
    const other = await addMember(server, outsider, 'admin');
    // Suspended: the token still names the organization, the membership no longer lets them act.
    ok(await outsider.api.patch(`/memberships/organizations/${outsider.orgId}/members/${other.membershipId}/status`, { status: 'suspended' }, { token: outsider.accessToken }));
    const suspended = await other.api.get('/conversations', { token: other.accessToken });
    expectError(suspended, 403, 'forbidden');
    expect(suspended.body.message).to.equal('You are not an active member of this organization');
  });
});
