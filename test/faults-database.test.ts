// Database connections cut under a running instance (failover, a restarted pooler, an operator's pg_terminate_backend).
import { expect } from 'chai';
import knexModule from 'knex';
import { signUp, PASSWORD } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { unhandledRejections } from './helpers/logs.js';
import { sharedServer } from './helpers/hooks.js';
import type { AppServer } from '../server/server.js';
import { toAppError } from '../server/errors.js';
import { connectOk, nextEvent, request } from './helpers/sockets.js';

const knexFactory = (knexModule as unknown as { knex: typeof knexModule }).knex ?? knexModule;

describe('database connections terminated under a running instance', function () {
  this.timeout(60_000);
  const rejections = unhandledRejections();
  let admin: ReturnType<typeof knexFactory>;

  before(function () {
    if (!process.env.DATABASE_URL) this.skip();
    admin = knexFactory({ client: 'pg', connection: process.env.DATABASE_URL, pool: { min: 0, max: 1 } });
    rejections.start();
  });

  after(async () => {
    rejections.stop();
    await admin?.destroy();
  });

  /** Ends every connection in the server's pool (and only those: other suites may share the database). */
  const terminatePool = async (server: AppServer) => {
    const pool = (server.db.knex.client as { pool: { free: { resource: { processID: number } }[]; used: { resource: { processID: number } }[] } }).pool;
    const pids = [...pool.free, ...pool.used].map((r) => r.resource.processID).filter(Number.isInteger);
    if (pids.length === 0) return 0;
    const { rows } = await admin.raw('select count(pg_terminate_backend(pid))::int as n from pg_stat_activity where pid = any(?::int[])', [pids]);
    return rows[0].n as number;
  };

  it('recovers at once: REST, prepared statements and socket sends answer after every pooled connection was killed', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const agent = await connectOk(baseUrl, owner.orgId, owner.accessToken);
    try {
      // Fill the pool with several open connections, then kill them all.
      await Promise.all(Array.from({ length: 6 }, () => owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken })));
      expect(await terminatePool(server)).to.be.greaterThan(1);

      const statuses: number[] = [];
      for (let round = 0; round < 3; round++) {
        const results = await Promise.all([
          owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken }),
          owner.api.post(`/conversations/${conversationId}/messages`, { content: `after kill ${round}` }, { token: owner.accessToken }),
          new Api(baseUrl).post('/auth/login', { email: owner.email, password: PASSWORD }),
          visitor.api.get(`/widget/conversations/${conversationId}/messages`, { token: visitor.token }),
        ]);
        statuses.push(...results.map((r) => r.status));
      }
      // Nothing answered 500; a request that met a dead connection is retried or answered 503, never lost silently.
      expect(statuses.filter((s) => s >= 500 && s !== 503), JSON.stringify(statuses)).to.be.empty;
      expect(statuses.slice(-4)).to.deep.equal([200, 201, 200, 200]);

      const arrived = nextEvent(agent, 'new_message', (p) => p.message.content === 'socket after kill');
      expect(await terminatePool(server)).to.be.greaterThan(0);
      // A send that meets a connection killed under it is answered 503 and retried by the client with the same
      // clientMessageId; each pooled connection the kill left behind can fail one attempt (the pool learns of a
      // killed idle connection only when it is next used or its notice arrives), never more than the pool holds.
      let ack = await request(agent, 'send_message', { conversationId, content: 'socket after kill', clientMessageId: 'kill-1' });
      for (let attempt = 0; !ack.success && attempt < 10; attempt++) {
        expect(ack.error?.code, JSON.stringify(ack)).to.equal('service_unavailable');
        ack = await request(agent, 'send_message', { conversationId, content: 'socket after kill', clientMessageId: 'kill-1' });
      }
      expect(ack.success, JSON.stringify(ack)).to.equal(true);
      await arrived;
      expect((await fetch(`${baseUrl}/api/v1/health/ready`)).status).to.equal(200);
      expect(rejections.reasons, 'unhandled rejections').to.be.empty;
    } finally {
      agent.close();
    }
  });

  it('maps a cut or refused database connection to 503 service_unavailable, not 500', () => {
    const cut = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const noConnection = Object.assign(new Error('Knex: Timeout acquiring a connection'), { name: 'KnexTimeoutError' });
    const closedUnderQuery = new Error('select 1 - Connection terminated unexpectedly');
    for (const err of [cut, refused, noConnection, closedUnderQuery]) expect(toAppError(err).code, err.message).to.equal('service_unavailable');
    expect(toAppError(Object.assign(new Error('syntax error'), { code: '42601' })).status).to.equal(500);
  });
});
