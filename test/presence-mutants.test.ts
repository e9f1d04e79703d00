// Presence as agents and routing see it: one instance from memory, instances over Redis (a crashed instance's counts,
// this instance's own count, an outage's fallback and the counts written again after it).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { RedisPresence } from '../server/presence.js';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { redisServerAvailable, testRedis, type TestRedis } from './helpers/redis.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { collect, connectOk, disconnected, nextEvent, settle, type ClientSocket } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

/** What the organization sees of an agent: the profile's status (offline without a socket anywhere). */
async function statusOf(member: Member | SignedUp): Promise<string> {
  const res = await member.api.get('/agent/profile', { token: member.accessToken });
  expect(res.status, JSON.stringify(res.body)).to.equal(200);
  return res.body.data.status as string;
}

const sorted = (ids: string[]) => [...ids].sort();

describe('presence of one instance without Redis (from memory)', function () {
  this.timeout(60_000);
  let app: TestServer;
  const sockets: ClientSocket[] = [];

  before(async () => {
    app = await startTestServer({ REDIS_URL: undefined });
  });

  after(async () => {
    for (const s of sockets) s.close();
    await app?.stop();
  });

  it('counts each socket: online on the first, still online while one is left, offline on the last; the list routing reads agrees', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const agent = await addMember(app.server, owner, 'agent');
    expect(await app.server.presence.onlineUsers(owner.orgId), 'nobody connected').to.deep.equal([]);
    const watcher = await connectOk(app.baseUrl, owner.orgId, owner.accessToken);
    sockets.push(watcher);
    await waitFor(() => app.server.presence.isOnline(owner.orgId, owner.userId), { what: 'the owner online' });

    const online = nextEvent(watcher, 'user_status_update', (p) => p.userId === agent.userId);
    const first = await connectOk(app.baseUrl, owner.orgId, agent.accessToken);
    sockets.push(first);
    expect(await online).to.deep.equal({ userId: agent.userId, status: 'online' });
    const heard = collect(watcher, 'user_status_update');
    const second = await connectOk(app.baseUrl, owner.orgId, agent.accessToken);
    const third = await connectOk(app.baseUrl, owner.orgId, agent.accessToken);
    sockets.push(second, third);
    expect(sorted(await app.server.presence.onlineUsers(owner.orgId))).to.deep.equal(sorted([owner.userId, agent.userId]));

    // Two of three sockets close: the agent is still online, and nobody is told otherwise.
    first.close();
    second.close();
    await Promise.all([disconnected(first), disconnected(second)]);
    await settle(300);
    expect(heard.filter((p) => p.userId === agent.userId), 'sockets left keep the agent online').to.deep.equal([]);
    expect(await statusOf(agent)).to.equal('online');
    expect(await app.server.presence.isOnline(owner.orgId, agent.userId)).to.equal(true);

    const offline = nextEvent(watcher, 'user_status_update', (p) => p.userId === agent.userId);
    third.close();
    expect(await offline).to.deep.equal({ userId: agent.userId, status: 'offline' });
    expect(await statusOf(agent)).to.equal('offline');
    expect(await app.server.presence.onlineUsers(owner.orgId), 'the agent left the list').to.deep.equal([owner.userId]);

    // Back with a new socket: online again, announced again.
    const again = nextEvent(watcher, 'user_status_update', (p) => p.userId === agent.userId);
    sockets.push(await connectOk(app.baseUrl, owner.orgId, agent.accessToken));
    expect(await again).to.deep.equal({ userId: agent.userId, status: 'online' });

    // The last socket of the organization gone: no one is listed.
    const ownerGone = nextEvent(sockets.at(-1)!, 'user_status_update', (p) => p.userId === owner.userId);
    watcher.close();
    expect(await ownerGone).to.deep.equal({ userId: owner.userId, status: 'offline' });
    expect(await app.server.presence.onlineUsers(owner.orgId)).to.deep.equal([agent.userId]);
  });

  it('a disconnect never counted leaves nobody online and does not hold back the next connect', async () => {
    const orgId = randomUUID();
    const userId = randomUUID();
    const presence = app.server.presence;
    expect(await presence.disconnected(orgId, userId), 'nobody of this organization was counted').to.equal(false);
    expect(await presence.isOnline(orgId, userId)).to.equal(false);
    expect(await presence.connected(orgId, userId), 'the first socket').to.equal(true);
    expect(await presence.connected(orgId, userId), 'a second socket').to.equal(false);
    expect(await presence.disconnected(orgId, userId), 'one socket left').to.equal(false);
    expect(await presence.isOnline(orgId, userId)).to.equal(true);
    expect(await presence.disconnected(orgId, userId), 'the last socket').to.equal(true);
    expect(await presence.isOnline(orgId, userId)).to.equal(false);
    expect(await presence.onlineUsers(orgId)).to.deep.equal([]);
    expect(await presence.connected(orgId, userId), 'online again').to.equal(true);
    expect(await presence.onlineUsers(orgId)).to.deep.equal([userId]);
    expect(await presence.disconnected(orgId, userId)).to.equal(true);
  });
});

