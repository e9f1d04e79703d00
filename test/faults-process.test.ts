// `npm start`'s process through a Redis outage: it must not exit, and must stop cleanly afterwards.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { Api } from './helpers/http.js';
import { uniqueEmail } from './helpers/factories.js';
import { freePort, redisServerAvailable, testRedis, type TestRedis } from './helpers/redis.js';
import { TEST_SECRETS } from './helpers/server.js';
import { connectOk, settle } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

describe('the server process during a Redis outage', function () {
  this.timeout(150_000);
  let redis: TestRedis;
  let child: ChildProcess;
  let dataDir: string;
  const lines: Array<Record<string, any>> = [];

  before(async function () {
    if (!redisServerAvailable()) this.skip();
    redis = await testRedis();
    dataDir = mkdtempSync(path.join(tmpdir(), 'support-process-'));
  });

  after(async () => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    await redis?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('stays up while agents and visitors send, answers 503 only on readiness, resumes, and stops with 0', async () => {
    const port = await freePort();
    child = spawn(process.execPath, ['--import', 'tsx', 'server/index.ts'], {
      env: {
        PATH: process.env.PATH,
        NODE_ENV: 'test',
        PORT: String(port),
        HOST: '127.0.0.1',
        DATA_DIR: dataDir,
        REDIS_URL: redis.url,
        ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
        BCRYPT_COST: '4',
        LOG_LEVEL: 'info',
        TRUST_PROXY: 'true',
        ...TEST_SECRETS,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let buffered = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      for (const line of parts) if (line.trim()) lines.push(JSON.parse(line));
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const base = `http://127.0.0.1:${port}`;
    const api = new Api(base);
    const readyStatus = async () => (await fetch(`${base}/api/v1/health/ready`, { signal: AbortSignal.timeout(3_000) }).catch(() => null))?.status;
    await waitFor(async () => (await readyStatus()) === 200, { timeoutMs: 90_000, what: 'the server to be ready' });

    // A tenant through the public API; the signup code is in the log, as for the first user of a fresh install.
    const email = uniqueEmail('process');
    expect((await api.post('/auth/initiate-signup', { name: 'Pat', email })).status).to.equal(202);
    const code = await waitFor(
      () => lines.map((l) => JSON.stringify(l)).filter((l) => l.includes(email)).map((l) => /code is (\d{6})/.exec(l)?.[1]).find(Boolean),
      { what: 'the signup code in the log' },
    );
    const signup = await api.post('/auth/complete-signup', { email, organizationName: 'Process Org', password: 'process-pass-1', code });
    expect(signup.status, JSON.stringify(signup.body)).to.equal(201);
    const { accessToken, organization } = signup.body.data;
    const publicKey = (await api.get('/widget/manage', { token: accessToken })).body.data.publicKey;
    const visitorToken = (await api.post('/widget/auth/token', { publicKey })).body.data.token;
    const started = await api.post('/widget/conversations', { message: 'hello' }, { token: visitorToken });
    const conversationId = started.body.data.conversation.id;
    const agent = await connectOk(base, organization.id, accessToken);

    try {
      await redis.stop();
      // Four seconds of traffic that publishes through the adapter and counts rate limits.
      const sent: number[] = [];
      const until = Date.now() + 4_000;
      for (let i = 0; Date.now() < until; i++) {
        sent.push((await api.post(`/widget/conversations/${conversationId}/messages`, { content: `m${i}`, clientMessageId: `p-${i}` }, { token: visitorToken })).status);
        sent.push((await api.post(`/conversations/${conversationId}/messages`, { content: `r${i}` }, { token: accessToken })).status);
        await settle(50);
      }
      expect(new Set(sent)).to.deep.equal(new Set([201]));
      expect(child.exitCode).to.equal(null);
      expect(await readyStatus()).to.equal(503);

      await redis.start();
      await waitFor(async () => (await readyStatus()) === 200, { timeoutMs: 15_000, what: 'readiness after the outage' });
      expect(child.exitCode).to.equal(null);
      const warnings = lines.filter((l) => l.level === 40 && l.variable === 'REDIS_URL');
      expect(warnings).to.have.length(1);
      expect(lines.filter((l) => /unhandled/.test(String(l.msg)))).to.be.empty;
    } finally {
      agent.close();
    }

    child.kill('SIGTERM');
    expect(await exited).to.equal(0);
  });
});
