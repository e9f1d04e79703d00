// Auto-assignment of new widget conversations: least busy online agent, round-robin on ties, capacity and
// availability respected, nobody online leaves the conversation unassigned.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { connectOk, type ClientSocket } from './helpers/sockets.js';
import { expectApiSuccess } from './helpers/auth.js';
import { waitFor } from './helpers/wait.js';

type Who = Pick<SignedUp | Member, 'api' | 'accessToken'> & { userId: string };

interface Team {
  owner: SignedUp;
  a: Member;
  b: Member;
  sockets: ClientSocket[];
}

async function team(autoAssignment = true): Promise<Team> {
  const { server, baseUrl } = sharedServer();
  const owner = await signUp(server, baseUrl);
  const a = await addMember(server, owner, 'agent', 'Ann Agent');
  const b = await addMember(server, owner, 'agent', 'Ben Agent');
  expectApiSuccess(await owner.api.patch(`/organizations/${owner.orgId}`, { settings: { autoAssignment } }, { token: owner.accessToken }), 200);
  return { owner, a, b, sockets: [] };
}

async function status(who: Who): Promise<string> {
  return expectApiSuccess(await who.api.get('/agent/profile', { token: who.accessToken }), 200).status;
}

/** Connects the agent's socket and waits until the server counts them online. */
async function goOnline(t: Team, who: Who & { api: any }): Promise<ClientSocket> {
  const socket = await connectOk(sharedServer().baseUrl, t.owner.orgId, who.accessToken);
  t.sockets.push(socket);
  await waitFor(async () => (await status(who)) !== 'offline', { what: 'the agent online' });
  return socket;
}

/** Starts a widget conversation and waits for routing and notifications to finish; returns the conversation. */
async function newConversation(t: Team): Promise<any> {
  const { conversationId } = await startConversation(await newVisitor(t.owner));
  // The owner is never online here, so their new_conversation notification marks the end of the after-start work.
  await waitFor(
    async () => expectApiSuccess(await t.owner.api.get('/notifications?limit=200', { token: t.owner.accessToken }), 200).some((n: any) => n.data.conversationId === conversationId),
    { what: 'the after-start work' },
  );
  return expectApiSuccess(await t.owner.api.get(`/conversations/${conversationId}`, { token: t.owner.accessToken }), 200);
}

async function resolve(t: Team, conversationId: string) {
  expectApiSuccess(await t.owner.api.patch(`/conversations/${conversationId}/status`, { status: 'resolved' }, { token: t.owner.accessToken }), 200);
}

