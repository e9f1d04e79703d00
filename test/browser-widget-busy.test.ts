// The widget in real Chromium when its server is busy: a reconnect refused with service_unavailable and retryAfter
// (Socket.IO never retries a refused handshake by itself) is tried again once that time has passed, and the visitor
// hears the agent again.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { chromium, type BrowserContext } from 'playwright-core';
import { io as connect, type Socket } from 'socket.io-client';
import { expectApiSuccess } from './helpers/auth.js';
import { signUp } from './helpers/factories.js';
import { newVisitor } from './helpers/live.js';
import { captureLogs } from './helpers/logs.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

interface Pool {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<void>;
  pool?: { max: number };
}

describe('browser: the widget when the server is busy (Chromium)', function () {
  this.timeout(90_000);
  let app: TestServer;
  let context: BrowserContext;
  let profile: string;
  let site: Server;
  const logs = captureLogs('debug');
  const sockets: Socket[] = [];

  before(async function () {
    if (!existsSync(CHROMIUM)) return this.skip(); // CI installs chromium (.ci/run); without it there is no browser to drive.
    // One handshake may wait for its caller; nothing answered lately allows no more.
    app = await startTestServer({ SOCKET_HANDSHAKE_BACKLOG: '1', SOCKET_HANDSHAKE_MAX_WAIT_MS: '1000' }, { logger: logs.logger });
    site = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><html><head><title>Shop</title></head><body><script src="${app.baseUrl}/widget.js" data-key="${publicKey}"></script></body></html>`);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.2', resolve));
    profile = mkdtempSync(path.join(tmpdir(), 'chromium-profile-'));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS });
  });
  after(async () => {
    for (const s of sockets) s.close();
    await context?.close();
    site?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await app?.stop();
  });

  let publicKey = '';

  it('tries a refused reconnect again after retryAfter and hears the agent again', async () => {
    const owner = await signUp(app.server, app.baseUrl);
    const origin = `http://127.0.0.2:${(site.address() as AddressInfo).port}`;
    publicKey = expectApiSuccess(await owner.api.put('/widget/manage', { allowedOrigins: [origin] }, { token: owner.accessToken }), 200).publicKey;
    const agent = connect(`${app.baseUrl}/orgs/${owner.orgId}`, { auth: { token: owner.accessToken }, transports: ['websocket'], reconnection: false });
    sockets.push(agent);
    await new Promise<void>((resolve) => agent.once('connect', () => resolve()));
    const other = await newVisitor(owner, { origin });

    const page = await context.newPage();
    await page.goto(`${origin}/`);
    await page.locator('[data-support-widget] .launcher').click();
    const arrived = new Promise<{ conversationId: string }>((resolve) => agent.once('new_message', resolve));
    await page.locator('[data-support-widget] textarea').fill('Is anyone there?');
    await page.keyboard.press('Enter');
    const { conversationId } = await arrived;
    const nsp = app.server.realtime.io.of(`/orgs/${owner.orgId}`);
    const widgetSocket = await waitFor(async () => (await nsp.fetchSockets()).find((s) => s.data.visitor), { what: "the widget's socket" });

    // The caller lookups stall (every pooled connection taken) and another visitor's handshake fills the backlog.
    const client = app.server.db.knex.client as unknown as Pool;
    const held: unknown[] = [];
    try {
      for (let i = 0; i < (client.pool?.max ?? 1); i++) held.push(await client.acquireConnection());
      const blocker = connect(`${app.baseUrl}/orgs/${owner.orgId}`, { auth: { token: other.token }, transports: ['websocket'], reconnection: false, extraHeaders: { origin } });
      sockets.push(blocker);
      await waitFor(() => app.server.realtime.handshakesWaiting() === 1, { what: 'a handshake waiting' });
      const refusedBefore = logs.lines.filter((l) => l.reason === 'too many handshakes waiting').length;
      // The instance drops the widget's socket (as one stopping does): the widget's reconnect is refused.
      widgetSocket.disconnect(true);
      await waitFor(() => logs.lines.filter((l) => l.reason === 'too many handshakes waiting').length > refusedBefore, { what: "the widget's reconnect refused" });
    } finally {
      for (const connection of held) await client.releaseConnection(connection);
    }
    // Nothing else brings it back: the widget connects again by itself once retryAfter has passed.
    await waitFor(async () => (await nsp.fetchSockets()).some((s) => s.data.visitor?.sessionId === widgetSocket.data.visitor!.sessionId), { timeoutMs: 40_000, what: 'the widget back' });
    await new Promise((resolve) => agent.emit('send_message', { conversationId, content: 'Yes, we are here.', clientMessageId: randomUUID() }, resolve));
    await page.locator('[data-support-widget] .msg.agent', { hasText: 'Yes, we are here.' }).waitFor({ timeout: 15_000 });
    expect(await page.locator('[data-support-widget] .msg.agent', { hasText: 'Yes, we are here.' }).count()).to.equal(1);
    await page.close();
  });
});