describe('presence across instances over Redis', function () {
  this.timeout(60_000);
  let app: TestServer;
  let probe: Redis;
  const sockets: ClientSocket[] = [];

  before(async function () {
    if (!process.env.REDIS_URL) this.skip();
    app = await startTestServer();
    await waitFor(() => app.server.redis?.isUp, { what: 'the Redis link' });
    probe = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 1 });
  });

  after(async () => {
    for (const s of sockets) s.close();
    probe?.disconnect();
    await app?.stop();
  });

  it("ignores a crashed instance's counts, counts a live one's, and always its own", async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const agent = await addMember(app.server, owner, 'agent');
    const watcher = await connectOk(app.baseUrl, owner.orgId, owner.accessToken);
    sockets.push(watcher);
    await waitFor(() => app.server.presence.isOnline(owner.orgId, owner.userId), { what: 'the owner online' });
    // Another instance wrote two sockets of the agent, then died: its heartbeat key is gone.
    const other = randomUUID();
    const userKey = `presence:${owner.orgId}:user:${agent.userId}`;
    await probe.multi().hset(userKey, other, '2').sadd(`presence:${owner.orgId}:users`, agent.userId).exec();
    expect(await statusOf(agent), "a dead instance's sockets").to.equal('offline');
    expect(await app.server.presence.onlineUsers(owner.orgId)).to.deep.equal([owner.userId]);

    // This instance's first socket of the agent is the first anywhere: announced; its last, announced offline.
    const online = nextEvent(watcher, 'user_status_update', (p) => p.userId === agent.userId);
    const socket = await connectOk(app.baseUrl, owner.orgId, agent.accessToken);
    expect(await online).to.deep.equal({ userId: agent.userId, status: 'online' });
    const offline = nextEvent(watcher, 'user_status_update', (p) => p.userId === agent.userId);
    socket.close();
    expect(await offline).to.deep.equal({ userId: agent.userId, status: 'offline' });

    // The other instance is alive after all (its heartbeat is back): its two sockets count.
    await probe.set(`presence:instance:${other}`, '1', 'EX', 30);
    expect(await statusOf(agent), "a live instance's sockets").to.equal('online');
    expect(sorted(await app.server.presence.onlineUsers(owner.orgId))).to.deep.equal(sorted([owner.userId, agent.userId]));
    // A socket here now is not the first anywhere (nothing announced), and closing it is not the last.
    const heard = collect(watcher, 'user_status_update');
    const here = await connectOk(app.baseUrl, owner.orgId, agent.accessToken);
    here.close();
    await disconnected(here);
    await settle(300);
    expect(heard.filter((p) => p.userId === agent.userId)).to.deep.equal([]);

    // This instance's own count counts even while its heartbeat key is missing (a Redis that lost its data).
    await probe.del(`presence:instance:${other}`);
    const mine = `presence:instance:${(app.server.presence as RedisPresence).instanceId}`;
    await probe.del(mine);
    expect(await app.server.presence.isOnline(owner.orgId, owner.userId), 'the owner, connected here').to.equal(true);
    expect(await app.server.presence.onlineUsers(owner.orgId)).to.deep.equal([owner.userId]);
    await probe.set(mine, '1', 'EX', 30);
  });
});

