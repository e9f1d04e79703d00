// Rules of a send that hold on both write paths: a clientMessageId reused by someone else never hands out the
// stored message (an internal note above all); the transactional path (every send the batch declines) reopens,
// counts unread and sets first reply and human joined exactly as the batch does; NUL is refused, other control
// characters are text.
import { expect } from 'chai';
import type { StatementFactory } from '../db/statements.js';
import { MessageService, type SendInput, type SendResult, type Sender } from '../server/services/messages/index.js';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation, type Visitor } from './helpers/live.js';
import { ackData, closeAfterEach, expectAckError } from './helpers/socket-acks.js';
import { connectOk, request, settle } from './helpers/sockets.js';
import { expectError } from './helpers/tenancy.js';

/** A statement factory whose statements always fail: every batch fails as a whole, so every send takes the transaction. */
const failingStatements: StatementFactory = () => ({
  rows: async () => {
    throw new Error('batch statement refused (the transactional path is under test)');
  },
});

/** A MessageService on the shared server's database and event bus that writes every send through its transaction. */
function transactionalMessages(): MessageService {
  const { server } = sharedServer();
  return new MessageService({ models: server.db.models, knex: server.db.knex, statement: failingStatements, events: server.events, batching: { concurrency: 1, maxBatch: 200 } });
}

async function tenantWithConversation(): Promise<{ owner: SignedUp; visitor: Visitor; conversationId: string }> {
  const { server, baseUrl } = sharedServer();
  const owner = await signUp(server, baseUrl);
  const visitor = await newVisitor(owner);
  const { conversationId } = await startConversation(visitor, 'hello');
  return { owner, visitor, conversationId };
}

