// REST widget: admin configuration, the public config, visitor tokens (origins, resume), the visitor's own
// conversations and messages, QR scans and QR images.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { newVisitor, startConversation, widgetKey } from './helpers/live.js';
import { expectApiError, expectApiSuccess, jwtPayload } from './helpers/auth.js';

describe('REST widget: configuration', () => {
  it('GET/PUT /widget/manage keep a stable publicKey, replace given fields and reject unknown ones', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl, { organizationName: 'Widget Works' });
    const t = { token: owner.accessToken };
    const first = expectApiSuccess(await owner.api.get('/widget/manage', t), 200);
    expect(first.publicKey).to.be.a('string').and.have.length.greaterThan(10);
    expect(first).to.include({ organizationId: owner.orgId, displayName: 'Widget Works' });
    expect(first.allowedOrigins).to.deep.equal([]);
    expect(expectApiSuccess(await owner.api.get('/widget/manage', t), 200).publicKey).to.equal(first.publicKey);

    const updated = expectApiSuccess(
      await owner.api.put('/widget/manage', { displayName: 'Help Desk', appearance: { color: '#123456' }, allowedOrigins: ['https://Shop.Example.test', 'https://shop.example.test'] }, t),
      200,
    );
    expect(updated).to.include({ publicKey: first.publicKey, displayName: 'Help Desk', id: first.id });
    expect(updated.appearance).to.deep.equal({ color: '#123456' });
    expect(updated.allowedOrigins).to.deep.equal(['https://shop.example.test']);
    const again = expectApiSuccess(await owner.api.get('/widget/manage', t), 200);
    expect(again).to.deep.include({ publicKey: first.publicKey, displayName: 'Help Desk', allowedOrigins: ['https://shop.example.test'] });

    expectApiError(await owner.api.put('/widget/manage', { publicKey: 'pk_mine' }, t), 400, 'validation_failed');
    expectApiError(await owner.api.put('/widget/manage', { organizationId: owner.orgId }, t), 400, 'validation_failed');
    expectApiError(await owner.api.put('/widget/manage', { colour: 'red' }, t), 400, 'validation_failed');
    expectApiError(await owner.api.put('/widget/manage', { allowedOrigins: ['javascript:alert(1)'] }, t), 400, 'validation_failed');
    expectApiError(await owner.api.get('/widget/manage'), 401, 'unauthorized');
    expect(expectApiSuccess(await owner.api.get('/widget/manage', t), 200).publicKey).to.equal(first.publicKey);
  });

  it('GET /widget/config gives the public part only; an unknown key is 404', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    const admin = expectApiSuccess(
      await owner.api.put('/widget/manage', { displayName: 'Public Face', allowedOrigins: ['https://a.example.test'], ai: { enabled: true, greeting: 'Hi!', systemPrompt: 'secret prompt' } }, t),
      200,
    );
    const anon = new Api(baseUrl);
    const configPath = `/widget/config?publicKey=${encodeURIComponent(admin.publicKey)}`;
    const listed = { headers: { origin: 'https://a.example.test' } };
    const allowed = await anon.get(configPath, listed);
    const pub = expectApiSuccess(allowed, 200);
    expect(allowed.headers.get('access-control-allow-origin')).to.equal('https://a.example.test');
    // Like the token exchange, a page elsewhere (or a client naming no origin) reads nothing, not even the CORS grant.
    const foreign = await anon.get(configPath, { headers: { origin: 'https://elsewhere.example.test' } });
    expectApiError(foreign, 403, 'forbidden');
    expect(foreign.headers.get('access-control-allow-origin')).to.equal(null);
    expectApiError(await anon.get(configPath), 403, 'forbidden');
    expect(pub).to.include({ publicKey: admin.publicKey, displayName: 'Public Face', organizationId: owner.orgId });
    expect(pub).to.not.have.property('allowedOrigins');
    expect(pub.ai).to.deep.equal({ enabled: true, greeting: 'Hi!' });
    expect(JSON.stringify(pub)).to.not.contain('secret prompt');
    expectApiError(await anon.get('/widget/config?publicKey=pk_does_not_exist'), 404, 'not_found');
    expectApiError(await anon.get('/widget/config'), 400, 'validation_failed');
  });
});

