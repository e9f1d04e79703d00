// `npm run migrate`: applies pending migrations and exits (for MIGRATE_ON_START=false deployments).
import { DataDirLockedError } from '../db/dataDirLock.js';
import { createDatabase } from '../db/index.js';
import { MigrationLockTimeout } from '../db/migrate.js';
import { ConfigError, loadConfig, loadEnvFileIfPresent } from './config.js';

try {
  loadEnvFileIfPresent();
  const config = loadConfig();
  const db = createDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  // Waits its turn if an instance is migrating the same database, and says so.
  const applied = await db.migrate({ logger: { info: (_, msg) => console.log(msg), warn: (details, msg) => console.warn(msg, details) } });
  console.log(applied.length ? `Applied: ${applied.join(', ')}` : 'Nothing to apply');
  await db.close();
} catch (err) {
  const expected = err instanceof ConfigError || err instanceof DataDirLockedError || err instanceof MigrationLockTimeout;
  console.error(expected ? err.message : err);
  process.exit(1);
}
