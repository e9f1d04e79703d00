// Entry point of `npm start`: read the configuration, start the server, stop gracefully on SIGTERM/SIGINT.
import { ConfigError, loadConfig, loadEnvFileIfPresent } from './config.js';
import { DataDirLockedError } from '../db/dataDirLock.js';
import { createServer, type AppServer } from './server.js';

let config;
let envFile: string | null = null;
try {
  envFile = loadEnvFileIfPresent();
  config = loadConfig();
} catch (err) {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(1);
  }
  throw err;
}

let server: AppServer;
try {
  server = createServer(config);
} catch (err) {
  // Another process serves this DATA_DIR: say which in one line rather than with a stack trace.
  if (err instanceof DataDirLockedError) {
    console.error(err.message);
    process.exit(1);
  }
  throw err;
}
if (envFile) server.logger.info({ file: envFile }, 'settings read from .env (the environment wins)');
let stopping = false;
const stop = async (signal: string, exitCode = 0) => {
  if (stopping) return;
  stopping = true;
  server.logger.info({ signal }, 'stopping');
  const force = setTimeout(() => {
    server.logger.error('graceful stop took too long; exiting');
    process.exit(1);
  }, 15_000);
  force.unref();
  try {
    await server.stop();
    server.logger.info('stopped');
    process.exit(exitCode);
  } catch (err) {
    server.logger.error({ err }, 'error while stopping');
    process.exit(1);
  }
};
// A promise nobody awaited rejected: typically a fire-and-forget call into Redis, the database or SMTP failing for a
// moment. Log it with its stack and keep serving; one dependency's transient error must not take down an instance
// and every socket it holds. A synchronous exception that nothing caught leaves state unknown: stop gracefully, exit 1.
process.on('unhandledRejection', (reason) => server.logger.error({ err: reason }, 'unhandled promise rejection (the instance keeps running)'));
process.on('uncaughtException', (err, origin) => {
  server.logger.fatal({ err, origin }, 'uncaught exception; stopping');
  void stop('uncaughtException', 1);
});
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));

server.start().catch((err) => {
  server.logger.fatal({ err }, 'failed to start');
  process.exit(1);
});
