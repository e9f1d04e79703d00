// The visitor's side in real Chromium: the widget embedded on another origin, the hosted chat page at a phone's
// viewport, the account pages behind mail links and the API reference. Screenshots go to test/reports/browser/.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { io as connect, type Socket } from 'socket.io-client';
import { expectApiSuccess } from './helpers/auth.js';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';
import { latestMail, linkTokenIn, signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';

const CHROMIUM = '/usr/bin/chromium';
const REPORTS = path.resolve('test/reports/browser');
// The machine's network may be closed: nothing in the browser reaches beyond loopback.
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** A customer's website on its own loopback address: hostile CSS, then the embed snippet. */
async function hostSite(address: string, page: () => string): Promise<{ server: Server; origin: string }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(page());
  });
  await new Promise<void>((resolve) => server.listen(0, address, resolve));
  return { server, origin: `http://${address}:${(server.address() as AddressInfo).port}` };
}

function nextEvent<T>(socket: Socket, event: string, accept: (payload: T) => boolean = () => true, ms = 15_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} within ${ms} ms`)), ms);
    const handler = (payload: T) => {
      if (!accept(payload)) return;
      clearTimeout(timer);
      socket.off(event, handler);
      resolve(payload);
    };
    socket.on(event, handler);
  });
}

const shot = (page: Page, name: string) => page.screenshot({ path: path.join(REPORTS, `${name}.png`) });

describe('browser: the widget, the hosted pages and the API reference (Chromium)', function () {
  this.timeout(60_000);
  let context: BrowserContext;
  let profile: string;
  let owner: SignedUp;
  let publicKey: string;
  let agent: Socket;
  const sites: Server[] = [];
  let allowedOrigin = '';
  let foreignOrigin = '';

  before(async function () {
    if (!existsSync(CHROMIUM)) return this.skip(); // CI installs chromium (.ci/run); without it there is no browser to drive.
    mkdirSync(REPORTS, { recursive: true });
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl, { organizationName: 'Acme Shop' });
    const embed = () => `<!doctype html><html><head><title>Shop</title>
