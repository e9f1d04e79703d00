// Redis outages: instances stay up, answer what they can, say so once, and resume by themselves.
import { expect } from 'chai';
import { Api } from './helpers/http.js';
import { addMember, signUp, uniqueEmail, PASSWORD } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { captureLogs, unhandledRejections, type CapturedLogs } from './helpers/logs.js';
import { redisServerAvailable, testRedis, type TestRedis } from './helpers/redis.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { collect, connectOk, disconnected, nextEvent, refusal, request, settle, type ClientSocket } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

/** Readiness with a client-side bound: a hanging probe fails the test instead of stalling it. */
async function ready(api: Api) {
  const res = await fetch(`${api.baseUrl}/api/v1/health/ready`, { signal: AbortSignal.timeout(3_000) });
  return { status: res.status, body: (await res.json()) as any };
}

const outageWarnings = (logs: CapturedLogs) => logs.lines.filter((l) => l.level === 40 && l.variable === 'REDIS_URL');

describe('Redis outage on one instance', function () {
  this.timeout(60_000);
  let redis: TestRedis;
  let app: TestServer;
  let logs: CapturedLogs;
  const sockets: ClientSocket[] = [];
  const rejections = unhandledRejections();

  before(async function () {
    if (!redisServerAvailable()) this.skip();
    rejections.start();
    redis = await testRedis();
    logs = captureLogs();
    app = await startTestServer({ REDIS_URL: redis.url }, { logger: logs.logger });
    await waitFor(() => app.server.redis?.isUp, { what: 'the Redis link' });
  });

  after(async () => {
    rejections.stop();
    for (const s of sockets) s.close();
    await app?.stop();
    await redis?.stop();
  });

  it('keeps serving REST and local sockets, refuses readiness with each dependency, limits per instance, logs once, and resumes', async () => {
    const api = new Api(app.baseUrl);
    const owner = await signUp(app.server, app.baseUrl);
    const agent = await connectOk(app.baseUrl, owner.orgId, owner.accessToken);
    sockets.push(agent);
    const visitor = await newVisitor(owner);
    const visitorSocket = await connectOk(app.baseUrl, owner.orgId, visitor.token);
    sockets.push(visitorSocket);
    const { conversationId } = await startConversation(visitor);
    expect((await ready(api)).status).to.equal(200);
    // Shared rate limits live in Redis while it is there.
    const probe = redis.client();
    try {
      const before = await api.post('/auth/login', { email: owner.email, password: PASSWORD });
      expect(before.status).to.equal(200);
      expect(await probe.keys('rl:login:email:*')).to.not.be.empty;
    } finally {
      probe.disconnect();
    }

    await redis.stop();
    await waitFor(() => app.server.redis?.isUp === false, { what: 'the link to notice the outage' });

    // Alive, and not ready: the body names each dependency.
    expect((await api.get('/health')).status).to.equal(200);
    const notReady = await ready(api);
    expect(notReady.status).to.equal(503);
    expect(notReady.body.error.code).to.equal('service_unavailable');
    const details = Object.fromEntries(notReady.body.error.details.map((d: any) => [d.field, d.status]));
    expect(details).to.deep.equal({ database: 'up', redis: 'down' });

    // Rate-limited routes answer (no 500) and still limit, per instance: login allows 10 per email and window.
    const email = uniqueEmail('limited');
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await api.post('/auth/login', { email, password: 'wrong password' })).status);
    expect(statuses.slice(0, 10)).to.deep.equal(Array(10).fill(401));
    expect(statuses[10]).to.equal(429);
    const token = await api.post('/widget/auth/token', { publicKey: visitor.publicKey });
    expect(token.status).to.equal(201);

    // Messages are stored and reach sockets on this instance, both ways.
    const toAgent = nextEvent(agent, 'new_message', (p) => p.message.content === 'during the outage');
    const ack = await request(visitorSocket, 'send_message', { conversationId, content: 'during the outage', clientMessageId: 'outage-1' });
    expect(ack.success, JSON.stringify(ack)).to.equal(true);
    expect((await toAgent).conversationId).to.equal(conversationId);
    const toVisitor = nextEvent(visitorSocket, 'new_message', (p) => p.message.content === 'agent reply');
    const reply = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'agent reply' }, { token: owner.accessToken });
    expect(reply.status).to.equal(201);
    await toVisitor;

    // Presence falls back to what this instance knows: the connected owner is online.
    expect(await app.server.presence.isOnline(owner.orgId, owner.userId)).to.equal(true);

    // A session remembered from a handshake and a request during the outage is refused at once once logged out.
    const second = (await api.post('/auth/login', { email: owner.email, password: PASSWORD })).body.data.accessToken;
    (await connectOk(app.baseUrl, owner.orgId, second)).close();
    expect((await api.get('/contacts', { token: second })).status).to.equal(200);
    expect((await api.post('/auth/logout', {}, { token: second })).status).to.equal(200);
    expect(await refusal(app.baseUrl, owner.orgId, second)).to.equal('unauthorized');
    expect((await api.get('/contacts', { token: second })).status).to.equal(401);

    // A few seconds more of outage, as in the field: still no exit, still serving.
    await settle(3_000);
    expect((await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken })).body.data.messages.map((m: any) => m.content)).to.include.members([
      'during the outage',
      'agent reply',
    ]);

    await redis.start();
    await waitFor(async () => (await ready(api)).status === 200, { timeoutMs: 15_000, what: 'readiness after Redis came back' });
    expect(outageWarnings(logs)).to.have.length(1);
    expect(outageWarnings(logs)[0]!.msg).to.match(/REDIS_URL/);
    expect(logs.matching(30, 'reachable again')).to.have.length(1);
    expect(rejections.reasons, 'unhandled rejections').to.be.empty;

    // Back on shared state: the rate limit keys and this instance's presence tally are in Redis again.
    const after = redis.client();
    try {
      await api.post('/auth/login', { email: owner.email, password: PASSWORD });
      expect(await after.keys('rl:login:email:*')).to.not.be.empty;
      await waitFor(async () => Number(Object.values(await after.hgetall(`presence:${owner.orgId}:user:${owner.userId}`))[0]) === 1, { what: 'presence resynced' });
    } finally {
      after.disconnect();
    }
  });
});

