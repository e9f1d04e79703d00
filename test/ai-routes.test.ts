// The internal AI service's trusted routes (x-ai-tool-secret): memory, gate, replies, resolve, escalate, agent
// runs, closing inactive bot-only conversations and notifications. Every call names an organization, checked
// against the conversation, so another organization's id answers 404 like a conversation that does not exist.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp } from './helpers/factories.js';
import { Api, type ApiResponse } from './helpers/http.js';
import { newVisitor, startConversation, supportScene, type SupportScene } from './helpers/live.js';
import { TEST_AI_SECRET } from './helpers/server.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, nextEvent, request, settle } from './helpers/sockets.js';
import { expectError } from './helpers/tenancy.js';
import { waitFor } from './helpers/wait.js';

const secret = { 'x-ai-tool-secret': TEST_AI_SECRET };

function ok(res: ApiResponse, status: number): any {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(res.body.success).to.equal(true);
  return res.body.data;
}

/** The AI service: the secret header, no bearer token. */
function aiClient(baseUrl: string) {
  const api = new Api(baseUrl);
  return {
    get: (path: string, headers: Record<string, string> = secret) => api.get(path, { headers }),
    post: (path: string, body: unknown, headers: Record<string, string> = secret) => api.post(path, body, { headers }),
    patch: (path: string, body: unknown, headers: Record<string, string> = secret) => api.patch(path, body, { headers }),
  };
}

const tenant = () => supportScene(sharedServer());

async function conversation(t: SupportScene, id = t.conversationId): Promise<any> {
  return ok(await t.owner.api.get(`/conversations/${id}`, { token: t.owner.accessToken }), 200);
}

/** A member's notifications, without the new_conversation ones every visitor's first message brings. */
async function notifications(m: { api: Api; accessToken: string }): Promise<any[]> {
  return (ok(await m.api.get('/notifications', { token: m.accessToken }), 200) as any[]).filter((n) => n.type !== 'new_conversation');
}

