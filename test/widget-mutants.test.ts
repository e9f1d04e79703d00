// Widget sessions: what the visitor's token exchange stores and resumes, which pages may use a widget that lists its
// websites, the visitor's own conversations, QR scans and QR images. Each case holds a promise no other test read.
import { request } from 'node:http';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { widgetKey } from './helpers/live.js';
import { expectApiError, expectApiSuccess } from './helpers/auth.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/** A visitor token exchange as a browser page makes it; `sessionId` resumes. */
async function exchange(api: Api, publicKey: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  return api.post('/widget/auth/token', { publicKey, ...extra }, { headers });
}

/** Starts a conversation with the token and reads, as the owner, whom it names as its visitor. */
async function visitorSeenByAgents(owner: SignedUp, api: Api, token: string): Promise<{ name: string | null; email: string | null }> {
  const started = expectApiSuccess(await api.post('/widget/conversations', { content: 'hello' }, { token }), 201);
  const conversation = expectApiSuccess(await owner.api.get(`/conversations/${started.conversation.id}`, { token: owner.accessToken }), 200);
  return { name: conversation.visitor.name, email: conversation.visitor.email };
}

/** A POST with a Host header of our choosing (fetch always sends the address it connects to). */
function postWithHost(baseUrl: string, path: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; body: any }> {
  const url = new URL(`${baseUrl}/api/v1${path}`);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), 'x-forwarded-for': '10.9.8.7', ...headers } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

describe('widget sessions', () => {
  it("stores the visitor's name trimmed and email lowercased; a resumed session takes new details and keeps the rest", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const publicKey = await widgetKey(owner);
    const api = new Api(baseUrl);

    const first = expectApiSuccess(await exchange(api, publicKey, { visitor: { name: '  Vera Visitor  ', email: 'Vera@Example.TEST' } }), 201);
    expect(await visitorSeenByAgents(owner, api, first.token)).to.deep.equal({ name: 'Vera Visitor', email: 'vera@example.test' });

    // Resumed with a new name only: the name changes, the email stays.
    const renamed = expectApiSuccess(await exchange(api, publicKey, { sessionId: first.sessionId, visitor: { name: 'Vera Renamed' } }), 201);
    expect(renamed.sessionId).to.equal(first.sessionId);
    expect(await visitorSeenByAgents(owner, api, renamed.token)).to.deep.equal({ name: 'Vera Renamed', email: 'vera@example.test' });

    // Resumed with a new email only: the email changes, the name stays.
    const moved = expectApiSuccess(await exchange(api, publicKey, { sessionId: first.sessionId, visitor: { email: 'New.Address@Example.TEST' } }), 201);
    expect(moved.sessionId).to.equal(first.sessionId);
    expect(await visitorSeenByAgents(owner, api, moved.token)).to.deep.equal({ name: 'Vera Renamed', email: 'new.address@example.test' });

    // Resumed naming nobody: both stay.
    const plain = expectApiSuccess(await exchange(api, publicKey, { sessionId: first.sessionId }), 201);
    expect(plain.sessionId).to.equal(first.sessionId);
    expect(await visitorSeenByAgents(owner, api, plain.token)).to.deep.equal({ name: 'Vera Renamed', email: 'new.address@example.test' });
  });

  it('lists the visitor\'s conversations newest first, and names what it did not find', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const publicKey = await widgetKey(owner);
    const api = new Api(baseUrl);
    const { token } = expectApiSuccess(await exchange(api, publicKey), 201);
    const started: string[] = [];
    for (const content of ['first', 'second', 'third']) {
      started.push(expectApiSuccess(await api.post('/widget/conversations', { content }, { token }), 201).conversation.id);
    }
    const listed = expectApiSuccess(await api.get('/widget/conversations', { token }), 200);
    expect(listed.map((c: { id: string }) => c.id)).to.deep.equal([...started].reverse());

    const missing = await api.get('/widget/conversations/00000000-0000-4000-8000-000000000000/messages', { token });
    expectApiError(missing, 404, 'not_found');
    expect(missing.body.message).to.equal('Conversation not found');
    const unknownKey = await exchange(api, 'pk_no_such_widget_here');
    expectApiError(unknownKey, 404, 'not_found');
    expect(unknownKey.body.message).to.equal('Widget not found');
  });

  it('a configuration change that names no websites keeps the list', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    expectApiSuccess(await owner.api.put('/widget/manage', { allowedOrigins: ['https://shop.example.test'] }, t), 200);
    const renamed = expectApiSuccess(await owner.api.put('/widget/manage', { displayName: 'Renamed Desk' }, t), 200);
    expect(renamed).to.deep.include({ displayName: 'Renamed Desk', allowedOrigins: ['https://shop.example.test'] });
  });

  it('QR scans store a long user agent and referrer cut to their columns, and a scan with no user agent', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const publicKey = await widgetKey(owner);
    const anon = new Api(baseUrl);
    const longAgent = `Phone/${'a'.repeat(700)}`;
    const longReferrer = `https://poster.example.test/${'p'.repeat(3000)}`;
    expectApiSuccess(await anon.post('/widget/qr-scan', { publicKey }, { headers: { 'user-agent': longAgent, referer: longReferrer } }), 201);
    expectApiSuccess(await anon.post('/widget/qr-scan', { publicKey }, { headers: { 'user-agent': '' } }), 201);
    const rows = await server.db.models.QrScan.acrossOrgs().where('organizationId', owner.orgId);
    const long = rows.find((r) => r.userAgent !== null);
    expect(long?.userAgent).to.equal(longAgent.slice(0, 512));
    expect(long?.referrer).to.equal(longReferrer.slice(0, 2048));
    expect(rows.filter((r) => r.userAgent === null)).to.have.length(1);
  });

  it('the PNG QR code is 512 pixels wide', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const png = await fetch(`${baseUrl}/api/v1/widget/qr?format=png`, { headers: { authorization: `Bearer ${owner.accessToken}` } });
    expect(png.status).to.equal(200);
    const bytes = Buffer.from(await png.arrayBuffer());
    // The IHDR chunk follows the 8-byte signature: length, type, then width and height as 32-bit big-endian.
    expect(bytes.subarray(12, 16).toString('latin1')).to.equal('IHDR');
    expect([bytes.readUInt32BE(16), bytes.readUInt32BE(20)]).to.deep.equal([512, 512]);
  });
});

