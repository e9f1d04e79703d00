// Starts real servers for tests: PGlite in a fresh directory by default, PostgreSQL/Redis when the env names them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../server/config.js';
import { createServer, type AppServer } from '../../server/server.js';
import type { Logger } from '../../server/logger.js';
import type { PolicyOverrides } from '../../server/policies/index.js';

/** Fixed test secrets, so tests can forge tokens with the right and the wrong secret. */
export const TEST_SECRETS = {
  JWT_ACCESS_SECRET: 'test-access-secret-0123456789abcdef0123456789',
  JWT_REFRESH_SECRET: 'test-refresh-secret-0123456789abcdef012345678',
  WIDGET_JWT_SECRET: 'test-widget-secret-0123456789abcdef0123456789',
};
export const TEST_AI_SECRET = 'test-ai-tool-secret-0123456789';

export interface TestServer {
  server: AppServer;
  baseUrl: string;
  stop(): Promise<void>;
}

/**
 * A server on an ephemeral loopback port. Embedded runs get their own data directory (PGlite allows one
 * process per directory); with DATABASE_URL every server shares that database, as instances do in production.
 */
export async function startTestServer(overrides: Record<string, string | undefined> = {}, opts: { logger?: Logger; policies?: PolicyOverrides } = {}): Promise<TestServer> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'support-test-'));
  const env: Record<string, string | undefined> = {
    NODE_ENV: 'test',
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    DATABASE_URL: process.env.DATABASE_URL,
    REDIS_URL: process.env.REDIS_URL,
    REDIS_ADAPTER: process.env.REDIS_ADAPTER,
    BCRYPT_COST: '4',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    TRUST_PROXY: 'true',
    AI_TOOL_SECRET: TEST_AI_SECRET,
    ...TEST_SECRETS,
    ...overrides,
  };
  const config = loadConfig(env);
  const server = createServer(config, opts);
  let port: number;
  try {
    port = await server.start();
  } catch (err) {
    // A start that failed half-way (a port taken) has opened the database and started the jobs: close them too.
    await server.stop();
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    server,
    baseUrl: `http://127.0.0.1:${port}`,
    async stop() {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
