// Entry point of `npm start`: read the configuration, start the server, stop gracefully on SIGTERM/SIGINT.
import { ConfigError, loadConfig } from './config.js';
import { DataDirLockedError } from '../db/dataDirLock.js';
import { createServer, type AppServer } from './server.js';

let config;
try {
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
let stopping = false;
const stop = async (signal: string) => {
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
    process.exit(0);
  } catch (err) {
    server.logger.error({ err }, 'error while stopping');
    process.exit(1);
  }
};
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));

server.start().catch((err) => {
  server.logger.fatal({ err }, 'failed to start');
  process.exit(1);
});
