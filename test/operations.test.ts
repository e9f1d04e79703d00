// Running it: `npm start` reads .env (the environment wins) and prints the URL it serves; socket handshakes are logged.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { pino } from 'pino';
import { io } from 'socket.io-client';
import { loadConfig } from '../server/config.js';
import { createServer, type AppServer } from '../server/server.js';
import { signUp } from './helpers/factories.js';
import { spawnScript } from './helpers/process.js';
import { TEST_SECRETS } from './helpers/server.js';
import { connected, refusal, type ClientSocket } from './helpers/sockets.js';
import { waitFor } from './helpers/wait.js';

type LogLine = Record<string, unknown> & { msg: string; level: number };

describe('operations', () => {
  describe('npm start', () => {
    let cwd: string;
    before(() => {
      cwd = mkdtempSync(path.join(tmpdir(), 'support-dotenv-'));
    });
    after(() => {
      rmSync(cwd, { recursive: true, force: true });
    });

    it('reads .env from its working directory (the real environment wins) and logs the URL it serves', async function () {
      this.timeout(120_000);
      // HOST in .env is an address this machine does not have: the start only works if the environment's HOST wins.
      writeFileSync(path.join(cwd, '.env'), ['PORT=0', 'HOST=203.0.113.7', 'DATA_DIR=./from-dotenv', 'LOG_LEVEL=info', '# a comment', 'MAIL_FROM="Dotenv <dotenv@example.test>"', ''].join('\n'));
      const child = spawnScript('server/index.ts', [], { cwd, env: { HOME: process.env.HOME, HOST: '127.0.0.1', ...TEST_SECRETS } });
      const lines: LogLine[] = [];
      let buffered = '';
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.stdout!.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        const parts = buffered.split('\n');
        buffered = parts.pop()!;
        for (const part of parts) if (part.startsWith('{')) lines.push(JSON.parse(part) as LogLine);
      });
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      let code: number | null;
      try {
        const listening = await waitFor(
          () => {
            if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}: ${stderr}`);
            return lines.find((l) => l.msg === 'listening');
          },
          { timeoutMs: 90_000, what: 'the listening line' },
        );
        expect(listening.url).to.match(/^http:\/\/127\.0\.0\.1:\d+\/api\/v1$/);
        expect(listening.url).to.equal(`http://127.0.0.1:${listening.port}/api/v1`);
        expect(lines.find((l) => l.msg.startsWith('settings read from .env'))?.file).to.equal(path.join(cwd, '.env'));
        expect(existsSync(path.join(cwd, 'from-dotenv', 'secrets.json')) || existsSync(path.join(cwd, 'from-dotenv', 'pgdata')), 'DATA_DIR from .env').to.equal(true);
        const ready = await fetch(`${listening.url as string}/health/ready`);
        expect(ready.status).to.equal(200);
      } finally {
        child.kill('SIGTERM');
        code = await exited;
      }
      expect(code, `a graceful stop on SIGTERM: ${stderr} ${JSON.stringify(lines.slice(-3))}`).to.equal(0);
    });
  });

  describe('socket handshakes', () => {
    let server: AppServer;
    let baseUrl: string;
    let dataDir: string;
    const lines: LogLine[] = [];
    const sockets: ClientSocket[] = [];

    before(async function () {
      this.timeout(60_000);
      dataDir = mkdtempSync(path.join(tmpdir(), 'support-socket-log-'));
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line) as LogLine);
          done();
        },
      });
      const config = loadConfig({ NODE_ENV: 'test', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, DATABASE_URL: process.env.DATABASE_URL, REDIS_URL: process.env.REDIS_URL, BCRYPT_COST: '4', TRUST_PROXY: 'true', ...TEST_SECRETS });
      server = createServer(config, { logger: pino({ level: 'debug', base: undefined }, sink) });
      baseUrl = `http://127.0.0.1:${await server.start()}`;
    });
    after(async () => {
      for (const s of sockets) s.close();
      await server?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    });

    const open = (orgId: string, token: string, requestId?: string) => {
      const socket = io(`${baseUrl}/orgs/${orgId}`, {
        transports: ['websocket'],
        auth: { token },
        reconnection: false,
        forceNew: true,
        extraHeaders: requestId ? { 'x-request-id': requestId } : undefined,
      }) as ClientSocket;
      sockets.push(socket);
      return socket;
    };

    it('logs connects and refusals at debug with a per-connection request id, the organization, the kind and the reason', async () => {
      const owner = await signUp(server, baseUrl);
      await connected(open(owner.orgId, owner.accessToken, 'sock-req-0001'));
      const connect = await waitFor(() => lines.find((l) => l.msg === 'socket connected' && l.requestId === 'sock-req-0001'), { what: 'socket connected' });
      expect(connect).to.include({ level: 20, orgId: owner.orgId, kind: 'agent', userId: owner.userId });

      const other = await signUp(server, baseUrl);
      expect(await refusal(baseUrl, other.orgId, owner.accessToken)).to.equal('forbidden');
      const refused = await waitFor(() => lines.find((l) => l.msg === 'socket refused' && l.orgId === other.orgId), { what: 'socket refused' });
      expect(refused).to.include({ level: 20, kind: 'agent', reason: 'the token is for another organization' });
      expect(refused.requestId, 'a generated id when none is sent').to.match(/^[0-9a-f-]{36}$/);

      expect(await refusal(baseUrl, owner.orgId, 'not-a-token')).to.equal('unauthorized');
      const unknown = await waitFor(() => lines.find((l) => l.msg === 'socket refused' && l.orgId === owner.orgId), { what: 'the second refusal' });
      expect(unknown).to.include({ kind: 'unknown', reason: 'not an access or widget_session token' });
      const logged = JSON.stringify(lines.filter((l) => l.msg.startsWith('socket ')));
      expect(logged, 'tokens never reach the log').not.to.include(owner.accessToken);
    });
  });
});