describe('AI routes: secret, organization and tenancy checks on every route', () => {
  it('wrong secret -> 401, another organization -> 404 (nothing changes), no organizationId -> 400', async () => {
    const { baseUrl } = sharedServer();
    const a = await tenant();
    const b = await tenant();
    const ai = aiClient(baseUrl);
    const id = a.conversationId;
    type Call = { name: string; send: (orgId: string | undefined, headers?: Record<string, string>) => Promise<ApiResponse>; perConversation: boolean };
    const q = (orgId?: string) => (orgId ? `?organizationId=${orgId}` : '');
    const calls: Call[] = [
      { name: 'GET memory', perConversation: true, send: (o, h) => ai.get(`/conversations/ai/${id}/memory${q(o)}`, h) },
      { name: 'PATCH memory', perConversation: true, send: (o, h) => ai.patch(`/conversations/ai/${id}/memory`, { organizationId: o, facts: { hijacked: true } }, h) },
      { name: 'GET gate', perConversation: true, send: (o, h) => ai.get(`/conversations/ai/${id}/gate${q(o)}`, h) },
      { name: 'POST messages', perConversation: true, send: (o, h) => ai.post(`/conversations/ai/${id}/messages`, { organizationId: o, content: 'leak' }, h) },
      { name: 'POST resolve', perConversation: true, send: (o, h) => ai.post(`/conversations/ai/${id}/resolve`, { organizationId: o, summary: 'x' }, h) },
      { name: 'POST escalate', perConversation: true, send: (o, h) => ai.post(`/conversations/ai/${id}/escalate`, { organizationId: o, reason: 'x' }, h) },
      { name: 'POST agent-runs', perConversation: true, send: (o, h) => ai.post(`/conversations/ai/${id}/agent-runs`, { organizationId: o, status: 'succeeded' }, h) },
      { name: 'POST close-inactive', perConversation: false, send: (o, h) => ai.post('/conversations/ai/close-inactive', { organizationId: o, inactiveMinutes: 1 }, h) },
      { name: 'POST notifications', perConversation: false, send: (o, h) => ai.post('/notifications/ai', { organizationId: o, userIds: [a.agent.userId], title: 'Hi' }, h) },
    ];
    for (const call of calls) {
      const wrong: Record<string, string>[] = [{}, { 'x-ai-tool-secret': 'wrong' }, { 'x-ai-tool-secret': `${TEST_AI_SECRET}x` }, { 'x-ai-tool-secret': '' }];
      for (const headers of wrong) {
        const res = await call.send(a.owner.orgId, headers);
        expect(res.status, `${call.name} ${JSON.stringify(headers)}`).to.equal(401);
        expectError(res, 401, 'unauthorized');
      }
      // An operator's bearer token is no substitute for the secret.
      expectError(await call.send(a.owner.orgId, { authorization: `Bearer ${a.owner.accessToken}` }), 401, 'unauthorized');
      const missing = await call.send(undefined);
      expect(missing.status, `${call.name} without organizationId: ${JSON.stringify(missing.body)}`).to.equal(400);
      expectError(missing, 400, 'validation_failed');
      expectError(await call.send('not-a-uuid'), 400, 'validation_failed');
      if (call.perConversation) {
        const cross = await call.send(b.owner.orgId);
        expect(cross.status, `${call.name} cross-tenant: ${JSON.stringify(cross.body)}`).to.equal(404);
        expectError(cross, 404, 'not_found');
        expectError(await call.send(randomUUID()), 404, 'not_found');
      }
    }
    // Another organization's id reaches nothing of this one: no facts, messages, runs, status or notifications.
    expect(ok(await ai.post('/notifications/ai', { organizationId: b.owner.orgId, userIds: [a.agent.userId], title: 'Hi' }), 201).created).to.equal(0);
    expect(ok(await ai.post('/conversations/ai/close-inactive', { organizationId: b.owner.orgId, inactiveMinutes: 1 }), 200).conversationIds).to.not.include(id);
    const after = await conversation(a);
    expect(after).to.include({ status: 'open', escalatedAt: null, assignedTo: null, lastSeq: 1 });
    expect(after.messages.map((m: any) => m.content)).to.deep.equal(['first']);
    expect(ok(await ai.get(`/conversations/ai/${id}/memory?organizationId=${a.owner.orgId}`), 200).facts).to.deep.equal({});
    expect(ok(await a.agent.api.get(`/conversations/${id}/agent-runs`, { token: a.agent.accessToken }), 200)).to.deep.equal([]);
    expect(await notifications(a.agent)).to.deep.equal([]);
    // Unknown conversation ids and malformed ones, with the right organization.
    expectError(await ai.get(`/conversations/ai/${randomUUID()}/gate?organizationId=${a.owner.orgId}`), 404, 'not_found');
    expectError(await ai.get(`/conversations/ai/not-a-uuid/gate?organizationId=${a.owner.orgId}`), 404, 'not_found');
  });
});

