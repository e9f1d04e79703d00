// A Redis server of the test's own (redis-server on a free loopback port), to stop and start for outage tests.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { waitFor } from './wait.js';

/** True when redis-server is installed (CI installs it; outage tests skip without it). */
export function redisServerAvailable(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

export interface TestRedis {
  port: number;
  url: string;
  running: boolean;
  start(): Promise<void>;
  /** Kills the server (SIGKILL: an outage, not a polite shutdown); the port stays ours for the restart. */
  stop(): Promise<void>;
  /** A plain client to look inside. */
  client(): Redis;
}

export async function testRedis(opts: { start?: boolean } = {}): Promise<TestRedis> {
  const port = await freePort();
  let child: ChildProcess | null = null;
  const url = `redis://127.0.0.1:${port}`;
  const answers = async () => {
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      return (await probe.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      probe.disconnect();
    }
  };
  const redis: TestRedis = {
    port,
    url,
    running: false,
    async start() {
      child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
      await waitFor(answers, { timeoutMs: 10_000, what: `redis-server on port ${port}` });
      redis.running = true;
    },
    async stop() {
      const dying = child;
      child = null;
      redis.running = false;
      if (!dying || dying.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        dying.once('exit', () => resolve());
        dying.kill('SIGKILL');
      });
    },
    client() {
      return new Redis(url, { maxRetriesPerRequest: 1 });
    },
  };
  if (opts.start !== false) await redis.start();
  return redis;
}
