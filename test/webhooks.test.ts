// Outbound webhooks: subscriptions, signed deliveries (checked here with node:crypto, not the server's code),
// retries after a 500 and a timeout, nothing for a rolled-back change, 410 disabling the hook, rotation, redelivery,
// target checks, and deliveries surviving a restart.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { signedWith, startReceiver, type Received, type WebhookReceiver } from './helpers/webhookReceiver.js';
import { fannedOut } from './helpers/webhookFanout.js';

const QUEUE = 'webhook-delivery';

async function createHook(owner: SignedUp, url: string, events: string[]): Promise<{ id: string; secret: string }> {
  const res = await owner.api.post('/webhooks', { url, events }, { token: owner.accessToken });
  expect(res.status, JSON.stringify(res.body)).to.equal(201);
  return { id: res.body.data.webhook.id, secret: res.body.data.secret };
}

/**
 * Makes the organization's waiting deliveries due now and runs them (no waiting minutes for a retry). Its own only:
 * other files' servers share the database and may leave a delivery running until its lease ends.
 */
async function runDue(server: TestServer, organizationId: string): Promise<void> {
  // A run's outcome (the next attempt's time) is written after its handler returns: wait for it, or it would move
  // the job back to the future after this made it due.
  const jobs = () => server.server.db.knex('jobs').where({ queue: QUEUE, organization_id: organizationId });
  await until(() => jobs().where({ status: 'running' }).first(), (running) => !running, 20_000);
  await jobs().where({ status: 'pending' }).update({ run_at: new Date(Date.now() - 1000) });
  await server.server.jobs.drain(QUEUE);
}

