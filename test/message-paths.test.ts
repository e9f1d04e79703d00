// The batched and the transactional write store the same thing: one script of sends (visitor, AI, note, replies,
// a reopening, an escalation, files aside) runs against two twin conversations, one through the shared server's
// batches and one through a service whose batch statement always fails, and after every step both conversations
// and their messages agree field by field (times compared by which are set and in which order they came).
import { expect } from 'chai';
import type { StatementFactory } from '../db/statements.js';
import { MessageService, type Sender, type SendInput, type SendResult } from '../server/services/messages/index.js';
import { expectApiSuccess } from './helpers/auth.js';
import { addMember, signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation, type Visitor } from './helpers/live.js';
import { settle } from './helpers/sockets.js';
import { aiClient } from './helpers/tickets.js';

const failingStatements: StatementFactory = () => ({
  rows: async () => {
    throw new Error('batch statement refused (the transactional path is under test)');
  },
});

const MOMENTS = ['lastMessageAt', 'resolvedAt', 'firstReplyAt', 'humanJoinedAt', 'firstResponseAt', 'firstHumanReplyAt', 'escalatedAt'] as const;

/** A conversation's state with its moments reduced to their order of appearance (null, or the rank among them). */
async function state(conversationId: string) {
  const knex = sharedServer().server.db.knex;
  const c = await knex('conversations').where({ id: conversationId }).first();
  const times = [...new Set(MOMENTS.map((k) => c[k]?.getTime()).filter((t): t is number => t !== undefined))].sort((a, b) => a - b);
  const rank = (d: Date | null) => (d ? times.indexOf(d.getTime()) : null);
  const messages = (await knex('messages').where({ conversationId }).orderBy('seq')).map((m: any) => ({
    seq: m.seq, senderType: m.senderType, senderId: m.senderId, content: m.content, type: m.type, private: m.private, metadata: m.metadata, clientMessageId: m.clientMessageId,
  }));
  return {
    status: c.status, unreadCount: c.unreadCount, lastSeq: c.lastSeq, firstHumanReplyBy: c.firstHumanReplyBy,
    moments: Object.fromEntries(MOMENTS.map((k) => [k, rank(c[k])])),
    messages,
  };
}

describe('the batched and the transactional write apply the same rules', () => {
  it('a whole conversation, step by step, ends the same on both paths', async () => {
    const { server, baseUrl } = sharedServer();
    const batched = server.services.messages;
    const transactional = new MessageService({ models: server.db.models, knex: server.db.knex, statement: failingStatements, events: server.events, batching: { concurrency: 1, maxBatch: 200 } });
    transactional.outbox = null;
    const owner = await signUp(server, baseUrl);
    const colleague = await addMember(server, owner, 'agent', 'Cleo');
    const visitors: Visitor[] = [await newVisitor(owner), await newVisitor(owner)];
    const twins = [(await startConversation(visitors[0]!, 'hello')).conversationId, (await startConversation(visitors[1]!, 'hello')).conversationId];
    const orgId = owner.orgId;
    const agent = (userId: string): Sender => ({ type: 'agent', orgId, userId });
    const ai: Sender = { type: 'ai', orgId };

    type Step = { who: (i: number) => Sender; input: Omit<SendInput, 'conversationId'> } | { act: (conversationId: string) => Promise<void> };
    const resolve = async (id: string) => void expectApiSuccess(await owner.api.patch(`/conversations/${id}/status`, { status: 'resolved' }, { token: owner.accessToken }), 200);
    const escalate = async (id: string) => void expectApiSuccess(await aiClient(baseUrl).post(`/conversations/ai/${id}/escalate`, { organizationId: orgId }), 200);
    const visitor = (i: number): Sender => ({ type: 'visitor', orgId, sessionId: visitors[i]!.sessionId });
    const script: Step[] = [
      { who: () => ai, input: { content: 'an AI answer', metadata: { confidence: 0.4 } } },
      { who: visitor, input: { content: 'still there?', clientMessageId: 'v-1' } },
      { who: () => agent(owner.userId), input: { content: 'a note', private: true } },
      { who: () => agent(owner.userId), input: { content: 'the reply' } },
      { act: escalate },
      { who: () => agent(colleague.userId), input: { content: 'after the escalation' } },
      { who: () => agent(owner.userId), input: { content: 'one more' } },
      { act: resolve },
      { who: () => agent(owner.userId), input: { content: 'a note on a resolved chat', private: true } },
      { who: visitor, input: { content: 'it broke again', clientMessageId: 'v-2' } },
      { who: () => ({ type: 'system', orgId }), input: { content: 'summary', type: 'system', private: true, metadata: { kind: 'ai_resolution_summary' } } },
      { who: visitor, input: { content: 'thanks' } },
    ];
    const results: SendResult[][] = [[], []];
    const before = { batched: { ...batched.batchStats }, transactional: { ...transactional.batchStats } };
    for (const [n, step] of script.entries()) {
      for (const [i, service] of [batched, transactional].entries()) {
        if ('act' in step) await step.act(twins[i]!);
        else results[i]!.push(await service.send(step.who(i), { ...step.input, conversationId: twins[i]! }));
        // Apart in time, so "kept" and "replaced" moments are distinct.
        await settle(5);
      }
      const [a, b] = [await state(twins[0]!), await state(twins[1]!)];
      // The sender ids of the two visitors differ by construction; everything else is the same.
      const sameVisitor = (s: typeof a) => ({ ...s, messages: s.messages.map((m) => (m.senderType === 'visitor' ? { ...m, senderId: 'the visitor' } : m)) });
      expect(sameVisitor(b), `after step ${n + 1}`).to.deep.equal(sameVisitor(a));
    }
    const sends = script.filter((s) => !('act' in s)).length;
    expect(batched.batchStats.appended - before.batched.appended, 'every send of the first twin was batched').to.equal(sends);
    expect(transactional.batchStats.failed - before.transactional.failed, 'every send of the second went through the transaction').to.equal(sends);
    const final = await state(twins[0]!);
    expect(final).to.deep.include({ status: 'open', unreadCount: 4, lastSeq: 11, firstHumanReplyBy: colleague.userId });
    // What each send answered agrees as well: reopened once, never started or duplicate.
    const flags = (r: SendResult[]) => r.map((x) => [x.message.seq, x.reopened, x.started, x.duplicate]);
    expect(flags(results[1]!)).to.deep.equal(flags(results[0]!));
    expect(results[0]!.filter((r) => r.reopened)).to.have.length(1);
  });
});