describe('AI routes: memory and gate', () => {
  const track = closeAfterEach();

  it('GET memory: the conversation with its contact, the last N messages oldest first, and the facts; PATCH merges', async () => {
    const { baseUrl } = sharedServer();
    const t = await tenant();
    const ai = aiClient(baseUrl);
    for (const content of ['second', 'third', 'fourth']) ok(await t.visitor.api.post(`/widget/conversations/${t.conversationId}/messages`, { content }, { token: t.visitor.token }), 201);
    ok(await t.owner.api.post(`/conversations/${t.conversationId}/contact`, { name: 'Carla Contact', email: 'carla@example.test' }, { token: t.owner.accessToken }), 200);
    const path = `/conversations/ai/${t.conversationId}/memory`;

    const m = ok(await ai.get(`${path}?organizationId=${t.owner.orgId}&limit=2`), 200);
    expect(m.conversation).to.include({ id: t.conversationId, organizationId: t.owner.orgId, status: 'open' });
    expect(m.conversation.contact).to.include({ name: 'Carla Contact', email: 'carla@example.test' });
    expect(m.messages.map((x: any) => [x.seq, x.content])).to.deep.equal([[3, 'third'], [4, 'fourth']]);
    expect(m.facts).to.deep.equal({});
    const all = ok(await ai.get(`${path}?organizationId=${t.owner.orgId}`), 200);
    expect(all.messages.map((x: any) => x.content)).to.deep.equal(['first', 'second', 'third', 'fourth']);
    expectError(await ai.get(`${path}?organizationId=${t.owner.orgId}&limit=0`), 400, 'validation_failed');

    expect(ok(await ai.patch(path, { organizationId: t.owner.orgId, facts: { plan: 'pro', language: 'en', order: { id: 42 } } }), 200).facts).to.deep.equal({ plan: 'pro', language: 'en', order: { id: 42 } });
    const merged = ok(await ai.patch(path, { organizationId: t.owner.orgId, facts: { language: null, tier: 2, plan: 'enterprise' } }), 200).facts;
    expect(merged).to.deep.equal({ plan: 'enterprise', order: { id: 42 }, tier: 2 });
    expect(ok(await ai.get(`${path}?organizationId=${t.owner.orgId}`), 200).facts).to.deep.equal(merged);
    // Forgetting a key that was never there changes nothing.
    expect(ok(await ai.patch(path, { organizationId: t.owner.orgId, facts: { nothing: null } }), 200).facts).to.deep.equal(merged);
    expectError(await ai.patch(path, { organizationId: t.owner.orgId, facts: 'plan=pro' }), 400, 'validation_failed');
    expectError(await ai.patch(path, { organizationId: t.owner.orgId }), 400, 'validation_failed');
    expectError(await ai.patch(path, { organizationId: t.owner.orgId, facts: {}, extra: 1 }), 400, 'validation_failed');
  });

  it('gate: ok, then human_joined after an agent joins live; assigned; resolved; closed', async () => {
    const { baseUrl } = sharedServer();
    const t = await tenant();
    const ai = aiClient(baseUrl);
    const gate = async (id: string) => ok(await ai.get(`/conversations/ai/${id}/gate?organizationId=${t.owner.orgId}`), 200);
    expect(await gate(t.conversationId)).to.deep.equal({ shouldRespond: true, reason: 'ok', conversationStatus: 'open' });

    const socket = track(await connectOk(baseUrl, t.owner.orgId, t.agent.accessToken));
    const ack = await request(socket, 'join_conversation', { conversationId: t.conversationId });
    expect(ack.success, JSON.stringify(ack)).to.equal(true);
    expect(await gate(t.conversationId)).to.deep.equal({ shouldRespond: false, reason: 'human_joined', conversationStatus: 'open' });
    expect((await conversation(t)).humanJoinedAt).to.be.a('string');

    const second = (await startConversation(t.visitor, 'another question')).conversationId;
    expect((await gate(second)).reason).to.equal('ok');
    ok(await t.owner.api.post(`/conversations/${second}/route`, { agentId: t.agent.userId }, { token: t.owner.accessToken }), 200);
    expect(await gate(second)).to.deep.equal({ shouldRespond: false, reason: 'assigned', conversationStatus: 'open' });

    const third = (await startConversation(t.visitor, 'third question')).conversationId;
    ok(await t.owner.api.patch(`/conversations/${third}/status`, { status: 'resolved' }, { token: t.owner.accessToken }), 200);
    expect(await gate(third)).to.deep.equal({ shouldRespond: false, reason: 'resolved', conversationStatus: 'resolved' });
    ok(await t.owner.api.patch(`/conversations/${third}/status`, { status: 'closed' }, { token: t.owner.accessToken }), 200);
    expect(await gate(third)).to.deep.equal({ shouldRespond: false, reason: 'closed', conversationStatus: 'closed' });
  });
});