describe('REST widget: visitor tokens', () => {
  it('issues a 24-hour widget_session token, resumes a session and validates only widget tokens', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const publicKey = await widgetKey(owner);
    const anon = new Api(baseUrl);
    const issued = expectApiSuccess(await anon.post('/widget/auth/token', { publicKey, visitor: { name: 'Tina Token', email: 'Tina@Example.test' } }), 201);
    expect(issued).to.have.all.keys('token', 'sessionId', 'organizationId', 'expiresAt');
    expect(issued.organizationId).to.equal(owner.orgId);
    const ttl = Date.parse(issued.expiresAt) - Date.now();
    expect(ttl).to.be.within(24 * 3600_000 - 120_000, 24 * 3600_000 + 1000);
    expect(jwtPayload(issued.token)).to.include({ typ: 'widget_session', orgId: owner.orgId, sessionId: issued.sessionId });

    const valid = expectApiSuccess(await anon.post('/widget/auth/validate', undefined, { token: issued.token }), 200);
    expect(valid).to.deep.equal({ valid: true, sessionId: issued.sessionId, organizationId: owner.orgId });
    expectApiError(await anon.post('/widget/auth/validate', undefined, { token: owner.accessToken }), 401, 'unauthorized');
    expectApiError(await anon.post('/widget/auth/validate'), 401, 'unauthorized');
    expectApiError(await anon.post('/widget/auth/validate', undefined, { token: `${issued.token}x` }), 401, 'unauthorized');
    // And a widget token is no operator token.
    expectApiError(await anon.get('/conversations', { token: issued.token }), 401, 'unauthorized');

    const { conversationId } = await startConversation({ api: anon, token: issued.token, sessionId: issued.sessionId, orgId: owner.orgId, publicKey });
    const resumed = expectApiSuccess(await anon.post('/widget/auth/token', { publicKey, sessionId: issued.sessionId }), 201);
    expect(resumed.sessionId).to.equal(issued.sessionId);
    const mine = expectApiSuccess(await anon.get('/widget/conversations', { token: resumed.token }), 200);
    expect(mine.map((c: any) => c.id)).to.deep.equal([conversationId]);

    // A session of another organization's widget is not resumed: a new session starts.
    const other = await signUp(server, baseUrl);
    const otherKey = await widgetKey(other);
    const fresh = expectApiSuccess(await anon.post('/widget/auth/token', { publicKey: otherKey, sessionId: issued.sessionId }), 201);
    expect(fresh.sessionId).to.not.equal(issued.sessionId);
    expect(fresh.organizationId).to.equal(other.orgId);
    expect(expectApiSuccess(await anon.get('/widget/conversations', { token: fresh.token }), 200)).to.deep.equal([]);

    expectApiError(await anon.post('/widget/auth/token', { publicKey: 'pk_unknown_key' }), 404, 'not_found');
    expectApiError(await anon.post('/widget/auth/token', { publicKey, organizationId: owner.orgId }), 400, 'validation_failed');
  });

  it('with allowedOrigins set, only a listed Origin gets a token', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    const { publicKey } = expectApiSuccess(await owner.api.put('/widget/manage', { allowedOrigins: ['https://shop.example.test', 'http://localhost:8080'] }, t), 200);
    const anon = new Api(baseUrl);
    const token = (origin?: string) => anon.post('/widget/auth/token', { publicKey }, { headers: origin ? { origin } : {} });
    expectApiError(await token('https://evil.example.test'), 403, 'forbidden');
    expectApiError(await token('https://shop.example.test.evil.test'), 403, 'forbidden');
    expectApiError(await token(), 403, 'forbidden');
    expectApiSuccess(await token('https://shop.example.test'), 201);
    expectApiSuccess(await token('http://localhost:8080'), 201);

    // Emptying the list allows every origin again.
    expectApiSuccess(await owner.api.put('/widget/manage', { allowedOrigins: [] }, t), 200);
    expectApiSuccess(await token('https://evil.example.test'), 201);
  });

  it("answers CORS by the widget's rules on every visitor route, whatever CORS_ORIGINS says", async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const t = { token: owner.accessToken };
    const { publicKey } = expectApiSuccess(await owner.api.put('/widget/manage', { allowedOrigins: ['https://shop.example.test'] }, t), 200);
    const anon = new Api(baseUrl);
    // A preflight cannot name its widget: answered for any origin, without credentials.
    const preflight = await anon.request('OPTIONS', '/widget/conversations', { headers: { origin: 'https://evil.example.test', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' } });
    expect(preflight.status).to.equal(204);
    expect(preflight.headers.get('access-control-allow-origin')).to.equal('https://evil.example.test');
    expect(preflight.headers.get('access-control-allow-headers')).to.match(/authorization/i);
    expect(preflight.headers.get('access-control-allow-credentials')).to.equal(null);
    // The operator API keeps CORS_ORIGINS (none here).
    const operatorPreflight = await anon.request('OPTIONS', '/conversations', { headers: { origin: 'https://shop.example.test', 'access-control-request-method': 'GET' } });
    expect(operatorPreflight.headers.get('access-control-allow-origin')).to.equal(null);

    const shop = { origin: 'https://shop.example.test' };
    const { token } = expectApiSuccess(await anon.post('/widget/auth/token', { publicKey }, { headers: shop }), 201);
    const allowed = await anon.post('/widget/auth/validate', {}, { token, headers: shop });
    expectApiSuccess(allowed, 200);
    expect(allowed.headers.get('access-control-allow-origin')).to.equal('https://shop.example.test');
    // A token taken to another website is refused there, and that website reads nothing.
    for (const call of [
      () => anon.post('/widget/auth/validate', {}, { token, headers: { origin: 'https://evil.example.test' } }),
      () => anon.get('/widget/conversations', { token, headers: { origin: 'https://evil.example.test' } }),
      () => anon.post('/widget/conversations', { message: 'hi' }, { token, headers: { origin: 'https://evil.example.test' } }),
      () => anon.post('/widget/qr-scan', { publicKey }, { headers: { origin: 'https://evil.example.test' } }),
    ]) {
      const res = await call();
      expectApiError(res, 403, 'forbidden');
      expect(res.headers.get('access-control-allow-origin')).to.equal(null);
    }
    // The server's own hosted chat page (same host) may always use the widget.
    expectApiSuccess(await anon.post('/widget/auth/token', { publicKey }, { headers: { origin: baseUrl } }), 201);
  });
});

