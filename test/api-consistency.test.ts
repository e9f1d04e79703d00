// One API: 405 with Allow, `data` on every success, PATCH /conversations/{id}, visitors writing text, socket
// validation errors naming the field as REST does, and the old names kept beside the ones used across the API.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { closeAfterEach, expectAckError } from './helpers/socket-acks.js';
import { collect, connectOk, nextEvent, request, settle } from './helpers/sockets.js';
import { expectError } from './helpers/tenancy.js';

const allowOf = (res: { headers: Headers }) => (res.headers.get('allow') ?? '').split(/,\s*/).filter(Boolean).sort();

describe('API consistency', () => {
  const track = closeAfterEach();
  let owner: SignedUp;
  let conversationId: string;
  const t = () => ({ token: owner.accessToken });

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    ({ conversationId } = await startConversation(await newVisitor(owner)));
  });

  describe('a wrong method on an existing path', () => {
    it('answers 405 method_not_allowed in the error body, with Allow naming the methods the path has', async () => {
      const cases: [string, string, string[]][] = [
        ['DELETE', '/auth/login', ['POST']],
        ['PUT', `/conversations/${conversationId}`, ['GET', 'HEAD', 'PATCH']],
        // `recents` is no conversation id, so GET/PATCH /conversations/{id} do not count for this path.
        ['POST', '/conversations/recents', ['DELETE', 'GET', 'HEAD']],
        ['PATCH', '/widget/config', ['GET', 'HEAD']],
        ['GET', `/conversations/${conversationId}/route`, ['POST']],
        ['GET', '/memberships/accept-invite', ['POST']],
        ['POST', '/notifications/unread-count', ['GET', 'HEAD']],
      ];
      for (const [method, path, allowed] of cases) {
        const res = await owner.api.request(method, path, { token: owner.accessToken });
        expectError(res, 405, 'method_not_allowed');
        expect(allowOf(res), `${method} ${path}`).to.deep.equal(allowed);
      }
    });

    it('still answers 404 for a path the API does not have, or whose id is malformed', async () => {
      expectError(await owner.api.request('PUT', '/no/such/path', t()), 404, 'not_found');
      expectError(await owner.api.request('PUT', '/conversations/not-a-uuid', t()), 404, 'not_found');
    });

    it('answers a plain OPTIONS with 204 and Allow', async () => {
      const res = await owner.api.request('OPTIONS', `/conversations/${conversationId}/messages`);
      expect(res.status).to.equal(204);
      expect(allowOf(res)).to.deep.equal(['GET', 'HEAD', 'POST']);
    });
  });

  it('puts data in every success body, an empty object when there is nothing more to say', async () => {
    const cleared = await owner.api.delete('/conversations/recents', t());
    expect(cleared.status).to.equal(200);
    expect(cleared.body).to.deep.equal({ success: true, message: cleared.body.message, data: {} });
    const doc = (await owner.api.get('/openapi.json')).body;
    const schema = doc.paths['/api/v1/conversations/recents'].delete.responses['200'].content['application/json'].schema;
    expect(schema.required).to.include('data');
  });

  describe('PATCH /conversations/{id}', () => {
    it('sets priority and tags, announces the change to agents, and is in the OpenAPI document', async () => {
      const { baseUrl } = sharedServer();
      const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
      const heard = nextEvent(agentSocket, 'conversation_updated', (p) => p.conversation.id === conversationId);
      const res = await owner.api.patch(`/conversations/${conversationId}`, { priority: 'urgent', tags: [' VIP ', 'billing', 'vip'] }, t());
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.data).to.include({ id: conversationId, priority: 'urgent' });
      expect(res.body.data.tags).to.deep.equal(['vip', 'billing']);
      expect((await heard).conversation).to.include({ priority: 'urgent' });

      // The same values again change nothing and announce nothing.
      const updates = collect(agentSocket, 'conversation_updated');
      const again = await owner.api.patch(`/conversations/${conversationId}`, { priority: 'urgent', tags: ['vip', 'billing'] }, t());
      expect(again.status).to.equal(200);
      await settle();
      expect(updates).to.have.length(0);
      const read = await owner.api.get(`/conversations/${conversationId}`, t());
      expect(read.body.data).to.include({ priority: 'urgent' });
      expect(read.body.data.tags).to.deep.equal(['vip', 'billing']);

      const op = (await owner.api.get('/openapi.json')).body.paths['/api/v1/conversations/{conversationId}'].patch;
      expect(op.operationId).to.equal('updateConversation');
      expect(op['x-required-role']).to.equal('agent');
      expect(op.requestBody.content['application/json'].schema.properties).to.have.all.keys('priority', 'tags');
    });

    it('refuses bad input with the field named, and changes nothing', async () => {
      const path = `/conversations/${conversationId}`;
      const bad: [unknown, string][] = [
        [{}, 'body'],
        [{ priority: 'critical' }, 'priority'],
        [{ tags: 'vip' }, 'tags'],
        [{ tags: [''] }, 'tags.0'],
        [{ status: 'closed' }, 'status'],
      ];
      for (const [body, field] of bad) {
        const res = await owner.api.patch(path, body, t());
        expectError(res, 400, 'validation_failed');
        expect(res.body.error.details.map((d: { field: string }) => d.field), JSON.stringify(body)).to.include(field);
      }
      expect((await owner.api.get(path, t())).body.data.status).to.equal('open');
    });

    it("answers 404 for another organization's conversation and leaves it as it was", async () => {
      const { server, baseUrl } = sharedServer();
      const other = await signUp(server, baseUrl);
      const { conversationId: theirs } = await startConversation(await newVisitor(other));
      expectError(await owner.api.patch(`/conversations/${theirs}`, { priority: 'low' }, t()), 404, 'not_found');
      expectError(await owner.api.patch(`/conversations/${randomUUID()}`, { priority: 'low' }, t()), 404, 'not_found');
      expect((await other.api.get(`/conversations/${theirs}`, { token: other.accessToken })).body.data.priority).to.equal('medium');
    });

    it('lets any agent of the organization change them; an API key needs conversations:write', async () => {
      const { server } = sharedServer();
      const agent = await addMember(server, owner, 'agent');
      const byAgent = await agent.api.patch(`/conversations/${conversationId}`, { priority: 'low' }, { token: agent.accessToken });
      expect(byAgent.status, JSON.stringify(byAgent.body)).to.equal(200);
      const key = async (scopes: string[]) => (await owner.api.post('/api-keys', { name: 'Bot', scopes }, t())).body.data.token as string;
      expectError(await owner.api.patch(`/conversations/${conversationId}`, { priority: 'high' }, { token: await key(['conversations:read']) }), 403, 'forbidden');
      const byKey = await owner.api.patch(`/conversations/${conversationId}`, { priority: 'high' }, { token: await key(['conversations:write']) });
      expect(byKey.status, JSON.stringify(byKey.body)).to.equal(200);
      expect(byKey.body.data.priority).to.equal('high');
    });
  });

  describe('visitors send text', () => {
    it('refuses another content type without attachments on REST and on the socket, naming the field', async () => {
      const { baseUrl } = sharedServer();
      const visitor = await newVisitor(owner);
      const { conversationId: mine } = await startConversation(visitor);
      const rest = await visitor.api.post(`/widget/conversations/${mine}/messages`, { content: 'https://evil.example/a.png', type: 'image' }, { token: visitor.token });
      expectError(rest, 400, 'validation_failed');
      expect(rest.body.error.details).to.deep.equal([{ field: 'type', message: 'must be text unless the message has attachments', in: 'body' }]);

      const socket = track(await connectOk(baseUrl, owner.orgId, visitor.token));
      const ack = await request(socket, 'send_message', { conversationId: mine, content: 'https://evil.example/a.pdf', type: 'file' });
      expectAckError(ack, 'validation_failed');
      expect(ack.error!.details).to.deep.equal([{ field: 'type', message: 'must be text unless the message has attachments', in: 'payload' }]);

      const history = (await owner.api.get(`/conversations/${mine}`, t())).body.data.messages;
      expect(history.map((m: { content: string }) => m.content)).to.deep.equal(['Hello, I need help']);
      // Text, said so or not, goes through.
      expect((await visitor.api.post(`/widget/conversations/${mine}/messages`, { content: 'plain', type: 'text' }, { token: visitor.token })).status).to.equal(201);
      expect((await request(socket, 'send_message', { conversationId: mine, content: 'plain too' })).success).to.equal(true);
    });
  });

  it('names the field at fault in a socket validation error as the REST error body does', async () => {
    const { baseUrl } = sharedServer();
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    const bad = { content: '', colour: 'red' };
    const rest = await owner.api.post(`/conversations/${conversationId}/messages`, bad, t());
    expectError(rest, 400, 'validation_failed');
    const ack = await request(agentSocket, 'send_message', { conversationId, ...bad });
    expectAckError(ack, 'validation_failed');
    const fields = (details: { field: string }[]) => details.map((d) => d.field).sort();
    expect(fields(ack.error!.details as { field: string }[])).to.deep.equal(fields(rest.body.error.details));
    expect(fields(rest.body.error.details)).to.deep.equal(['colour', 'content']);
    expect(ack.error!.details.every((d) => d.in === 'payload')).to.equal(true);
  });

  describe('one name for one idea', () => {
    it('accepts content (and the old message) to start a widget conversation', async () => {
      const visitor = await newVisitor(owner);
      const started = await visitor.api.post('/widget/conversations', { content: 'Named like every message' }, { token: visitor.token });
      expect(started.status, JSON.stringify(started.body)).to.equal(201);
      expect(started.body.data.message.content).to.equal('Named like every message');
      const both = await visitor.api.post('/widget/conversations', { content: 'one', message: 'two' }, { token: visitor.token });
      expectError(both, 400, 'validation_failed');
      expect(both.body.error.details[0].field).to.equal('message');
      expect((await visitor.api.post('/widget/conversations', {}, { token: visitor.token })).body.error.details[0].field).to.equal('content');
    });

    it('accepts assignedTo (and the old agentId) to route a conversation, and documents the old name as deprecated', async () => {
      const path = `/conversations/${conversationId}/route`;
      const assigned = await owner.api.post(path, { assignedTo: owner.userId }, t());
      expect(assigned.status, JSON.stringify(assigned.body)).to.equal(200);
      expect(assigned.body.data.assignedTo).to.equal(owner.userId);
      const unassigned = await owner.api.post(path, { agentId: null }, t());
      expect(unassigned.body.data.assignedTo).to.equal(null);
      expectError(await owner.api.post(path, {}, t()), 400, 'validation_failed');
      const doc = (await owner.api.get('/openapi.json')).body;
      const props = doc.paths['/api/v1/conversations/{conversationId}/route'].post.requestBody.content['application/json'].schema.properties;
      expect(props.agentId).to.include({ deprecated: true });
      expect(props.agentId.description).to.include('assignedTo');
      const start = doc.paths['/api/v1/widget/conversations'].post.requestBody.content['application/json'].schema.properties;
      expect(start.message).to.include({ deprecated: true });
    });
  });
});