/** Polls until `check` passes: the queue's own poller may be running the job that drain found taken. */
async function until<T>(read: () => Promise<T>, check: (value: T) => boolean, timeoutMs = 5000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (check(value)) return value;
    if (Date.now() > end) throw new Error(`still not there: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const ofType = (type: string) => (r: Received) => r.json?.type === type;

describe('webhooks', function () {
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

  it('creates, lists, updates and deletes hooks; the secret is shown once; at most 20', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const hook = await createHook(owner, receiver.url, ['contact.*']);
    expect(hook.secret).to.match(/^whsec_/);
    const got = await owner.api.get(`/webhooks/${hook.id}`, t);
    expect(got.body.data).to.include({ url: receiver.url, enabled: true, consecutiveFailures: 0 });
    expect(JSON.stringify(got.body)).not.to.include(hook.secret);
    const patched = await owner.api.patch(`/webhooks/${hook.id}`, { events: ['ticket.created'] }, t);
    expect(patched.body.data.events).to.deep.equal(['ticket.created']);
    expectError(await owner.api.post('/webhooks', { url: receiver.url, events: ['nope.created'] }, t), 400, 'validation_failed');
    for (let i = 1; i < 20; i++) await createHook(owner, `${receiver.url}?n=${i}`, ['ticket.created']);
    expectError(await owner.api.post('/webhooks', { url: receiver.url, events: ['*'] }, t), 409, 'conflict');
    expect((await owner.api.get('/webhooks', t)).body.data).to.have.length(20);
    expect((await owner.api.delete(`/webhooks/${hook.id}`, t)).status).to.equal(200);
    expectError(await owner.api.get(`/webhooks/${hook.id}`, t), 404, 'not_found');
  });

  it('delivers signed events: a new conversation and its public messages, never internal notes', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner, receiver.url, ['conversation.created', 'message.created']);
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor, 'first words');
    // The next visitor message and the agent's reply go through the batched path; the note is private.
    await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'internal only', private: true }, { token: owner.accessToken });
    await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'agent reply' }, { token: owner.accessToken });
    await server.server.jobs.drain(QUEUE);
    const messages = await receiver.waitFor(2, ofType('message.created'));
    await receiver.waitFor(1, ofType('conversation.created'));
    expect(messages.map((m) => m.json.data.message.content).sort()).to.deep.equal(['agent reply', 'first words']);
    for (const r of receiver.received) {
      expect(signedWith(r, hook.secret), 'signature').to.equal(true);
      expect(r.json).to.have.all.keys('id', 'type', 'organizationId', 'createdAt', 'data');
      expect(r.json.organizationId).to.equal(owner.orgId);
      expect(r.headers['x-webhook-id']).to.equal(r.json.id);
    }
    expect(signedWith(messages[0]!, 'whsec_wrong')).to.equal(false);
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.received.some((r) => JSON.stringify(r.json).includes('internal only'))).to.equal(false);
  });

  it('retries after a 500 and after a timeout with the same X-Webhook-Id, then succeeds', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner, receiver.url, ['contact.created']);
    receiver.plan({ status: 500 }, { status: 200, delayMs: 4000 }, { status: 200 });
    await owner.api.post('/contacts', { name: 'Retry Me', email: uniqueEmail('retry') }, { token: owner.accessToken });
    await server.server.jobs.drain(QUEUE);
    await receiver.waitFor(1);
    const list = async () => (await owner.api.get(`/webhooks/${hook.id}/deliveries`, { token: owner.accessToken })).body.data;
    let [delivery] = await until(list, (d) => d[0]?.attempts === 1, 20_000);
    expect(delivery).to.include({ status: 'pending', attempts: 1, responseStatus: 500 });
    await runDue(server, owner.orgId); // answered after the 2 s timeout: a retry
    [delivery] = await until(list, (d) => d[0]?.attempts === 2, 20_000);
    expect(delivery).to.include({ status: 'pending', attempts: 2 });
    expect(delivery.lastError).to.match(/within 2000 ms/);
    await runDue(server, owner.orgId);
    [delivery] = await until(list, (d) => d[0]?.attempts === 3, 20_000);
    expect(delivery).to.include({ status: 'succeeded', attempts: 3, responseStatus: 200 });
    const all = await receiver.waitFor(3);
    expect(new Set(all.map((r) => r.headers['x-webhook-id'])).size).to.equal(1);
    expect((await owner.api.get(`/webhooks/${hook.id}`, { token: owner.accessToken })).body.data.consecutiveFailures).to.equal(0);
  });

  it('sends a delivery again at once when the receiver closed the kept-alive connection it went out on', async () => {
    // The receiver answers the first request of a connection, and drops the connection at the second one's arrival
    // without answering: what a receiver closing an idle connection, just as it is reused, looks like to the sender.
    const served = new WeakMap<Socket, number>();
    const seen: { connection: number; contact: string }[] = [];
    const connections: Socket[] = [];
    const closer = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c));
      req.on('end', () => {
        if (!connections.includes(req.socket)) connections.push(req.socket);
        const n = (served.get(req.socket) ?? 0) + 1;
        served.set(req.socket, n);
        seen.push({ connection: connections.indexOf(req.socket), contact: JSON.parse(raw).data.contact.name });
        if (n > 1) return void req.socket.destroy();
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    await new Promise<void>((r) => closer.listen(0, '127.0.0.1', r));
    try {
      const owner = await signUp(server.server, server.baseUrl);
      const hook = await createHook(owner, `http://127.0.0.1:${(closer.address() as AddressInfo).port}/hook`, ['contact.created']);
      const list = async () => (await owner.api.get(`/webhooks/${hook.id}/deliveries`, { token: owner.accessToken })).body.data as Record<string, unknown>[];
      for (const [k, name] of ['Kept Alive', 'Reused'].entries()) {
        await owner.api.post('/contacts', { name, email: uniqueEmail('kept') }, { token: owner.accessToken });
        await server.server.jobs.drain(QUEUE);
        await until(list, (d) => d.length === k + 1 && d.every((x) => x.status !== 'pending' || (x.attempts as number) > 0), 20_000);
      }
      // Both succeeded on their first attempt: the second was sent again on a new connection, not left for a retry.
      expect((await list()).map((d) => [d.status, d.attempts, d.responseStatus])).to.deep.equal([['succeeded', 1, 200], ['succeeded', 1, 200]]);
      expect(seen).to.deep.equal([{ connection: 0, contact: 'Kept Alive' }, { connection: 0, contact: 'Reused' }, { connection: 1, contact: 'Reused' }]);
    } finally {
      closer.closeAllConnections();
      await new Promise((r) => closer.close(r));
    }
  });

  it('records each delivery\'s own answer when many to the same receiver are sent together', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hooks: { id: string; n: number }[] = [];
    for (let n = 0; n < 6; n++) hooks.push({ ...(await createHook(owner, `${receiver.url}?n=${n}`, ['contact.created'])), n });
    const planned = [200, 201, 202, 204, 206, 299];
    receiver.plan(...planned.map((status) => ({ status })));
    await owner.api.post('/contacts', { name: 'Fan Out', email: uniqueEmail('fan') }, { token: owner.accessToken });
    await server.server.jobs.drain(QUEUE);
    const received = await receiver.waitFor(6);
    // The receiver answered in arrival order: which status went to which hook is known only from its log.
    const answeredFor = new Map(received.map((r, k) => [Number(new URL(r.url, 'http://x').searchParams.get('n')), planned[k]]));
    expect(answeredFor.size).to.equal(6);
    expect(new Set(received.map((r) => r.headers['x-webhook-id'])).size).to.equal(1);
    for (const hook of hooks) {
      const [delivery] = await until(async () => (await owner.api.get(`/webhooks/${hook.id}/deliveries`, { token: owner.accessToken })).body.data, (d) => d[0]?.status === 'succeeded', 20_000);
      expect(delivery).to.include({ status: 'succeeded', attempts: 1, responseStatus: answeredFor.get(hook.n) });
      expect(delivery.responseBody).to.equal(answeredFor.get(hook.n) === 204 ? '' : 'ok');
      expect(delivery.durationMs).to.be.a('number');
    }
    const jobs = await server.server.db.knex('jobs').where({ queue: QUEUE, organization_id: owner.orgId });
    expect(jobs.map((j: { status: string; attempts: number }) => `${j.status}:${j.attempts}`)).to.deep.equal(Array(6).fill('done:1'));
  });

  it('sends at most 16 deliveries at once to one receiver, however many are due', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const slow = await startReceiver();
    try {
      for (let n = 0; n < 20; n++) await createHook(owner, `${slow.url}?n=${n}`, ['contact.created']);
      slow.plan(...Array.from({ length: 40 }, () => ({ status: 200, delayMs: 300 })));
      await owner.api.post('/contacts', { name: 'Crowd One', email: uniqueEmail('crowd') }, { token: owner.accessToken });
      await owner.api.post('/contacts', { name: 'Crowd Two', email: uniqueEmail('crowd') }, { token: owner.accessToken });
      await server.server.jobs.drain(QUEUE);
      await slow.waitFor(40, () => true, 20_000);
      expect(slow.mostAtOnce()).to.equal(16);
    } finally {
      await slow.close();
    }
  });

  it('presents only a message of the delivery\'s own organization, and fails the delivery when there is none', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const other = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner, receiver.url, ['message.created']);
    const { knex } = server.server.db;
    // Sent by the other organization, which has no webhook: its message must never reach the owner's receiver.
    const { conversationId } = await startConversation(await newVisitor(other), 'the other organization\'s words');
    const foreign = await knex('messages').where({ conversation_id: conversationId }).first('id');
    await server.server.jobs.stop();
    try {
      await startConversation(await newVisitor(owner), 'own words');
      await fannedOut(server.server, owner.orgId);
      const delivery = await knex('webhook_deliveries').where({ webhook_id: hook.id }).first('id');
      // The delivery now names a message that is not its organization's (as a forged or stale row would).
      await knex('webhook_deliveries').where({ id: delivery.id }).update({ message_id: foreign.id });
      await server.server.jobs.drain(QUEUE);
      const row = await knex('webhook_deliveries').where({ id: delivery.id }).first();
      expect([row.status, row.lastError]).to.deep.equal(['failed', 'The message no longer exists']);
      await new Promise((r) => setTimeout(r, 200));
      expect(receiver.received).to.have.length(0);
    } finally {
      server.server.jobs.start();
    }
  });

  it('sends nothing for a change that rolled back', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner, receiver.url, ['contact.created']);
    const email = uniqueEmail('once');
    expect((await owner.api.post('/contacts', { name: 'Once', email }, { token: owner.accessToken })).status).to.equal(201);
    // Same email: the insert fails and the transaction, delivery row included, rolls back.
    expectError(await owner.api.post('/contacts', { name: 'Twice', email }, { token: owner.accessToken }), 409, 'conflict');
    await server.server.jobs.drain(QUEUE);
    const rows = await server.server.db.knex('webhook_deliveries').where({ webhook_id: hook.id });
    expect(rows).to.have.length(1);
    await receiver.waitFor(1);
    expect(receiver.received.map((r) => r.json.data.contact.name)).to.deep.equal(['Once']);
  });

  it('disables the hook after a 410 and notifies the admins', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const hook = await createHook(owner, receiver.url, ['contact.created']);
    receiver.plan({ status: 410 });
    await owner.api.post('/contacts', { name: 'Gone', email: uniqueEmail('gone') }, { token: owner.accessToken });
    await server.server.jobs.drain(QUEUE);
    const t = { token: owner.accessToken };
    const got = await until(async () => (await owner.api.get(`/webhooks/${hook.id}`, t)).body.data, (h) => h.enabled === false);
    expect(got.enabled).to.equal(false);
    expect(got.disabledReason).to.match(/410/);
    const [delivery] = (await owner.api.get(`/webhooks/${hook.id}/deliveries?status=failed`, t)).body.data;
    expect(delivery).to.include({ status: 'failed', responseStatus: 410 });
    const notes = await until(async () => (await owner.api.get('/notifications', t)).body.data, (n) => n.length > 0);
    expect(notes.map((n: any) => n.type)).to.include('webhook_disabled');
    // Disabled: later events are not recorded for it.
    await owner.api.post('/contacts', { name: 'Later', email: uniqueEmail('later') }, t);
    expect(await server.server.db.knex('webhook_deliveries').where({ webhook_id: hook.id })).to.have.length(1);
  });

  it('rotates the secret (both sign for a day), tests and redelivers with the same event id', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    const hook = await createHook(owner, receiver.url, ['ticket.created']);
    const rotated = await owner.api.post(`/webhooks/${hook.id}/rotate-secret`, undefined, t);
    expect(rotated.status).to.equal(200);
    const fresh = rotated.body.data.secret as string;
    expect(fresh).not.to.equal(hook.secret);
    const test = await owner.api.post(`/webhooks/${hook.id}/test`, undefined, t);
    expect(test.status).to.equal(202);
    await server.server.jobs.drain(QUEUE);
    const [r] = await receiver.waitFor(1, ofType('webhook.test'));
    expect(String(r!.headers['x-webhook-signature']).split(',')).to.have.length(2);
    expect(signedWith(r!, fresh)).to.equal(true);
    expect(signedWith(r!, hook.secret)).to.equal(true);
    const again = await owner.api.post(`/webhooks/${hook.id}/deliveries/${test.body.data.id}/redeliver`, undefined, t);
    expect(again.status).to.equal(202);
    await server.server.jobs.drain(QUEUE);
    const both = await receiver.waitFor(2, ofType('webhook.test'));
    expect(both[1]!.headers['x-webhook-id']).to.equal(both[0]!.headers['x-webhook-id']);
    await until(async () => (await owner.api.get(`/webhooks/${hook.id}/deliveries/${again.body.data.id}`, t)).body.data.status, (st) => st === 'succeeded');
  });
});

