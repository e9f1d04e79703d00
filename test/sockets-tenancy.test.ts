// Cross-tenant and cross-visitor isolation over sockets: other conversations answer not_found and leak nothing.
import { expect } from 'chai';
import { signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { ackData, closeAfterEach, expectAckError } from './helpers/socket-acks.js';
import { collect, connectOk, request, settle } from './helpers/sockets.js';

describe('socket tenancy', () => {
  const track = closeAfterEach();

  it("an agent of organization A gets not_found for every event on B's conversation, and B hears nothing", async () => {
    const { server, baseUrl } = sharedServer();
    const a = await signUp(server, baseUrl);
    const b = await signUp(server, baseUrl);
    const bVisitor = await newVisitor(b);
    const { conversationId } = await startConversation(bVisitor);
    const aSocket = track(await connectOk(baseUrl, a.orgId, a.accessToken));
    const bSocket = track(await connectOk(baseUrl, b.orgId, b.accessToken));
    const bVisitorSocket = track(await connectOk(baseUrl, b.orgId, bVisitor.token));
    const bHeard = { messages: collect(bSocket, 'new_message'), updates: collect(bSocket, 'conversation_updated') };
    const visitorHeard = { messages: collect(bVisitorSocket, 'new_message'), typing: collect(bVisitorSocket, 'agent_typing'), status: collect(bVisitorSocket, 'status_updated') };

    expectAckError(await request(aSocket, 'send_message', { conversationId, content: 'hijack' }), 'not_found');
    expectAckError(await request(aSocket, 'send_message', { conversationId, content: 'hijack note', private: true }), 'not_found');
    expectAckError(await request(aSocket, 'join_conversation', { conversationId }), 'not_found');
    expectAckError(await request(aSocket, 'sync', { conversationId, afterSeq: 0 }), 'not_found');
    expectAckError(await request(aSocket, 'typing_start', { conversationId }), 'not_found');
    expectAckError(await request(aSocket, 'typing_stop', { conversationId }), 'not_found');
    await settle();
    expect(bHeard.messages).to.deep.equal([]);
    expect(bHeard.updates).to.deep.equal([]);
    expect(visitorHeard.messages).to.deep.equal([]);
    expect(visitorHeard.typing).to.deep.equal([]);
    expect(visitorHeard.status).to.deep.equal([]);
    const res = await b.api.get(`/conversations/${conversationId}`, { token: b.accessToken });
    expect(res.body.data.messages).to.have.length(1);
    expect(res.body.data.humanJoinedAt).to.equal(null);
    // The not_found is indistinguishable from a conversation that does not exist.
    const missing = await request(aSocket, 'sync', { conversationId: '00000000-0000-4000-8000-000000000000', afterSeq: 0 });
    const foreign = await request(aSocket, 'sync', { conversationId, afterSeq: 0 });
    expect(foreign).to.deep.equal(missing);
  });

  it("agents of A never hear B's messages, conversations or typing", async () => {
    const { server, baseUrl } = sharedServer();
    const a = await signUp(server, baseUrl);
    const b = await signUp(server, baseUrl);
    const aSocket = track(await connectOk(baseUrl, a.orgId, a.accessToken));
    const bSocket = track(await connectOk(baseUrl, b.orgId, b.accessToken));
    const heard = ['new_message', 'new_widget_conversation', 'conversation_updated', 'conversation_assigned', 'customer_typing', 'user_status_update', 'notification_created'].map((e) => collect(aSocket, e as 'new_message'));
    const bVisitor = await newVisitor(b);
    const bVisitorSocket = track(await connectOk(baseUrl, b.orgId, bVisitor.token));
    const { conversationId } = await startConversation(bVisitor);
    ackData(await request(bVisitorSocket, 'typing_start', { conversationId }));
    ackData(await request(bVisitorSocket, 'send_message', { conversationId, content: 'B only' }));
    ackData(await request(bSocket, 'send_message', { conversationId, content: 'B note', private: true }));
    ackData(await request(bSocket, 'update_status', { status: 'away' }));
    expect((await b.api.post(`/conversations/${conversationId}/route`, { agentId: b.userId }, { token: b.accessToken })).status).to.equal(200);
    await settle();
    expect(heard.flat()).to.deep.equal([]);
  });

  it("a visitor gets not_found for another visitor's conversation and never receives that visitor's messages", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const alice = await newVisitor(owner, { name: 'Alice' });
    const mallory = await newVisitor(owner, { name: 'Mallory' });
    const { conversationId: alicesConversation } = await startConversation(alice, 'alice private question');
    const { conversationId: mallorysConversation } = await startConversation(mallory, 'mallory question');
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    const aliceSocket = track(await connectOk(baseUrl, owner.orgId, alice.token));
    const mallorySocket = track(await connectOk(baseUrl, owner.orgId, mallory.token));
    const malloryHeard = ['new_message', 'status_updated', 'agent_typing', 'agent_stopped_typing'].map((e) => collect(mallorySocket, e as 'new_message'));
    const agentHeard = collect(agentSocket, 'new_message');
    const typingHeard = collect(agentSocket, 'customer_typing');

    expectAckError(await request(mallorySocket, 'send_message', { conversationId: alicesConversation, content: 'let me in' }), 'not_found');
    expectAckError(await request(mallorySocket, 'sync', { conversationId: alicesConversation, afterSeq: 0 }), 'not_found');
    expectAckError(await request(mallorySocket, 'typing_start', { conversationId: alicesConversation }), 'not_found');
    expectAckError(await request(mallorySocket, 'typing_stop', { conversationId: alicesConversation }), 'not_found');
    const rest = await mallory.api.get(`/widget/conversations/${alicesConversation}/messages`, { token: mallory.token });
    expect(rest.status).to.equal(404);
    const restSend = await mallory.api.post(`/widget/conversations/${alicesConversation}/messages`, { content: 'let me in' }, { token: mallory.token });
    expect(restSend.status).to.equal(404);

    // Alice's conversation carries on; Mallory hears none of it.
    ackData(await request(aliceSocket, 'send_message', { conversationId: alicesConversation, content: 'alice again' }));
    ackData(await request(agentSocket, 'send_message', { conversationId: alicesConversation, content: 'reply to alice' }));
    ackData(await request(agentSocket, 'typing_start', { conversationId: alicesConversation }));
    expect((await owner.api.patch(`/conversations/${alicesConversation}/status`, { status: 'pending' }, { token: owner.accessToken })).status).to.equal(200);
    await settle();
    expect(malloryHeard.flat()).to.deep.equal([]);
    expect(agentHeard.map((p) => p.message.content)).to.deep.equal(['alice again', 'reply to alice']);
    expect(typingHeard).to.deep.equal([]);

    // Mallory's own conversation still works for Mallory.
    const own = ackData(await request(mallorySocket, 'sync', { conversationId: mallorysConversation, afterSeq: 0 }));
    expect(own.messages.map((m: any) => m.content)).to.deep.equal(['mallory question']);
    const history = await owner.api.get(`/conversations/${alicesConversation}`, { token: owner.accessToken });
    expect(history.body.data.messages.map((m: any) => m.content)).to.deep.equal(['alice private question', 'alice again', 'reply to alice']);
  });

  it("a visitor of A addressing a conversation of B from A's namespace gets not_found", async () => {
    const { server, baseUrl } = sharedServer();
    const a = await signUp(server, baseUrl);
    const b = await signUp(server, baseUrl);
    const aVisitor = await newVisitor(a);
    const { conversationId } = await startConversation(await newVisitor(b));
    const socket = track(await connectOk(baseUrl, a.orgId, aVisitor.token));
    expectAckError(await request(socket, 'send_message', { conversationId, content: 'hello B' }), 'not_found');
    expectAckError(await request(socket, 'sync', { conversationId, afterSeq: 0 }), 'not_found');
    expectAckError(await request(socket, 'typing_start', { conversationId }), 'not_found');
    const res = await b.api.get(`/conversations/${conversationId}`, { token: b.accessToken });
    expect(res.body.data.messages).to.have.length(1);
  });
});