describe('REST widget: visitor conversations', () => {
  it('a visitor sees only their own conversations and public messages; another visitor\'s conversation is 404', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const alice = await newVisitor(owner, { name: 'Alice' });
    const bob = await newVisitor(owner, { name: 'Bob' });
    const t = { token: owner.accessToken };

    const started = await startConversation(alice, 'hello from alice');
    expect(started.body.data.conversation).to.include({ status: 'open', lastSeq: 1 });
    expect(started.body.data.message).to.include({ seq: 1, senderType: 'visitor', content: 'hello from alice', private: false, senderId: alice.sessionId });
    // The visitor view is narrow: no assignee, tags, unread counts or organization internals.
    expect(started.body.data.conversation).to.not.have.any.keys('assignedTo', 'unreadCount', 'tags', 'contactId');
    const second = await startConversation(alice, 'another topic');
    const bobs = await startConversation(bob, 'hello from bob');

    const aliceList = expectApiSuccess(await alice.api.get('/widget/conversations', { token: alice.token }), 200);
    expect(aliceList.map((c: any) => c.id).sort()).to.deep.equal([started.conversationId, second.conversationId].sort());
    expect(expectApiSuccess(await bob.api.get('/widget/conversations', { token: bob.token }), 200).map((c: any) => c.id)).to.deep.equal([bobs.conversationId]);

    const id = started.conversationId;
    expectApiSuccess(await owner.api.post(`/conversations/${id}/messages`, { content: 'public answer' }, t), 201);
    expectApiSuccess(await owner.api.post(`/conversations/${id}/messages`, { content: 'internal only', private: true }, t), 201);
    expectApiSuccess(await owner.api.post(`/conversations/${id}/messages`, { content: 'second answer' }, t), 201);
    const seen = expectApiSuccess(await alice.api.get(`/widget/conversations/${id}/messages`, { token: alice.token }), 200);
    expect(seen.map((m: any) => [m.seq, m.content])).to.deep.equal([[1, 'hello from alice'], [2, 'public answer'], [4, 'second answer']]);
    expect(seen.every((m: any) => m.private === false)).to.equal(true);
    const after = expectApiSuccess(await alice.api.get(`/widget/conversations/${id}/messages?afterSeq=2`, { token: alice.token }), 200);
    expect(after.map((m: any) => m.seq)).to.deep.equal([4]);

    const sent = await alice.api.post(`/widget/conversations/${id}/messages`, { content: 'thanks', clientMessageId: 'v-1' }, { token: alice.token });
    expect(expectApiSuccess(sent, 201)).to.include({ seq: 5, senderType: 'visitor', content: 'thanks' });
    const repeat = await alice.api.post(`/widget/conversations/${id}/messages`, { content: 'thanks', clientMessageId: 'v-1' }, { token: alice.token });
    expect(expectApiSuccess(repeat, 200).id).to.equal(sent.body.data.id);
    expectApiError(await alice.api.post(`/widget/conversations/${id}/messages`, { content: 'sneaky', private: true }, { token: alice.token }), 400, 'validation_failed');

    // Bob cannot read or write Alice's conversation; it answers like one that does not exist.
    expectApiError(await bob.api.get(`/widget/conversations/${id}/messages`, { token: bob.token }), 404, 'not_found');
    expectApiError(await bob.api.post(`/widget/conversations/${id}/messages`, { content: 'hi' }, { token: bob.token }), 404, 'not_found');
    // Nor can a visitor of another organization.
    const stranger = await newVisitor(await signUp(server, baseUrl));
    expectApiError(await stranger.api.get(`/widget/conversations/${id}/messages`, { token: stranger.token }), 404, 'not_found');
    expectApiError(await stranger.api.post(`/widget/conversations/${id}/messages`, { content: 'hi' }, { token: stranger.token }), 404, 'not_found');
    const history = expectApiSuccess(await owner.api.get(`/conversations/${id}`, t), 200);
    expect(history.messages.map((m: any) => m.content)).to.deep.equal(['hello from alice', 'public answer', 'internal only', 'second answer', 'thanks']);
    expectApiError(await alice.api.post('/widget/conversations', { message: 'hi' }, { token: owner.accessToken }), 401, 'unauthorized');
    expectApiError(await alice.api.post('/widget/conversations', { message: 'hi', organizationId: owner.orgId }, { token: alice.token }), 400, 'validation_failed');
    expectApiError(await alice.api.post('/widget/conversations', { message: '' }, { token: alice.token }), 400, 'validation_failed');
  });

  it('a retried start (same clientMessageId) answers 200 with the conversation it already started', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const visitor = await newVisitor(owner);
    const other = await newVisitor(owner);
    const start = (who = visitor) => who.api.post('/widget/conversations', { message: 'help me', clientMessageId: 'start-1' }, { token: who.token });
    const first = expectApiSuccess(await start(), 201);
    const [again, concurrent] = await Promise.all([start(), start()]);
    for (const res of [again, concurrent]) {
      const data = expectApiSuccess(res, 200);
      expect(data.conversation.id).to.equal(first.conversation.id);
      expect(data.message).to.deep.equal(first.message);
    }
    // Another visitor's identical id is theirs alone.
    const theirs = expectApiSuccess(await start(other), 201);
    expect(theirs.conversation.id).to.not.equal(first.conversation.id);
    const listed = expectApiSuccess(await visitor.api.get('/widget/conversations', { token: visitor.token }), 200);
    expect(listed.map((c: any) => c.id)).to.deep.equal([first.conversation.id]);
    expect(await server.db.models.Conversation.acrossOrgs().where('organizationId', owner.orgId).resultSize()).to.equal(2);
  });

  it('a visitor message reopens a resolved conversation; on a closed one it starts a new conversation', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const visitor = await newVisitor(owner);
    const t = { token: owner.accessToken };
    const { conversationId } = await startConversation(visitor, 'first');
    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'resolved' }, t), 200);
    const reply = expectApiSuccess(await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'not fixed yet' }, { token: visitor.token }), 201);
    expect(reply).to.include({ conversationId, seq: 2 });
    const reopened = expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200);
    expect(reopened).to.include({ status: 'open', resolvedAt: null });

    expectApiSuccess(await owner.api.patch(`/conversations/${conversationId}/status`, { status: 'closed' }, t), 200);
    const next = expectApiSuccess(await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'one more thing' }, { token: visitor.token }), 201);
    expect(next.conversationId).to.not.equal(conversationId);
    expect(next.seq).to.equal(1);
    const old = expectApiSuccess(await owner.api.get(`/conversations/${conversationId}`, t), 200);
    expect(old.status).to.equal('closed');
    expect(old.messages).to.have.length(2);
    const fresh = expectApiSuccess(await owner.api.get(`/conversations/${next.conversationId}`, t), 200);
    expect(fresh).to.include({ status: 'open', unreadCount: 1 });
    expect(fresh.visitor.sessionId).to.equal(visitor.sessionId);
    expect(fresh.messages.map((m: any) => m.content)).to.deep.equal(['one more thing']);
    // A retry of that send (same clientMessageId) gets the stored message back instead of starting a third one.
    const first = expectApiSuccess(await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'hello?', clientMessageId: 'retry-1' }, { token: visitor.token }), 201);
    expect(first.conversationId).to.not.be.oneOf([conversationId, next.conversationId]);
    const retry = expectApiSuccess(await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'hello?', clientMessageId: 'retry-1' }, { token: visitor.token }), 200);
    expect(retry).to.deep.equal(first);
    const mine = expectApiSuccess(await visitor.api.get('/widget/conversations', { token: visitor.token }), 200);
    expect(mine.map((c: any) => c.id).sort()).to.deep.equal([conversationId, next.conversationId, first.conversationId].sort());
  });
});

