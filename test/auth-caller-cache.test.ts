// REST and the agents' socket handshake remember an access token's caller for a moment; ending access must still take
// effect on the very next request or handshake, on this instance and on every other one sharing the database, and an
// agent's chosen availability must replace the remembered one.
import { randomUUID } from 'node:crypto';
import { connect as connectTcp, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import knexModule from 'knex';
import { expect } from 'chai';
import { REVOCATION_CHANNEL, REVOCATION_LISTENER, Revocations } from '../server/auth/revocations.js';
import { sharedServer } from './helpers/hooks.js';
import { addMember, PASSWORD, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { expectApiError, expectApiSuccess, jwtPayload, login } from './helpers/auth.js';
import { Api, type ApiResponse } from './helpers/http.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { connectOk, disconnected, nextEvent, refusal, request, type ClientSocket } from './helpers/sockets.js';
import { newVisitor } from './helpers/live.js';
import { CallerCache } from '../server/auth/callerCache.js';
import { DomainEventBus } from '../server/events.js';
import type { AppServer } from '../server/server.js';
import { waitFor } from './helpers/wait.js';
import { withClockAhead } from './helpers/clock.js';
import { captureLogs } from './helpers/logs.js';

const knexFactory = (knexModule as unknown as { knex: typeof knexModule }).knex ?? knexModule;

const members = (orgId: string) => `/memberships/organizations/${orgId}/members`;

/** Counts the server's own reads of each operator token (the resolver the cache must spare), until `restore`. */
function countOperatorReads(actors: AppServer['services']['actors']): { readsOf(token: string): number; restore(): void } {
  const { operator } = actors;
  const reads: string[] = [];
  actors.operator = function (token) {
    reads.push(token);
    return operator.call(this, token);
  };
  return { readsOf: (token) => reads.filter((t) => t === token).length, restore: () => Object.assign(actors, { operator }) };
}

/** B's listening connection's socket (the one revocations from other instances arrive on), to read it late. */
function listeningSocket(server: TestServer): Socket {
  const callers = server.server.services.callers as unknown as { revocations: { client: { connection: { stream: Socket } } | null } };
  const client = callers.revocations.client;
  if (!client) throw new Error('the instance is not listening');
  return client.connection.stream;
}

/** Counts the queries written on `socket` (PostgreSQL's simple-query messages, type 'Q') until `stop()`. */
function countQueries(socket: Socket): { stop(): number } {
  const write = socket.write;
  let queries = 0;
  socket.write = function (this: Socket, chunk: unknown, ...rest: unknown[]) {
    if (Buffer.isBuffer(chunk) && chunk[0] === 0x51) queries += 1;
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as Socket['write'];
  return {
    stop() {
      socket.write = write;
      return queries;
    },
  };
}

/** The status the agents' sockets are told when `userId` connects with `token` (then the socket is closed). */
async function statusOnConnect(watcher: ClientSocket, baseUrl: string, orgId: string, userId: string, token: string): Promise<string> {
  // An offline still on its way (the last socket, or a choice made while offline) is not this connection's.
  const told = nextEvent(watcher, 'user_status_update', (p) => p.userId === userId && p.status !== 'offline');
  const socket = await connectOk(baseUrl, orgId, token);
  try {
    return (await told).status;
  } finally {
    const offline = nextEvent(watcher, 'user_status_update', (p) => p.userId === userId && p.status === 'offline');
    socket.close();
    await offline;
  }
}

/** A TCP relay to the database whose connections the test can cut (and refuse new ones) and then let through again. */
async function databaseRelay(databaseUrl: string): Promise<{ url: string; cut(): void; restore(): Promise<void>; close(): Promise<void> }> {
  const target = new URL(databaseUrl);
  const open = new Set<Socket>();
  const relay = createNetServer((inbound) => {
    const outbound = connectTcp(Number(target.port || 5432), target.hostname);
    for (const [from, to] of [[inbound, outbound], [outbound, inbound]] as const) {
      open.add(from);
      from.pipe(to);
      from.on('error', () => to.destroy());
      from.on('close', () => {
        open.delete(from);
        to.destroy();
      });
    }
  });
  const listen = (port: number) => new Promise<void>((resolve, reject) => relay.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
  await listen(0);
  const port = (relay.address() as AddressInfo).port;
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    cut() {
      relay.close();
      for (const socket of open) socket.destroy();
    },
    async restore() {
      if (!relay.listening) await listen(port);
    },
    close: () => new Promise<void>((resolve) => {
      for (const socket of open) socket.destroy();
      relay.close(() => resolve());
    }),
  };
}

/** Several reads with one token, so its caller is remembered if it is going to be. */
async function warm(api: Api, token: string): Promise<void> {
  for (let i = 0; i < 3; i++) expectApiSuccess(await api.get('/contacts', { token }), 200);
}

describe('auth: remembered callers', () => {
  it('remembers callers on this instance', async () => {
    const { server } = sharedServer();
    await waitFor(() => server.services.callers.live, { what: 'the caller cache to hear revocations' });
  });

  it('reads a caller once for a burst of requests and handshakes with one token, and again once the moment has passed', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const key = expectApiSuccess(await owner.api.post('/api-keys', { name: 'Inbox bot', scopes: ['conversations:read', 'contacts:read'] }, { token: owner.accessToken }), 201);
    // The resolver itself, counted: the cache must spare it, not replace it.
    const actors = server.services.actors;
    const { operator, fromToken } = actors;
    const reads: string[] = [];
    actors.operator = function (token) {
      reads.push(token);
      return operator.call(this, token);
    };
    actors.fromToken = function (token, kind) {
      reads.push(token);
      return fromToken.call(this, token, kind);
    };
    const readsOf = (token: string) => reads.filter((t) => t === token).length;
    try {
      const { accessToken } = await login(new Api(baseUrl), owner.email, PASSWORD);
      await warm(owner.api, accessToken);
      (await connectOk(baseUrl, owner.orgId, accessToken)).close();
      expect(readsOf(accessToken)).to.equal(1);
      // A key is read every time (its revocation has its own path).
      for (let i = 0; i < 2; i++) expectApiSuccess(await owner.api.get('/contacts', { token: key.token }), 200);
      expect(readsOf(key.token)).to.equal(2);
      await withClockAhead(11, async () => {
        await warm(owner.api, accessToken);
        expect(readsOf(accessToken)).to.equal(2);
      });
    } finally {
      Object.assign(actors, { operator, fromToken });
    }
  });

  it('a lookup that an availability change overtakes takes the change, and is remembered all the same', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const otherDevice = await login(new Api(baseUrl), agent.email, PASSWORD);
    const watcher = await connectOk(baseUrl, owner.orgId, owner.accessToken);
    const actors = server.services.actors;
    const { operator } = actors;
    let reads = 0;
    // The agent's first handshake reads the database; before that answer is used, the agent picks busy elsewhere.
    actors.operator = async function (token) {
      if (token !== agent.accessToken) return operator.call(this, token);
      reads += 1;
      const actor = await operator.call(this, token);
      if (reads === 1) expectApiSuccess(await agent.api.patch('/agent/status', { status: 'busy' }, { token: otherDevice.accessToken }), 200);
      return actor;
    };
    try {
      expect(await statusOnConnect(watcher, baseUrl, owner.orgId, agent.userId, agent.accessToken)).to.equal('busy');
      expect(await statusOnConnect(watcher, baseUrl, owner.orgId, agent.userId, agent.accessToken)).to.equal('busy');
      expect(reads).to.equal(1);
    } finally {
      Object.assign(actors, { operator });
      watcher.close();
    }
  });

  it('a lookup that a revocation overtakes answers what it read, and is not remembered', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const actors = server.services.actors;
    const { operator } = actors;
    let reads = 0;
    // The agent's first request reads an accepted membership; the agent is suspended before that answer is used.
    actors.operator = async function (token) {
      if (token !== agent.accessToken) return operator.call(this, token);
      reads += 1;
      const actor = await operator.call(this, token);
      if (reads === 1) expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
      return actor;
    };
    try {
      expectApiSuccess(await agent.api.get('/contacts', { token: agent.accessToken }), 200);
      expectApiError(await agent.api.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
      expect(reads).to.equal(2);
    } finally {
      Object.assign(actors, { operator });
    }
  });

  it('never answers from memory past the token\'s expiry', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    await warm(owner.api, owner.accessToken);
    (await connectOk(baseUrl, owner.orgId, owner.accessToken)).close();
    const left = jwtPayload(owner.accessToken).exp - Date.now() / 1000;
    await withClockAhead(left + 1, async () => {
      expectApiError(await owner.api.get('/contacts', { token: owner.accessToken }), 401, 'unauthorized');
      expect(await refusal(baseUrl, owner.orgId, owner.accessToken)).to.equal('unauthorized');
    });
  });

  it("never answers from memory past the session's end, when the session ends before the token expires", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const session = await login(new Api(baseUrl), owner.email, PASSWORD);
    // The session ends in 2 s, within the moment a caller is remembered (10 s) and long before its access token expires.
    await server.db.knex('auth_sessions').update({ expires_at: new Date(Date.now() + 2_000) }).where({ id: jwtPayload(session.accessToken).sid });
    await warm(owner.api, session.accessToken);
    (await connectOk(baseUrl, owner.orgId, session.accessToken)).close();
    await withClockAhead(3, async () => {
      expectApiError(await owner.api.get('/contacts', { token: session.accessToken }), 401, 'unauthorized');
      expect(await refusal(baseUrl, owner.orgId, session.accessToken)).to.equal('unauthorized');
      // The owner's other session lives on.
      expectApiSuccess(await owner.api.get('/contacts', { token: owner.accessToken }), 200);
    });
  });

  it('drops only the callers a revocation names: the others are still answered from memory', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const colleague = await addMember(server, owner, 'agent');
    const staying = await login(new Api(baseUrl), owner.email, PASSWORD);
    const leaving = await login(new Api(baseUrl), owner.email, PASSWORD);
    const created = expectApiSuccess(await owner.api.post('/organizations', { name: 'Second desk' }, { token: owner.accessToken }), 201);
    const actors = server.services.actors;
    const { readsOf, restore } = countOperatorReads(actors);
    try {
      for (const token of [agent.accessToken, colleague.accessToken, staying.accessToken, leaving.accessToken]) await warm(owner.api, token);
      const kept = [colleague.accessToken, staying.accessToken];
      const stillRemembered = async (what: string) => {
        for (const token of kept) {
          const before = readsOf(token);
          expectApiSuccess(await owner.api.get('/contacts', { token }), 200);
          expect(readsOf(token), what).to.equal(before);
        }
      };
      await stillRemembered('warmed');
      // A logout names its session, not the user's other sessions.
      expectApiSuccess(await owner.api.post('/auth/logout', {}, { token: leaving.accessToken }), 200);
      expectApiError(await owner.api.get('/contacts', { token: leaving.accessToken }), 401, 'unauthorized');
      await stillRemembered('after a logout');
      // A suspension names the agent in that organization, not its colleagues.
      expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
      expectApiError(await owner.api.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
      await stillRemembered('after a suspension');
      // A deleted organization names its own callers, not another organization's.
      expectApiSuccess(await owner.api.delete(`/organizations/${created.id}`, { token: owner.accessToken }), 200);
      await stillRemembered('after another organization was deleted');
    } finally {
      restore();
    }
    // A visitor's handshake is answered by the widget session, never as a person's token.
    (await connectOk(baseUrl, owner.orgId, (await newVisitor(owner)).token)).close();
  });

  it('remembers a caller without an organization too', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    expectApiSuccess(await owner.api.delete(`${members(owner.orgId)}/${agent.membershipId}`, { token: owner.accessToken }), 200);
    // Removed from their only organization, the agent signs in again: a token without an organization.
    const alone = await login(new Api(baseUrl), agent.email, PASSWORD);
    expect(jwtPayload(alone.accessToken).orgId).to.equal(null);
    const actors = server.services.actors;
    const { operator } = actors;
    let reads = 0;
    actors.operator = function (token) {
      if (token === alone.accessToken) reads += 1;
      return operator.call(this, token);
    };
    try {
      for (let i = 0; i < 3; i++) expectApiSuccess(await agent.api.get('/auth/profile', { token: alone.accessToken }), 200);
      expect(reads).to.equal(1);
    } finally {
      Object.assign(actors, { operator });
    }
  });

  it('bounds its memory: when full it forgets the callers whose moment has passed, or everyone when none has', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const tokens = [owner.accessToken];
    for (let i = 0; i < 3; i++) tokens.push((await login(new Api(baseUrl), owner.email, PASSWORD)).accessToken);
    const [t0, t1, t2, t3] = tokens as [string, string, string, string];
    const actors = server.services.actors;
    const { readsOf, restore } = countOperatorReads(actors);
    // The server's own resolver, behind a memory of three callers that hears this process's revocations.
    const memory = () => new CallerCache(actors, { events: new DomainEventBus(server.logger), knex: server.db.knex, logger: server.logger, mode: 'local' }, 3);
    const cache = memory();
    const fresh = memory();
    try {
      await cache.operator(t0);
      await withClockAhead(6, async () => {
        await cache.operator(t1);
        await cache.operator(t2);
      });
      // Full: t0's moment has passed (10 s), t1 and t2 are current. Room is made by forgetting t0 only.
      await withClockAhead(11, async () => {
        await cache.operator(t3);
        await cache.operator(t1);
        await cache.operator(t2);
      });
      expect([t0, t1, t2, t3].map(readsOf)).to.deep.equal([1, 1, 1, 1]);
      // Another memory, full of current callers: a fourth starts it over.
      for (const token of [t0, t1, t2, t3, t0, t1]) await fresh.operator(token);
      expect([t0, t1, t2, t3].map(readsOf)).to.deep.equal([3, 3, 2, 2]);
    } finally {
      restore();
      await cache.stop();
      await fresh.stop();
    }
  });

  it('where one process serves the database, hears revocations from its domain events and opens no connection to listen', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const second = await login(new Api(baseUrl), owner.email, PASSWORD);
    const actors = server.services.actors;
    const { readsOf, restore } = countOperatorReads(actors);
    // The embedded database's way (`local`): this process's own events are every revocation there is. Given an address
    // to listen on (a socket that counts who connects to it), such a memory must not use it, nor notify anyone.
    const attempts: Socket[] = [];
    const endpoint = createNetServer((socket) => void attempts.push(socket));
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    const notified: string[] = [];
    const onQuery = (q: { sql: string }) => void (q.sql.includes('pg_notify') && notified.push(q.sql));
    server.db.knex.on('query', onQuery);
    const events = new DomainEventBus(server.logger);
    const databaseUrl = `postgres://nobody@127.0.0.1:${(endpoint.address() as AddressInfo).port}/none`;
    const cache = new CallerCache(actors, { events, knex: server.db.knex, logger: server.logger, mode: 'local', databaseUrl });
    const [ownerToken, secondToken, agentToken] = [owner.accessToken, second.accessToken, agent.accessToken];
    /** How many times each token was read from the database after asking the memory once more for each. */
    const ask = async () => {
      for (const token of [ownerToken, secondToken, agentToken]) await cache.operator(token);
      return [ownerToken, secondToken, agentToken].map(readsOf);
    };
    try {
      cache.start();
      expect(await ask()).to.deep.equal([1, 1, 1]);
      expect(await ask(), 'remembered').to.deep.equal([1, 1, 1]);
      // A logout names its session only.
      events.publish('session.revoked', { userId: owner.userId, sessionIds: [jwtPayload(secondToken).sid] });
      expect(await ask(), 'after a logout').to.deep.equal([1, 2, 1]);
      // A change of an invitation not yet accepted names no one; a suspension names the agent in that organization.
      const change = { organizationId: owner.orgId, membershipId: agent.membershipId, status: 'suspended', role: 'agent', removed: false };
      events.publish('membership.changed', { ...change, userId: null });
      expect(await ask(), 'after an invitation changed').to.deep.equal([1, 2, 1]);
      events.publish('membership.changed', { ...change, userId: agent.userId });
      expect(await ask(), 'after a suspension').to.deep.equal([1, 2, 2]);
      // An availability chosen replaces the remembered one; a socket's coming or going, which chooses none, does not.
      events.publish('presence.changed', { organizationId: owner.orgId, userId: agent.userId, status: 'busy', availability: 'busy' });
      expect((await cache.operator(agentToken)).membership?.availability).to.equal('busy');
      events.publish('presence.changed', { organizationId: owner.orgId, userId: agent.userId, status: 'offline' });
      expect((await cache.operator(agentToken)).membership?.availability).to.equal('busy');
      expect(await ask(), 'after the availabilities').to.deep.equal([1, 2, 2]);
      // A deleted organization names everyone in it.
      events.publish('organization.deleted', { organizationId: owner.orgId });
      expect(await ask(), 'after the organization was deleted').to.deep.equal([2, 3, 3]);
      expect(cache.live).to.equal(true);
      expect(attempts, 'connections to listen').to.have.length(0);
      expect(notified, 'notices sent').to.deep.equal([]);
    } finally {
      restore();
      server.db.knex.off('query', onQuery);
      for (const socket of attempts) socket.destroy();
      endpoint.close();
      await cache.stop();
    }
    expect(cache.live, 'stopped').to.equal(false);
  });

  it('logs an availability it could not tell the other instances', async () => {
    const { server } = sharedServer();
    const logs = captureLogs();
    // A database that refuses every connection (nothing listens on port 1).
    const unreachable = knexFactory({ client: 'pg', connection: 'postgres://nobody@127.0.0.1:1/none', pool: { min: 0, max: 1 }, acquireConnectionTimeout: 5_000, log: { error: () => undefined, warn: () => undefined } });
    const events = new DomainEventBus(server.logger);
    const cache = new CallerCache(server.services.actors, { events, knex: unreachable, logger: logs.logger, mode: 'listen' });
    try {
      events.publish('presence.changed', { organizationId: randomUUID(), userId: randomUUID(), status: 'away', availability: 'away' });
      await waitFor(() => logs.matching(40, 'could not tell other instances of an availability').length === 1, { timeoutMs: 10_000, what: 'the failed notice to be logged' });
      expect(logs.matching(40, 'could not tell other instances of an availability')[0]!.err).to.have.property('message').that.is.a('string').and.not.empty;
    } finally {
      await cache.stop();
      await unreachable.destroy();
    }
  });

  it('a suspended agent is refused on the next request, and let in again at once when reactivated', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    await warm(agent.api, agent.accessToken);
    expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
    expectApiError(await agent.api.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
    expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'active' }, { token: owner.accessToken }), 200);
    expectApiSuccess(await agent.api.get('/contacts', { token: agent.accessToken }), 200);
  });

  it('a role change applies to the next request, both ways', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    await warm(agent.api, agent.accessToken);
    expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/role`, { role: 'admin' }, { token: owner.accessToken }), 200);
    const asAdmin = await owner.api.post('/contacts/attribute-definitions', { key: `k${Date.now()}`, label: 'Plan', type: 'text' }, { token: agent.accessToken });
    expect(asAdmin.status, JSON.stringify(asAdmin.body)).to.equal(201);
    expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/role`, { role: 'agent' }, { token: owner.accessToken }), 200);
    expectApiError(await owner.api.post('/contacts/attribute-definitions', { key: `k${Date.now()}b`, label: 'Plan', type: 'text' }, { token: agent.accessToken }), 403, 'forbidden');
  });

  it('a removed agent and a logged-out session are refused on the next request', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    await warm(agent.api, agent.accessToken);
    expectApiSuccess(await owner.api.delete(`${members(owner.orgId)}/${agent.membershipId}`, { token: owner.accessToken }), 200);
    expectApiError(await agent.api.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');

    const session = await login(new Api(baseUrl), owner.email, PASSWORD);
    await warm(owner.api, session.accessToken);
    expectApiSuccess(await owner.api.post('/auth/logout', {}, { token: session.accessToken }), 200);
    expectApiError(await owner.api.get('/contacts', { token: session.accessToken }), 401, 'unauthorized');
    // The owner's other session is not affected.
    expectApiSuccess(await owner.api.get('/contacts', { token: owner.accessToken }), 200);
  });

  it('the members of a deleted organization are refused on the next request', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    await warm(agent.api, agent.accessToken);
    expectApiSuccess(await owner.api.delete(`/organizations/${owner.orgId}`, { token: owner.accessToken }), 200);
    expectApiError(await agent.api.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
  });

  it('a handshake is answered like REST: a logged-out session and a suspended agent are refused at the next handshake', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const session = await login(new Api(baseUrl), owner.email, PASSWORD);
    for (const token of [agent.accessToken, session.accessToken]) {
      await warm(owner.api, token);
      (await connectOk(baseUrl, owner.orgId, token)).close();
    }
    expectApiSuccess(await owner.api.post('/auth/logout', {}, { token: session.accessToken }), 200);
    expect(await refusal(baseUrl, owner.orgId, session.accessToken)).to.equal('unauthorized');
    expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
    expect(await refusal(baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
    // The owner's own session, in the same organization, is untouched.
    (await connectOk(baseUrl, owner.orgId, owner.accessToken)).close();
  });

  it("an agent's chosen availability replaces the remembered one, chosen on the socket or over REST while offline", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const colleague = await addMember(server, owner, 'agent');
    const watcher = await connectOk(baseUrl, owner.orgId, owner.accessToken);
    try {
      expect(await statusOnConnect(watcher, baseUrl, owner.orgId, colleague.userId, colleague.accessToken)).to.equal('online');
      expect(await statusOnConnect(watcher, baseUrl, owner.orgId, agent.userId, agent.accessToken)).to.equal('online');
      const socket = await connectOk(baseUrl, owner.orgId, agent.accessToken);
      expect((await request(socket, 'update_status', { status: 'away' })).success).to.equal(true);
      socket.close();
      await disconnected(socket);
      await waitFor(async () => !(await server.presence.isOnline(owner.orgId, agent.userId)), { what: 'the agent offline' });
      expect(await statusOnConnect(watcher, baseUrl, owner.orgId, agent.userId, agent.accessToken)).to.equal('away');
      // Chosen while no socket is open: the status announced is offline, the availability still changed.
      expect(expectApiSuccess(await agent.api.patch('/agent/status', { status: 'busy' }, { token: agent.accessToken }), 200)).to.deep.equal({ availability: 'busy', status: 'offline' });
      expect(await statusOnConnect(watcher, baseUrl, owner.orgId, agent.userId, agent.accessToken)).to.equal('busy');
      // Only that agent's: a colleague remembered in the same organization keeps theirs.
      expect(await statusOnConnect(watcher, baseUrl, owner.orgId, colleague.userId, colleague.accessToken)).to.equal('online');
    } finally {
      watcher.close();
    }
  });

  it('an availability chosen in one organization leaves the one remembered for another organization of the same person', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const colleague = await addMember(server, owner, 'agent');
    const watcher = await connectOk(baseUrl, owner.orgId, colleague.accessToken);
    try {
      const created = expectApiSuccess(await owner.api.post('/organizations', { name: 'Second desk' }, { token: owner.accessToken }), 201);
      const second = expectApiSuccess(await owner.api.post(`/organizations/${created.id}/switch`, undefined, { token: owner.accessToken }), 200);
      expect(await statusOnConnect(watcher, baseUrl, owner.orgId, owner.userId, owner.accessToken)).to.equal('online');
      expect(expectApiSuccess(await owner.api.patch('/agent/status', { status: 'busy' }, { token: second.accessToken }), 200)).to.include({ availability: 'busy' });
      expect(await statusOnConnect(watcher, baseUrl, owner.orgId, owner.userId, owner.accessToken)).to.equal('online');
    } finally {
      watcher.close();
    }
  });

  describe('across instances (PostgreSQL)', function () {
    let a: TestServer;
    let b: TestServer;

    before(async function () {
      if (!process.env.DATABASE_URL) this.skip();
      a = await startTestServer();
      b = await startTestServer();
      await waitFor(() => a.server.services.callers.live && b.server.services.callers.live, { what: 'both instances to listen for revocations' });
    });

    after(async () => {
      await a?.stop();
      await b?.stop();
    });

    /** An organization made on A, with an agent whose caller B remembers. */
    async function agentRememberedByB(): Promise<{ owner: SignedUp; agent: Member; onB: Api }> {
      const owner = await signUp(a.server, a.baseUrl);
      const agent = await addMember(a.server, owner, 'agent');
      const onB = new Api(b.baseUrl);
      await warm(onB, agent.accessToken);
      return { owner, agent, onB };
    }

    it('suspension, removal and logout on one instance are refused by the other as the change commits', async () => {
      const { owner, agent, onB } = await agentRememberedByB();
      expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
      expect((await onB.get('/contacts', { token: agent.accessToken })).status).to.equal(403);
      expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'active' }, { token: owner.accessToken }), 200);
      await warm(onB, agent.accessToken);
      expectApiSuccess(await owner.api.delete(`${members(owner.orgId)}/${agent.membershipId}`, { token: owner.accessToken }), 200);
      expect((await onB.get('/contacts', { token: agent.accessToken })).status).to.equal(403);

      const session = await login(new Api(a.baseUrl), owner.email, PASSWORD);
      await warm(onB, session.accessToken);
      expectApiSuccess(await owner.api.post('/auth/logout', {}, { token: session.accessToken }), 200);
      expect((await onB.get('/contacts', { token: session.accessToken })).status).to.equal(401);
      expectApiSuccess(await onB.get('/contacts', { token: owner.accessToken }), 200);
    });

    it("an agent's availability chosen on one instance replaces the one the other remembers", async () => {
      const owner = await signUp(a.server, a.baseUrl);
      const agent = await addMember(a.server, owner, 'agent');
      const watcher = await connectOk(b.baseUrl, owner.orgId, owner.accessToken);
      try {
        expect(await statusOnConnect(watcher, b.baseUrl, owner.orgId, agent.userId, agent.accessToken)).to.equal('online');
        expectApiSuccess(await agent.api.patch('/agent/status', { status: 'busy' }, { token: agent.accessToken }), 200);
        // The notice follows the change (not inside a transaction): allow B a moment to read it.
        const deadline = Date.now() + 1_000;
        let status = await statusOnConnect(watcher, b.baseUrl, owner.orgId, agent.userId, agent.accessToken);
        while (status !== 'busy' && Date.now() < deadline) status = await statusOnConnect(watcher, b.baseUrl, owner.orgId, agent.userId, agent.accessToken);
        expect(status).to.equal('busy');
      } finally {
        watcher.close();
      }
    });

    it('a password changed on one instance ends the other sessions on the other instance at once', async () => {
      const owner = await signUp(a.server, a.baseUrl);
      const other = await login(new Api(b.baseUrl), owner.email, PASSWORD);
      const onB = new Api(b.baseUrl);
      await warm(onB, other.accessToken);
      expectApiSuccess(await owner.api.post('/auth/change-password', { currentPassword: PASSWORD, newPassword: `${PASSWORD}-new` }, { token: owner.accessToken }), 200);
      expect((await onB.get('/contacts', { token: other.accessToken })).status).to.equal(401);
    });

    it('an organization deleted on one instance refuses its members on the other as it commits', async () => {
      const { owner, agent, onB } = await agentRememberedByB();
      await warm(owner.api, agent.accessToken);
      expectApiSuccess(await owner.api.delete(`/organizations/${owner.orgId}`, { token: owner.accessToken }), 200);
      expect((await onB.get('/contacts', { token: agent.accessToken })).status).to.equal(403);
      expectApiError(await owner.api.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
    });

    it('hears what was committed before a request before answering it from memory, however late its listening connection is read', async () => {
      const { owner, agent, onB } = await agentRememberedByB();
      // B reads its listening connection late (a starved event loop, a slow network): the suspension's notice waits.
      const listener = listeningSocket(b);
      listener.pause();
      try {
        expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
        setTimeout(() => listener.resume(), 300);
        expectApiError(await onB.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
      } finally {
        listener.resume();
      }
      expect(await refusal(b.baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
    });

    it('answers a burst of requests after one shared round trip, and a request after the burst after a round trip of its own', async () => {
      const owner = await signUp(a.server, a.baseUrl);
      const agent = await addMember(a.server, owner, 'agent');
      const onB = new Api(b.baseUrl);
      const status = `${members(owner.orgId)}/${agent.membershipId}/status`;
      await warm(onB, agent.accessToken);
      const listener = listeningSocket(b);
      listener.pause();
      try {
        expectApiSuccess(await owner.api.patch(status, { status: 'suspended' }, { token: owner.accessToken }), 200);
        // The first request's round trip is held up; the others come while it is, and wait for the next one.
        const sent = countQueries(listener);
        const burst = Promise.all(Array.from({ length: 10 }, () => onB.get('/contacts', { token: agent.accessToken })));
        setTimeout(() => listener.resume(), 300);
        expect((await burst).map((res) => res.status)).to.deep.equal(Array(10).fill(403));
        // Ten requests, two round trips (the held one and the one the others waited for).
        expect(sent.stop()).to.equal(2);
      } finally {
        listener.resume();
      }
      expectApiSuccess(await owner.api.patch(status, { status: 'active' }, { token: owner.accessToken }), 200);
      await warm(onB, agent.accessToken);
      // Later, the same again for one request: the burst's round trips are over, it must not be answered by them.
      listener.pause();
      try {
        expectApiSuccess(await owner.api.patch(status, { status: 'suspended' }, { token: owner.accessToken }), 200);
        setTimeout(() => listener.resume(), 300);
        expectApiError(await onB.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
      } finally {
        listener.resume();
      }
    });

    it('reads the caller from the database when its listening connection stalls', async () => {
      const { owner, agent, onB } = await agentRememberedByB();
      const listener = listeningSocket(b);
      listener.pause();
      try {
        expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
        // Not read again during the request: B gives up waiting for it and asks the database.
        expectApiError(await onB.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
        expect(await refusal(b.baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
      } finally {
        listener.resume();
      }
    });

    it('stops remembering while its listening connection is lost, and hears revocations again once it listens anew', async () => {
      const { owner, agent, onB } = await agentRememberedByB();
      // Both instances' listening connections in this database are cut, as a failover or a restarted pooler would.
      await a.server.db.knex.raw(`select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and application_name = ?`, [REVOCATION_LISTENER]);
      await waitFor(() => !b.server.services.callers.live, { what: 'B to notice it no longer hears revocations' });
      await waitFor(() => a.server.services.callers.live && b.server.services.callers.live, { timeoutMs: 10_000, what: 'both instances to listen again' });
      await warm(onB, agent.accessToken);
      expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
      expect((await onB.get('/contacts', { token: agent.accessToken })).status).to.equal(403);
      expect(await refusal(b.baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
    });

    it('remembers no caller while its listening connection is lost: a suspension it cannot hear is refused at once', async function () {
      this.timeout(60_000);
      const owner = await signUp(a.server, a.baseUrl);
      const onB = new Api(b.baseUrl);
      // B reconnects about a second after it loses its connection; what follows must happen within that second, so
      // a slow attempt (B listening again before the last request) is made again with another agent.
      for (let attempt = 1; ; attempt++) {
        const agent = await addMember(a.server, owner, 'agent');
        await waitFor(() => a.server.services.callers.live && b.server.services.callers.live, { timeoutMs: 10_000, what: 'both instances to listen' });
        await a.server.db.knex.raw(`select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and application_name = ?`, [REVOCATION_LISTENER]);
        await waitFor(() => !b.server.services.callers.live, { intervalMs: 5, what: 'B to notice it no longer hears revocations' });
        // Read while B is deaf: served, and (it must not be) remembered.
        await warm(onB, agent.accessToken);
        // Suspended through A while B cannot hear it.
        expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
        const res = await onB.get('/contacts', { token: agent.accessToken });
        expect(res.status, JSON.stringify(res.body)).to.equal(403);
        const deafThroughout = !b.server.services.callers.live;
        // The next test starts with both instances listening.
        await waitFor(() => a.server.services.callers.live && b.server.services.callers.live, { timeoutMs: 10_000, what: 'both instances to listen again' });
        if (deafThroughout) return;
        if (attempt === 5) expect.fail('B listened again within a second of losing its connection five times running');
      }
    });

    it('forgets what it remembered when it stops listening: a suspension made meanwhile is refused once it listens again', async () => {
      const { owner, agent, onB } = await agentRememberedByB();
      await a.server.db.knex.raw(`select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and application_name = ?`, [REVOCATION_LISTENER]);
      await waitFor(() => !b.server.services.callers.live, { what: 'B to notice it no longer hears revocations' });
      // Made while B cannot hear it.
      expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
      await waitFor(() => a.server.services.callers.live && b.server.services.callers.live, { timeoutMs: 10_000, what: 'both instances to listen again' });
      expectApiError(await onB.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
      expect(await refusal(b.baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
    });

    it('ignores a notice on its channel that is not JSON or not an object, and keeps hearing revocations', async () => {
      const { owner, agent, onB } = await agentRememberedByB();
      for (const payload of ['not a notice', 'null', '5']) await a.server.db.knex.raw(`select pg_notify(?, ?)`, [REVOCATION_CHANNEL, payload]);
      expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
      expectApiError(await onB.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
      expect(b.server.services.callers.live).to.equal(true);
    });

    it('a stopped instance leaves no listening connection behind', async function () {
      this.timeout(60_000);
      const listeners = async () => Number((await a.server.db.knex.raw(`select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = ?`, [REVOCATION_LISTENER])).rows[0].n);
      const c = await startTestServer();
      await waitFor(() => c.server.services.callers.live, { what: 'the third instance to listen' });
      const withC = await listeners();
      await c.stop();
      expect(c.server.services.callers.live).to.equal(false);
      await waitFor(async () => (await listeners()) === withC - 1, { timeoutMs: 5_000, what: 'the stopped instance\'s listening connection to close' });
    });

    it('a stopped instance does not reconnect: stopped while it waits to listen again, it leaves no listening connection', async function () {
      this.timeout(60_000);
      const listeners = async () => Number((await a.server.db.knex.raw(`select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = ?`, [REVOCATION_LISTENER])).rows[0].n);
      const before = await listeners();
      const logs = captureLogs();
      const c = await startTestServer({}, { logger: logs.logger });
      try {
        await waitFor(() => c.server.services.callers.live, { what: 'the third instance to listen' });
        // Only C's listening connection is cut; C plans to connect again a second later, and is stopped meanwhile.
        const { processID } = (c.server.services.callers as unknown as { revocations: { client: { processID: number } } }).revocations.client;
        await a.server.db.knex.raw('select pg_terminate_backend(?)', [processID]);
        await waitFor(() => !c.server.services.callers.live, { intervalMs: 5, what: 'C to notice it no longer hears revocations' });
      } finally {
        await c.stop();
      }
      // Past the moment C had planned to connect again (a second), with room to spare: C tried no connection (one
      // would fail its probe through the stopped pool, say so, and try again every second), and none of C's is left.
      const logged = logs.lines.length;
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      expect(logs.lines.slice(logged).map((line) => line.msg)).to.deep.equal([]);
      expect(await listeners()).to.equal(before);
      expect(c.server.services.callers.live).to.equal(false);
    });

    it('while PostgreSQL cannot be reached (a restart) it cannot listen and remembers no one; a suspension made meanwhile is refused once it listens again', async function () {
      this.timeout(60_000);
      // C reaches PostgreSQL through a relay the test can cut and restore: its pool and its listening connection drop
      // together and no new connection can be made, as while the database restarts. A and B reach it directly.
      const relay = await databaseRelay(process.env.DATABASE_URL!);
      const logs = captureLogs();
      const c = await startTestServer({ DATABASE_URL: relay.url }, { logger: logs.logger });
      try {
        const owner = await signUp(a.server, a.baseUrl);
        const agent = await addMember(a.server, owner, 'agent');
        const onC = new Api(c.baseUrl);
        await waitFor(() => c.server.services.callers.live, { what: 'C to listen' });
        await warm(onC, agent.accessToken);
        relay.cut();
        await waitFor(() => !c.server.services.callers.live, { what: 'C to notice it no longer hears revocations' });
        // Suspended through A while C cannot hear it; C keeps trying to listen, and says so.
        expectApiSuccess(await owner.api.patch(`${members(owner.orgId)}/${agent.membershipId}/status`, { status: 'suspended' }, { token: owner.accessToken }), 200);
        await waitFor(() => logs.matching(20, 'the revocation listener could not connect').length >= 2, { timeoutMs: 10_000, what: 'C to fail to listen, twice' });
        expect(logs.matching(20, 'the revocation listener could not connect')[0]!.err, 'the reason logged').to.have.property('message').that.is.a('string').and.not.empty;
        expect(c.server.services.callers.live).to.equal(false);
        await relay.restore();
        await waitFor(() => c.server.services.callers.live, { timeoutMs: 10_000, what: 'C to listen again' });
        expectApiError(await onC.get('/contacts', { token: agent.accessToken }), 403, 'forbidden');
        expect(await refusal(c.baseUrl, owner.orgId, agent.accessToken)).to.equal('forbidden');
      } finally {
        await relay.restore();
        await c.stop();
        await relay.close();
      }
    });

    it('never caches where its listening connection does not hear what the instances send (a pooler that cannot LISTEN), whoever else probes', async () => {
      // The listening connection is made to another database of the cluster: what is sent through the pool never
      // reaches it (as behind a pooler that pools by transaction), while what is sent on that database does.
      const elsewhere = new URL(process.env.DATABASE_URL!);
      elsewhere.pathname = '/postgres';
      const revocations = new Revocations({ events: new DomainEventBus(a.server.logger), knex: a.server.db.knex, logger: a.server.logger, mode: 'listen', databaseUrl: elsewhere.toString() });
      const heard: string[] = [];
      revocations.onNotice((notice) => void ('sessionIds' in notice && heard.push(...notice.sessionIds)));
      const sender = knexFactory({ client: 'pg', connection: elsewhere.toString(), pool: { min: 0, max: 1 } });
      const send = (notice: object) => sender.raw('select pg_notify(?, ?)', [REVOCATION_CHANNEL, JSON.stringify(notice)]);
      try {
        revocations.start();
        await waitFor(async () => (await send({ sessionIds: ['listening'] }), heard.includes('listening')), { what: 'the connection to listen' });
        // Another listener's probe on that database, then a notice after it: once that is heard, so was the probe.
        await send({ probe: randomUUID() });
        await send({ sessionIds: ['after the probe'] });
        await waitFor(() => heard.includes('after the probe'), { what: 'the notice after the probe' });
        expect(revocations.live).to.equal(false);
      } finally {
        await revocations.stop();
        await sender.destroy();
      }
    });

    it('a password change ends every other session on the other instance, however many there are', async () => {
      const owner = await signUp(a.server, a.baseUrl);
      const other = await login(new Api(b.baseUrl), owner.email, PASSWORD);
      const onB = new Api(b.baseUrl);
      await warm(onB, other.accessToken);
      // Signed in on more devices than one notice can list (PostgreSQL limits a NOTIFY payload to 8000 bytes).
      const expiresAt = new Date(Date.now() + 86_400_000);
      await a.server.db.knex('auth_sessions').insert(Array.from({ length: 250 }, () => ({ id: randomUUID(), user_id: owner.userId, organization_id: owner.orgId, refresh_jti: randomUUID(), expires_at: expiresAt })));
      expectApiSuccess(await owner.api.post('/auth/change-password', { currentPassword: PASSWORD, newPassword: `${PASSWORD}-new` }, { token: owner.accessToken }), 200);
      expect((await onB.get('/contacts', { token: other.accessToken })).status).to.equal(401);
      expectApiSuccess(await owner.api.get('/contacts', { token: owner.accessToken }), 200);
    });
  });
});