<style>* { font-family: serif !important; color: green !important; } button { background: red !important; font-size: 40px !important; }</style>
</head><body><h1>Acme Shop</h1><p>Products.</p><script src="${baseUrl}/widget.js" data-key="${publicKey}"></script></body></html>`;
    const allowed = await hostSite('127.0.0.2', embed);
    const foreign = await hostSite('127.0.0.3', embed);
    sites.push(allowed.server, foreign.server);
    allowedOrigin = allowed.origin;
    foreignOrigin = foreign.origin;
    const widget = expectApiSuccess(
      await owner.api.put('/widget/manage', { displayName: 'Acme Help', appearance: { primaryColor: '#7c3aed' }, behavior: { greeting: 'Hi! How can we help?' }, allowedOrigins: [allowedOrigin] }, { token: owner.accessToken }),
      200,
    );
    publicKey = widget.publicKey;
    agent = connect(`${baseUrl}/orgs/${owner.orgId}`, { auth: { token: owner.accessToken }, transports: ['websocket'], reconnection: false });
    await nextEvent(agent, 'connect');
    profile = mkdtempSync(path.join(tmpdir(), 'chromium-profile-'));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1280, height: 800 } });
  });

  after(async () => {
    agent?.close();
    await context?.close();
    for (const s of sites) s.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  let conversationId = '';

  it('a visitor on an allowed website chats with an agent: the reply and the typing indicator show live', async () => {
    const page = await context.newPage();
    await page.goto(`${allowedOrigin}/`);
    const launcher = page.locator('[data-support-widget] .launcher');
    await launcher.waitFor();
    // The host page's CSS does not reach inside the widget.
    expect(await launcher.evaluate((el) => getComputedStyle(el).fontSize)).to.not.equal('40px');
    await launcher.click();
    await page.locator('[data-support-widget] header', { hasText: 'Acme Help' }).waitFor();
    await page.locator('[data-support-widget] .msg.greeting', { hasText: 'Hi! How can we help?' }).waitFor();

    const arrived = nextEvent<{ conversationId: string; message: { content: string; senderType: string } }>(agent, 'new_message', (p) => p.message.content === 'Where is my order?');
    await page.locator('[data-support-widget] textarea').fill('Where is my order?');
    await page.keyboard.press('Enter');
    conversationId = (await arrived).conversationId;

    await page.locator('[data-support-widget] .msg.visitor:not(.sending)', { hasText: 'Where is my order?' }).waitFor();
    // The visitor's socket is up once the conversation exists; typing reaches the page.
    const typingShown = page.locator('[data-support-widget] .typing', { hasText: 'is typing' });
    for (let i = 0; i < 20 && !(await typingShown.isVisible()); i++) {
      agent.emit('typing_start', { conversationId }, () => undefined);
      await page.waitForTimeout(250);
    }
    await typingShown.waitFor({ timeout: 5_000 });
    await shot(page, '1-widget-agent-typing');
    await new Promise((resolve) => agent.emit('send_message', { conversationId, content: 'It ships today.', clientMessageId: randomUUID() }, resolve));
    await page.locator('[data-support-widget] .msg.agent', { hasText: 'It ships today.' }).waitFor();
    expect(await page.locator('[data-support-widget] .typing').textContent()).to.equal('');
    await shot(page, '2-widget-agent-reply');

    // The server drops the visitor's socket (an instance stopping): the widget reconnects and catches up with sync.
    const { server } = sharedServer();
    const visitors = (await server.realtime.io.of(`/orgs/${owner.orgId}`).fetchSockets()).filter((s) => s.data.visitor);
    expect(visitors).to.have.length(1);
    visitors[0]!.disconnect(true);
    await new Promise((resolve) => agent.emit('send_message', { conversationId, content: 'Sent while you were away.', clientMessageId: randomUUID() }, resolve));
    await page.locator('[data-support-widget] .msg.agent', { hasText: 'Sent while you were away.' }).waitFor();

    // A reload keeps the session and the conversation.
    await page.reload();
    await page.locator('[data-support-widget] .launcher').click();
    await page.locator('[data-support-widget] .msg.visitor', { hasText: 'Where is my order?' }).waitFor();
    await page.locator('[data-support-widget] .msg.agent', { hasText: 'It ships today.' }).waitFor();
    const again = nextEvent<{ conversationId: string }>(agent, 'new_message', (p) => p.conversationId === conversationId);
    await page.locator('[data-support-widget] textarea').fill('Thanks!');
    await page.keyboard.press('Enter');
    expect((await again).conversationId).to.equal(conversationId);
    await shot(page, '3-widget-after-reload');
    await page.close();
  });

  it('a website outside allowedOrigins gets nothing: no widget, no token, no messages', async () => {
    const page = await context.newPage();
    await page.goto(`${foreignOrigin}/`);
    await page.waitForTimeout(1_500);
    expect(await page.locator('[data-support-widget]').count()).to.equal(0);
    const { baseUrl } = sharedServer();
    // A token obtained elsewhere does not help either: the page cannot read the answer.
    const token = expectApiSuccess(await new Api(baseUrl).post('/widget/auth/token', { publicKey }, { headers: { origin: allowedOrigin } }), 201).token;
    // Given as source text: the test runner's compiled helpers do not exist inside the page.
    const attempts = await page.evaluate(`(async () => {
      const tryFetch = (url, init) => fetch(url, init).then((r) => 'read ' + r.status, () => 'blocked');
      return [
        await tryFetch(${JSON.stringify(`${baseUrl}/api/v1/widget/auth/token`)}, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ publicKey: ${JSON.stringify(publicKey)} }) }),
        await tryFetch(${JSON.stringify(`${baseUrl}/api/v1/widget/conversations/${conversationId}/messages`)}, { headers: { authorization: ${JSON.stringify(`Bearer ${token}`)} } }),
      ];
    })()`);
    expect(attempts).to.deep.equal(['blocked', 'blocked']);
    await shot(page, '4-foreign-origin-nothing');
    await page.close();
  });

  it('the hosted chat page (the QR code target) works at a phone viewport and records the scan', async () => {
    const { server, baseUrl } = sharedServer();
    const scans = async () => Number(((await server.db.models.QrScan.acrossOrgs().where('organizationId', owner.orgId).count('* as n').first()) as unknown as { n: string }).n);
    const before = await scans();
    const page = await context.newPage();
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${baseUrl}/chat/${publicKey}?source=qr`);
    const panel = page.locator('[data-support-widget] .panel');
    await panel.waitFor();
    const box = await panel.boundingBox();
    expect(box!.width).to.equal(390);
    const arrived = nextEvent<{ conversationId: string; message: { content: string } }>(agent, 'new_message', (p) => p.message.content === 'Scanned the code in store');
    await page.locator('[data-support-widget] textarea').fill('Scanned the code in store');
    await page.locator('[data-support-widget] button.send').click();
    const { conversationId: qrConversation } = await arrived;
    const ack = await new Promise((resolve) => agent.emit('send_message', { conversationId: qrConversation, content: 'Welcome to the store!', clientMessageId: randomUUID() }, resolve));
    expect(ack).to.have.property('success', true);
    await page.locator('[data-support-widget] .msg.agent', { hasText: 'Welcome to the store!' }).waitFor();
    expect(await scans()).to.equal(before + 1);
    const conversation = await server.db.models.Conversation.acrossOrgs().findById(qrConversation);
    expect(conversation!.source).to.equal('qr');
    await shot(page, '5-hosted-chat-phone');
    await page.close();
  });

  it('the accept-invite page creates the account and joins the organization, or joins with an existing account', async () => {
    const { server, baseUrl } = sharedServer();
    const email = uniqueEmail('invitee');
    expectApiSuccess(await owner.api.post(`/memberships/organizations/${owner.orgId}/members/invite`, { email, role: 'agent' }, { token: owner.accessToken }), 201);
    const mail = await latestMail(server, email, 'invitation');
    expect(mail!.textBody).to.match(/\/accept-invite\?token=/);
    const page = await context.newPage();
    await page.goto(`${baseUrl}/accept-invite?token=${encodeURIComponent(linkTokenIn(mail!.textBody))}`);
    await page.locator('h1', { hasText: 'Join Acme Shop' }).waitFor();
    await page.fill('#name', 'Ivy Invitee');
    await page.fill('#password', 'invitee password 1');
    await page.click('button[type=submit]');
    await page.locator('#result', { hasText: 'You joined Acme Shop as agent' }).waitFor();
    await shot(page, '6-accept-invite');
    expectApiSuccess(await new Api(baseUrl).post('/auth/login', { email, password: 'invitee password 1' }), 200);

    // Invited again elsewhere, the person now has an account: the page asks only for its password.
    const other = await signUp(server, baseUrl, { organizationName: 'Beta Co' });
    expectApiSuccess(await other.api.post(`/memberships/organizations/${other.orgId}/members/invite`, { email, role: 'admin' }, { token: other.accessToken }), 201);
    const second = await latestMail(server, email, 'invitation');
    await page.goto(`${baseUrl}/accept-invite?token=${encodeURIComponent(linkTokenIn(second!.textBody))}`);
    await page.locator('h1', { hasText: 'Join Beta Co' }).waitFor();
    expect(await page.locator('#name').count()).to.equal(0);
    await page.fill('#password', 'invitee password 1');
    await page.click('button[type=submit]');
    await page.locator('#result', { hasText: 'You joined Beta Co as admin' }).waitFor();
    await shot(page, '6b-accept-invite-existing-account');
    await page.close();
  });

  it('the reset-password page sets a new password, and the sign-in page reports success with it', async () => {
    const { server, baseUrl } = sharedServer();
    expectApiSuccess(await new Api(baseUrl).post('/auth/forgot-password', { email: owner.email }), 200);
    const mail = await latestMail(server, owner.email, 'password_reset');
    expect(mail!.textBody).to.match(/\/reset-password\?token=/);
    const page = await context.newPage();
    await page.goto(`${baseUrl}/reset-password?token=${encodeURIComponent(linkTokenIn(mail!.textBody))}`);
    await page.fill('#newPassword', 'a brand new password');
    await page.click('button[type=submit]');
    await page.locator('#result', { hasText: 'Your password has been changed' }).waitFor();
    await shot(page, '7-reset-password');
    await page.goto(`${baseUrl}/login`);
    await page.fill('#email', owner.email);
    await page.fill('#password', 'a brand new password');
    await page.click('button[type=submit]');
    await page.locator('#result', { hasText: 'Signed in as' }).waitFor();
    await shot(page, '8-login');
    await page.close();
  });

  it('/api/v1/docs renders the API reference from the served document', async () => {
    const { baseUrl } = sharedServer();
    const page = await context.newPage();
    await page.goto(`${baseUrl}/api/v1/docs`);
    await page.getByText('Support Platform API', { exact: false }).first().waitFor({ timeout: 45_000 });
    await page.locator('h2', { hasText: 'Exchange the public key' }).first().waitFor({ timeout: 15_000 });
    await shot(page, '9-api-docs');
    await page.close();
  });
});