describe('Redis unreachable when the instance starts', function () {
  this.timeout(60_000);
  let redis: TestRedis;
  let app: TestServer;
  let logs: CapturedLogs;
  const rejections = unhandledRejections();

  before(async function () {
    if (!redisServerAvailable()) this.skip();
    rejections.start();
    redis = await testRedis({ start: false });
  });

  after(async () => {
    rejections.stop();
    await app?.stop();
    await redis?.stop();
  });

  it('starts anyway, reports not ready naming REDIS_URL, and connects when Redis comes', async () => {
    logs = captureLogs();
    app = await startTestServer({ REDIS_URL: redis.url }, { logger: logs.logger });
    const api = new Api(app.baseUrl);
    const notReady = await ready(api);
    expect(notReady.status).to.equal(503);
    expect(notReady.body.error.details.find((d: any) => d.field === 'redis').status).to.equal('down');
    await waitFor(() => outageWarnings(logs).length > 0, { what: 'a warning naming REDIS_URL' });
    // Serving already: a whole signup and a visitor's first message.
    const owner = await signUp(app.server, app.baseUrl);
    const visitor = await newVisitor(owner);
    await startConversation(visitor);

    // Well past the point where queued commands used to give up and take the process down.
    await settle(7_000);
    await redis.start();
    await waitFor(async () => (await ready(api)).status === 200, { timeoutMs: 15_000, what: 'readiness once Redis is there' });
    expect(outageWarnings(logs)).to.have.length(1);
    expect(rejections.reasons, 'unhandled rejections').to.be.empty;
    const agent = await connectOk(app.baseUrl, owner.orgId, owner.accessToken);
    try {
      const probe = redis.client();
      try {
        await waitFor(async () => (await probe.exists(`presence:${owner.orgId}:user:${owner.userId}`)) === 1, { what: 'presence written to Redis' });
      } finally {
        probe.disconnect();
      }
    } finally {
      agent.close();
    }
  });
});

