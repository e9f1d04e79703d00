// The webhook events a send records with the message, whichever path stores it: conversation.created for a
// conversation a customer opens, message.created for every public message (batched or not) and never for an
// internal note; an organization without such a subscription gets nothing recorded, and its sends still batch.
// message.created deliveries are written by the fan-out job a send's statement writes (one per organization and
// statement), for the subscriptions that exist, are enabled and were created no later than the message.
import { expect } from 'chai';
import type { StatementFactory } from '../db/statements.js';
import { MessageService, type Sender } from '../server/services/messages/index.js';
import { WEBHOOK_FANOUT_QUEUE, WEBHOOK_QUEUE } from '../server/services/webhooks/queue.js';
import { fannedOut } from './helpers/webhookFanout.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';

const failingStatements: StatementFactory = () => ({
  rows: async () => {
    throw new Error('batch statement refused (the transactional path is under test)');
  },
});

describe('webhook events recorded by a send', function () {
  this.timeout(60_000);
  let app: TestServer;
  before(async () => {
    app = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: 'true' });
  });
  after(async () => {
    await app?.stop();
  });

  const subscribe = async (owner: SignedUp, events: string[]) => {
    const res = await owner.api.post('/webhooks', { url: 'http://127.0.0.1:9/hook', events }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.data.webhook.id as string;
  };
  /** What was recorded for the organization, oldest first: [event, the message's content or the conversation's id]. */
  const recorded = async (orgId: string) => {
    await fannedOut(app.server, orgId);
    const knex = app.server.db.knex;
    const rows = await knex('webhook_deliveries as d').leftJoin('messages as m', 'm.id', 'd.message_id').where('d.organization_id', orgId).orderBy('d.created_at').orderBy('d.id').select('d.event_type', 'd.payload', 'm.content');
    return rows.map((r: any) => [r.eventType, r.content ?? r.payload?.conversation?.id ?? null]);
  };

  it('records conversation.created and message.created with a start, message.created per public message, none for notes', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    await subscribe(owner, ['conversation.created', 'message.created']);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'hello');
    expect(await recorded(owner.orgId)).to.have.deep.members([['conversation.created', conversationId], ['message.created', 'hello']]);

    const t = { token: owner.accessToken };
    const stats = app.server.services.messages.batchStats;
    const batchedBefore = stats.appended;
    expect((await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'a note', private: true }, t)).status).to.equal(201);
    expect((await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'a reply' }, t)).status).to.equal(201);
    expect((await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'thanks' }, { token: visitor.token })).status).to.equal(201);
    expect(stats.appended - batchedBefore, 'all three were batched').to.equal(3);

    // The transactional path records the same.
    const { server } = app;
    const transactional = new MessageService({ models: server.db.models, knex: server.db.knex, statement: failingStatements, events: server.events, batching: { concurrency: 1, maxBatch: 200 } });
    transactional.outbox = server.services.webhooks;
    const agent: Sender = { type: 'agent', orgId: owner.orgId, userId: owner.userId };
    await transactional.send(agent, { conversationId, content: 'another note', private: true });
    await transactional.send(agent, { conversationId, content: 'another reply' });

    const events = await recorded(owner.orgId);
    expect(events.slice(2)).to.deep.equal([['message.created', 'a reply'], ['message.created', 'thanks'], ['message.created', 'another reply']]);
  });

  it('wakes the fan-out queue once a batched message and its fan-out job are committed, rather than leaving them to the next poll', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    await subscribe(owner, ['message.created']);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'hello');
    const { jobs } = app.server;
    const knex = app.server.db.knex;
    // Each wake records how many of this organization's fan-out jobs were visible to another connection then.
    const seen: number[] = [];
    const wake = jobs.wake.bind(jobs);
    jobs.wake = (queue: string, withinMs?: number) => {
      if (queue === WEBHOOK_FANOUT_QUEUE) {
        void knex('jobs').where({ queue, organization_id: owner.orgId }).count({ n: '*' }).then(([row]) => seen.push(Number(row!.n)));
      }
      wake(queue, withinMs);
    };
    try {
      const stats = app.server.services.messages.batchStats;
      const before = stats.appended;
      expect((await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'thanks' }, { token: visitor.token })).status).to.equal(201);
      expect(stats.appended - before, 'batched').to.equal(1);
      for (let i = 0; i < 50 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    } finally {
      jobs.wake = wake;
    }
    // The start's fan-out job (written by its transaction) and the batched reply's: both committed when the queue woke.
    expect(seen.length, 'the queue was woken by the batched send').to.be.greaterThan(0);
    expect(seen[0]).to.equal(2);
  });

  /** Runs `fn` with this instance's job queue stopped, so the fan-out jobs it writes wait for the test. */
  const queueStopped = async (fn: () => Promise<void>) => {
    await app.server.jobs.stop();
    try {
      await fn();
    } finally {
      app.server.jobs.start();
    }
  };
  const fanoutJobs = (orgId: string) => app.server.db.knex('jobs').where({ queue: WEBHOOK_FANOUT_QUEUE, organization_id: orgId });

  it('a subscription created after a message does not get it; one created before does, even when the fan-out runs later', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const before = await subscribe(owner, ['message.created']);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'hello');
    await fannedOut(app.server, owner.orgId);
    let after = '';
    await queueStopped(async () => {
      expect((await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'early' }, { token: visitor.token })).status).to.equal(201);
      after = await subscribe(owner, ['message.created']);
      await app.server.jobs.drain(WEBHOOK_FANOUT_QUEUE);
    });
    const rows = await app.server.db.knex('webhook_deliveries as d').join('messages as m', 'm.id', 'd.message_id').where('d.organization_id', owner.orgId).select('d.webhook_id', 'm.content');
    const of = (hook: string) => rows.filter((r: any) => r.webhookId === hook).map((r: any) => r.content).sort();
    expect(of(before)).to.deep.equal(['early', 'hello']);
    expect(of(after)).to.deep.equal([]);
  });

  it('wakes the delivery queue after a fan-out that wrote deliveries, and not after one that wrote none', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const hook = await subscribe(owner, ['message.created']);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'hello');
    await fannedOut(app.server, owner.orgId);
    const { jobs } = app.server;
    /** The wakes of the delivery queue while this organization's waiting fan-out job runs. */
    const wakesOfFanout = async (): Promise<number> => {
      let woken = 0;
      const wake = jobs.wake.bind(jobs);
      jobs.wake = (queue: string, withinMs?: number) => {
        if (queue === WEBHOOK_QUEUE) woken++;
        wake(queue, withinMs);
      };
      try {
        await jobs.drain(WEBHOOK_FANOUT_QUEUE);
      } finally {
        jobs.wake = wake;
      }
      return woken;
    };
    let woken = -1;
    await queueStopped(async () => {
      expect((await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'written' }, { token: visitor.token })).status).to.equal(201);
      woken = await wakesOfFanout();
    });
    expect(woken, 'a fan-out that wrote a delivery').to.equal(1);
    await queueStopped(async () => {
      expect((await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'not written' }, { token: visitor.token })).status).to.equal(201);
      // The hook is disabled before the fan-out runs: it writes no delivery.
      expect((await owner.api.patch(`/webhooks/${hook}`, { enabled: false }, { token: owner.accessToken })).status).to.equal(200);
      woken = await wakesOfFanout();
    });
    expect(woken, 'a fan-out that wrote none').to.equal(0);
    expect(await fanoutJobs(owner.orgId).whereIn('status', ['pending', 'running'])).to.have.length(0);
  });

  it('a fan-out job that runs again (a retry after a crash) writes each delivery and its job once, and is finished', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const hooks = [await subscribe(owner, ['message.created']), await subscribe(owner, ['*'])];
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'hello');
    await fannedOut(app.server, owner.orgId);
    const knex = app.server.db.knex;
    await queueStopped(async () => {
      expect((await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'once' }, { token: visitor.token })).status).to.equal(201);
      const [job] = await fanoutJobs(owner.orgId).where({ status: 'pending' });
      expect(job, 'the send wrote a fan-out job').to.not.equal(undefined);
      expect(await app.server.jobs.drain(WEBHOOK_FANOUT_QUEUE)).to.equal(1);
      // As if the instance had died after writing the deliveries, before its job was recorded done.
      await knex('jobs').where({ id: job.id }).update({ status: 'pending', run_at: new Date(Date.now() - 1000), finished_at: null });
      expect(await app.server.jobs.drain(WEBHOOK_FANOUT_QUEUE)).to.equal(1);
      const again = await knex('jobs').where({ id: job.id }).first('status', 'attempts', 'last_error');
      expect([again.status, again.attempts, again.lastError]).to.deep.equal(['done', 2, null]);
    });
    const rows = await knex('webhook_deliveries as d').join('messages as m', 'm.id', 'd.message_id').where('d.organization_id', owner.orgId).where('m.content', 'once').select('d.id', 'd.webhook_id', 'd.event_id');
    expect(rows.map((r: any) => r.webhookId).sort()).to.deep.equal([...hooks].sort());
    expect(new Set(rows.map((r: any) => r.eventId)).size, 'one event id for every subscription').to.equal(1);
    const deliveryJobs = await knex('jobs').where({ queue: 'webhook-delivery', organization_id: owner.orgId }).whereRaw(`payload->>'deliveryId' = any(?)`, [rows.map((r: any) => r.id)]);
    expect(deliveryJobs).to.have.length(2);
    // An admin's redelivery is a second row of the same event on purpose: the uniqueness does not refuse it.
    const again = await owner.api.post(`/webhooks/${hooks[0]}/deliveries/${rows.find((r: any) => r.webhookId === hooks[0]).id}/redeliver`, undefined, { token: owner.accessToken });
    expect(again.status, JSON.stringify(again.body)).to.equal(202);
    expect(again.body.data.eventId).to.equal(rows[0].eventId);
  });

  it('writes no fan-out job for a message whose transaction rolled back', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    await subscribe(owner, ['message.created']);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'hello');
    await fannedOut(app.server, owner.orgId);
    const before = (await fanoutJobs(owner.orgId)).length;
    const { server } = app;
    const transactional = new MessageService({ models: server.db.models, knex: server.db.knex, statement: failingStatements, events: server.events, batching: { concurrency: 1, maxBatch: 200 } });
    transactional.outbox = server.services.webhooks;
    const agent: Sender = { type: 'agent', orgId: owner.orgId, userId: owner.userId };
    // A change that fails after its outbox write: the whole transaction, job included, rolls back.
    const stored = await server.db.knex('messages').where({ conversation_id: conversationId }).first('id');
    const failed = await server.db.knex
      .transaction(async (trx) => {
        await server.services.webhooks.recordMessage(trx, owner.orgId, stored.id);
        throw new Error('rolled back');
      })
      .then(() => null, (err: Error) => err.message);
    expect(failed).to.equal('rolled back');
    expect((await fanoutJobs(owner.orgId)).length).to.equal(before);
    // And a send that commits writes one.
    await transactional.send(agent, { conversationId, content: 'kept' });
    expect((await fanoutJobs(owner.orgId)).length).to.equal(before + 1);
  });

  it('a customer reopening a resolved conversation records conversation.updated: the batch hands that send back', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    await subscribe(owner, ['conversation.updated']);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'hello');
    const t = { token: owner.accessToken };
    expect((await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'resolved' }, t)).status).to.equal(200);
    const knex = app.server.db.knex;
    const updates = async () =>
      (await knex('webhook_deliveries').where({ organization_id: owner.orgId, event_type: 'conversation.updated' }).orderBy('created_at').orderBy('id').select('payload')).map(
        (r: any) => r.payload.conversation.status,
      );
    expect(await updates()).to.deep.equal(['resolved']);
    const stats = app.server.services.messages.batchStats;
    const [appended, declined] = [stats.appended, stats.declined];
    expect((await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'one more thing' }, { token: visitor.token })).status).to.equal(201);
    expect([stats.appended - appended, stats.declined - declined], 'handed to the transactional path').to.deep.equal([0, 1]);
    expect(await updates()).to.deep.equal(['resolved', 'open']);
  });

  it('records nothing for an organization without a subscription to these events, and still batches its sends', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    await subscribe(owner, ['contact.created']);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'hello');
    const stats = app.server.services.messages.batchStats;
    const before = stats.appended;
    expect((await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'a reply' }, { token: owner.accessToken })).status).to.equal(201);
    expect(stats.appended - before).to.equal(1);
    expect(await recorded(owner.orgId)).to.deep.equal([]);
  });
});
