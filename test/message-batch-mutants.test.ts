// The bounds of group commit that the batch tests leave open: a malformed conversation id never joins a batch (it
// would fail the statement for every other send in it), a statement carries at most `maxBatch` messages, and at
// most `concurrency` statements run at once. The service under test runs the real statements; the factory only
// counts them (how many rows each one carries, how many are in flight).
import { expect } from 'chai';
import type { Statement, StatementFactory } from '../db/statements.js';
import { toAppError } from '../server/errors.js';
import { MessageService, type SendResult } from '../server/services/messages/index.js';
import { signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation, type Visitor } from './helpers/live.js';

describe('message batches: what joins a batch, and how large and how many at once', () => {
  async function organization(visitors: number) {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const people: Array<Visitor & { conversationId: string }> = [];
    for (let i = 0; i < visitors; i++) {
      const visitor = await newVisitor(owner, { name: `Visitor ${i}` });
      people.push({ ...visitor, conversationId: (await startConversation(visitor, `hello ${i}`)).conversationId });
    }
    return { owner, people };
  }
  const visitorOf = (v: Visitor) => ({ type: 'visitor' as const, orgId: v.orgId, sessionId: v.sessionId });

  it('a malformed conversation id is refused on its own (400 from the service; routes answer 404 before); the valid sends of that turn are one batch that stores them', async () => {
    const { owner, people } = await organization(2);
    const messages = sharedServer().server.services.messages;
    const before = { ...messages.batchStats };
    const outcomes = await Promise.allSettled([
      messages.send(visitorOf(people[0]!), { conversationId: people[0]!.conversationId, content: 'first' }),
      messages.send(visitorOf(people[0]!), { conversationId: 'not-a-conversation', content: 'lost' }),
      messages.send(visitorOf(people[1]!), { conversationId: people[1]!.conversationId, content: 'second' }),
    ]);
    expect(outcomes.map((o) => o.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
    expect(toAppError((outcomes[1] as PromiseRejectedResult).reason)).to.include({ code: 'validation_failed', status: 400 });
    const now = messages.batchStats;
    expect({ batches: now.batches - before.batches, appended: now.appended - before.appended, declined: now.declined - before.declined, failed: now.failed - before.failed })
      .to.deep.equal({ batches: 1, appended: 2, declined: 1, failed: 0 });
    const read = await owner.api.get(`/conversations/${people[1]!.conversationId}`, { token: owner.accessToken });
    expect(read.body.data.messages.map((m: any) => m.content)).to.deep.equal(['hello 1', 'second']);
  });

  it('splits a turn into statements of at most maxBatch messages, one statement in flight at concurrency 1', async () => {
    const { server } = sharedServer();
    const { owner, people } = await organization(5);
    const sizes: number[] = [];
    let inFlight = 0;
    let mostInFlight = 0;
    const counting: StatementFactory = <Row>(name: string, text: string): Statement<Row> => {
      const real = server.db.statement<Row>(name, text);
      return {
        async rows(values) {
          sizes.push((JSON.parse(values[0] as string) as unknown[]).length);
          mostInFlight = Math.max(mostInFlight, ++inFlight);
          try {
            return await real.rows(values);
          } finally {
            inFlight--;
          }
        },
      };
    };
    const service = new MessageService({ models: server.db.models, knex: server.db.knex, statement: counting, events: server.events, batching: { concurrency: 1, maxBatch: 2 } });
    service.outbox = null;
    const results: SendResult[] = await Promise.all(people.map((v, i) => service.send(visitorOf(v), { conversationId: v.conversationId, content: `turn ${i}` })));
    expect(results.map((r) => r.message.seq)).to.deep.equal([2, 2, 2, 2, 2]);
    expect(sizes).to.deep.equal([2, 2, 1]);
    expect(mostInFlight).to.equal(1);
    expect(service.batchStats).to.deep.equal({ batches: 3, appended: 5, declined: 0, failed: 0 });
    for (const [i, v] of people.entries()) {
      const read = await owner.api.get(`/conversations/${v.conversationId}`, { token: owner.accessToken });
      expect(read.body.data.messages.map((m: any) => m.content)).to.deep.equal([`hello ${i}`, `turn ${i}`]);
    }
  });

  it('runs up to concurrency statements at once, not more', async () => {
    const { server } = sharedServer();
    const { people } = await organization(6);
    let inFlight = 0;
    let mostInFlight = 0;
    const counting: StatementFactory = <Row>(name: string, text: string): Statement<Row> => {
      const real = server.db.statement<Row>(name, text);
      return {
        async rows(values) {
          mostInFlight = Math.max(mostInFlight, ++inFlight);
          try {
            return await real.rows(values);
          } finally {
            inFlight--;
          }
        },
      };
    };
    const service = new MessageService({ models: server.db.models, knex: server.db.knex, statement: counting, events: server.events, batching: { concurrency: 2, maxBatch: 1 } });
    service.outbox = null;
    await Promise.all(people.map((v, i) => service.send(visitorOf(v), { conversationId: v.conversationId, content: `turn ${i}` })));
    expect(service.batchStats).to.deep.equal({ batches: 6, appended: 6, declined: 0, failed: 0 });
    expect(mostInFlight).to.equal(2);
  });
});