describe('Redis outage between two instances', function () {
  this.timeout(90_000);
  let redis: TestRedis;
  let a: TestServer;
  let b: TestServer;
  const sockets: ClientSocket[] = [];
  const rejections = unhandledRejections();

  before(async function () {
    // Two instances share one database only on a real PostgreSQL.
    if (!process.env.DATABASE_URL || !redisServerAvailable()) this.skip();
    rejections.start();
    redis = await testRedis();
    a = await startTestServer({ REDIS_URL: redis.url });
    b = await startTestServer({ REDIS_URL: redis.url });
    await waitFor(() => a.server.redis?.isUp && b.server.redis?.isUp, { what: 'both Redis links' });
  });

  after(async () => {
    rejections.stop();
    for (const s of sockets) s.close();
    await a?.stop();
    await b?.stop();
    await redis?.stop();
  });

  it('loses no acknowledged message while Redis is down, refuses a session and a member revoked on the other instance within moments, and resumes', async () => {
    const owner = await signUp(a.server, a.baseUrl);
    const agentOnA = await connectOk(a.baseUrl, owner.orgId, owner.accessToken);
    sockets.push(agentOnA);
    // A second session of the owner, held on B, that will be logged out through A during the outage.
    const login = await new Api(a.baseUrl).post('/auth/login', { email: owner.email, password: PASSWORD });
    const otherSession = await connectOk(b.baseUrl, owner.orgId, login.body.data.accessToken);
    sockets.push(otherSession);
    const agent = await addMember(a.server, owner, 'agent');
    const onB = new Api(b.baseUrl);
    const visitor = await newVisitor(owner);
    const visitorOnB = await connectOk(b.baseUrl, owner.orgId, visitor.token);
    sockets.push(visitorOnB);
    const { conversationId } = await startConversation(visitor);
    // Held on B through the outage: the owner's own session and a bot whose key stays live must keep their sockets;
    // the agent suspended and the key revoked through A meanwhile must lose theirs once the link is back.
    const keys: { id: string; token: string }[] = [];
    for (const name of ['Revoked bot', 'Live bot']) {
      const created = await owner.api.post('/api-keys', { name, scopes: ['conversations:read'] }, { token: owner.accessToken });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      keys.push({ id: created.body.data.apiKey.id as string, token: created.body.data.token as string });
    }
    const [revokedBotOnB, liveBotOnB, ownerOnB, agentSocketOnB] = await Promise.all(
      [keys[0]!.token, keys[1]!.token, owner.accessToken, agent.accessToken].map((token) => connectOk(b.baseUrl, owner.orgId, token)),
    );
    sockets.push(revokedBotOnB!, liveBotOnB!, ownerOnB!, agentSocketOnB!);
    const crossed = nextEvent(agentOnA, 'new_message', (p) => p.message.content === 'before');
    expect((await request(visitorOnB, 'send_message', { conversationId, content: 'before', clientMessageId: 'm-before' })).success).to.equal(true);
    await crossed;

    await redis.stop();
    await waitFor(() => a.server.redis?.isUp === false && b.server.redis?.isUp === false, { what: 'both links to notice' });
    // Messages keep flowing through B for three seconds; every one acknowledged must be stored.
    const acked: string[] = [];
    const until = Date.now() + 3_000;
    for (let i = 0; Date.now() < until; i++) {
      const ack = await request(visitorOnB, 'send_message', { conversationId, content: `outage ${i}`, clientMessageId: `m-outage-${i}` });
      if (ack.success) acked.push(`outage ${i}`);
      await settle(100);
    }
    expect(acked.length).to.be.greaterThan(5);
    // B remembers the second session and the agent from a handshake and a request made just now; revocations made
    // through A reach it through PostgreSQL, not Redis, so B refuses both at once on either path.
    const otherToken = login.body.data.accessToken;
    for (const token of [otherToken, agent.accessToken]) {
      (await connectOk(b.baseUrl, owner.orgId, token)).close();
      expect((await onB.get('/contacts', { token })).status).to.equal(200);
    }
    expect((await new Api(a.baseUrl).post('/auth/logout', {}, { token: otherToken })).status).to.equal(200);
    // PostgreSQL hands the notice to every listening connection as the logout commits; B acts on it as soon as its
    // event loop reads it, which can be a few milliseconds after A has answered.
    await waitFor(async () => (await refusal(b.baseUrl, owner.orgId, otherToken)) === 'unauthorized', { timeoutMs: 2_000, what: 'B to refuse the logged-out session' });
    expect((await onB.get('/contacts', { token: otherToken })).status).to.equal(401);
    const suspended = await owner.api.patch(`/memberships/organizations/${owner.orgId}/members/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken });
    expect(suspended.status).to.equal(200);
    await waitFor(async () => (await refusal(b.baseUrl, owner.orgId, agent.accessToken)) === 'forbidden', { timeoutMs: 2_000, what: 'B to refuse the suspended member' });
    expect((await onB.get('/contacts', { token: agent.accessToken })).status).to.equal(403);
    expect((await owner.api.delete(`/api-keys/${keys[0]!.id}`, { token: owner.accessToken })).status).to.equal(200);
    // Nothing told B's sockets yet: the disconnects travel through Redis.
    expect([revokedBotOnB!.connected, agentSocketOnB!.connected]).to.deep.equal([true, true]);

    await redis.start();
    await waitFor(() => a.server.redis?.isUp && b.server.redis?.isUp, { timeoutMs: 15_000, what: 'both links back' });
    // The logout made during the outage reaches B's socket once the link is back.
    await disconnected(otherSession, 10_000);
    // B checks its agent and bot sockets against the database: the suspended member and the revoked key go.
    await disconnected(agentSocketOnB!, 10_000);
    await disconnected(revokedBotOnB!, 10_000);
    // Fan-out resumes by itself: a message through B reaches the agent on A again.
    const again = nextEvent(agentOnA, 'new_message', (p) => p.message.content === 'after', 10_000);
    const late = collect(agentOnA, 'new_message');
    await waitFor(async () => {
      if (late.some((p) => p.message.content === 'after')) return true;
      const ack = await request(visitorOnB, 'send_message', { conversationId, content: 'after', clientMessageId: 'm-after' });
      expect(ack.success).to.equal(true);
      await settle(300);
      return late.some((p) => p.message.content === 'after');
    }, { timeoutMs: 15_000, what: 'fan-out to resume' });
    await again;

    const stored = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
    const contents = stored.body.data.messages.map((m: any) => m.content);
    expect(contents).to.include.members(acked);
    const seqs = stored.body.data.messages.map((m: any) => m.seq);
    expect(seqs).to.deep.equal(seqs.map((_: number, i: number) => i + 1));
    expect(rejections.reasons, 'unhandled rejections').to.be.empty;
    // A live session with an accepted membership, and a live key, kept their sockets through it all.
    expect([ownerOnB!.connected, liveBotOnB!.connected]).to.deep.equal([true, true]);
  });
});