describe('webhooks: private targets refused by default', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server?.stop());

  it('refuses http and loopback, private or link-local targets at save', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const t = { token: owner.accessToken };
    for (const url of ['http://example.com/hook', 'https://127.0.0.1/hook', 'https://localhost/hook', 'https://10.1.2.3/x', 'https://169.254.169.254/latest', 'https://[::1]/x', 'https://0.0.0.0/']) {
      const res = await owner.api.post('/webhooks', { url, events: ['*'] }, t);
      expectError(res, 400, 'validation_failed');
      // Named as schema errors name a body field.
      expect(res.body.error.details.map((d: { field: string }) => d.field), url).to.deep.equal(['url']);
    }
  });

  it('refuses a loopback target at send too (a hook saved while allowed)', async () => {
    const owner = await signUp(server.server, server.baseUrl);
    const receiver = await startReceiver();
    try {
      const [hook] = await server.server.db.knex('webhooks')
        .insert({ organization_id: owner.orgId, url: receiver.url, events: JSON.stringify(['contact.created']), secret_encrypted: 'v1.x.y.z' })
        .returning('id');
      await owner.api.post('/contacts', { name: 'Private', email: uniqueEmail('private') }, { token: owner.accessToken });
      await server.server.jobs.drain(QUEUE);
      const [delivery] = await until(() => server.server.db.knex('webhook_deliveries').where({ webhook_id: (hook as { id: string }).id }), (rows) => rows[0]?.status === 'failed');
      expect(delivery.lastError).to.match(/https URL|private, loopback/);
      expect(receiver.received).to.have.length(0);
    } finally {
      await receiver.close();
    }
  });
});

