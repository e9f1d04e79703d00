// Group commit of sends: plain appends made in one event-loop turn share one statement; anything that needs a
// decision (closed, duplicate, someone else's conversation) or a batch that fails as a whole takes the
// transactional path and still gets its own answer. Same stored rows, same events, same order per conversation.
import { expect } from 'chai';
import { toAppError } from '../server/errors.js';
import type { SendResult } from '../server/services/messages/index.js';
import { presentMessage } from '../server/presenters/conversation.js';
import { signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation, type Visitor } from './helpers/live.js';
import { ackData, closeAfterEach } from './helpers/socket-acks.js';
import { collect, connectOk, request, settle } from './helpers/sockets.js';
import { Api } from './helpers/http.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';

describe('message batches (group commit)', () => {
  const track = closeAfterEach();

  const messages = () => sharedServer().server.services.messages;
  const stats = () => ({ ...messages().batchStats });
  const delta = (before: ReturnType<typeof stats>) => {
    const now = stats();
    return { batches: now.batches - before.batches, appended: now.appended - before.appended, declined: now.declined - before.declined, failed: now.failed - before.failed };
  };

  async function organization(visitors: number) {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const people: Array<Visitor & { conversationId: string }> = [];
    for (let i = 0; i < visitors; i++) {
      const visitor = await newVisitor(owner, { name: `Visitor ${i}` });
      people.push({ ...visitor, conversationId: (await startConversation(visitor, `hello ${i}`)).conversationId });
    }
    const agentSocket = track(await connectOk(baseUrl, owner.orgId, owner.accessToken));
    return { owner, people, agentSocket };
  }

  const visitorOf = (v: Visitor) => ({ type: 'visitor' as const, orgId: v.orgId, sessionId: v.sessionId });

  it('writes the sends of one turn with one statement: seq, counters, first reply and events as the transactional path would', async () => {
    const { owner, people, agentSocket } = await organization(5);
    const heard = collect(agentSocket, 'new_message');
    const agent = { type: 'agent' as const, orgId: owner.orgId, userId: owner.userId };
    const before = stats();
    // All seven are queued before the batch runs: five conversations in the first statement, and the second
    // message of conversations 0 and 1 in the next one (one message per conversation per statement keeps their order).
    const sends: Array<Promise<SendResult>> = people.map((v, i) => messages().send(visitorOf(v), { conversationId: v.conversationId, content: `question ${i}`, clientMessageId: `q-${i}` }));
    sends.push(messages().send(agent, { conversationId: people[0]!.conversationId, content: 'public answer' }));
    sends.push(messages().send(agent, { conversationId: people[1]!.conversationId, content: 'internal note', private: true, metadata: { source: 'test' } }));
    const results = await Promise.all(sends);
    expect(delta(before)).to.deep.equal({ batches: 2, appended: 7, declined: 0, failed: 0 });

    expect(results.map((r) => [r.message.conversationId, r.message.seq, r.duplicate, r.started, r.reopened])).to.deep.equal([
      ...people.map((v) => [v.conversationId, 2, false, false, false]),
      [people[0]!.conversationId, 3, false, false, false],
      [people[1]!.conversationId, 3, false, false, false],
    ]);
    // What the batch answered is what was stored, to the field.
    for (const [i, r] of results.entries()) {
      const res = await owner.api.get(`/conversations/${r.message.conversationId}`, { token: owner.accessToken });
      expect(res.status).to.equal(200);
      const stored = res.body.data.messages.find((m: any) => m.seq === r.message.seq);
      expect(presentMessage(r.message), `send ${i}`).to.deep.equal(stored);
      expect(r.conversation.lastSeq).to.equal(r.message.seq);
      expect(r.conversation.lastMessageAt).to.be.instanceOf(Date);
    }
    expect(results[6]!.message).to.include({ private: true, senderType: 'agent', senderId: owner.userId });
    expect(results[6]!.message.metadata).to.deep.equal({ source: 'test' });
    expect(results[0]!.message).to.include({ senderType: 'visitor', senderId: people[0]!.sessionId, clientMessageId: 'q-0', private: false, type: 'text' });

    const read = async (id: string) => (await owner.api.get(`/conversations/${id}`, { token: owner.accessToken })).body.data;
    const first = await read(people[0]!.conversationId);
    const second = await read(people[1]!.conversationId);
    const third = await read(people[2]!.conversationId);
    // A public agent reply sets firstReplyAt and humanJoinedAt; a note sets humanJoinedAt only; visitors count as unread.
    expect(first.firstReplyAt).to.be.a('string');
    expect(first.humanJoinedAt).to.be.a('string');
    expect(second.firstReplyAt).to.equal(null);
    expect(second.humanJoinedAt).to.be.a('string');
    expect(third.firstReplyAt).to.equal(null);
    expect(third.humanJoinedAt).to.equal(null);
    expect([first.lastSeq, second.lastSeq, third.lastSeq]).to.deep.equal([3, 3, 2]);
    expect(third.unreadCount).to.equal(first.unreadCount).and.to.be.greaterThan(0);

    await settle(150);
    const ids = results.map((r) => r.message.id);
    expect(heard.map((p) => p.message.id).sort()).to.deep.equal([...ids].sort());
    // Each conversation's messages are announced in seq order.
    for (const v of people) {
      const seqs = heard.filter((p) => p.conversationId === v.conversationId).map((p) => p.message.seq);
      expect(seqs).to.deep.equal([...seqs].sort((a, b) => a - b));
    }
  });

  it("keeps one visitor's unawaited socket sends in the order they were sent, gap-free", async () => {
    const { owner, people } = await organization(1);
    const v = people[0]!;
    const visitorSocket = track(await connectOk(sharedServer().baseUrl, owner.orgId, v.token));
    const acks = await Promise.all(Array.from({ length: 12 }, (_, i) => request(visitorSocket, 'send_message', { conversationId: v.conversationId, content: `burst ${i}` })));
    expect(acks.map((a) => ackData(a).message.content)).to.deep.equal(Array.from({ length: 12 }, (_, i) => `burst ${i}`));
    expect(acks.map((a) => ackData(a).message.seq)).to.deep.equal(Array.from({ length: 12 }, (_, i) => i + 2));
  });

  it('hands back what needs a decision; each of those still gets its own answer and the rest of the batch is stored', async () => {
    const { owner, people } = await organization(5);
    const other = await organization(1);
    const [plain, closed, resolved, retried, stranger] = people;
    expect((await owner.api.patch(`/conversations/${closed!.conversationId}/status`, { status: 'closed' }, { token: owner.accessToken })).status).to.equal(200);
    expect((await owner.api.patch(`/conversations/${resolved!.conversationId}/status`, { status: 'resolved' }, { token: owner.accessToken })).status).to.equal(200);
    const original = await messages().send(visitorOf(retried!), { conversationId: retried!.conversationId, content: 'first try', clientMessageId: 'same-id' });

    const before = stats();
    const outcomes = await Promise.allSettled([
      messages().send(visitorOf(plain!), { conversationId: plain!.conversationId, content: 'plain' }),
      messages().send(visitorOf(closed!), { conversationId: closed!.conversationId, content: 'after closing' }),
      messages().send(visitorOf(resolved!), { conversationId: resolved!.conversationId, content: 'one more thing' }),
      messages().send(visitorOf(retried!), { conversationId: retried!.conversationId, content: 'first try', clientMessageId: 'same-id' }),
      // Another visitor's conversation, and another organization's: not found, as on the transactional path.
      messages().send(visitorOf(stranger!), { conversationId: plain!.conversationId, content: 'not mine' }),
      messages().send(visitorOf(stranger!), { conversationId: other.people[0]!.conversationId, content: 'not ours' }),
    ]);
    // Two statements: "not mine" names the same conversation as "plain", so it waits for the next one.
    expect(delta(before)).to.deep.equal({ batches: 2, appended: 2, declined: 4, failed: 0 });
    const [plainOk, closedOk, resolvedOk, retriedOk, notMine, notOurs] = outcomes.map((o) => o);

    expect(plainOk!.status).to.equal('fulfilled');
    expect((plainOk as PromiseFulfilledResult<SendResult>).value.message.seq).to.equal(2);
    const started = (closedOk as PromiseFulfilledResult<SendResult>).value;
    expect(started.started).to.equal(true);
    expect(started.conversation.id).to.not.equal(closed!.conversationId);
    expect(started.message.seq).to.equal(1);
    const reopened = (resolvedOk as PromiseFulfilledResult<SendResult>).value;
    expect(reopened).to.include({ reopened: true, started: false, duplicate: false });
    expect(reopened.conversation).to.include({ status: 'open', resolvedAt: null });
    const duplicate = (retriedOk as PromiseFulfilledResult<SendResult>).value;
    expect(duplicate.duplicate).to.equal(true);
    expect(duplicate.message.id).to.equal(original.message.id);
    for (const refused of [notMine, notOurs]) {
      expect(refused!.status).to.equal('rejected');
      expect((refused as PromiseRejectedResult).reason).to.include({ code: 'not_found', status: 404 });
    }
    // Nothing else was written: the stranger's sends left no trace, the retry stored no second row.
    const plainRead = await owner.api.get(`/conversations/${plain!.conversationId}`, { token: owner.accessToken });
    expect(plainRead.body.data.messages.map((m: any) => m.content)).to.deep.equal(['hello 0', 'plain']);
    const retriedRead = await owner.api.get(`/conversations/${retried!.conversationId}`, { token: owner.accessToken });
    expect(retriedRead.body.data.messages.map((m: any) => m.content)).to.deep.equal(['hello 3', 'first try']);
    const otherRead = await other.owner.api.get(`/conversations/${other.people[0]!.conversationId}`, { token: other.owner.accessToken });
    expect(otherRead.body.data.messages.map((m: any) => m.content)).to.deep.equal(['hello 0']);
  });

  it('a statement that fails as a whole stores nothing itself; every send then answers on its own', async () => {
    const { owner, people } = await organization(3);
    const before = stats();
    // A clientMessageId longer than the column (routes refuse it earlier; this reaches the service directly) fails
    // the whole statement. The two good sends are then stored by the transactional path; the bad one gets a 400.
    const outcomes = await Promise.allSettled(people.map((v, i) => messages().send(visitorOf(v), { conversationId: v.conversationId, content: `try ${i}`, clientMessageId: i === 1 ? 'x'.repeat(101) : `ok-${i}` })));
    expect(delta(before)).to.deep.equal({ batches: 1, appended: 0, declined: 3, failed: 1 });
    expect(outcomes.map((o) => o.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
    // The error the client sees, mapped in the one place errors are mapped.
    expect(toAppError((outcomes[1] as PromiseRejectedResult).reason)).to.include({ code: 'validation_failed', status: 400 });
    for (const [i, v] of people.entries()) {
      const res = await owner.api.get(`/conversations/${v.conversationId}`, { token: owner.accessToken });
      expect(res.body.data.messages.map((m: any) => m.content)).to.deep.equal(i === 1 ? [`hello ${i}`] : [`hello ${i}`, `try ${i}`]);
    }
  });

  it('REST replies go through the same batches (a malformed id is 404 without reaching the database)', async () => {
    const { owner, people } = await organization(2);
    const before = stats();
    const replies = await Promise.all(people.map((v) => owner.api.post(`/conversations/${v.conversationId}/messages`, { content: 'hi from REST' }, { token: owner.accessToken })));
    expect(replies.map((r) => r.status)).to.deep.equal([201, 201]);
    expect(delta(before).appended).to.equal(2);
    expectError(await owner.api.post('/conversations/not-a-uuid/messages', { content: 'x' }, { token: owner.accessToken }), 404, 'not_found');
  });

  it("an id in another spelling is still one conversation: another organization's visitor cannot write into it", async () => {
    const { owner, people } = await organization(1);
    const other = await organization(1);
    const victim = people[0]!;
    const intruder = other.people[0]!;
    // The intruder's send comes first in the turn, the owner's second.
    const outcomes = await Promise.allSettled([
      messages().send(visitorOf(intruder), { conversationId: victim.conversationId.toUpperCase(), content: 'injected' }),
      messages().send(visitorOf(victim), { conversationId: victim.conversationId, content: 'mine' }),
    ]);
    expect(outcomes[0]!.status).to.equal('rejected');
    expect((outcomes[0] as PromiseRejectedResult).reason).to.include({ code: 'not_found', status: 404 });
    expect(outcomes[1]!.status).to.equal('fulfilled');
    expect((outcomes[1] as PromiseFulfilledResult<SendResult>).value.conversation.organizationId).to.equal(owner.orgId);
    const res = await owner.api.get(`/conversations/${victim.conversationId}`, { token: owner.accessToken });
    expect(res.body.data.messages.map((m: any) => [m.seq, m.content])).to.deep.equal([[1, 'hello 0'], [2, 'mine']]);
    expect(res.body.data.lastSeq).to.equal(2);
  });

  it("the database itself refuses a message whose organization is not its conversation's", async () => {
    const { people } = await organization(1);
    const other = await organization(1);
    const knex = sharedServer().server.db.knex;
    const row = { conversationId: people[0]!.conversationId, seq: 99, senderType: 'system', content: 'misfiled', type: 'text', private: false, metadata: '{}' };
    let refused: unknown = null;
    await knex('messages').insert({ ...row, organizationId: other.owner.orgId }).catch((err: unknown) => (refused = err));
    expect(toAppError(refused)).to.include({ status: 409 });
    // With its own organization the same row is accepted: only the mismatch was refused.
    await knex('messages').insert({ ...row, organizationId: people[0]!.orgId });
  });

  it('keeps the order of a conversation when its batch fails: the next send waits for the transactional path', async () => {
    const { owner, people } = await organization(2);
    const [x, y] = people;
    for (let round = 0; round < 4; round++) {
      // A (x) and a send that fails the statement (y) share a batch; B (x) waits behind A.
      const [a, , b] = await Promise.allSettled([
        messages().send(visitorOf(x!), { conversationId: x!.conversationId, content: `A${round}` }),
        messages().send(visitorOf(y!), { conversationId: y!.conversationId, content: 'bad', clientMessageId: 'x'.repeat(101) }),
        messages().send(visitorOf(x!), { conversationId: x!.conversationId, content: `B${round}` }),
      ]);
      const seqA = (a as PromiseFulfilledResult<SendResult>).value.message.seq;
      const seqB = (b as PromiseFulfilledResult<SendResult>).value.message.seq;
      expect(seqB, `round ${round}`).to.equal(seqA + 1);
    }
    const res = await owner.api.get(`/conversations/${x!.conversationId}`, { token: owner.accessToken });
    expect(res.body.data.messages.map((m: any) => m.content)).to.deep.equal(['hello 0', 'A0', 'B0', 'A1', 'B1', 'A2', 'B2', 'A3', 'B3']);
  });

  it('refuses NUL characters with 400 before they reach a batch; the others in that turn are batched', async () => {
    const { owner, people } = await organization(2);
    const before = stats();
    const outcomes = await Promise.allSettled([
      messages().send(visitorOf(people[0]!), { conversationId: people[0]!.conversationId, content: 'nul \u0000 inside' }),
      messages().send(visitorOf(people[1]!), { conversationId: people[1]!.conversationId, content: 'fine' }),
      messages().send({ type: 'ai', orgId: owner.orgId }, { conversationId: people[1]!.conversationId, content: 'meta', metadata: { note: 'a\u0000b' } }),
    ]);
    expect(outcomes.map((o) => o.status)).to.deep.equal(['rejected', 'fulfilled', 'rejected']);
    for (const o of [outcomes[0], outcomes[2]]) expect((o as PromiseRejectedResult).reason).to.include({ code: 'validation_failed', status: 400 });
    expect(delta(before)).to.deep.equal({ batches: 1, appended: 1, declined: 0, failed: 0 });
    // Over HTTP too, with the contract's error body.
    expectError(await owner.api.post(`/conversations/${people[0]!.conversationId}/messages`, { content: 'x\u0000y' }, { token: owner.accessToken }), 400, 'validation_failed');
  });

  describe('on PostgreSQL: row locks held elsewhere, and a second instance', () => {
    let second: TestServer | null = null;
    before(async function () {
      // Only a real PostgreSQL has concurrent writers; PGlite runs one statement at a time.
      if (!process.env.DATABASE_URL) this.skip();
      // The second instance runs its statements unprepared, as behind a transaction-pooling proxy.
      second = await startTestServer({ DATABASE_PREPARED_STATEMENTS: 'false' });
    });
    after(async () => {
      await second?.stop();
    });

    /** Runs `body` while another transaction holds the conversation's row lock; `release` commits that transaction. */
    async function withLockHeld(conversationId: string, body: (release: () => Promise<void>) => Promise<void>): Promise<void> {
      const trx = await sharedServer().server.db.knex.transaction();
      try {
        await trx('conversations').where({ id: conversationId }).forNoKeyUpdate().first();
        await body(async () => {
          await trx.commit();
        });
      } finally {
        if (!trx.isCompleted()) await trx.rollback();
      }
    }

    it('a conversation locked elsewhere is skipped, not waited for: the rest of the batch is stored at once', async () => {
      const { owner, people } = await organization(2);
      const [held, free] = people;
      await withLockHeld(held!.conversationId, async (release) => {
        let heldDone = false;
        const heldSend = messages().send(visitorOf(held!), { conversationId: held!.conversationId, content: 'waits' }).then((r) => {
          heldDone = true;
          return r;
        });
        const freeSend = await messages().send(visitorOf(free!), { conversationId: free!.conversationId, content: 'goes' });
        expect(freeSend.message.seq).to.equal(2);
        await settle(100);
        expect(heldDone).to.equal(false);
        await release();
        expect((await heldSend).message.seq).to.equal(2);
      });
      const res = await owner.api.get(`/conversations/${held!.conversationId}`, { token: owner.accessToken });
      expect(res.body.data.messages.map((m: any) => m.content)).to.deep.equal(['hello 0', 'waits']);
    });

    it('a send handed to the transactional path holds its conversation: the next send is not batched before it is stored', async () => {
      const { owner, people } = await organization(2);
      const [x, y] = people;
      // x is locked elsewhere, so A (declined, with the failing send on y) waits on the transactional path.
      await withLockHeld(x!.conversationId, async (release) => {
        const before = stats();
        const sends = Promise.allSettled([
          messages().send(visitorOf(x!), { conversationId: x!.conversationId, content: 'A' }),
          messages().send(visitorOf(y!), { conversationId: y!.conversationId, content: 'bad', clientMessageId: 'x'.repeat(101) }),
          messages().send(visitorOf(x!), { conversationId: x!.conversationId, content: 'B' }),
        ]);
        await settle(200);
        // Only the first statement ran: B still waits for A.
        expect(delta(before)).to.include({ batches: 1, failed: 1 });
        await release();
        const [a, , b] = await sends;
        expect((a as PromiseFulfilledResult<SendResult>).value.message.seq).to.equal(2);
        expect((b as PromiseFulfilledResult<SendResult>).value.message.seq).to.equal(3);
        expect(delta(before)).to.deep.equal({ batches: 2, appended: 1, declined: 2, failed: 1 });
      });
      const res = await owner.api.get(`/conversations/${x!.conversationId}`, { token: owner.accessToken });
      expect(res.body.data.messages.map((m: any) => m.content)).to.deep.equal(['hello 0', 'A', 'B']);
    });

    it('batches on both lock in id order: no deadlock, every send stored once, seq gap-free per conversation', async () => {
      const { owner, people } = await organization(6);
      const there = second!.server.services.messages;
      const agent = { type: 'agent' as const, orgId: owner.orgId, userId: owner.userId };
      const sends: Array<Promise<SendResult>> = [];
      // Each instance writes to every conversation, in opposite orders, with retries of one id mixed in.
      for (let round = 0; round < 8; round++) {
        for (const [i, v] of people.entries()) {
          sends.push(messages().send(visitorOf(v), { conversationId: v.conversationId, content: `here ${round}`, clientMessageId: `here-${round}` }));
          const w = people[people.length - 1 - i]!;
          sends.push(there.send(agent, { conversationId: w.conversationId, content: `there ${round}`, clientMessageId: `there-${round}` }));
          if (round % 3 === 0) sends.push(there.send(visitorOf(v), { conversationId: v.conversationId, content: `here ${round}`, clientMessageId: `here-${round}` }));
        }
      }
      const results = await Promise.all(sends);
      for (const v of people) {
        const res = await owner.api.get(`/conversations/${v.conversationId}?limit=100`, { token: owner.accessToken });
        const stored = res.body.data.messages as any[];
        expect(stored.map((m) => m.seq)).to.deep.equal(Array.from({ length: 17 }, (_, i) => i + 1));
        expect(new Set(stored.map((m) => m.clientMessageId)).size).to.equal(17);
        expect(res.body.data.lastSeq).to.equal(17);
        // A retry answered with the stored message, never a second one.
        const mine = results.filter((r) => r.message.conversationId === v.conversationId);
        expect(mine.filter((r) => !r.duplicate)).to.have.length(16);
        // The unprepared instance reads it the same (the caller's statement and the history statement).
        const there = await new Api(second!.baseUrl).get(`/conversations/${v.conversationId}`, { token: owner.accessToken });
        expect(there.status).to.equal(200);
        expect(there.body.data).to.deep.equal(res.body.data);
      }
    });
  });
});
