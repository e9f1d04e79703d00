// The files and pages the app serves outside the API: widget.js and its caching, the hosted chat page, the API
// reference, and where mail links point (APP_URL).
import { expect } from 'chai';
import { loadConfig } from '../server/config.js';
import { sharedServer } from './helpers/hooks.js';
import { latestMail, signUp, uniqueEmail } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';

describe('web: widget.js, hosted pages and the API reference', () => {
  it('serves widget.js and the Socket.IO client for other sites, cached with an ETag (304 when unchanged)', async () => {
    const { baseUrl } = sharedServer();
    const res = await fetch(`${baseUrl}/widget.js`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/javascript/);
    expect(res.headers.get('cache-control')).to.equal('public, max-age=300');
    // Loaded by <script> from any website: the resource policy must not stop it.
    expect(res.headers.get('cross-origin-resource-policy')).to.equal('cross-origin');
    const etag = res.headers.get('etag')!;
    expect(etag).to.match(/^".+"$/);
    expect(await res.text()).to.contain('data-key');
    expect((await fetch(`${baseUrl}/widget.js`, { headers: { 'if-none-match': etag } })).status).to.equal(304);
    const client = await fetch(`${baseUrl}/assets/socket.io.min.js`);
    expect(client.status).to.equal(200);
    expect(client.headers.get('cross-origin-resource-policy')).to.equal('cross-origin');
  });

  it('serves the hosted chat page with a strict Content-Security-Policy, and 404 for a malformed key', async () => {
    const { baseUrl } = sharedServer();
    const res = await fetch(`${baseUrl}/chat/pk_abc123?source=qr`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-security-policy')).to.contain("script-src 'self'").and.not.contain('unsafe-inline');
    const html = await res.text();
    expect(html).to.contain('data-key="pk_abc123"').and.contain('data-source="qr"').and.contain('width=device-width');
    expect((await fetch(`${baseUrl}/chat/${encodeURIComponent('<script>')}`)).status).to.equal(404);
    const docs = await fetch(`${baseUrl}/api/v1/docs`);
    expect(docs.status).to.equal(200);
    expect(await docs.text()).to.contain('/api/v1/openapi.json').and.contain('/api/v1/docs/redoc.standalone.js');
    expect((await fetch(`${baseUrl}/api/v1/docs/redoc.standalone.js`)).status).to.equal(200);
  });

  it('APP_URL defaults to PUBLIC_URL and must be an http(s) URL', () => {
    expect(loadConfig({ PUBLIC_URL: 'https://support.example.test/' }).appUrl).to.equal('https://support.example.test');
    expect(loadConfig({ PUBLIC_URL: 'https://support.example.test', APP_URL: 'https://app.example.test/' }).appUrl).to.equal('https://app.example.test');
    expect(() => loadConfig({ APP_URL: 'ftp://app.example.test' })).to.throw(/APP_URL/);
  });

  describe('with a separate dashboard (APP_URL elsewhere)', function () {
    this.timeout(60_000);
    let app: TestServer;
    before(async () => {
      app = await startTestServer({ PUBLIC_URL: 'https://support.example.test', APP_URL: 'https://app.example.test' });
    });
    after(async () => app?.stop());

    it('builds invite links on APP_URL and sends a link that reached this server on to the dashboard', async () => {
      const owner = await signUp(app.server, app.baseUrl);
      const email = uniqueEmail('invitee');
      const invite = await owner.api.post(`/memberships/organizations/${owner.orgId}/members/invite`, { email, role: 'agent' }, { token: owner.accessToken });
      expect(invite.status).to.equal(201);
      const mail = await latestMail(app.server, email, 'invitation');
      expect(mail!.textBody).to.match(/https:\/\/app\.example\.test\/accept-invite\?token=/);
      const res = await fetch(`${app.baseUrl}/accept-invite?token=abc`, { redirect: 'manual' });
      expect(res.status).to.equal(302);
      expect(res.headers.get('location')).to.equal('https://app.example.test/accept-invite?token=abc');
    });
  });
});