describe('REST widget: QR codes', () => {
  it('records QR scans (201, stored) and 404s an unknown key', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const publicKey = await widgetKey(owner);
    const anon = new Api(baseUrl);
    const count = () => server.db.models.QrScan.acrossOrgs().where('organizationId', owner.orgId).resultSize();
    expect(await count()).to.equal(0);
    expectApiSuccess(await anon.post('/widget/qr-scan', { publicKey }, { headers: { 'user-agent': 'QR-Phone/1.0', referer: 'https://poster.example.test/' } }), 201);
    expectApiSuccess(await anon.post('/widget/qr-scan', { publicKey }), 201);
    expect(await count()).to.equal(2);
    const row = await server.db.models.QrScan.acrossOrgs().where({ organizationId: owner.orgId, userAgent: 'QR-Phone/1.0' }).first();
    expect(row, 'the scan with its user agent').to.not.equal(undefined);
    expect(row!.referrer).to.equal('https://poster.example.test/');
    const widget = expectApiSuccess(await owner.api.get('/widget/manage', { token: owner.accessToken }), 200);
    expect(row!.widgetId).to.equal(widget.id);
    expectApiError(await anon.post('/widget/qr-scan', { publicKey: 'pk_nope_nope' }), 404, 'not_found');
    expect(await count()).to.equal(2);
  });

  it('GET /widget/qr renders SVG and PNG for admins', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const svg = await owner.api.get('/widget/qr?format=svg', { token: owner.accessToken });
    expect(svg.status).to.equal(200);
    expect(svg.headers.get('content-type')).to.match(/^image\/svg\+xml/);
    expect(svg.body).to.be.a('string');
    expect((svg.body as string).trimStart()).to.match(/^(<svg|<\?xml)/);
    expect(svg.body as string).to.contain('</svg>');
    const byDefault = await owner.api.get('/widget/qr', { token: owner.accessToken });
    expect(byDefault.headers.get('content-type')).to.match(/^image\/svg\+xml/);

    const png = await fetch(`${baseUrl}/api/v1/widget/qr?format=png`, { headers: { authorization: `Bearer ${owner.accessToken}` } });
    expect(png.status).to.equal(200);
    expect(png.headers.get('content-type')).to.match(/^image\/png/);
    const bytes = Buffer.from(await png.arrayBuffer());
    expect(bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'PNG magic bytes').to.equal(true);
    expect(bytes.length).to.be.greaterThan(100);

    expectApiError(await owner.api.get('/widget/qr?format=gif', { token: owner.accessToken }), 400, 'validation_failed');
    expectApiError(await owner.api.get('/widget/qr?format=svg'), 401, 'unauthorized');
  });
});
