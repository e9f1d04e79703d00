// How the socket handshake maps what the caller resolver throws: a 401 is `unauthorized` with the resolver's own
// message as the logged reason (no error logged: a stale token is the client's business), anything that is neither
// 401 nor 403 nor 429 is `unauthorized` too, logged once at error level with the connection's request id, so that an
// operator sees it, and refused at debug as "handshake failed". A key over its rate limit (429) is `rate_limited`
// with the seconds to wait, like REST's 429, and logs no error: the client hit a limit, nothing failed.
import { expect } from 'chai';
import { io } from 'socket.io-client';
import { ServiceUnavailable } from '../server/errors.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { captureLogs, type CapturedLogs } from './helpers/logs.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { connected, type ClientSocket } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

describe('socket handshake failures', function () {
  this.timeout(60_000);
  const track = closeAfterEach();
  let app: TestServer;
  let logs: CapturedLogs;

  before(async () => {
    logs = captureLogs('debug');
    // One request per minute per key: a key's second handshake is over its limit.
    app = await startTestServer({ API_KEY_RATE_LIMIT: '1' }, { logger: logs.logger });
  });
  after(async () => {
    await app?.stop();
  });

  const open = (orgId: string, token: string, requestId: string) =>
    track(io(`${app.baseUrl}/orgs/${orgId}`, { path: '/socket.io', transports: ['websocket'], auth: { token }, reconnection: false, forceNew: true, extraHeaders: { 'x-request-id': requestId } }) as ClientSocket);
  const refused = (socket: ClientSocket) =>
    connected(socket).then(
      () => null,
      (err: Error & { data?: unknown }) => ({ message: err.message, data: err.data }),
    );
  const linesOf = (requestId: string) => logs.lines.filter((l) => l.requestId === requestId);
  const logLine = (msg: string, requestId: string) => waitFor(() => logs.lines.find((l) => l.msg === msg && l.requestId === requestId), { what: `${msg} ${requestId}` });

  async function createKey(owner: SignedUp): Promise<string> {
    const res = await owner.api.post('/api-keys', { name: 'Inbox bot', scopes: ['conversations:read'] }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.data.token as string;
  }

  it("refuses a person's ended session as unauthorized, giving the resolver's reason and logging no error", async () => {
    const owner = await signUp(app.server, app.baseUrl);
    expect((await owner.api.post('/auth/logout', {}, { token: owner.accessToken })).status).to.equal(200);
    // REST and the handshake share the resolver: the same token is refused with the same words.
    const rest = await owner.api.get('/auth/profile', { token: owner.accessToken });
    expect(rest.status, JSON.stringify(rest.body)).to.equal(401);
    const why = rest.body.message as string;
    expect(why).to.be.a('string').and.not.equal('');

    expect(await refused(open(owner.orgId, owner.accessToken, 'hs-ended-0001'))).to.deep.equal({ message: 'unauthorized', data: { code: 'unauthorized' } });
    expect(await logLine('socket refused', 'hs-ended-0001')).to.include({ level: 20, orgId: owner.orgId, kind: 'agent', reason: why });
    expect(linesOf('hs-ended-0001').filter((l) => l.level >= 50)).to.deep.equal([]);
  });

  it('refuses a key over its rate limit as rate_limited with the seconds to wait, and logs no error', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const token = await createKey(owner);
    await connected(open(owner.orgId, token, 'hs-rate-ok-01'));

    const over = (await refused(open(owner.orgId, token, 'hs-rate-over1'))) as { message: string; data: { code: string; retryAfter: number } };
    expect(over.message).to.equal('rate_limited');
    expect(over.data.code).to.equal('rate_limited');
    expect(over.data.retryAfter).to.be.within(1, 60);
    // The seconds REST gives the same key a moment later: the handshake's count no more than the moment sooner.
    const rest = await owner.api.get('/conversations', { token });
    expect(rest.status, JSON.stringify(rest.body)).to.equal(429);
    const restSeconds = Number(rest.headers.get('retry-after'));
    expect(over.data.retryAfter).to.be.within(restSeconds, restSeconds + 10);
    expect(await logLine('socket refused', 'hs-rate-over1')).to.include({ level: 20, orgId: owner.orgId, kind: 'bot', reason: 'Too many requests, try again later' });
    expect(linesOf('hs-rate-over1').filter((l) => l.level >= 50)).to.deep.equal([]);
    expect(linesOf('hs-rate-ok-01').filter((l) => l.level >= 50)).to.deep.equal([]);
  });

  it('refuses as unauthorized when looking up the caller fails, logging the failure once with the request id', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const token = await createKey(owner);
    const actors = app.server.services.actors;
    const { fromToken } = actors;
    // The lookup fails for a reason of its own, as a lost database connection would (no status), or with a status
    // that is not about the caller (503).
    const other = await createKey(owner);
    actors.fromToken = function (t, kind) {
      if (t === token) return Promise.reject(new Error('connection terminated unexpectedly'));
      if (t === other) return Promise.reject(new ServiceUnavailable('The service is starting'));
      return fromToken.call(this, t, kind);
    };
    try {
      expect(await refused(open(owner.orgId, token, 'hs-failed-001'))).to.deep.equal({ message: 'unauthorized', data: { code: 'unauthorized' } });
      expect(await refused(open(owner.orgId, other, 'hs-failed-002'))).to.deep.equal({ message: 'unauthorized', data: { code: 'unauthorized' } });
    } finally {
      Object.assign(actors, { fromToken });
    }
    expect(await logLine('socket refused', 'hs-failed-001')).to.include({ level: 20, orgId: owner.orgId, kind: 'bot', reason: 'handshake failed' });
    const errors = linesOf('hs-failed-001').filter((l) => l.level >= 50);
    expect(errors.map((l) => l.msg)).to.deep.equal(['socket handshake failed']);
    expect(errors[0]!.err).to.include({ message: 'connection terminated unexpectedly' });
    expect(await logLine('socket refused', 'hs-failed-002')).to.include({ reason: 'handshake failed' });
  });
});
