// The socket handshake per kind of caller, on a server with CORS_ORIGINS: bots (API keys) are not browsers and are
// not bound to CORS_ORIGINS, people are; visitors follow their widget's allowedOrigins, where a page on the server's
// own host counts as allowed (by its Origin, or by Sec-Fetch-Site without one); a refusal carries its code in the
// connect_error's data as well as its message; each handshake is logged at debug with the kind of caller and why.
import { expect } from 'chai';
import { io } from 'socket.io-client';
import { signUp, type SignedUp } from './helpers/factories.js';
import { captureLogs, type CapturedLogs } from './helpers/logs.js';
import { newVisitor } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { connected, connectOk, refusal, type ClientSocket } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

async function createKey(owner: SignedUp, scopes: string[]): Promise<{ id: string; token: string }> {
  const res = await owner.api.post('/api-keys', { name: 'Inbox bot', scopes }, { token: owner.accessToken });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return { id: res.body.data.apiKey.id, token: res.body.data.token };
}

describe('socket handshake by kind of caller', function () {
  this.timeout(60_000);
  const track = closeAfterEach();
  let app: TestServer;
  let logs: CapturedLogs;

  before(async () => {
    logs = captureLogs('debug');
    app = await startTestServer({ CORS_ORIGINS: 'https://app.example.test' }, { logger: logs.logger });
  });
  after(async () => {
    await app?.stop();
  });

  /** A socket with any handshake headers (the helpers set only Origin). */
  const open = (orgId: string, token: string | undefined, headers: Record<string, string>) =>
    track(io(`${app.baseUrl}/orgs/${orgId}`, { path: '/socket.io', transports: ['websocket'], auth: token === undefined ? {} : { token }, reconnection: false, forceNew: true, extraHeaders: headers }) as ClientSocket);
  /** The connect_error of a refused handshake, message and data. */
  const refused = (socket: ClientSocket) =>
    connected(socket).then(
      () => null,
      (err: Error & { data?: unknown }) => ({ message: err.message, data: err.data }),
    );
  const logLine = (msg: string, requestId: string) => waitFor(() => logs.lines.find((l) => l.msg === msg && l.requestId === requestId), { what: `${msg} ${requestId}` });

  it('lets a bot with conversations:read in from any origin, while a person is held to CORS_ORIGINS', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const key = await createKey(owner, ['conversations:read']);
    track(await connectOk(app.baseUrl, owner.orgId, key.token, { origin: 'https://elsewhere.example.test' }));
    expect(await refusal(app.baseUrl, owner.orgId, owner.accessToken, { origin: 'https://elsewhere.example.test' })).to.equal('forbidden');
    // A bot of another organization is refused there like a person.
    const other = await signUp(app.server, app.baseUrl);
    expect(await refusal(app.baseUrl, other.orgId, key.token)).to.equal('forbidden');
  });

  it("counts a page on the server's own host as an allowed origin for a restricted widget", async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const visitor = await newVisitor(owner);
    const put = await owner.api.put('/widget/manage', { allowedOrigins: ['https://shop.example.test'] }, { token: owner.accessToken });
    expect(put.status, JSON.stringify(put.body)).to.equal(200);
    const host = new URL(app.baseUrl).host;
    // A same-origin page: its Origin is the server's own, or (no Origin sent) the browser says same-origin.
    await connected(open(owner.orgId, visitor.token, { origin: `http://${host}` }));
    await connected(open(owner.orgId, visitor.token, { 'sec-fetch-site': 'same-origin' }));
    // Neither is enough from another site.
    expect(await refused(open(owner.orgId, visitor.token, { 'sec-fetch-site': 'cross-site', 'x-request-id': 'hs-widget-org1' }))).to.deep.equal({ message: 'forbidden', data: { code: 'forbidden' } });
    expect(await logLine('socket refused', 'hs-widget-org1')).to.include({ level: 20, orgId: owner.orgId, kind: 'visitor', reason: "origin not in the widget's allowedOrigins" });
    expect(await refused(open(owner.orgId, visitor.token, { origin: 'https://elsewhere.example.test', 'sec-fetch-site': 'same-origin' }))).to.deep.equal({ message: 'forbidden', data: { code: 'forbidden' } });
  });

  it('refuses with the code in the message and the data, and logs each handshake with the kind of caller and why', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const other = await signUp(app.server, app.baseUrl);
    const visitor = await newVisitor(owner);
    const key = await createKey(owner, ['conversations:read']);
    const narrowKey = await createKey(owner, ['contacts:read']);

    const cases: Array<{ id: string; orgId: string; token: string | undefined; code: 'unauthorized' | 'forbidden'; kind: string }> = [
      { id: 'hs-none-0001', orgId: owner.orgId, token: undefined, code: 'unauthorized', kind: 'unknown' },
      { id: 'hs-junk-0001', orgId: owner.orgId, token: 'not-a-token', code: 'unauthorized', kind: 'unknown' },
      { id: 'hs-agent-0001', orgId: other.orgId, token: owner.accessToken, code: 'forbidden', kind: 'agent' },
      { id: 'hs-visit-0001', orgId: other.orgId, token: visitor.token, code: 'forbidden', kind: 'visitor' },
      { id: 'hs-bot-00001', orgId: other.orgId, token: key.token, code: 'forbidden', kind: 'bot' },
      { id: 'hs-scope-0001', orgId: owner.orgId, token: narrowKey.token, code: 'forbidden', kind: 'bot' },
      { id: 'hs-origin-001', orgId: owner.orgId, token: owner.accessToken, code: 'forbidden', kind: 'agent' },
    ];
    const reasons: string[] = [];
    for (const c of cases) {
      const headers: Record<string, string> = { 'x-request-id': c.id, ...(c.id.startsWith('hs-origin') ? { origin: 'https://elsewhere.example.test' } : {}) };
      expect(await refused(open(c.orgId, c.token, headers)), c.id).to.deep.equal({ message: c.code, data: { code: c.code } });
      const line = await logLine('socket refused', c.id);
      expect(line, c.id).to.include({ level: 20, orgId: c.orgId, kind: c.kind });
      expect(line.reason, c.id).to.be.a('string').and.not.equal('');
      reasons.push(line.reason as string);
    }
    // Each cause is told apart; a person's token and a visitor's for another organization are the same cause, a key
    // for another organization is named as a key.
    expect(reasons[2]).to.equal(reasons[3]);
    expect(new Set(reasons).size, reasons.join(' | ')).to.equal(cases.length - 1);
    // The reasons an operator searches the logs for (the key's missing scope is worded by the policy, as on REST).
    expect([reasons[0], reasons[1], reasons[2], reasons[4], reasons[6]]).to.deep.equal([
      'no token',
      'not an access or widget_session token',
      'the token is for another organization',
      'the key is for another organization',
      'origin not in CORS_ORIGINS',
    ]);

    // An empty token is no token, whatever it would decode to.
    expect(await refused(open(owner.orgId, '', { 'x-request-id': 'hs-empty-0001' }))).to.deep.equal({ message: 'unauthorized', data: { code: 'unauthorized' } });
    expect((await logLine('socket refused', 'hs-empty-0001')).reason).to.equal(reasons[0]);

    await connected(open(owner.orgId, visitor.token, { 'x-request-id': 'hs-ok-visitor1' }));
    expect(await logLine('socket connected', 'hs-ok-visitor1')).to.include({ level: 20, orgId: owner.orgId, kind: 'visitor', sessionId: visitor.sessionId });
    await connected(open(owner.orgId, key.token, { 'x-request-id': 'hs-ok-bot-0001' }));
    const bot = await logLine('socket connected', 'hs-ok-bot-0001');
    expect(bot).to.include({ level: 20, orgId: owner.orgId, kind: 'bot', apiKeyId: key.id });
    expect(bot).to.not.have.property('userId');
    expect(bot.socketId).to.be.a('string').and.not.equal('');
    await connected(open(owner.orgId, owner.accessToken, { 'x-request-id': 'hs-ok-agent-01' }));
    const agent = await logLine('socket connected', 'hs-ok-agent-01');
    expect(agent).to.include({ level: 20, orgId: owner.orgId, kind: 'agent', userId: owner.userId });
    expect(agent).to.not.have.property('apiKeyId');
  });
});