describe('widget sessions: which pages may use a widget that lists its websites', () => {
  let app: TestServer;
  let publicKey: string;

  before(async () => {
    // The hosted chat pages live at PUBLIC_URL; behind a proxy the server sees another Host.
    app = await startTestServer({ PUBLIC_URL: 'https://Support.Example.test' });
    const owner = await signUp(app.server, app.baseUrl);
    ({ publicKey } = expectApiSuccess(await owner.api.put('/widget/manage', { allowedOrigins: ['https://shop.example.test'] }, { token: owner.accessToken }), 200));
  });
  after(async () => {
    await app?.stop();
  });

  it("the hosted chat page at PUBLIC_URL may, whatever Host the server sees", async () => {
    const api = new Api(app.baseUrl);
    expectApiSuccess(await exchange(api, publicKey, {}, { origin: 'https://support.example.test' }), 201);
    expectApiError(await exchange(api, publicKey, {}, { origin: 'https://other.example.test' }), 403, 'forbidden');
  });

  it('a page on the Host the request names may, whatever the case of that Host', async () => {
    const same = await postWithHost(app.baseUrl, '/widget/auth/token', { publicKey }, { host: 'Chat.Example.test', origin: 'https://chat.example.test' });
    expect(same.status, JSON.stringify(same.body)).to.equal(201);
    const other = await postWithHost(app.baseUrl, '/widget/auth/token', { publicKey }, { host: 'Chat.Example.test', origin: 'https://shop.example.test.evil.test' });
    expect(other.status).to.equal(403);
  });

  it('an opaque Origin ("null", a sandboxed frame) is not a listed website', async () => {
    const api = new Api(app.baseUrl);
    const res = await exchange(api, publicKey, {}, { origin: 'null' });
    expectApiError(res, 403, 'forbidden');
    expect(res.headers.get('access-control-allow-origin')).to.equal(null);
  });
});
