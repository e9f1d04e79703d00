// A channel's contact on the transactional path (every send the batch declines or fails): it writes to its own
// conversation like a visitor does, and never to another contact's.
import { expect } from 'chai';
import type { StatementFactory } from '../db/statements.js';
import { MessageService, type Sender } from '../server/services/messages/index.js';
import { NotFound } from '../server/errors.js';
import { signUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';

/** Statements that always fail: every batch fails as a whole, so every send takes the transaction. */
const failingStatements: StatementFactory = () => ({
  rows: async () => {
    throw new Error('batch statement refused (the transactional path is under test)');
  },
});

describe('message service: a channel contact on the transactional path', () => {
  it('sends to its own conversation; another contact of the organization gets 404', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    const contact = async (email: string) => {
      const res = await owner.api.post('/contacts', { name: email, email }, t);
      expect(res.status).to.equal(201);
      return res.body.data.id as string;
    };
    const cara = await contact('cara@example.com');
    const dan = await contact('dan@example.com');
    const messages = new MessageService({ models: server.db.models, knex: server.db.knex, statement: failingStatements, events: server.events, batching: { concurrency: 1, maxBatch: 200 } });
    const asCara: Sender = { type: 'contact', orgId: owner.orgId, contactId: cara };

    const first = await messages.send(asCara, { content: 'My parcel is late', start: { channel: 'email' } });
    expect(first).to.include({ started: true, duplicate: false });
    const conversationId = first.conversation.id;

    const second = await messages.send(asCara, { conversationId, content: 'Any news?' });
    expect(second).to.include({ started: false, duplicate: false });
    expect(second.message).to.include({ conversationId, content: 'Any news?', senderType: 'visitor', senderId: cara, seq: 2 });
    expect(messages.batchStats.failed, 'the batch failed, the transaction stored it').to.be.greaterThan(0);

    const refused = await messages.send({ type: 'contact', orgId: owner.orgId, contactId: dan }, { conversationId, content: 'not mine' }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).to.be.instanceOf(NotFound);
    const stored = await server.db.knex('messages').where({ conversationId }).orderBy('seq').pluck('content');
    expect(stored).to.deep.equal(['My parcel is late', 'Any news?']);
  });
});