describe('REST auto-assignment', () => {
  let current: Team | null = null;
  afterEach(() => {
    for (const s of current?.sockets ?? []) s.close();
    current = null;
  });

  it('gives a new conversation to the online agent with the fewest open conversations', async () => {
    const t = (current = await team());
    await goOnline(t, t.a);
    await goOnline(t, t.b);
    // Ann already holds one open conversation (assigned by hand).
    const held = await startConversation(await newVisitor(t.owner));
    expectApiSuccess(await t.owner.api.post(`/conversations/${held.conversationId}/route`, { agentId: t.a.userId }, { token: t.owner.accessToken }), 200);

    const first = await newConversation(t);
    expect(first.assignedTo).to.equal(t.b.userId);
    // Now both hold one; Ben was assigned most recently, so Ann is next.
    const second = await newConversation(t);
    expect(second.assignedTo).to.equal(t.a.userId);
    // Ann 2, Ben 1: Ben.
    const third = await newConversation(t);
    expect(third.assignedTo).to.equal(t.b.userId);

    // The assignee is told by an assignment notification, not a new_conversation one.
    const benNotes = expectApiSuccess(await t.b.api.get('/notifications?limit=200', { token: t.b.accessToken }), 200);
    const aboutFirst = benNotes.filter((n: any) => n.data.conversationId === first.id).map((n: any) => n.type);
    expect(aboutFirst).to.deep.equal(['conversation_assigned']);
    const annNotes = expectApiSuccess(await t.a.api.get('/notifications?limit=200', { token: t.a.accessToken }), 200);
    expect(annNotes.filter((n: any) => n.data.conversationId === first.id).map((n: any) => n.type)).to.deep.equal(['new_conversation']);
  });

  it('alternates between equally busy agents (round-robin)', async () => {
    const t = (current = await team());
    await goOnline(t, t.a);
    await goOnline(t, t.b);
    const assignees: string[] = [];
    for (let i = 0; i < 4; i++) {
      const c = await newConversation(t);
      expect(c.assignedTo, `conversation ${i} assigned`).to.be.oneOf([t.a.userId, t.b.userId]);
      assignees.push(c.assignedTo);
      await resolve(t, c.id); // both back to zero open: every pick is a tie
    }
    expect(assignees[1]).to.not.equal(assignees[0]);
    expect(assignees[2]).to.equal(assignees[0]);
    expect(assignees[3]).to.equal(assignees[1]);
  });

  it('spreads conversations started at the same moment instead of giving them all to one agent', async () => {
    const t = (current = await team());
    await goOnline(t, t.a);
    await goOnline(t, t.b);
    const started = await Promise.all([1, 2, 3, 4].map(() => newConversation(t)));
    const counts = { a: 0, b: 0, none: 0 };
    for (const c of started) counts[c.assignedTo === t.a.userId ? 'a' : c.assignedTo === t.b.userId ? 'b' : 'none'] += 1;
    expect(counts).to.deep.equal({ a: 2, b: 2, none: 0 });
  });

  it('skips an agent at maxOpenConversations and agents who are away or busy', async () => {
    const t = (current = await team());
    await goOnline(t, t.a);
    await goOnline(t, t.b);
    expectApiSuccess(await t.a.api.put('/agent/profile', { maxOpenConversations: 1 }, { token: t.a.accessToken }), 200);
    const held = await startConversation(await newVisitor(t.owner));
    expectApiSuccess(await t.owner.api.post(`/conversations/${held.conversationId}/route`, { agentId: t.a.userId }, { token: t.owner.accessToken }), 200);
    // Ann is full (1 of 1) although Ben will hold more.
    for (let i = 0; i < 2; i++) expect((await newConversation(t)).assignedTo).to.equal(t.b.userId);

    // Ann has room again once hers is resolved; Ben goes away.
    await resolve(t, held.conversationId);
    expectApiSuccess(await t.b.api.patch('/agent/status', { status: 'away' }, { token: t.b.accessToken }), 200);
    expect((await newConversation(t)).assignedTo).to.equal(t.a.userId);
    // Ann is full again and Ben is away: nobody.
    expect((await newConversation(t)).assignedTo).to.equal(null);
    // Busy is skipped too; online again is eligible.
    expectApiSuccess(await t.b.api.patch('/agent/status', { status: 'busy' }, { token: t.b.accessToken }), 200);
    expect((await newConversation(t)).assignedTo).to.equal(null);
    expectApiSuccess(await t.b.api.patch('/agent/status', { status: 'online' }, { token: t.b.accessToken }), 200);
    expect((await newConversation(t)).assignedTo).to.equal(t.b.userId);
  });

  it('leaves the conversation unassigned when nobody is online, or when auto-assignment is off', async () => {
    const t = (current = await team());
    expect((await newConversation(t)).assignedTo, 'nobody online').to.equal(null);

    const socket = await goOnline(t, t.a);
    expect((await newConversation(t)).assignedTo).to.equal(t.a.userId);
    socket.close();
    await waitFor(async () => (await status(t.a)) === 'offline', { what: 'Ann offline' });
    expect((await newConversation(t)).assignedTo, 'after the last socket closed').to.equal(null);

    const off = (current = await team(false));
    await goOnline(off, off.a);
    expect((await newConversation(off)).assignedTo, 'auto-assignment off').to.equal(null);
  });
});