describe('presence through a Redis outage', function () {
  this.timeout(60_000);
  let redis: TestRedis;
  let app: TestServer;
  const sockets: ClientSocket[] = [];

  before(async function () {
    if (!redisServerAvailable()) this.skip();
    redis = await testRedis();
    app = await startTestServer({ REDIS_URL: redis.url });
    await waitFor(() => app.server.redis?.isUp, { what: 'the Redis link' });
  });

  after(async () => {
    for (const s of sockets) s.close();
    await app?.stop();
    await redis?.stop();
  });

  it("answers from this instance's sockets while Redis is away, and writes every count again when it is back", async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const [leaver, newcomer] = [await addMember(app.server, owner, 'agent'), await addMember(app.server, owner, 'agent')];
    const watcher = await connectOk(app.baseUrl, owner.orgId, owner.accessToken);
    const leaving = await connectOk(app.baseUrl, owner.orgId, leaver.accessToken);
    sockets.push(watcher, leaving);
    const presence = app.server.presence as RedisPresence;
    const key = (userId: string) => `presence:${owner.orgId}:user:${userId}`;
    const look = redis.client();
    try {
      await waitFor(async () => (await look.hget(key(leaver.userId), presence.instanceId)) === '1', { what: 'the leaver counted in Redis' });
    } finally {
      look.disconnect();
    }

    await redis.stop();
    await waitFor(() => app.server.redis?.isUp === false, { what: 'the link to notice the outage' });
    expect(sorted(await presence.onlineUsers(owner.orgId)), 'from this instance').to.deep.equal(sorted([owner.userId, leaver.userId]));
    // One agent leaves and another comes during the outage: both told, from this instance's view.
    const offline = nextEvent(watcher, 'user_status_update', (p) => p.userId === leaver.userId);
    leaving.close();
    expect(await offline).to.deep.equal({ userId: leaver.userId, status: 'offline' });
    const online = nextEvent(watcher, 'user_status_update', (p) => p.userId === newcomer.userId);
    sockets.push(await connectOk(app.baseUrl, owner.orgId, newcomer.accessToken));
    expect(await online).to.deep.equal({ userId: newcomer.userId, status: 'online' });
    expect(sorted(await presence.onlineUsers(owner.orgId))).to.deep.equal(sorted([owner.userId, newcomer.userId]));
    expect(await presence.isOnline(owner.orgId, leaver.userId)).to.equal(false);

    await redis.start();
    await waitFor(() => app.server.redis?.isUp, { timeoutMs: 15_000, what: 'the link back' });
    const after = redis.client();
    try {
      // The leaver's count is written as 0 (not left at 1), the newcomer's as 1 and listed in the organization's set.
      await waitFor(async () => (await after.hget(key(newcomer.userId), presence.instanceId)) === '1', { what: 'the newcomer written' });
      expect(await after.hget(key(leaver.userId), presence.instanceId)).to.equal('0');
      expect(await after.hget(key(owner.userId), presence.instanceId)).to.equal('1');
      expect(await after.sismember(`presence:${owner.orgId}:users`, newcomer.userId)).to.equal(1);
      expect(await after.exists(`presence:instance:${presence.instanceId}`), 'the heartbeat written again').to.equal(1);
    } finally {
      after.disconnect();
    }
    // Answered from Redis again: the same view.
    expect(sorted(await presence.onlineUsers(owner.orgId))).to.deep.equal(sorted([owner.userId, newcomer.userId]));
    expect(await statusOf(leaver)).to.equal('offline');
    expect(await statusOf(newcomer)).to.equal('online');
  });
});
