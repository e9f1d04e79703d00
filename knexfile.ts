// For the knex CLI (npx knex migrate:make ...); the server applies migrations itself on start.
import { loadConfig, loadEnvFileIfPresent } from './server/config.js';
import { knexConfig } from './db/index.js';

loadEnvFileIfPresent();
const config = loadConfig();
export default knexConfig({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
