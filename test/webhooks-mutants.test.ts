// Delivery rules that each change of the code should break: 429 waits for its Retry-After (bounded, and only on 429),
// other 4xx are final, the last attempt fails the delivery for good, 50 failures in a row disable the hook, a hook
// disabled meanwhile gets nothing but a test, the answer is kept cut and without NUL, the request's headers, and an
// unreadable secret is not retried.
import { createDecipheriv, createHash, createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { WEBHOOK_FANOUT_QUEUE } from '../server/services/webhooks/queue.js';
import { isPublicAddress } from '../server/addresses.js';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { fannedOut } from './helpers/webhookFanout.js';
import { signedWith, startReceiver, type Received, type WebhookReceiver } from './helpers/webhookReceiver.js';

const QUEUE = 'webhook-delivery';
const METRICS_TOKEN = 'metrics-token-webhook-rules';

describe('webhooks: delivery rules', function () {
  this.timeout(60_000);
  let server: TestServer;
  let receiver: WebhookReceiver;

  before(async () => {
    server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_MS: '2000', METRICS_TOKEN });
    receiver = await startReceiver();
    // Deliveries earlier tests (or runs) left waiting for a retry, to receivers long gone, wait a day more: run here,
    // they would add to the counts these tests read.
    await server.server.db.knex('jobs').where({ queue: QUEUE, status: 'pending' }).update({ run_at: new Date(Date.now() + 86_400_000) });
  });
  after(async () => {
    await server?.stop();
    await receiver?.close();
  });
  // The queue's own poller is stopped: each test runs the deliveries itself, after arranging their rows.
  beforeEach(async () => {
    receiver.received.length = 0;
    receiver.plan();
    await server.server.jobs.stop();
  });
  afterEach(() => server.server.jobs.start());

  const knex = () => server.server.db.knex;

  async function createHook(owner: SignedUp, events: string[] = ['contact.created']): Promise<{ id: string; secret: string }> {
    const res = await owner.api.post('/webhooks', { url: receiver.url, events }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return { id: res.body.data.webhook.id, secret: res.body.data.secret };
  }

  async function contact(owner: SignedUp, name = 'Someone'): Promise<void> {
    const res = await owner.api.post('/contacts', { name, email: uniqueEmail('hookrule') }, { token: owner.accessToken });
    expect(res.status).to.equal(201);
  }

  /** The hook's one delivery and its job, after running what is due now. */
  async function run(hookId: string): Promise<{ delivery: any; job: any }> {
    const ofHook = () => knex()('jobs').where({ queue: QUEUE }).whereRaw(`payload->>'deliveryId' in (select id::text from webhook_deliveries where webhook_id = ?)`, [hookId]);
    // Only this hook's delivery is made due: earlier tests leave theirs waiting for a retry.
    await ofHook().where({ status: 'pending' }).update({ run_at: new Date(Date.now() - 1000) });
    await server.server.jobs.drain(QUEUE);
    const delivery = await knex()('webhook_deliveries').where({ webhook_id: hookId }).first();
    const job = await ofHook().first();
    return { delivery, job };
  }

  /** webhook_deliveries_total by result, as /metrics counts them. */
  async function counted(): Promise<Record<string, number>> {
    const text = await (await fetch(`${server.baseUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    const out: Record<string, number> = { succeeded: 0, retry: 0, failed: 0 };
    for (const m of text.matchAll(/^webhook_deliveries_total\{result="(\w+)"\} (\d+)$/gm)) out[m[1]!] = Number(m[2]);
    return out;
  }
  /** What /metrics counted since `before`. */
  const since = async (before: Record<string, number>) => {
    const now = await counted();
    return { succeeded: now.succeeded! - before.succeeded!, retry: now.retry! - before.retry!, failed: now.failed! - before.failed! };
  };

  /** Seconds from the job's reschedule to its next run (both written by one statement). */
  const delayOf = (job: { runAt: Date; updatedAt: Date }) => Math.round((new Date(job.runAt).getTime() - new Date(job.updatedAt).getTime()) / 1000);

  it('waits out a 429\'s Retry-After (seconds or a date, at most a day); without one, or on a 5xx, the schedule', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner);
    await contact(owner);
    const before = await counted();
    receiver.plan({ status: 429, headers: { 'retry-after': '120' } });
    let { delivery, job } = await run(hook.id);
    expect(delivery).to.include({ status: 'pending', attempts: 1, responseStatus: 429 });
    expect(job.status).to.equal('pending');
    expect(delayOf(job)).to.equal(120);

    receiver.plan({ status: 429, headers: { 'retry-after': new Date(Date.now() + 600_000).toUTCString() } });
    ({ job } = await run(hook.id));
    expect(delayOf(job)).to.be.within(590, 600);

    receiver.plan({ status: 429, headers: { 'retry-after': '999999' } });
    ({ job } = await run(hook.id));
    expect(delayOf(job)).to.equal(86_400);

    receiver.plan({ status: 429, headers: { 'retry-after': 'soon' } });
    ({ delivery, job } = await run(hook.id));
    expect(delivery).to.include({ status: 'pending', attempts: 4 });
    expect(delayOf(job)).to.equal(7200); // after the 4th attempt

    receiver.plan({ status: 503, headers: { 'retry-after': '120' } });
    ({ delivery, job } = await run(hook.id));
    expect(delivery).to.include({ status: 'pending', attempts: 5, responseStatus: 503 });
    expect(delayOf(job)).to.equal(21_600);

    receiver.plan({ status: 429, headers: { 'retry-after': '0' } });
    ({ job } = await run(hook.id));
    expect(delayOf(job)).to.equal(1);
    expect(await since(before)).to.deep.equal({ succeeded: 0, retry: 6, failed: 0 });
    expect((await owner.api.get(`/webhooks/${hook.id}`, { token: owner.accessToken })).body.data).to.include({ enabled: true, consecutiveFailures: 6 });
    // Sent once more (it is due in a second, and would take another test's planned answer otherwise): a success
    // forgets the hook's failures.
    ({ delivery } = await run(hook.id));
    expect(delivery).to.include({ status: 'succeeded', attempts: 7 });
    expect((await owner.api.get(`/webhooks/${hook.id}`, { token: owner.accessToken })).body.data).to.include({ enabled: true, consecutiveFailures: 0 });
  });

  it('takes any other answer as final: a 300 or a 400 fails the delivery at once and counts against the hook', async () => {
    for (const status of [300, 400]) {
      const owner = await signUp(server.server, server.baseUrl);
      const hook = await createHook(owner);
      await contact(owner);
      const before = await counted();
      receiver.received.length = 0;
      receiver.plan({ status });
      const { delivery, job } = await run(hook.id);
      expect(delivery).to.include({ status: 'failed', attempts: 1, responseStatus: status, lastError: `HTTP ${status}` });
      expect(job.status).to.equal('failed');
      expect((await owner.api.get(`/webhooks/${hook.id}`, { token: owner.accessToken })).body.data).to.include({ enabled: true, consecutiveFailures: 1 });
      expect(receiver.received).to.have.length(1);
      expect(await since(before)).to.deep.equal({ succeeded: 0, retry: 0, failed: 1 });
    }
  });

  it('sends nothing, and finishes the job, for a delivery gone, already settled, or whose hook is not its organization\'s', async () => {
    const other = await signUp(server.server, server.baseUrl);
    for (const change of ['gone', 'settled', 'foreign'] as const) {
      const owner = await signUp(server.server, server.baseUrl);
      const hook = await createHook(owner);
      await contact(owner);
      const [delivery] = await knex()('webhook_deliveries').where({ webhook_id: hook.id });
      const job = () => knex()('jobs').where({ queue: QUEUE }).whereRaw(`payload->>'deliveryId' = ?`, [delivery.id]).first();
      if (change === 'gone') await knex()('webhook_deliveries').where({ id: delivery.id }).delete();
      if (change === 'settled') await knex()('webhook_deliveries').where({ id: delivery.id }).update({ status: 'succeeded' });
      if (change === 'foreign') await knex()('webhooks').where({ id: hook.id }).update({ organization_id: other.orgId });
      await server.server.jobs.drain(QUEUE);
      expect((await job()).status, change).to.equal('done');
      // (An earlier test's delivery may be due again now: only this organization's count.)
      expect(receiver.received.filter((r) => r.json?.organizationId === owner.orgId), change).to.have.length(0);
    }
  });

  it('fails the delivery for good when its last attempt fails, not before', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner);
    await contact(owner);
    // Six attempts already made: the next is the 7th of 8.
    await knex()('jobs').where({ queue: QUEUE, organization_id: owner.orgId }).update({ attempts: 6 });
    const before = await counted();
    receiver.plan({ status: 500 }, { status: 500 });
    let { delivery, job } = await run(hook.id);
    expect(delivery.status).to.equal('pending');
    expect(job).to.include({ status: 'pending', attempts: 7 });
    ({ delivery, job } = await run(hook.id));
    expect(delivery).to.include({ status: 'failed', responseStatus: 500 });
    expect(job).to.include({ status: 'failed', attempts: 8 });
    expect(await since(before)).to.deep.equal({ succeeded: 0, retry: 1, failed: 1 });
  });

  it('disables the hook at its 50th failure in a row, not its 49th, and tells the admins why', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const hook = await createHook(owner);
    await knex()('webhooks').where({ id: hook.id }).update({ consecutive_failures: 48 });
    await contact(owner);
    receiver.plan({ status: 500 }, { status: 500 });
    await run(hook.id);
    expect((await owner.api.get(`/webhooks/${hook.id}`, t)).body.data).to.include({ enabled: true, consecutiveFailures: 49 });
    expect((await owner.api.get('/notifications', t)).body.data).to.have.length(0);
    await run(hook.id);
    const got = (await owner.api.get(`/webhooks/${hook.id}`, t)).body.data;
    expect(got).to.include({ enabled: false, consecutiveFailures: 50, disabledReason: '50 deliveries failed in a row' });
    const notes = (await owner.api.get('/notifications', t)).body.data;
    expect(notes.map((n: any) => [n.type, n.title])).to.deep.equal([['webhook_disabled', 'A webhook was disabled']]);
    expect(notes[0].body).to.equal(`${receiver.url}: 50 deliveries failed in a row. Fix the receiver, then enable the webhook again.`);
    expect(notes[0].data).to.deep.include({ webhookId: hook.id, url: receiver.url, reason: '50 deliveries failed in a row' });
  });

  it('tells the admins once when deliveries sent together are all answered 410', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const hook = await createHook(owner);
    await contact(owner, 'Gone One');
    await contact(owner, 'Gone Two');
    receiver.plan({ status: 410 }, { status: 410 });
    // Both claimed by one drain and sent while the hook is still enabled: both runs turn it off, one tells.
    await server.server.jobs.drain(QUEUE);
    expect(await receiver.waitFor(2, (r) => r.json?.organizationId === owner.orgId)).to.have.length(2);
    const rows = await knex()('webhook_deliveries').where({ webhook_id: hook.id });
    expect(rows.map((r: { status: string; responseStatus: number }) => `${r.status}:${r.responseStatus}`)).to.deep.equal(['failed:410', 'failed:410']);
    expect((await owner.api.get(`/webhooks/${hook.id}`, t)).body.data).to.include({ enabled: false, disabledReason: 'The receiver answered 410 Gone' });
    const notes = (await owner.api.get('/notifications', t)).body.data;
    expect(notes.map((n: any) => n.type)).to.deep.equal(['webhook_disabled']);
  });

  it('fails a delivery whose hook was disabled meanwhile without sending it; a test is still sent', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const hook = await createHook(owner);
    await contact(owner);
    expect((await owner.api.patch(`/webhooks/${hook.id}`, { enabled: false }, t)).status).to.equal(200);
    const before = await counted();
    const { delivery } = await run(hook.id);
    expect(delivery).to.include({ status: 'failed', attempts: 1, lastError: 'The webhook is disabled' });
    expect(receiver.received).to.have.length(0);
    expect((await owner.api.post(`/webhooks/${hook.id}/test`, undefined, t)).status).to.equal(202);
    await server.server.jobs.drain(QUEUE);
    // (Under load the run may still be finishing when drain returns: it found the job already claimed.)
    expect((await receiver.waitFor(1)).map((r) => r.json.type)).to.deep.equal(['webhook.test']);
    for (const end = Date.now() + 5000; (await since(before)).succeeded === 0 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 25));
    expect(await since(before)).to.deep.equal({ succeeded: 1, retry: 0, failed: 1 });
  });

  it('sends each event its own body when several are claimed together', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    await createHook(owner);
    await contact(owner, 'First Together');
    await contact(owner, 'Second Together');
    await server.server.jobs.drain(QUEUE);
    const got = await receiver.waitFor(2, (r) => r.json?.organizationId === owner.orgId);
    expect(got.map((r) => r.json.data.contact.name).sort()).to.deep.equal(['First Together', 'Second Together']);
    expect(new Set(got.map((r) => r.json.id)).size).to.equal(2);
  });

  it('presents a message as it stands at each attempt: a retry does not resend the body of the first', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner, ['message.created']);
    const { conversationId } = await startConversation(await newVisitor(owner), 'words as first sent');
    await fannedOut(server.server, owner.orgId);
    receiver.plan({ status: 500 });
    let { delivery } = await run(hook.id);
    expect(delivery).to.include({ status: 'pending', attempts: 1, responseStatus: 500 });
    // The row changed since (as a correction or a redaction made in the database would change it).
    await knex()('messages').where({ conversation_id: conversationId }).update({ content: 'words as they stand now' });
    ({ delivery } = await run(hook.id));
    expect(delivery).to.include({ status: 'succeeded', attempts: 2 });
    const sent = receiver.received.filter((r) => r.json?.organizationId === owner.orgId);
    expect(sent.map((r) => r.json.data.message.content)).to.deep.equal(['words as first sent', 'words as they stand now']);
    expect(sent[1]!.json.id).to.equal(sent[0]!.json.id);
  });

  it('sends to an https receiver over TLS', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const bodies: string[] = [];
    const tls = createHttpsServer(
      { key: readFileSync(new URL('./fixtures/webhook-receiver-key.pem', import.meta.url)), cert: readFileSync(new URL('./fixtures/webhook-receiver-cert.pem', import.meta.url)) },
      (req, res) => {
        let body = '';
        req.on('data', (c: Buffer) => (body += c.toString('utf8')));
        req.on('end', () => {
          bodies.push(body);
          res.end('ok');
        });
      },
    );
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', () => resolve()));
    // The receiver's certificate is its own (self-signed): trusted for this test only.
    const trust = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
    try {
      const res = await owner.api.post('/webhooks', { url: `https://127.0.0.1:${(tls.address() as AddressInfo).port}/hook`, events: ['contact.created'] }, { token: owner.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      await contact(owner, 'Over TLS');
      const { delivery } = await run(res.body.data.webhook.id);
      expect(delivery, delivery.lastError).to.include({ status: 'succeeded', responseStatus: 200 });
      expect(bodies.map((b) => JSON.parse(b).data.contact.name)).to.deep.equal(['Over TLS']);
    } finally {
      if (trust === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
      else process.env.NODE_TLS_REJECT_UNAUTHORIZED = trust;
      tls.closeAllConnections();
      await new Promise((resolve) => tls.close(resolve));
    }
  });

  it('keeps the first 1024 characters of the answer, without NUL', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner);
    await contact(owner);
    receiver.plan({ status: 200, body: `a\u0000b${'x'.repeat(3000)}` });
    const { delivery, job } = await run(hook.id);
    expect(delivery).to.include({ status: 'succeeded', attempts: 1, responseStatus: 200, lastError: null });
    expect(delivery.responseBody).to.equal(`ab${'x'.repeat(1021)}`);
    expect(job.status).to.equal('done');
  });

  it('posts JSON with its length, the product\'s User-Agent, the event id and a timestamp in seconds', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    await createHook(owner);
    const before = Math.floor(Date.now() / 1000);
    await contact(owner, 'Zoë Ærøskøbing');
    await server.server.jobs.drain(QUEUE);
    const [r] = await receiver.waitFor(1);
    expect(r!.method).to.equal('POST');
    expect(r!.headers).to.include({ 'content-type': 'application/json', 'user-agent': 'SupportPlatform-Webhooks/1' });
    expect(Number(r!.headers['content-length'])).to.equal(Buffer.byteLength(r!.body));
    expect(r!.headers['x-webhook-id']).to.equal(r!.json.id);
    const ts = String(r!.headers['x-webhook-timestamp']);
    expect(ts).to.match(/^\d+$/);
    expect(Number(ts)).to.be.within(before, Math.floor(Date.now() / 1000));
    expect(r!.json).to.include({ type: 'contact.created', organizationId: owner.orgId });
    expect(r!.json.createdAt).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    expect(r!.json.data.contact.name).to.equal('Zoë Ærøskøbing');
  });

  it('keeps a secret sealed under a key derived from the refresh secret for this one purpose, and opens only that format', async () => {
    // What a secret saved by an earlier release depends on: AES-256-GCM under HMAC-SHA256(refresh secret,
    // "webhook-signing-secrets"), stored as v1.<iv>.<tag>.<ciphertext> in base64url.
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner);
    const { secretEncrypted: sealed } = await knex()('webhooks').where({ id: hook.id }).first();
    const [version, iv, tag, body] = String(sealed).split('.');
    expect(version).to.equal('v1');
    const key = createHmac('sha256', server.server.config.secrets.refresh).update('webhook-signing-secrets').digest();
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv!, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag!, 'base64url'));
    expect(Buffer.concat([decipher.update(Buffer.from(body!, 'base64url')), decipher.final()]).toString('utf8')).to.equal(hook.secret);
    // The same sealed secret under another format's name is not read as this one.
    await knex()('webhooks').where({ id: hook.id }).update({ secret_encrypted: ['v2', iv, tag, body].join('.') });
    await contact(owner);
    const { delivery } = await run(hook.id);
    expect(delivery).to.include({ status: 'failed', attempts: 1 });
    expect(delivery.lastError).to.match(/signing secret cannot be read/);
    expect(receiver.received).to.have.length(0);
  });

  it('gives up at once on a secret that cannot be read, and sends nothing', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const [row] = await knex()('webhooks')
      .insert({ organization_id: owner.orgId, url: receiver.url, events: JSON.stringify(['contact.created']), secret_encrypted: 'v1.x.y.z' })
      .returning('id');
    const hookId = (row as { id: string }).id;
    await contact(owner);
    const { delivery, job } = await run(hookId);
    expect(delivery).to.include({ status: 'failed', attempts: 1 });
    expect(delivery.lastError).to.match(/signing secret cannot be read/);
    expect(job.status).to.equal('failed');
    expect(receiver.received).to.have.length(0);
  });
});