describe('message rules on both write paths', () => {
  const track = closeAfterEach();

  describe('a clientMessageId reused by another sender', () => {
    it("never gives a visitor the agent's internal note: REST answers 409, the note stays private", async () => {
      const { owner, visitor, conversationId } = await tenantWithConversation();
      const t = { token: owner.accessToken };
      const note = (await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'secret: refund approved up to 500', private: true, clientMessageId: 'X-1' }, t)).body.data;
      expect(note).to.include({ private: true, clientMessageId: 'X-1' });

      const res = await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'my own words', clientMessageId: 'X-1' }, { token: visitor.token });
      expectError(res, 409, 'conflict');
      expect(JSON.stringify(res.body)).to.not.include('secret').and.not.include(note.id);
      // The visitor's view of the conversation never shows the note.
      const mine = await visitor.api.get(`/widget/conversations/${conversationId}/messages`, { token: visitor.token });
      expect(mine.status).to.equal(200);
      expect(JSON.stringify(mine.body)).to.not.include('secret');
      // The agent's own retry still gets the note back (200, the same message).
      const retry = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'secret: refund approved up to 500', private: true, clientMessageId: 'X-1' }, t);
      expect(retry.status).to.equal(200);
      expect(retry.body.data.id).to.equal(note.id);
    });

    it('nor over the visitor socket, nor to another agent of the organization', async () => {
      const { server, baseUrl } = sharedServer();
      const { owner, visitor, conversationId } = await tenantWithConversation();
      const note = (await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'secret note', private: true, clientMessageId: 'X-2' }, { token: owner.accessToken })).body.data;

      const visitorSocket = track(await connectOk(baseUrl, visitor.orgId, visitor.token));
      const ack = await request(visitorSocket, 'send_message', { conversationId, content: 'mine', clientMessageId: 'X-2' });
      expectAckError(ack, 'conflict');
      expect(JSON.stringify(ack)).to.not.include('secret');

      // Another agent reusing the id is refused as well: only the same sender's retry is a retry.
      const colleague = await addMember(server, owner, 'agent');
      const theirs = await colleague.api.post(`/conversations/${conversationId}/messages`, { content: 'different', clientMessageId: 'X-2' }, { token: colleague.accessToken });
      expectError(theirs, 409, 'conflict');
      // The same visitor retrying their own id gets their own message back.
      const own = ackData(await request(visitorSocket, 'send_message', { conversationId, content: 'first', clientMessageId: 'V-2' }));
      const again = ackData(await request(visitorSocket, 'send_message', { conversationId, content: 'first', clientMessageId: 'V-2' }));
      expect(again.message.id).to.equal(own.message.id);
      expect(own.message.id).to.not.equal(note.id);
    });
  });

  // The same scenario through the batch (the shared server's service) and through the transaction alone.
  for (const path of ['batched', 'transactional'] as const) {
    describe(`conversation state on the ${path} path`, () => {
      let service: MessageService;
      before(() => {
        service = path === 'batched' ? sharedServer().server.services.messages : transactionalMessages();
      });

      const stats = () => ({ ...service.batchStats });
      const read = async (owner: SignedUp, id: string) => (await owner.api.get(`/conversations/${id}`, { token: owner.accessToken })).body.data;
      const send = async (sender: Sender, input: SendInput): Promise<SendResult> => {
        const result = await service.send(sender, input);
        // Sends in this block are apart in time, so "kept" below compares distinct moments.
        await settle(15);
        return result;
      };

      it('counts unread only for visitor messages; first reply on the first public agent reply; human joined on the first agent message', async () => {
        const { owner, visitor, conversationId } = await tenantWithConversation();
        const before = stats();
        const visitorSender = { type: 'visitor' as const, orgId: owner.orgId, sessionId: visitor.sessionId };
        const agent = { type: 'agent' as const, orgId: owner.orgId, userId: owner.userId };
        const ai = { type: 'ai' as const, orgId: owner.orgId };
        const start = await read(owner, conversationId);

        await send(ai, { conversationId, content: 'an AI answer' });
        let c = await read(owner, conversationId);
        expect(c.unreadCount, 'an AI message is not unread').to.equal(start.unreadCount);
        expect([c.firstReplyAt, c.humanJoinedAt], 'an AI answer is no human reply').to.deep.equal([null, null]);

        await send(visitorSender, { conversationId, content: 'still there?' });
        c = await read(owner, conversationId);
        expect(c.unreadCount, 'a visitor message is unread').to.equal(start.unreadCount + 1);
        expect([c.firstReplyAt, c.humanJoinedAt]).to.deep.equal([null, null]);

        await send(agent, { conversationId, content: 'looking into it', private: true });
        c = await read(owner, conversationId);
        expect(c.unreadCount, 'a note is not unread').to.equal(start.unreadCount + 1);
        expect(c.firstReplyAt, 'a note is no reply').to.equal(null);
        expect(c.humanJoinedAt, 'a note means a human joined').to.be.a('string');
        const joined = c.humanJoinedAt;

        await send(agent, { conversationId, content: 'here is the answer' });
        c = await read(owner, conversationId);
        expect(c.unreadCount, 'an agent reply is not unread').to.equal(start.unreadCount + 1);
        expect(c.firstReplyAt).to.be.a('string');
        expect(new Date(c.firstReplyAt).getTime()).to.be.above(new Date(joined).getTime());
        expect(c.humanJoinedAt, 'human joined is kept').to.equal(joined);
        const firstReply = c.firstReplyAt;

        await send(agent, { conversationId, content: 'and one more thing' });
        c = await read(owner, conversationId);
        expect(c.firstReplyAt, 'first reply is kept').to.equal(firstReply);
        expect(c.humanJoinedAt, 'human joined is kept').to.equal(joined);
        expect(c.lastSeq).to.equal(start.lastSeq + 5);

        const delta = { batches: stats().batches - before.batches, appended: stats().appended - before.appended, failed: stats().failed - before.failed };
        if (path === 'batched') expect(delta).to.deep.include({ appended: 5, failed: 0 });
        else expect(delta, 'every send went through the transaction').to.deep.include({ appended: 0, failed: 5 });
      });

      it('answers every message field for field, in column order, as a later read of the stored row, and the conversation as stored', async () => {
        const { server } = sharedServer();
        const { owner, visitor, conversationId } = await tenantWithConversation();
        const before = stats();
        const sends: Array<[Sender, Omit<SendInput, 'conversationId'>]> = [
          [{ type: 'visitor', orgId: owner.orgId, sessionId: visitor.sessionId }, { content: 'no metadata', clientMessageId: 'A-1' }],
          // Keys out of jsonb's order, nested values, unicode: the answer shows the metadata as stored.
          [{ type: 'agent', orgId: owner.orgId, userId: owner.userId }, { content: 'a note ✓', private: true, metadata: { zeta: 1, alpha: { b: [1, 'x', null], a: 'é' }, mid: true } }],
          [{ type: 'ai', orgId: owner.orgId }, { content: 'an answer', type: 'text', metadata: { source: 'kb' } }],
        ];
        const ids: string[] = [];
        for (const [sender, input] of sends) {
          const sent = await send(sender, { ...input, conversationId });
          ids.push(sent.message.id);
          const message = await server.db.knex('messages').where({ id: sent.message.id }).first();
          expect(JSON.stringify(sent.message), `${sender.type}'s message`).to.equal(JSON.stringify(message));
          const conversation = await server.db.knex('conversations').where({ id: conversationId }).first();
          for (const key of Object.keys(sent.conversation) as Array<keyof typeof sent.conversation>) {
            expect(sent.conversation[key], `conversation.${key} after the ${sender.type}'s message`).to.deep.equal(conversation[key]);
          }
          expect(sent.conversation.lastSeq).to.equal(sent.message.seq);
        }
        // Time-ordered ids (UUIDv7): later messages sort after earlier ones, so the primary key grows at its right edge.
        expect(ids.every((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab]/.test(id)), ids.join(' ')).to.equal(true);
        expect([...ids].sort()).to.deep.equal(ids);
        const appended = stats().appended - before.appended;
        expect(appended, 'the path under test stored them').to.equal(path === 'batched' ? sends.length : 0);
      });

      it("moves the row's updated_at only when a message changes the conversation itself; updatedAt still follows the latest message", async () => {
        const { server } = sharedServer();
        const { owner, visitor, conversationId } = await tenantWithConversation();
        const stored = async () => ((await server.db.knex('conversations').where({ id: conversationId }).first('updatedAt')) as { updatedAt: Date }).updatedAt.getTime();
        const visitorSender = { type: 'visitor' as const, orgId: owner.orgId, sessionId: visitor.sessionId };
        const agent = { type: 'agent' as const, orgId: owner.orgId, userId: owner.userId };
        let mark = await stored();
        /** Sends, then checks whether the stored updated_at moved, and that the conversation shown carries the message's time. */
        const step = async (sender: Sender, input: Omit<SendInput, 'conversationId'>, moves: boolean, what: string) => {
          await send(sender, { ...input, conversationId });
          const now = await stored();
          if (moves) expect(now, `${what} moves updated_at`).to.be.above(mark);
          else expect(now, `${what} leaves updated_at alone`).to.equal(mark);
          mark = now;
          const c = await read(owner, conversationId);
          expect(c.updatedAt, `${what}: updatedAt is the latest message's time`).to.equal(c.lastMessageAt);
        };
        await step(visitorSender, { content: 'a plain message' }, false, 'a visitor message');
        await step({ type: 'ai', orgId: owner.orgId }, { content: 'an AI answer' }, true, 'the first response');
        await step(visitorSender, { content: 'thanks, but' }, false, 'another visitor message');
        await step(agent, { content: 'joining', private: true }, true, 'a human joining');
        await step(agent, { content: 'the first human reply' }, true, 'the first reply');
        await step(agent, { content: 'a second reply' }, false, 'a later reply');
        await step(agent, { content: 'another note', private: true }, false, 'a later note');
      });

      it('a visitor writing to a resolved conversation reopens it (open, resolvedAt null, announced); an agent writing does not', async () => {
        const { server } = sharedServer();
        const { owner, visitor, conversationId } = await tenantWithConversation();
        const setStatus = (status: string) => owner.api.patch(`/conversations/${conversationId}/status`, { status }, { token: owner.accessToken });
        expect((await setStatus('resolved')).status).to.equal(200);
        const agent = { type: 'agent' as const, orgId: owner.orgId, userId: owner.userId };
        const updates: Array<{ id: string; status: string; statusChanged: boolean | undefined }> = [];
        const off = server.events.on('conversation.updated', (p) => {
          if (p.conversation.id === conversationId) updates.push({ id: p.conversation.id, status: p.conversation.status, statusChanged: (p as { statusChanged?: boolean }).statusChanged });
        });
        try {
          const byAgent = await send(agent, { conversationId, content: 'a follow-up note', private: true });
          expect(byAgent.reopened).to.equal(false);
          // A batched send that left the status alone answers the conversation's reference fields; the
          // transaction answers its whole row.
          if (path === 'batched') expect(Object.keys(byAgent.conversation).sort()).to.deep.equal(['id', 'lastMessageAt', 'lastSeq', 'organizationId', 'visitorSessionId']);
          else expect(byAgent.conversation).to.include({ status: 'resolved' });
          expect(byAgent.conversation).to.include({ id: conversationId, organizationId: owner.orgId, visitorSessionId: visitor.sessionId, lastSeq: byAgent.message.seq });
          expect((await read(owner, conversationId)).status).to.equal('resolved');

          const byVisitor = await send({ type: 'visitor', orgId: owner.orgId, sessionId: visitor.sessionId }, { conversationId, content: 'it broke again' });
          expect(byVisitor).to.include({ reopened: true, started: false, duplicate: false });
          // Reopened: the whole row on either path (conversation.updated shows it).
          expect(byVisitor.conversation).to.include({ status: 'open', resolvedAt: null, lastSeq: byVisitor.message.seq });
          const c = await read(owner, conversationId);
          expect(c.status).to.equal('open');
          expect(c.resolvedAt ?? null).to.equal(null);
          expect(updates).to.deep.equal([{ id: conversationId, status: 'open', statusChanged: true }]);

          // Open already: the next visitor message reopens nothing.
          const next = await send({ type: 'visitor', orgId: owner.orgId, sessionId: visitor.sessionId }, { conversationId, content: 'hello?' });
          expect(next.reopened).to.equal(false);
          expect(updates).to.have.length(1);
        } finally {
          off();
        }
      });
    });
  }

  describe('NUL and other control characters', () => {
    const nulError = (field: string) => ({ status: 400, code: 'validation_failed', message: 'Text must not contain NUL characters', details: [{ field, message: 'contains a NUL character' }] });
    const refusal = async (p: Promise<unknown>) => {
      const err = (await p.then(() => null, (e: unknown) => e)) as { status: number; code: string; message: string; details: unknown } | null;
      expect(err, 'refused').to.not.equal(null);
      return { status: err!.status, code: err!.code, message: err!.message, details: err!.details };
    };

    it('refuses NUL in the content and anywhere in the metadata (keys, nested values, after a backslash)', async () => {
      const { owner, conversationId } = await tenantWithConversation();
      const messages = sharedServer().server.services.messages;
      const ai = { type: 'ai' as const, orgId: owner.orgId };
      expect(await refusal(messages.send(ai, { conversationId, content: 'a\u0000b' }))).to.deep.equal(nulError('content'));
      expect(await refusal(messages.send(ai, { conversationId, content: '\u0000' }))).to.deep.equal(nulError('content'));
      for (const metadata of [{ note: 'a\u0000b' }, { 'k\u0000': 1 }, { deep: { list: ['ok', 'x\u0000'] } }, { path: 'C:\\\u0000' }, { path: '\\\\\\\u0000' }]) {
        expect(await refusal(messages.send(ai, { conversationId, content: 'fine', metadata })), JSON.stringify(metadata)).to.deep.equal(nulError('metadata'));
      }
      expectError(await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'x\u0000y' }, { token: owner.accessToken }), 400, 'validation_failed');
    });

    it('stores tab, newline and the other control characters as they are, and the text "\\u0000" in metadata', async () => {
      const { owner, conversationId } = await tenantWithConversation();
      const messages = sharedServer().server.services.messages;
      const ai = { type: 'ai' as const, orgId: owner.orgId };
      const content = 'tab\there\nnew line\r\n\u0001\u0007\u001b[0m\u001f\u007f\u0085\u2028end';
      const metadata = { text: 'col1\tcol2\nrow2', escaped: '\\u0000 is how JSON writes NUL', doubled: '\\\\u0000', bell: '\u0007' };
      const sent = await messages.send(ai, { conversationId, content, metadata });
      expect(sent.message.content).to.equal(content);
      expect(sent.message.metadata).to.deep.equal(metadata);
      const rest = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'line one\nline two\ttabbed\u0001' }, { token: owner.accessToken });
      expect(rest.status, JSON.stringify(rest.body)).to.equal(201);
      const stored = (await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken })).body.data.messages;
      expect(stored.map((m: any) => m.content)).to.deep.equal(['hello', content, 'line one\nline two\ttabbed\u0001']);
      expect(stored[1].metadata).to.deep.equal(metadata);
    });
  });
});
