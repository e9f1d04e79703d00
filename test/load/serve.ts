// The app under test as a child process: configuration from the environment (loadConfig), createServer().start(),
// then setup and counters over IPC. Spawned by the benchmark under `taskset -c 0`.
import { loadConfig } from '../../server/config.js';
import { createServer } from '../../server/server.js';
import { serveChild } from './lib/proc.js';
import { seedCrm, type CrmSeedRequest } from './lib/crm-seed.js';
import { explainSummary, findKeptAnalytics, seedAnalytics, timeConversationScan, type AnalyticsSeedRequest } from './lib/analytics-seed.js';
import { seedKnowledge, type KnowledgeSeedRequest } from './lib/knowledge-seed.js';
import { cleanup, countMessages, seed, seedTenants, type SeedRequest, type TenantsRequest } from './lib/seed.js';
import { settleDatabase } from './lib/settle.js';

const config = loadConfig(process.env);
const server = createServer(config);
const port = await server.start();
const runIds = new Set<string>();
// Statements this instance sent (knex's query event: every statement, batched or not), for per-delivery costs.
let statements = 0;
server.db.knex.on('query', () => void statements++);

serveChild(
  port,
  {
    seed: (req: SeedRequest) => {
      runIds.add(req.runId);
      return seed(server, req);
    },
    seedTenants: (req: TenantsRequest) => {
      runIds.add(req.runId);
      return seedTenants(server, req);
    },
    // Rows seeded through another instance of the run, removed by this one's cleanup.
    adopt: ({ runId }: { runId: string }) => {
      runIds.add(runId);
    },
    // Contacts and tickets of an organization `seed` made (its runId is already recorded for cleanup).
    seedCrm: (req: CrmSeedRequest) => seedCrm(server, req),
    // Agents, conversations and messages of an organization `seed` made, and the analytics baseline and plans.
    seedAnalytics: (req: AnalyticsSeedRequest) => seedAnalytics(server, req),
    // The organization an earlier run seeded and kept (--analytics-keep), or null.
    findKeptAnalytics: ({ runId }: { runId: string }) => findKeptAnalytics(server, { runId, cleanup: (id) => cleanup(server, id) }),
    analyticsScan: (req: { orgId: string; times: number }) => timeConversationScan(server, req),
    analyticsExplain: (req: { orgId: string; from: string; to: string }) => explainSummary(server, req),
    // Text sources of an organization `seed` made, indexed through the job queue (timed), and the queries to run.
    seedKnowledge: (req: KnowledgeSeedRequest) => seedKnowledge(server, req),
    countMessages: ({ orgIds }: { orgIds: string[] }) => countMessages(server, orgIds),
    // Between two measures: PostgreSQL finishes what the last one wrote (vacuum, checkpoint, autovacuum).
    settleDatabase: ({ maxMs, tables }: { maxMs: number; tables?: string[] }) => settleDatabase(server, maxMs, tables),
    // The webhooks scenario lets events pile up in the durable queue, then times how fast it empties.
    statements: () => statements,
    pauseJobs: () => server.jobs.stop(),
    resumeJobs: () => server.jobs.start(),
    // On a shared PostgreSQL the run removes its rows; an embedded data directory is deleted instead.
    // A restarted instance never seeded: it is told the run whose rows to remove.
    cleanup: async (args: { runId?: string }) => {
      if (args.runId) runIds.add(args.runId);
      for (const runId of runIds) await cleanup(server, runId);
      runIds.clear();
    },
    stop: () => server.stop(),
  },
  () => server.realtime.io.engine.clientsCount,
);