describe('webhooks: each receiver its own limit', function () {
  this.timeout(60_000);
  let server: TestServer;

  // Answers may take long here: a held delivery must stay in flight rather than time out.
  before(async () => {
    server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_MS: '30000' });
  });
  after(async () => {
    await server?.stop();
  });

  it('serves a second receiver while a slow one has its 16 deliveries in flight', async () => {
    const slow = await startReceiver();
    const quick = await startReceiver();
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    try {
      const owner = await signUp(server.server, server.baseUrl);
      const other = await signUp(server.server, server.baseUrl);
      for (let n = 0; n < 16; n++) {
        const res = await owner.api.post('/webhooks', { url: `${slow.url}?n=${n}`, events: ['contact.created'] }, { token: owner.accessToken });
        expect(res.status).to.equal(201);
      }
      expect((await other.api.post('/webhooks', { url: quick.url, events: ['contact.created'] }, { token: other.accessToken })).status).to.equal(201);
      slow.plan(...Array.from({ length: 16 }, () => ({ status: 200, hold: held })));
      expect((await owner.api.post('/contacts', { name: 'Slow One', email: uniqueEmail('slowhook') }, { token: owner.accessToken })).status).to.equal(201);
      const first = server.server.jobs.drain(QUEUE);
      // The slow receiver holds all 16 of its deliveries: its limit is reached.
      for (const end = Date.now() + 20_000; slow.openNow() < 16; ) {
        if (Date.now() > end) throw new Error(`the slow receiver holds ${slow.openNow()} of 16`);
        await new Promise((r) => setTimeout(r, 20));
      }
      expect((await other.api.post('/contacts', { name: 'Quick One', email: uniqueEmail('quickhook') }, { token: other.accessToken })).status).to.equal(201);
      const second = server.server.jobs.drain(QUEUE);
      // Not behind the slow receiver's deliveries: it arrives while they are all still held.
      const [r] = await quick.waitFor(1, () => true, 10_000);
      expect(r!.json).to.include({ type: 'contact.created', organizationId: other.orgId });
      expect(slow.openNow()).to.equal(16);
      expect(slow.received).to.have.length(0);
      release();
      await Promise.all([first, second]);
      expect(await slow.waitFor(16, () => true, 20_000)).to.have.length(16);
      expect(slow.mostAtOnce()).to.equal(16);
    } finally {
      release();
      await slow.close();
      await quick.close();
    }
  });
});