describe('webhooks: deliveries survive a restart', function () {
  this.timeout(120_000);
  it('delivers what was pending when the server stopped, after it starts again on the same data', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'support-webhooks-'));
    const receiver = await startReceiver();
    const env = { WEBHOOKS_ALLOW_PRIVATE: 'true', DATA_DIR: dataDir };
    let first: TestServer | null = await startTestServer(env);
    let second: TestServer | null = null;
    try {
      const owner = await signUp(first.server, first.baseUrl);
      const hook = await createHook(owner, receiver.url, ['contact.created']);
      receiver.plan({ status: 503 });
      await owner.api.post('/contacts', { name: 'Survivor', email: uniqueEmail('survivor') }, { token: owner.accessToken });
      await first.server.jobs.drain(QUEUE);
      await receiver.waitFor(1);
      await first.server.stop();
      first = null;
      second = await startTestServer(env);
      await runDue(second, owner.orgId);
      const delivered = await receiver.waitFor(2);
      expect(signedWith(delivered[1]!, hook.secret)).to.equal(true);
      expect(delivered[1]!.json.data.contact.name).to.equal('Survivor');
      await until(() => second!.server.db.knex('webhook_deliveries').where({ webhook_id: hook.id }), (rows) => rows[0]?.status === 'succeeded');
    } finally {
      if (first) await first.server.stop();
      await second?.stop();
      await receiver.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
