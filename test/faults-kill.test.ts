// An instance killed with SIGKILL in the middle of work (no graceful stop, no chance to write anything more): what it
// had acknowledged is finished by the next instance on the same data, once the dead one's lease runs out. The server
// runs as `npm start` does (server/index.ts in a child process), on the suite's PostgreSQL or on an embedded data
// directory that the second instance opens after the first died holding it.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { codeIn, PASSWORD } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { spawnScript } from './helpers/process.js';
import { TEST_AI_SECRET, TEST_SECRETS } from './helpers/server.js';
import { TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { waitFor } from './helpers/wait.js';

interface Instance {
  child: ChildProcess;
  api: Api;
  /** Every line the process wrote to stdout (pino JSON), for the mail a server without SMTP writes to its log. */
  lines: string[];
}

async function freePort(): Promise<number> {
  const probe = createNetServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((r) => probe.close(() => r()));
  return port;
}

async function start(env: Record<string, string | undefined>): Promise<Instance> {
  const port = await freePort();
  const child = spawnScript('server/index.ts', [], { env: { ...env, PORT: String(port) } });
  const lines: string[] = [];
  let pending = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const parts = (pending + chunk.toString()).split('\n');
    pending = parts.pop()!;
    lines.push(...parts);
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const api = new Api(`http://127.0.0.1:${port}`);
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}: ${stderr.slice(-2000)}`);
      return (await fetch(`${api.baseUrl}/api/v1/health/ready`).catch(() => null))?.ok ?? false;
    },
    { what: 'the server to be ready', timeoutMs: 180_000 },
  );
  return { child, api, lines };
}

async function kill(instance: Instance): Promise<void> {
  const exited = new Promise<NodeJS.Signals | null>((r) => instance.child.once('exit', (_code, signal) => r(signal)));
  instance.child.kill('SIGKILL');
  expect(await exited).to.equal('SIGKILL');
}

async function stop(instance: Instance | null): Promise<void> {
  if (!instance || instance.child.exitCode !== null || instance.child.signalCode !== null) return;
  const exited = new Promise((r) => instance.child.once('exit', r));
  instance.child.kill('SIGTERM');
  await exited;
}

/** Signs up through the API, reading the code from the mail the server (without SMTP) wrote to its log. */
async function signUp(instance: Instance): Promise<{ token: string; orgId: string }> {
  const email = `owner-${randomUUID().slice(0, 8)}@kill.test`;
  expect((await instance.api.post('/auth/initiate-signup', { name: 'Kim Owner', email })).status).to.equal(202);
  const text = await waitFor(
    async () => {
      for (const line of instance.lines) {
        const mail = (JSON.parse(line) as { mail?: { to: string; kind: string; text: string } }).mail;
        if (mail?.to === email && mail.kind === 'signup_code') return mail.text;
      }
      return null;
    },
    { what: 'the signup mail in the log' },
  ).catch((err: Error) => {
    // What the server logged instead, to tell a slow log from a mail never written.
    throw new Error(`${err.message}; the last of ${instance.lines.length} lines logged:\n${instance.lines.slice(-15).join('\n')}`);
  });
  const done = await instance.api.post('/auth/complete-signup', { email, organizationName: `Kill ${randomUUID().slice(0, 6)}`, password: PASSWORD, code: codeIn(text) });
  expect(done.status, JSON.stringify(done.body)).to.equal(201);
  return { token: done.body.data.accessToken, orgId: done.body.data.organization.id };
}

/** A local HTTP server whose handler is swapped by the test: first it holds requests, then it answers them. */
async function listen(handler: { fn: (req: IncomingMessage, body: string, res: ServerResponse) => void }): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handler.fn(req, Buffer.concat(chunks).toString('utf8'), res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

describe('faults: an instance killed with SIGKILL mid-work', function () {
  this.timeout(420_000);
  let dataDir: string;
  let env: Record<string, string | undefined>;
  let first: Instance | null = null;
  let second: Instance | null = null;

  beforeEach(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'support-kill-'));
    env = {
      NODE_ENV: 'test',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      DATABASE_URL: process.env.DATABASE_URL,
      REDIS_URL: process.env.REDIS_URL,
      BCRYPT_COST: '4',
      LOG_LEVEL: 'info',
      TRUST_PROXY: 'true',
      AI_TOOL_SECRET: TEST_AI_SECRET,
      ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
      ...TEST_SECRETS,
    };
  });
  afterEach(async () => {
    await stop(first);
    await stop(second);
    first = second = null;
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('delivers the webhooks that were in flight, each with the X-Webhook-Id it had', async () => {
    const held: string[] = [];
    const delivered = new Map<string, string>();
    const receiver = { fn: (req: IncomingMessage, _body: string, _res: ServerResponse) => void held.push(String(req.headers['x-webhook-id'])) };
    const target = await listen(receiver);
    try {
      // A timeout long enough that the killed instance cannot give up on a held request before it dies.
      Object.assign(env, { WEBHOOKS_ALLOW_PRIVATE: 'true', WEBHOOK_TIMEOUT_MS: '3000' });
      first = await start(env);
      const owner = await signUp(first);
      const t = { token: owner.token };
      const hook = await first.api.post('/webhooks', { url: `${target.url}/hook`, events: ['contact.created'] }, t);
      expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
      for (let i = 0; i < 4; i++) expect((await first.api.post('/contacts', { name: `Carla ${i}`, email: `carla${i}-${randomUUID().slice(0, 6)}@kill.test` }, t)).status).to.equal(201);
      await waitFor(async () => new Set(held).size === 4, { what: 'four deliveries held by the receiver' });
      await kill(first);

      receiver.fn = (req, body, res) => {
        const event = JSON.parse(body) as { type: string };
        delivered.set(String(req.headers['x-webhook-id']), event.type);
        res.writeHead(200).end('ok');
      };
      second = await start(env);
      // The deliveries are taken over once the dead instance's lease (timeout x 4 + 30 s) has run out.
      await waitFor(async () => delivered.size === 4, { what: 'the held deliveries from the second instance', timeoutMs: 120_000 });
      expect([...delivered.keys()].sort()).to.deep.equal([...new Set(held)].sort());
      expect([...delivered.values()]).to.deep.equal(Array(4).fill('contact.created'));
      const log = await second.api.get(`/webhooks/${hook.body.data.webhook.id}/deliveries`, t);
      expect(log.status).to.equal(200);
      expect(log.body.data.map((d: { status: string }) => d.status)).to.deep.equal(Array(4).fill('succeeded'));
    } finally {
      await target.close();
    }
  });

  it('stores the file of an acknowledged Telegram message whose processing died with the instance, once', async () => {
    const getFileCalls: number[] = [];
    const jpeg = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(60, 7)]);
    let webhookSecret = '';
    let answerGetFile = false;
    const telegram = await listen({
      fn: (req, body, res) => {
        const url = req.url ?? '';
        const json = (value: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value));
        if (url.endsWith('/getMe')) return json({ ok: true, result: { id: 9, username: 'kill_bot' } });
        if (url.endsWith('/setWebhook')) {
          webhookSecret = (JSON.parse(body) as { secret_token: string }).secret_token;
          return json({ ok: true, result: true });
        }
        if (url.endsWith('/getFile')) {
          getFileCalls.push(Date.now());
          // Held while the first instance lives: its processing is in flight when it dies.
          if (answerGetFile) json({ ok: true, result: { file_id: 'large', file_path: 'photos/file_9.jpg' } });
          return;
        }
        if (url.endsWith('/photos/file_9.jpg')) return res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': String(jpeg.length) }).end(jpeg);
        return json({ ok: true, result: true });
      },
    });
    try {
      Object.assign(env, { TELEGRAM_API_URL: telegram.url });
      first = await start(env);
      const owner = await signUp(first);
      const t = { token: owner.token };
      const channel = await first.api.post('/channels/telegram', { name: 'Kill bot', botToken: 'kill-token' }, t);
      expect(channel.status, JSON.stringify(channel.body)).to.equal(201);
      const channelId = channel.body.data.id;
      const update = { update_id: 901, message: { message_id: 901, chat: { id: 77 }, from: { id: 77, first_name: 'Pat' }, caption: 'The broken part', photo: [{ file_id: 'small' }, { file_id: 'large' }] } };
      const headers = { 'x-telegram-bot-api-secret-token': webhookSecret };
      expect((await first.api.post(`/channels/telegram/inbound/${channelId}`, update, { headers })).status).to.equal(200);
      await waitFor(async () => getFileCalls.length > 0, { what: 'the first instance asking for the file' });
      await kill(first);

      answerGetFile = true;
      second = await start(env);
      // A redelivery of the same update by Telegram is a no-op, before and after the takeover.
      expect((await second.api.post(`/channels/telegram/inbound/${channelId}`, update, { headers })).status).to.equal(200);
      const conversationId = await waitFor(
        async () => {
          const list = await second!.api.get('/conversations', t);
          return (list.body.data as { id: string; channel: string }[]).find((c) => c.channel === 'telegram')?.id ?? null;
        },
        { what: 'the conversation of the update, from the second instance', timeoutMs: 150_000 },
      );
      const messages = (await second.api.get(`/conversations/${conversationId}/messages`, t)).body.data as { content: string; type: string; attachments: { mimeType: string; sizeBytes: number }[] }[];
      const fromPat = messages.filter((m) => m.content === 'The broken part');
      expect(fromPat).to.have.length(1);
      expect(fromPat[0]!.type).to.equal('image');
      expect(fromPat[0]!.attachments).to.have.length(1);
      expect(fromPat[0]!.attachments[0]).to.include({ mimeType: 'image/jpeg', sizeBytes: jpeg.length });
      expect(getFileCalls.length).to.be.at.least(2);
    } finally {
      await telegram.close();
    }
  });
});