describe('webhooks: subscriptions, secrets and the delivery log', function () {
  this.timeout(60_000);
  let server: TestServer;
  let receiver: WebhookReceiver;

  before(async () => {
    server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_MS: '2000' });
    receiver = await startReceiver();
  });
  after(async () => {
    await server?.stop();
    await receiver?.close();
  });
  beforeEach(() => {
    receiver.received.length = 0;
    receiver.plan();
  });

  const knex = () => server.server.db.knex;
  const ofOrg = (orgId: string) => (r: Received) => r.json?.organizationId === orgId;

  async function createHook(owner: SignedUp, events: string[], extra: Record<string, unknown> = {}): Promise<{ id: string; secret: string; body: any }> {
    const res = await owner.api.post('/webhooks', { url: receiver.url, events, ...extra }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return { id: res.body.data.webhook.id, secret: res.body.data.secret, body: res.body };
  }

  async function contact(owner: SignedUp, name = 'Someone'): Promise<string> {
    const res = await owner.api.post('/contacts', { name, email: uniqueEmail('hooklog') }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.data.id;
  }

  const deliveriesOf = async (hookId: string) => knex()('webhook_deliveries').where({ webhook_id: hookId }).orderBy('created_at');

  it('records a subscription\'s events from its creation on, and not once it is changed away, disabled or deleted', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    // The organization's subscriptions (none yet) are now this instance's view: each change below must replace it.
    await contact(owner);
    const hook = await createHook(owner, ['contact.created']);
    await contact(owner);
    expect(await deliveriesOf(hook.id)).to.have.length(1);
    expect((await owner.api.patch(`/webhooks/${hook.id}`, { events: ['ticket.created'] }, t)).status).to.equal(200);
    await contact(owner);
    expect(await deliveriesOf(hook.id)).to.have.length(1);
    expect((await owner.api.patch(`/webhooks/${hook.id}`, { events: ['contact.*'] }, t)).status).to.equal(200);
    await contact(owner);
    expect(await deliveriesOf(hook.id)).to.have.length(2);
    expect((await owner.api.patch(`/webhooks/${hook.id}`, { enabled: false }, t)).status).to.equal(200);
    await contact(owner);
    expect(await deliveriesOf(hook.id)).to.have.length(2);
    expect((await owner.api.patch(`/webhooks/${hook.id}`, { enabled: true }, t)).status).to.equal(200);
    await contact(owner);
    const rows = await deliveriesOf(hook.id);
    expect(rows).to.have.length(3);
    // Each event its own id, though of the same type.
    expect(new Set(rows.map((r: { eventId: string }) => r.eventId)).size).to.equal(3);
    expect(rows.every((r: { messageId: string | null }) => r.messageId === null)).to.equal(true);
    expect((await owner.api.delete(`/webhooks/${hook.id}`, t)).status).to.equal(200);
    await contact(owner);
    expect(await knex()('webhook_deliveries').where({ organization_id: owner.orgId })).to.have.length(0);
    const gone = await owner.api.delete(`/webhooks/${hook.id}`, t);
    expectError(gone, 404, 'not_found');
    expect(gone.body.message).to.equal('Webhook not found');
    expectError(await owner.api.patch(`/webhooks/${hook.id}`, { enabled: true }, t), 404, 'not_found');
  });

  it('takes every event type, area and `*`, never the test event; a hook gets an event by its type, its area or `*`', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const types = [
      'conversation.created', 'conversation.updated', 'conversation.resolved', 'conversation.assigned', 'message.created',
      'contact.created', 'contact.updated', 'contact.merged', 'ticket.created', 'ticket.updated', 'ticket.status_changed',
      'ticket.merged', 'ticket.reply_sent', 'knowledge.indexed', 'knowledge.failed', 'channel.status_changed',
    ];
    const all = ['*', 'conversation.*', 'message.*', 'contact.*', 'ticket.*', 'knowledge.*', 'channel.*', ...types];
    const everything = await createHook(owner, all);
    expect(everything.body.data.webhook.events).to.deep.equal(all);
    await owner.api.delete(`/webhooks/${everything.id}`, t);
    for (const refused of ['webhook.test', 'webhook.*', 'contact', 'contact.deleted']) {
      expectError(await owner.api.post('/webhooks', { url: receiver.url, events: [refused] }, t), 400, 'validation_failed');
    }
    const hooks: Record<string, string> = {};
    for (const events of ['*', 'contact.*', 'contact.created', 'contact.updated', 'ticket.*', 'message.*', 'message.created', 'conversation.created']) {
      hooks[events] = (await createHook(owner, [events])).id;
    }
    await contact(owner);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'to the message subscribers');
    // A second message goes the batched way, which asks which organizations want message.created.
    expect((await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'and again' }, { token: visitor.token })).status).to.equal(201);
    await fannedOut(server.server, owner.orgId);
    const got: Record<string, string[]> = {};
    for (const [events, id] of Object.entries(hooks)) got[events] = (await deliveriesOf(id)).map((d: { eventType: string }) => d.eventType).sort();
    expect(got).to.deep.equal({
      '*': ['contact.created', 'conversation.created', 'message.created', 'message.created'],
      'contact.*': ['contact.created'],
      'contact.created': ['contact.created'],
      'contact.updated': [],
      'ticket.*': [],
      'message.*': ['message.created', 'message.created'],
      'message.created': ['message.created', 'message.created'],
      'conversation.created': ['conversation.created'],
    });
    // An organization whose hooks want no message event pays nothing on its messages: no fan-out job either way.
    const quiet = await signUp(server.server, server.baseUrl);
    await createHook(quiet, ['contact.created', 'ticket.*']);
    const quietVisitor = await newVisitor(quiet);
    const quietStart = await startConversation(quietVisitor, 'nobody listens');
    expect((await quietVisitor.api.post(`/widget/conversations/${quietStart.conversationId}/messages`, { content: 'still nobody' }, { token: quietVisitor.token })).status).to.equal(201);
    expect(await knex()('jobs').where({ queue: WEBHOOK_FANOUT_QUEUE, organization_id: quiet.orgId })).to.have.length(0);
  });

  it('sees a subscription another instance made within 2 seconds', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const other = await signUp(server.server, server.baseUrl);
    const sealed = (await knex()('webhooks').where({ id: (await createHook(other, ['ticket.created'])).id }).first()).secretEncrypted;
    await contact(owner);
    // Written as another instance would: this one is not told.
    const [row] = await knex()('webhooks').insert({ organization_id: owner.orgId, url: receiver.url, events: JSON.stringify(['contact.created']), secret_encrypted: sealed }).returning('id');
    await new Promise((r) => setTimeout(r, 2100));
    await contact(owner);
    expect(await deliveriesOf((row as { id: string }).id)).to.have.length(1);
  });

  it('reads an organization\'s subscriptions once for 2 seconds, and again after', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner, ['contact.created']);
    let reads = 0;
    const count = (q: { sql: string; bindings?: unknown[] }) => {
      if (/from "webhooks"/.test(q.sql) && /"enabled"/.test(q.sql) && q.bindings?.includes(owner.orgId)) reads++;
    };
    // The clock stands still, then moves to the view's last millisecond and one past it.
    const realNow = Date.now;
    const t0 = realNow();
    knex().on('query', count);
    try {
      Date.now = () => t0;
      await contact(owner);
      await contact(owner);
      expect(reads).to.equal(1);
      Date.now = () => t0 + 2000;
      await contact(owner);
      expect(reads).to.equal(1);
      Date.now = () => t0 + 2001;
      await contact(owner);
      await contact(owner);
      expect(reads).to.equal(2);
    } finally {
      Date.now = realNow;
      knex().off('query', count);
    }
    expect(await deliveriesOf(hook.id)).to.have.length(5);
  });

  it('reads the subscriptions again after a read that failed, rather than failing the organization\'s changes for 2 seconds', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner, ['contact.created']);
    // The table is out of reach for one request (a fault of the database); the change it was part of fails.
    await knex().raw('alter table webhooks rename to webhooks_out_of_reach');
    let failed;
    try {
      failed = await owner.api.post('/contacts', { name: 'During', email: uniqueEmail('hookfault') }, { token: owner.accessToken });
    } finally {
      await knex().raw('alter table webhooks_out_of_reach rename to webhooks');
    }
    expect(failed.status).to.equal(500);
    // At once, well within the 2 seconds a successful read is kept: read again, recorded.
    await contact(owner, 'After');
    const rows = await deliveriesOf(hook.id);
    expect(rows.map((r: { payload: { contact: { name: string } } }) => r.payload.contact.name)).to.deep.equal(['After']);
  });

  it('creates a hook disabled when asked, and refuses the 21st with its reason', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const off = await createHook(owner, ['contact.created'], { enabled: false });
    expect(off.body.data.webhook).to.include({ enabled: false, consecutiveFailures: 0, disabledReason: null });
    expect(off.body.data.webhook.events).to.deep.equal(['contact.created']);
    await contact(owner);
    expect(await deliveriesOf(off.id)).to.have.length(0);
    for (let n = 1; n < 20; n++) await createHook(owner, ['ticket.created']);
    const refused = await owner.api.post('/webhooks', { url: receiver.url, events: ['*'] }, t);
    expectError(refused, 409, 'conflict');
    expect(refused.body.message).to.equal('An organization has at most 20 webhooks');
  });

  it('checks a changed URL, sends to the new one, and starts the failure count afresh only when enabled again', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const hook = await createHook(owner, ['contact.created']);
    // http is allowed here (WEBHOOKS_ALLOW_PRIVATE), no other scheme.
    const refused = await owner.api.patch(`/webhooks/${hook.id}`, { url: 'ftp://127.0.0.1/hook' }, t);
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.error.details).to.deep.equal([{ field: 'url', message: 'The URL must be an https URL' }]);
    expect((await owner.api.get(`/webhooks/${hook.id}`, t)).body.data.url).to.equal(receiver.url);
    const moved = await owner.api.patch(`/webhooks/${hook.id}`, { url: `${receiver.url}?moved=1` }, t);
    expect(moved.body.data).to.include({ url: `${receiver.url}?moved=1` });
    expect(moved.body.data.events).to.deep.equal(['contact.created']);
    await contact(owner);
    await server.server.jobs.drain(QUEUE);
    const [r] = await receiver.waitFor(1, ofOrg(owner.orgId));
    expect(r!.url).to.equal('/hook?moved=1');
    await knex()('webhooks').where({ id: hook.id }).update({ consecutive_failures: 7, enabled: false, disabled_reason: '50 deliveries failed in a row' });
    const still = await owner.api.patch(`/webhooks/${hook.id}`, { enabled: false }, t);
    expect(still.body.data).to.include({ enabled: false, consecutiveFailures: 7, disabledReason: '50 deliveries failed in a row' });
    const again = await owner.api.patch(`/webhooks/${hook.id}`, { enabled: true }, t);
    expect(again.body.data).to.include({ enabled: true, consecutiveFailures: 0, disabledReason: null });
  });

  it('signs with the previous secret too for 24 hours after a rotation, then with the current one alone', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const hook = await createHook(owner, ['contact.created']);
    const first = await owner.api.post(`/webhooks/${hook.id}/rotate-secret`, undefined, t);
    const second = await owner.api.post(`/webhooks/${hook.id}/rotate-secret`, undefined, t);
    expect(second.status).to.equal(200);
    const expires = new Date(second.body.data.previousSecretExpiresAt).getTime();
    expect(expires - Date.now()).to.be.within(24 * 3600_000 - 60_000, 24 * 3600_000);
    const stored = await knex()('webhooks').where({ id: hook.id }).first();
    expect(new Date(stored.previousSecretExpiresAt).getTime()).to.equal(expires);
    await contact(owner);
    await server.server.jobs.drain(QUEUE);
    const [during] = await receiver.waitFor(1, ofOrg(owner.orgId));
    // The current secret, then the one it replaced (not the first).
    expect(String(during!.headers['x-webhook-signature']).split(',')).to.have.length(2);
    expect(signedWith(during!, second.body.data.secret)).to.equal(true);
    expect(signedWith(during!, first.body.data.secret)).to.equal(true);
    expect(signedWith(during!, hook.secret)).to.equal(false);
    await knex()('webhooks').where({ id: hook.id }).update({ previous_secret_expires_at: new Date(Date.now() - 1000) });
    await contact(owner);
    await server.server.jobs.drain(QUEUE);
    const after = (await receiver.waitFor(2, ofOrg(owner.orgId)))[1]!;
    expect(String(after.headers['x-webhook-signature']).split(',')).to.have.length(1);
    expect(signedWith(after, second.body.data.secret)).to.equal(true);
  });

  it('lists a hook\'s deliveries newest first, by status and event, in pages; tests and redelivers', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const hook = await createHook(owner, ['contact.*']);
    const otherHook = await createHook(owner, ['ticket.created']);
    receiver.plan({ status: 200 });
    const contactId = await contact(owner, 'First Name');
    await server.server.jobs.drain(QUEUE);
    await receiver.waitFor(1, ofOrg(owner.orgId));
    receiver.plan({ status: 500 });
    expect((await owner.api.patch(`/contacts/${contactId}`, { name: 'Second Name' }, t)).status).to.equal(200);
    await server.server.jobs.drain(QUEUE);
    await receiver.waitFor(2, ofOrg(owner.orgId));
    const test = await owner.api.post(`/webhooks/${hook.id}/test`, undefined, t);
    expect(test.status).to.equal(202);
    expect(test.body.data).to.include({ webhookId: hook.id, event: 'webhook.test', status: 'pending', attempts: 0 });
    receiver.plan({ status: 400 });
    await server.server.jobs.drain(QUEUE);
    const [tested] = await receiver.waitFor(1, (r) => r.json?.type === 'webhook.test' && r.json?.organizationId === owner.orgId);
    expect(tested!.json.id).to.equal(test.body.data.eventId);
    expect(tested!.json.data).to.deep.equal({ webhookId: hook.id, message: 'This is a test delivery' });

    const list = async (query = '') => (await owner.api.get(`/webhooks/${hook.id}/deliveries${query}`, t)).body;
    // The queue's own poller may be the one running them: until each outcome is written.
    for (const end = Date.now() + 10_000; (await list()).data.some((d: any) => d.attempts === 0); ) {
      if (Date.now() > end) throw new Error('deliveries still not attempted');
      await new Promise((r) => setTimeout(r, 25));
    }
    let page = await list();
    expect(page.data.map((d: any) => [d.event, d.status])).to.deep.equal([['webhook.test', 'failed'], ['contact.updated', 'pending'], ['contact.created', 'succeeded']]);
    expect(page.pagination).to.include({ total: 3, offset: 0 });
    page = await list('?status=pending');
    expect(page.data.map((d: any) => d.event)).to.deep.equal(['contact.updated']);
    expect(page.pagination.total).to.equal(1);
    page = await list('?event=contact.created');
    expect(page.data.map((d: any) => d.status)).to.deep.equal(['succeeded']);
    expect(page.pagination.total).to.equal(1);
    page = await list('?limit=1&offset=1');
    expect(page.data.map((d: any) => d.event)).to.deep.equal(['contact.updated']);
    expect(page.pagination).to.include({ total: 3, limit: 1, offset: 1 });
    const updated = (await list('?event=contact.updated')).data[0];
    expect((await owner.api.get(`/webhooks/${hook.id}/deliveries/${updated.id}`, t)).body.data).to.include({ id: updated.id, event: 'contact.updated', responseStatus: 500 });
    // A delivery is found only under its own hook.
    expectError(await owner.api.get(`/webhooks/${otherHook.id}/deliveries/${updated.id}`, t), 404, 'not_found');
    expectError(await owner.api.post(`/webhooks/${otherHook.id}/deliveries/${updated.id}/redeliver`, undefined, t), 404, 'not_found');

    const again = await owner.api.post(`/webhooks/${hook.id}/deliveries/${updated.id}/redeliver`, undefined, t);
    expect(again.status).to.equal(202);
    expect(again.body.data).to.include({ eventId: updated.eventId, event: 'contact.updated', status: 'pending', attempts: 0 });
    expect(again.body.data.id).not.to.equal(updated.id);
    await server.server.jobs.drain(QUEUE);
    const sent = (await receiver.waitFor(2, (r) => r.json?.type === 'contact.updated' && r.json?.organizationId === owner.orgId));
    // The same event, body for body (its time included), under the same id.
    expect(sent[1]!.body).to.equal(sent[0]!.body);
    expect(sent[1]!.headers['x-webhook-id']).to.equal(sent[0]!.headers['x-webhook-id']);
    expect((await list()).pagination.total).to.equal(4);
    // Its log with it: the delivery answered 500 would be retried to this receiver after it is gone.
    expect((await owner.api.delete(`/webhooks/${hook.id}`, t)).status).to.equal(200);
  });

  it('sends to a host named by the URL, at the address its check resolved', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const named = receiver.url.replace('127.0.0.1', 'localhost');
    const res = await owner.api.post('/webhooks', { url: named, events: ['contact.created'] }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    await contact(owner, 'Named Host');
    await server.server.jobs.drain(QUEUE);
    const [r] = await receiver.waitFor(1, ofOrg(owner.orgId));
    expect(r!.headers.host).to.equal(new URL(named).host);
    expect(r!.json.data.contact.name).to.equal('Named Host');
  });

  it('redelivers a message\'s event with the message', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const hook = await createHook(owner, ['message.created']);
    await startConversation(await newVisitor(owner), 'words to send twice');
    await fannedOut(server.server, owner.orgId);
    await server.server.jobs.drain(QUEUE);
    const [first] = await receiver.waitFor(1, ofOrg(owner.orgId));
    const [delivery] = await deliveriesOf(hook.id);
    const again = await owner.api.post(`/webhooks/${hook.id}/deliveries/${delivery.id}/redeliver`, undefined, t);
    expect(again.status, JSON.stringify(again.body)).to.equal(202);
    await server.server.jobs.drain(QUEUE);
    const both = await receiver.waitFor(2, ofOrg(owner.orgId));
    expect(both[1]!.body).to.equal(first!.body);
    expect(first!.json.data.message.content).to.equal('words to send twice');
    // The event's id derives from the message (md5 of `message.created:<id>` as a uuid): every run and hook alike.
    const h = createHash('md5').update(`message.created:${first!.json.data.message.id}`).digest('hex');
    expect(first!.json.id).to.equal(`${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`);
    expect(both[1]!.headers['x-webhook-id']).to.equal(first!.json.id);
  });
});