describe('AI routes: replies, resolve and escalate', () => {
  const track = closeAfterEach();

  it('an AI reply is 201 senderType ai, reaches the visitor and agents live; a repeated clientMessageId is 200 once', async () => {
    const { baseUrl } = sharedServer();
    const t = await tenant();
    const ai = aiClient(baseUrl);
    const visitorSocket = track(await connectOk(baseUrl, t.owner.orgId, t.visitor.token));
    const agentSocket = track(await connectOk(baseUrl, t.owner.orgId, t.agent.accessToken));
    const toVisitor = nextEvent(visitorSocket, 'new_message', (p) => p.message.senderType === 'ai');
    const toAgent = nextEvent(agentSocket, 'new_message', (p) => p.message.senderType === 'ai');
    const path = `/conversations/ai/${t.conversationId}/messages`;
    const body = { organizationId: t.owner.orgId, content: 'I can help with that.', clientMessageId: 'ai-1', metadata: { sources: ['kb:12'] } };

    const res = await ai.post(path, body);
    const message = ok(res, 201);
    expect(message).to.include({ conversationId: t.conversationId, seq: 2, senderType: 'ai', senderId: null, content: 'I can help with that.', type: 'text', private: false, clientMessageId: 'ai-1' });
    expect(message.metadata).to.deep.equal({ sources: ['kb:12'] });
    expect((await toVisitor).message).to.deep.equal(message);
    expect((await toAgent)).to.deep.equal({ conversationId: t.conversationId, message });

    const again = collect(visitorSocket, 'new_message');
    const repeated = await ai.post(path, { ...body, content: 'changed' });
    expect(ok(repeated, 200)).to.deep.equal(message);
    await settle();
    expect(again).to.deep.equal([]);
    const stored = await conversation(t);
    expect(stored.messages.filter((m: any) => m.senderType === 'ai')).to.have.length(1);
    expect(stored.lastSeq).to.equal(2);
    // An AI reply does not count as a human joining: the gate stays open.
    expect(ok(await ai.get(`/conversations/ai/${t.conversationId}/gate?organizationId=${t.owner.orgId}`), 200).reason).to.equal('ok');
    expectError(await ai.post(path, { organizationId: t.owner.orgId, content: '' }), 400, 'validation_failed');
    expectError(await ai.post(path, { organizationId: t.owner.orgId, content: 'x', private: true }), 400, 'validation_failed');
  });

  it('resolve: status resolved, the summary kept as an internal system message the visitor never sees', async () => {
    const { baseUrl } = sharedServer();
    const t = await tenant();
    const ai = aiClient(baseUrl);
    const visitorSocket = track(await connectOk(baseUrl, t.owner.orgId, t.visitor.token));
    const visitorMessages = collect(visitorSocket, 'new_message');
    const statusToVisitor = nextEvent(visitorSocket, 'status_updated');

    const resolved = ok(await ai.post(`/conversations/ai/${t.conversationId}/resolve`, { organizationId: t.owner.orgId, summary: 'Customer asked about refunds; answered from the KB.' }), 200);
    expect(resolved).to.include({ id: t.conversationId, status: 'resolved' });
    expect(resolved.resolvedAt).to.be.a('string');
    expect(await statusToVisitor).to.deep.equal({ conversationId: t.conversationId, status: 'resolved' });
    const stored = await conversation(t);
    expect(stored.status).to.equal('resolved');
    const summary = stored.messages.find((m: any) => m.senderType === 'system');
    expect(summary, JSON.stringify(stored.messages)).to.include({ type: 'system', content: 'Customer asked about refunds; answered from the KB.', private: true, seq: 2 });
    expect(summary.metadata).to.deep.equal({ kind: 'ai_resolution_summary' });
    const widget = ok(await t.visitor.api.get(`/widget/conversations/${t.conversationId}/messages`, { token: t.visitor.token }), 200);
    expect(widget.map((m: any) => m.content)).to.deep.equal(['first']);
    await settle();
    expect(visitorMessages).to.deep.equal([]);

    // Without a summary no message is written; closed conversations cannot be resolved.
    const second = (await startConversation(t.visitor, 'again')).conversationId;
    expect(ok(await ai.post(`/conversations/ai/${second}/resolve`, { organizationId: t.owner.orgId }), 200).status).to.equal('resolved');
    expect((await conversation(t, second)).messages).to.have.length(1);
    ok(await t.owner.api.patch(`/conversations/${second}/status`, { status: 'closed' }, { token: t.owner.accessToken }), 200);
    expectError(await ai.post(`/conversations/ai/${second}/resolve`, { organizationId: t.owner.orgId }), 400, 'invalid_transition');
    expectError(await ai.post(`/conversations/ai/${second}/resolve`, { organizationId: t.owner.orgId, summary: 'late' }), 400, 'invalid_transition');
    expect((await conversation(t, second)).messages).to.have.length(1);
  });

  it('escalate with auto-assignment on and an agent online: escalatedAt, open, assigned to that agent, announced', async () => {
    const { server, baseUrl } = sharedServer();
    const t = await tenant();
    const ai = aiClient(baseUrl);
    // A resolved conversation escalated by the AI is open again.
    ok(await t.owner.api.patch(`/conversations/${t.conversationId}/status`, { status: 'resolved' }, { token: t.owner.accessToken }), 200);
    ok(await t.owner.api.patch(`/organizations/${t.owner.orgId}`, { settings: { autoAssignment: true } }, { token: t.owner.accessToken }), 200);
    const socket = track(await connectOk(baseUrl, t.owner.orgId, t.agent.accessToken));
    await waitFor(() => server.presence.isOnline(t.owner.orgId, t.agent.userId), { what: 'the agent online' });
    const escalatedEvent = nextEvent(socket, 'conversation_escalated', (p) => p.conversation.id === t.conversationId);
    const updatedEvent = nextEvent(socket, 'conversation_updated', (p) => p.conversation.id === t.conversationId && p.conversation.escalatedAt !== null);
    const notified = nextEvent(socket, 'notification_created', (p) => p.notification.type !== 'new_conversation');

    const res = ok(await ai.post(`/conversations/ai/${t.conversationId}/escalate`, { organizationId: t.owner.orgId, reason: 'Customer asked for a human' }), 200);
    expect(res).to.include({ id: t.conversationId, status: 'open', assignedTo: t.agent.userId, resolvedAt: null });
    expect(res.escalatedAt).to.be.a('string');
    const escalated = await escalatedEvent;
    expect(escalated.reason).to.equal('Customer asked for a human');
    expect(escalated.conversation).to.include({ id: t.conversationId, status: 'open', assignedTo: t.agent.userId });
    expect((await updatedEvent).conversation).to.include({ status: 'open', assignedTo: t.agent.userId });
    expect((await notified).notification).to.include({ userId: t.agent.userId, type: 'conversation_assigned' });
    expect((await notified).notification.data).to.deep.equal({ conversationId: t.conversationId, reason: 'escalation' });
    expect((await conversation(t))).to.include({ status: 'open', assignedTo: t.agent.userId, escalatedAt: res.escalatedAt });
    expect(ok(await ai.get(`/conversations/ai/${t.conversationId}/gate?organizationId=${t.owner.orgId}`), 200).reason).to.equal('assigned');
    // The assignee hears about it once; the owner is not bothered.
    await settle();
    expect((await notifications(t.agent)).map((n: any) => n.type)).to.deep.equal(['conversation_assigned']);
    expect(await notifications(t.owner)).to.deep.equal([]);
    // Closed conversations cannot be escalated.
    ok(await t.owner.api.patch(`/conversations/${t.conversationId}/status`, { status: 'closed' }, { token: t.owner.accessToken }), 200);
    expectError(await ai.post(`/conversations/ai/${t.conversationId}/escalate`, { organizationId: t.owner.orgId }), 400, 'invalid_transition');
  });

  for (const [label, autoAssignment, availability] of [
    ['auto-assignment off (an agent online)', false, 'online'],
    ['auto-assignment on but no agent available', true, 'away'],
  ] as const) {
    it(`escalate with ${label}: unassigned, every agent notified live`, async () => {
      const { baseUrl } = sharedServer();
      const t = await tenant();
      const ai = aiClient(baseUrl);
      if (autoAssignment) ok(await t.owner.api.patch(`/organizations/${t.owner.orgId}`, { settings: { autoAssignment: true } }, { token: t.owner.accessToken }), 200);
      const socket = track(await connectOk(baseUrl, t.owner.orgId, t.agent.accessToken));
      const status = await request(socket, 'update_status', { status: availability });
      expect(status.success, JSON.stringify(status)).to.equal(true);
      const escalatedEvent = nextEvent(socket, 'conversation_escalated', (p) => p.conversation.id === t.conversationId);
      const updatedEvent = nextEvent(socket, 'conversation_updated', (p) => p.conversation.id === t.conversationId);
      const notified = nextEvent(socket, 'notification_created', (p) => p.notification.type === 'conversation_escalated');
      const assigned = collect(socket, 'conversation_assigned');

      const res = ok(await ai.post(`/conversations/ai/${t.conversationId}/escalate`, { organizationId: t.owner.orgId }), 200);
      expect(res).to.include({ status: 'open', assignedTo: null });
      expect(res.escalatedAt).to.be.a('string');
      expect((await escalatedEvent).conversation).to.include({ id: t.conversationId, assignedTo: null, escalatedAt: res.escalatedAt });
      expect((await escalatedEvent).reason).to.equal(null);
      expect((await updatedEvent).conversation.escalatedAt).to.equal(res.escalatedAt);
      const note = (await notified).notification;
      expect(note).to.include({ userId: t.agent.userId, organizationId: t.owner.orgId });
      expect(note.data).to.include({ conversationId: t.conversationId });
      expect((await notifications(t.owner)).map((n: any) => n.type)).to.deep.equal(['conversation_escalated']);
      await settle();
      expect(assigned).to.deep.equal([]);
      expect((await conversation(t)).assignedTo).to.equal(null);
      expect(ok(await ai.get(`/conversations/ai/${t.conversationId}/gate?organizationId=${t.owner.orgId}`), 200)).to.include({ shouldRespond: false, reason: 'escalated' });
    });
  }
});

