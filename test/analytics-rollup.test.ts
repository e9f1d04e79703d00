// The analytics moments written on both send paths (batched and transactional), and the message rollup job:
// counts that match the messages table, idempotent reruns, and two instances rolling up at once.
import { expect } from 'chai';
import type { Conversation } from '../db/models/Conversation.js';
import type { Sender, SendInput } from '../server/services/messages/index.js';
import { MessageRollup } from '../server/services/analytics/index.js';
import { expectApiSuccess } from './helpers/auth.js';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { aiClient } from './helpers/tickets.js';

type Path = 'batched' | 'transactional';

/**
 * Sends through the batch, or through the transactional path's append (what a send the batch declines runs: the
 * conversation locked by the transaction, then the append).
 */
async function send(path: Path, sender: Sender, input: SendInput): Promise<void> {
  const { server } = sharedServer();
  const before = { ...server.services.messages.batchStats };
  if (path === 'batched') {
    await server.services.messages.send(sender, input);
    expect(server.services.messages.batchStats.appended - before.appended, 'stored by a batch').to.equal(1);
    return;
  }
  await server.db.knex.transaction(async (trx) => {
    const conversation = (await trx('conversations').where({ id: input.conversationId, organizationId: sender.orgId }).forNoKeyUpdate().first()) as Conversation;
    await server.services.messages.append(trx, conversation, sender, input);
  });
  expect(server.services.messages.batchStats.appended - before.appended, 'not stored by a batch').to.equal(0);
}

async function moments(conversationId: string) {
  return sharedServer().server.db.knex('conversations').where('id', conversationId)
    .first('first_response_at', 'first_human_reply_at', 'first_human_reply_by', 'escalated_at', 'first_reply_at');
}

for (const path of ['batched', 'transactional'] as const) {
  describe(`Analytics moments on the ${path} send path`, () => {
    it('first response counts agents and AI (not notes); the first human reply restarts at the escalation', async () => {
      const { server, baseUrl } = sharedServer();
      const owner = await signUp(server, baseUrl);
      const x = await addMember(server, owner, 'agent', 'Xavi');
      const y = await addMember(server, owner, 'agent', 'Yara');
      const { conversationId } = await startConversation(await newVisitor(owner));
      const orgId = owner.orgId;

      await send(path, { type: 'agent', orgId, userId: x.userId }, { conversationId, content: 'internal', private: true });
      let m = await moments(conversationId);
      expect(m.firstResponseAt).to.equal(null);
      expect(m.firstHumanReplyAt).to.equal(null);

      await send(path, { type: 'ai', orgId }, { conversationId, content: 'AI here' });
      m = await moments(conversationId);
      const aiAt = m.firstResponseAt as Date;
      expect(aiAt).to.be.an.instanceOf(Date);
      expect(m.firstHumanReplyAt).to.equal(null);

      await send(path, { type: 'agent', orgId, userId: x.userId }, { conversationId, content: 'Xavi before the escalation' });
      m = await moments(conversationId);
      expect(m.firstResponseAt.getTime()).to.equal(aiAt.getTime());
      expect(m.firstHumanReplyBy).to.equal(x.userId);
      const xAt = m.firstHumanReplyAt as Date;

      await new Promise((resolve) => setTimeout(resolve, 5));
      expectApiSuccess(await aiClient(baseUrl).post(`/conversations/ai/${conversationId}/escalate`, { organizationId: orgId }), 200);
      await send(path, { type: 'agent', orgId, userId: y.userId }, { conversationId, content: 'Yara after it' });
      m = await moments(conversationId);
      expect(m.firstHumanReplyBy).to.equal(y.userId);
      expect(m.firstHumanReplyAt.getTime()).to.be.at.least(m.escalatedAt.getTime()).and.above(xAt.getTime());
      const yAt = m.firstHumanReplyAt as Date;

      await send(path, { type: 'agent', orgId, userId: x.userId }, { conversationId, content: 'Xavi again' });
      m = await moments(conversationId);
      expect(m.firstHumanReplyBy).to.equal(y.userId);
      expect(m.firstHumanReplyAt.getTime()).to.equal(yAt.getTime());
      expect(m.firstResponseAt.getTime()).to.equal(aiAt.getTime());
    });
  });
}

