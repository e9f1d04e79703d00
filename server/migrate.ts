// `npm run migrate`: applies pending migrations and exits (for MIGRATE_ON_START=false deployments).
import { createDatabase } from '../db/index.js';
import { ConfigError, loadConfig } from './config.js';

try {
  const config = loadConfig();
  const db = createDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  const applied = await db.migrate();
  console.log(applied.length ? `Applied: ${applied.join(', ')}` : 'Nothing to apply');
  await db.close();
} catch (err) {
  console.error(err instanceof ConfigError ? err.message : err);
  process.exit(1);
}