describe('webhooks: which targets are refused', function () {
  this.timeout(60_000);
  let server: TestServer;

  // Private targets refused, as in production.
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server?.stop();
  });

  const PUBLIC = 'https://93.184.215.14/hook';

  it('refuses an address inside every private, loopback, link-local, shared, documentation, multicast or reserved range', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const hosts = [
      '0.1.2.3', '10.0.0.1', '10.255.255.254', '100.64.0.1', '100.127.255.254', '127.0.0.1', '127.255.0.9', '169.254.169.254', '172.16.0.1',
      '172.31.255.254', '192.0.0.8', '192.0.2.10', '192.168.1.1', '198.18.0.1', '198.19.255.254', '198.51.100.7', '203.0.113.9',
      '224.0.0.1', '239.1.1.1', '240.0.0.1', '255.255.255.255', '192.88.99.1',
      '[::]', '[::1]', '[fc00::1]', '[fd12:3456::1]', '[fe80::1]', '[febf::1]', '[ff02::1]', '[64:ff9b::a00:1]', '[2001:db8::1]',
      // Discard-only, and Teredo (which carries an IPv4 address): the list knowledge URL sources use, shared.
      '[100::1]', '[2001::5efe:a00:1]',
      // IPv4 written as IPv6: the IPv4 ranges apply.
      '[::ffff:127.0.0.1]', '[::ffff:10.1.2.3]', '[::ffff:a9fe:a9fe]',
    ];
    for (const host of hosts) {
      const res = await owner.api.post('/webhooks', { url: `https://${host}/hook`, events: ['ticket.created'] }, t);
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details, host).to.have.length(1);
      expect(res.body.error.details[0].field).to.equal('url');
      expect(res.body.error.details[0].message, host).to.match(/^The host .+ resolves to a private, loopback or reserved address$/);
    }
    expect(await server.server.db.knex('webhooks').where({ organization_id: owner.orgId })).to.have.length(0);
  });

  it('takes a public address next to each range, at save and when changed', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const created = await owner.api.post('/webhooks', { url: PUBLIC, events: ['ticket.created'], enabled: false }, t);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.data.webhook.id;
    for (const host of [
      '11.0.0.1', '100.63.255.254', '100.128.0.1', '126.255.255.254', '128.0.0.1', '169.253.255.254', '169.255.0.1', '172.15.255.254', '172.32.0.1',
      '192.0.1.1', '192.0.3.1', '192.167.255.254', '192.169.0.1', '198.17.255.254', '198.20.0.1', '198.51.99.1', '203.0.114.1', '223.255.255.254',
      '[2606:4700:4700::1111]', '[2001:db9::1]', '[::ffff:5db8:d70e]',
    ]) {
      // A URL of its own (an address once checked is remembered by its URL): checked here, not remembered.
      const res = await owner.api.patch(`/webhooks/${id}`, { url: `https://${host}/hook?check=${randomUUID()}` }, t);
      expect(res.status, `${host}: ${JSON.stringify(res.body)}`).to.equal(200);
    }
  });

  it('checks an IPv4 address written as IPv6 against the IPv4 ranges, in either form a name may resolve to', () => {
    for (const address of ['::ffff:127.0.0.1', '::ffff:7f00:1', '::FFFF:10.1.2.3', '::ffff:169.254.169.254', '::ffff:c0a8:101']) {
      expect(isPublicAddress(address), address).to.equal(false);
    }
    for (const address of ['::ffff:93.184.215.14', '::ffff:5db8:d70e', '93.184.215.14', '2606:4700:4700::1111']) {
      expect(isPublicAddress(address), address).to.equal(true);
    }
    // Not an address at all: never taken as public.
    expect(isPublicAddress('example.com')).to.equal(false);
  });

  it('says what is wrong with a URL: not https, credentials, not a URL, a host that does not resolve', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const cases: [string, string][] = [
      ['http://93.184.215.14/hook', 'The URL must be an https URL'],
      ['ftp://93.184.215.14/hook', 'The URL must be an https URL'],
      ['https://user:pw@93.184.215.14/hook', 'The URL must not carry credentials'],
      ['https://user@93.184.215.14/hook', 'The URL must not carry credentials'],
      ['https://:pw@93.184.215.14/hook', 'The URL must not carry credentials'],
      ['not a URL at all', 'The URL is not a valid URL'],
      ['https://hook.invalid/x', 'The host hook.invalid does not resolve'],
      ['https://localhost/x', 'The host localhost resolves to a private, loopback or reserved address'],
    ];
    for (const [url, message] of cases) {
      const res = await owner.api.post('/webhooks', { url, events: ['ticket.created'] }, t);
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details, url).to.deep.equal([{ field: 'url', message }]);
    }
  });
});