describe('Analytics message rollup', () => {
  async function countsInTable(orgId: string): Promise<Record<string, number>> {
    const rows = await sharedServer().server.db.knex('messages').where('organization_id', orgId).groupBy('sender_type').select('sender_type', sharedServer().server.db.knex.raw('count(*)::int as n'));
    const out: Record<string, number> = { visitor: 0, agent: 0, ai: 0, system: 0 };
    for (const r of rows as { senderType: string; n: number }[]) out[r.senderType] = r.n;
    return { ...out, total: Object.values(out).reduce((a, b) => a + b, 0) };
  }

  let step = 0;
  /** A summary over the last day, with a `to` no earlier query used (so it is never a cached answer). */
  async function summaryMessages(owner: SignedUp) {
    const to = new Date(Date.now() + 120_000 + ++step).toISOString();
    const from = new Date(Date.now() - 86_400_000).toISOString();
    const res = await owner.api.get(`/analytics/summary?from=${from}&to=${to}`, { token: owner.accessToken });
    return expectApiSuccess(res, 200).messages;
  }

  it('counts exactly what the messages table holds once the job has run, and reruns change nothing', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const { conversationId } = await startConversation(await newVisitor(owner), 'first');
    const sender = { type: 'agent' as const, orgId: owner.orgId, userId: owner.userId };
    await server.services.messages.send(sender, { conversationId, content: 'reply' });
    await server.services.messages.send(sender, { conversationId, content: 'note', private: true });
    await server.services.messages.send({ type: 'ai', orgId: owner.orgId }, { conversationId, content: 'ai' });

    await server.services.analytics.rollup.run({ wait: true });
    const expected = await countsInTable(owner.orgId);
    expect(expected).to.deep.equal({ visitor: 1, agent: 2, ai: 1, system: 0, total: 4 });
    expect(await summaryMessages(owner)).to.deep.equal(expected);

    await server.services.analytics.rollup.run({ wait: true });
    expect(await summaryMessages(owner)).to.deep.equal(expected);

    await server.services.messages.send(sender, { conversationId, content: 'one more' });
    await server.services.analytics.rollup.run({ wait: true });
    expect(await summaryMessages(owner)).to.deep.equal({ ...expected, agent: 3, total: 5 });
    expect(await countsInTable(owner.orgId)).to.deep.equal({ ...expected, agent: 3, total: 5 });
  });

  it('counts a send that commits after a run by the next run: counting starts again where the oldest transaction running at the last run began', async function () {
    const { server, baseUrl } = sharedServer();
    // One connection: no transaction can run beside the rollup's.
    if (server.db.embedded) this.skip();
    const { knex } = server.db;
    const owner = await signUp(server, baseUrl);
    const { conversationId } = await startConversation(await newVisitor(owner), 'hello');
    const countedUntil = async () => new Date((await knex.raw('select messages_counted_until as t from message_rollup_state where id = 1')).rows[0].t).getTime();
    const late = await knex.transaction();
    let started: number;
    try {
      // Should this test die holding the transaction, the database ends it.
      await late.raw(`set local idle_in_transaction_session_timeout = '60s'`);
      started = new Date((await late.raw('select now() as started')).rows[0].started).getTime();
      const conversation = (await late('conversations').where({ id: conversationId }).forNoKeyUpdate().first()) as Conversation;
      await server.services.messages.append(late, conversation, { type: 'ai', orgId: owner.orgId }, { conversationId, content: 'late' });
      await server.services.analytics.rollup.run({ wait: true });
      expect(await countedUntil(), 'the next run counts from the start of the transaction still running').to.be.at.most(started);
      expect((await summaryMessages(owner)).ai, 'not committed yet').to.equal(0);
      await late.commit();
    } catch (err) {
      await late.rollback().catch(() => undefined);
      throw err;
    }
    await server.services.analytics.rollup.run({ wait: true });
    expect((await summaryMessages(owner)).ai).to.equal(1);
    expect(await countedUntil(), 'with that transaction over, counting moves on').to.be.above(started);
  });

  it('two instances rolling up at once: one works, the other skips, and the counts stay exact', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const { conversationId } = await startConversation(await newVisitor(owner), 'hello');
    for (let i = 0; i < 5; i++) await server.services.messages.send({ type: 'ai', orgId: owner.orgId }, { conversationId, content: `ai ${i}` });
    const a = new MessageRollup({ knex: server.db.knex, intervalMs: 60_000, onError: () => undefined });
    const b = new MessageRollup({ knex: server.db.knex, intervalMs: 60_000, onError: () => undefined });
    const results = await Promise.all([a.run(), b.run(), a.run({ wait: true }), b.run({ wait: true })]);
    expect(results.filter((r) => !r.skipped).length).to.be.at.least(2);
    expect(await summaryMessages(owner)).to.deep.equal(await countsInTable(owner.orgId));
    expect((await summaryMessages(owner)).ai).to.equal(5);
  });
});
