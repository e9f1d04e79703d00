// An inbound event whose processing fails is not lost: its job is tried again later, and the message then joins a
// conversation once. The failure is a database that refuses the message's write once (a trigger on this
// organization's messages, dropped before the retry).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { ok } from './helpers/tickets.js';
import { inboundEvents, mime, postSignedMail, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { INBOUND_QUEUE } from '../server/services/channels/index.js';
import { refuseWrites } from './helpers/refusals.js';

describe('Channels: an inbound event that fails once', function () {
  this.timeout(120_000);
  let test: TestServer;
  let owner: SignedUp;
  let channelId: string;
  let secret: string;

  before(async () => {
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, INBOUND_EMAIL_DOMAIN: 'in.platform.test' });
    owner = await signUp(test.server, test.baseUrl, { organizationName: `Retry ${randomUUID().slice(0, 6)}` });
    const created = ok(await owner.api.post('/channels/email', { name: 'Support', address: `support-${randomUUID().slice(0, 8)}@retry.test` }, { token: owner.accessToken }), 201);
    channelId = created.channel.id;
    secret = created.inbound.secret;
  });

  after(async () => {
    await test?.stop();
  });

  it('is tried again later, and its message then joins a conversation once', async () => {
    const { knex } = test.server.db;
    const refusal = await refuseWrites(knex, { table: 'messages', on: 'insert', when: `new.organization_id = '${owner.orgId}'` });
    try {
      const raw = mime({ from: 'ada@customer.test', subject: 'Order 12', text: 'Where is my parcel?', messageId: `<${randomUUID()}@customer.test>` });
      expect(ok(await postSignedMail(owner.api, channelId, secret, raw), 200)).to.deep.equal({ stored: 1, duplicates: 0 });
      await quiesce(test.server, owner.orgId);

      // The first attempt failed: the event waits, its job is pending for a later attempt with the error.
      let [event] = await inboundEvents(test.server, channelId);
      expect(event).to.include({ status: 'pending', conversationId: null });
      let [job] = await knex('jobs').where({ queue: INBOUND_QUEUE, organization_id: owner.orgId });
      expect(job).to.include({ status: 'pending', attempts: 1 });
      // (The error of the refused statement, which begins with the statement itself.)
      expect(job.lastError).to.be.a('string').and.not.equal('');
      expect(new Date(job.runAt).getTime(), 'the next attempt is later, not at once').to.be.above(Date.now());
      expect(await knex('conversations').where({ organizationId: owner.orgId })).to.deep.equal([]);

      // The database takes writes again; the retry (made due now rather than waited for) processes the event.
      await refusal.lift();
      await knex('jobs').where({ id: job.id }).update({ run_at: knex.fn.now() });
      await quiesce(test.server, owner.orgId);
      [event] = await inboundEvents(test.server, channelId);
      expect(event).to.include({ status: 'processed' });
      [job] = await knex('jobs').where({ queue: INBOUND_QUEUE, organization_id: owner.orgId });
      expect(job).to.include({ status: 'done', attempts: 2 });
      const messages = await knex('messages').where({ organizationId: owner.orgId, conversationId: event!.conversationId });
      expect(messages.map((m: { content: string }) => m.content)).to.deep.equal(['Order 12\n\nWhere is my parcel?']);
    } finally {
      await refusal.lift();
    }
  });
});
