// Both Socket.IO Redis adapters (REDIS_ADAPTER) carry each emit across instances exactly once; the sharded one holds
// an organization's channels only while the instance holds its sockets, so many organizations cost nothing idle.
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { signUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { collect, connectOk, request, settle } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

for (const adapter of ['sharded', 'classic'] as const) {
  describe(`two instances with REDIS_ADAPTER=${adapter}`, function () {
    let a: TestServer;
    let b: TestServer;

    before(async function () {
      // Two processes can only share a real PostgreSQL and Redis.
      if (!process.env.REDIS_URL || !process.env.DATABASE_URL) this.skip();
      a = await startTestServer({ REDIS_ADAPTER: adapter });
      b = await startTestServer({ REDIS_ADAPTER: adapter });
      await waitFor(() => a.server.redis?.isUp && b.server.redis?.isUp, { what: 'both Redis links' });
    });

    after(async () => {
      await a?.stop();
      await b?.stop();
    });

    it("delivers each message once to the organization's agents on both instances, and to no other organization", async () => {
      const owner = await signUp(a.server, a.baseUrl);
      const other = await signUp(a.server, a.baseUrl);
      const agentOnA = await connectOk(a.baseUrl, owner.orgId, owner.accessToken);
      const agentOnB = await connectOk(b.baseUrl, owner.orgId, owner.accessToken);
      const strangerOnB = await connectOk(b.baseUrl, other.orgId, other.accessToken);
      const visitor = await newVisitor(owner);
      const visitorOnB = await connectOk(b.baseUrl, owner.orgId, visitor.token);
      try {
        const { conversationId } = await startConversation(visitor);
        const onA = collect(agentOnA, 'new_message');
        const onB = collect(agentOnB, 'new_message');
        const stranger = collect(strangerOnB, 'new_message');
        for (const content of ['one', 'two', 'three']) expect((await request(visitorOnB, 'send_message', { conversationId, content })).success).to.equal(true);
        // The conversation's opening message may still be on its way when the collectors start.
        const sent = (received: typeof onA) => received.map((p) => p.message.content).filter((c) => c !== 'Hello, I need help');
        await waitFor(() => sent(onA).length >= 3 && sent(onB).length >= 3, { what: 'the messages on both instances' });
        await settle(300);
        expect(sent(onA)).to.deep.equal(['one', 'two', 'three']);
        expect(sent(onB)).to.deep.equal(['one', 'two', 'three']);
        expect(stranger).to.be.empty;
      } finally {
        for (const s of [agentOnA, agentOnB, strangerOnB, visitorOnB]) s.close();
      }
    });

    if (adapter === 'sharded') {
      it("subscribes to an organization's rooms while it holds their sockets, and lets go after", async () => {
        const owner = await signUp(a.server, a.baseUrl);
        const redis = new Redis(process.env.REDIS_URL!);
        const channels = async () => (await redis.call('PUBSUB', 'SHARDCHANNELS', `socket.io#/orgs/${owner.orgId}#*`)) as string[];
        try {
          const agent = await connectOk(b.baseUrl, owner.orgId, owner.accessToken);
          await waitFor(async () => (await channels()).some((c) => c.endsWith('#agents#')), { what: "the organization's agents channel" });
          expect(await channels()).to.satisfy((c: string[]) => c.some((x) => x.includes(`#user:${owner.userId}#`)));
          agent.close();
          // The namespace's own channels stay while it lives (an emit-only namespace outlives the last socket by a
          // minute: the agent going offline is announced through it); the rooms' channels go with their sockets.
          const rooms = async () => (await channels()).filter((c) => /#(agents|user:[^#]+|session:[^#]+)#$/.test(c));
          await waitFor(async () => (await rooms()).length === 0, { what: "the organization's room channels released" });
        } finally {
          redis.disconnect();
        }
      });
    }
  });
}
