// Root hooks: one shared server for the whole run (tests build their own tenants, so they never collide).
// The server's modules are imported when the run starts, not when mocha loads this file: mutation testing loads this
// file before it activates a mutant of a module-level value, and such a mutant is only seen by a module loaded after.
import type { TestServer } from './server.js';

let shared: TestServer | null = null;

export function sharedServer(): TestServer {
  if (!shared) throw new Error('the shared test server is not running');
  return shared;
}

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    // A busy machine (mutation testing runs many servers in a row) may set a longer start deadline.
    this.timeout(Number(process.env.TEST_SERVER_START_TIMEOUT_MS) || 60_000);
    // On PostgreSQL every test server shares one database. The shared server lives through the whole run, so it
    // leaves the jobs of channels and webhooks to the servers that the tests of those areas start with their fake
    // providers, keys and settings (it would otherwise claim some of them, with its own).
    // Loaded the way this file was (mocha requires TypeScript through tsx's CommonJS hook): a module loaded the other
    // way would be a second copy of the server's modules, with classes and state of its own.
    const { startTestServer } =
      typeof require === 'function' ? (require('./server.js') as typeof import('./server.js')) : await import('./server.js');
    shared = await startTestServer({ JOB_QUEUES: '-channel-inbound,-channel-delivery,-webhook-delivery,-webhook-fanout' });
  },
  async afterAll() {
    await shared?.stop();
    shared = null;
  },
};