describe('AI routes: agent runs, close-inactive, notifications', () => {
  const track = closeAfterEach();

  it('records agent runs; agents list them newest first; other organizations get 404', async () => {
    const { baseUrl } = sharedServer();
    const t = await tenant();
    const other = await signUp(sharedServer().server, baseUrl);
    const ai = aiClient(baseUrl);
    const path = `/conversations/ai/${t.conversationId}/agent-runs`;
    const first = ok(await ai.post(path, { organizationId: t.owner.orgId, status: 'succeeded', modelId: 'gpt-4o', input: 'refund?', output: 'Here is how', steps: [{ tool: 'kb_search', ms: 40 }], latencyMs: 820, totalTokens: 310 }), 201);
    expect(first).to.include({ conversationId: t.conversationId, status: 'succeeded', modelId: 'gpt-4o', input: 'refund?', output: 'Here is how', latencyMs: 820, totalTokens: 310, error: null });
    expect(first.steps).to.deep.equal([{ tool: 'kb_search', ms: 40 }]);
    const second = ok(await ai.post(path, { organizationId: t.owner.orgId, status: 'failed', error: 'provider timeout' }), 201);
    expect(second).to.include({ status: 'failed', error: 'provider timeout', modelId: null, latencyMs: null });
    expect(second.steps).to.deep.equal([]);
    expectError(await ai.post(path, { organizationId: t.owner.orgId, status: 'done' }), 400, 'validation_failed');
    expectError(await ai.post(path, { organizationId: t.owner.orgId, status: 'failed', latencyMs: -1 }), 400, 'validation_failed');

    const runs = ok(await t.agent.api.get(`/conversations/${t.conversationId}/agent-runs`, { token: t.agent.accessToken }), 200);
    expect(runs.map((r: any) => r.id)).to.deep.equal([second.id, first.id]);
    expect(runs[1]).to.deep.equal(first);
    expectError(await other.api.get(`/conversations/${t.conversationId}/agent-runs`, { token: other.accessToken }), 404, 'not_found');
    expectError(await t.agent.api.get(`/conversations/${randomUUID()}/agent-runs`, { token: t.agent.accessToken }), 404, 'not_found');
    expectError(await new Api(baseUrl).get(`/conversations/${t.conversationId}/agent-runs`, { headers: secret }), 401, 'unauthorized');
  });

  it('close-inactive closes only bot-only conversations idle longer than the threshold', async () => {
    const { server, baseUrl } = sharedServer();
    const t = await tenant();
    const other = await tenant();
    const ai = aiClient(baseUrl);
    const start = async (text: string) => (await startConversation(await newVisitor(t.owner), text)).conversationId;
    const idle = t.conversationId;
    const recent = await start('recent');
    const assigned = await start('assigned');
    const joined = await start('joined');
    const resolved = await start('resolved');
    const pending = await start('pending');
    ok(await t.owner.api.post(`/conversations/${assigned}/route`, { agentId: t.agent.userId }, { token: t.owner.accessToken }), 200);
    ok(await t.owner.api.patch(`/conversations/${resolved}/status`, { status: 'resolved' }, { token: t.owner.accessToken }), 200);
    ok(await t.owner.api.patch(`/conversations/${pending}/status`, { status: 'pending' }, { token: t.owner.accessToken }), 200);
    const socket = track(await connectOk(baseUrl, t.owner.orgId, t.agent.accessToken));
    // The join announces its conversation too, through Redis possibly after the ack: awaited here, so that the
    // updates collected below are close-inactive's own.
    const joinAnnounced = nextEvent(socket, 'conversation_updated', (p) => p.conversation.id === joined);
    expect((await request(socket, 'join_conversation', { conversationId: joined })).success).to.equal(true);
    await joinAnnounced;
    const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
    await server.db.knex('conversations').whereIn('id', [idle, assigned, joined, resolved, pending, other.conversationId]).update({ last_message_at: twoHoursAgo });
    const updates = collect(socket, 'conversation_updated');
    const visitorSocket = track(await connectOk(baseUrl, t.owner.orgId, t.visitor.token));
    const toVisitor = nextEvent(visitorSocket, 'status_updated');

    const res = ok(await ai.post('/conversations/ai/close-inactive', { organizationId: t.owner.orgId, inactiveMinutes: 60 }), 200);
    expect(res.closed).to.equal(2);
    expect([...res.conversationIds].sort()).to.deep.equal([idle, pending].sort());
    expect(await toVisitor).to.deep.equal({ conversationId: idle, status: 'closed' });
    await waitFor(() => updates.length >= 2, { what: 'two conversation_updated' });
    expect(updates.map((u) => [u.conversation.id, u.conversation.status]).sort()).to.deep.equal([[idle, 'closed'], [pending, 'closed']].sort());
    const statuses = await Promise.all([idle, recent, assigned, joined, resolved, pending].map(async (id) => (await conversation(t, id)).status));
    expect(statuses).to.deep.equal(['closed', 'open', 'open', 'open', 'resolved', 'closed']);
    expect((await conversation(other)).status).to.equal('open');
    // A threshold longer than the idle time closes nothing more; running it again finds nothing.
    expect(ok(await ai.post('/conversations/ai/close-inactive', { organizationId: t.owner.orgId, inactiveMinutes: 180 }), 200)).to.deep.equal({ closed: 0, conversationIds: [] });
    expect(ok(await ai.post('/conversations/ai/close-inactive', { organizationId: t.owner.orgId }), 200).closed).to.equal(0);
    expectError(await ai.post('/conversations/ai/close-inactive', { organizationId: t.owner.orgId, inactiveMinutes: 0 }), 400, 'validation_failed');
  });

  it('POST /notifications/ai notifies the named members only and pushes notification_created live', async () => {
    const { baseUrl } = sharedServer();
    const t = await tenant();
    const stranger = await signUp(sharedServer().server, baseUrl);
    const ai = aiClient(baseUrl);
    const socket = track(await connectOk(baseUrl, t.owner.orgId, t.agent.accessToken));
    const ownerSocket = track(await connectOk(baseUrl, t.owner.orgId, t.owner.accessToken));
    const ownerSeen = collect(ownerSocket, 'notification_created');
    const live = nextEvent(socket, 'notification_created');

    const res = await ai.post('/notifications/ai', { organizationId: t.owner.orgId, userIds: [t.agent.userId, stranger.userId, randomUUID()], type: 'kb_gap', title: 'Unanswered question', body: 'Nobody knew the refund window', data: { conversationId: t.conversationId } });
    expect(ok(res, 201)).to.deep.equal({ created: 1 });
    const pushed = (await live).notification;
    expect(pushed).to.include({ userId: t.agent.userId, organizationId: t.owner.orgId, type: 'kb_gap', title: 'Unanswered question', body: 'Nobody knew the refund window', readAt: null });
    expect(pushed.data).to.deep.equal({ conversationId: t.conversationId });
    expect((await notifications(t.agent)).map((n: any) => n.id)).to.deep.equal([pushed.id]);
    expect(await notifications(stranger)).to.deep.equal([]);
    await settle();
    expect(ownerSeen).to.deep.equal([]);

    // Without userIds every accepted member is notified; the type defaults to "ai".
    expect(ok(await ai.post('/notifications/ai', { organizationId: t.owner.orgId, title: 'Everyone' }), 201)).to.deep.equal({ created: 2 });
    const ownerList = await notifications(t.owner);
    expect(ownerList.map((n: any) => [n.type, n.title])).to.deep.equal([['ai', 'Everyone']]);
    expectError(await ai.post('/notifications/ai', { organizationId: t.owner.orgId }), 400, 'validation_failed');
    expectError(await ai.post('/notifications/ai', { organizationId: t.owner.orgId, title: 'x', userIds: ['nope'] }), 400, 'validation_failed');
  });
});
