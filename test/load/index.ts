// `npm run bench`: runs the load scenarios against real servers (child processes), each figure next to a baseline
// measured in the same run, prints a table and writes test/load/reports/<timestamp>.json. See README "Benchmarks".
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { machineInfo } from './lib/machine.js';
import { parseOptions, USAGE, type Options } from './lib/options.js';
import { childNodeFlags, pinSelf, tasksetAvailable } from './lib/proc.js';
import { formatTable, writeReport, type ScenarioResult } from './lib/report.js';
import { cpuTimes, stealBetween } from './lib/stats.js';
import { removeTemplate, type RunContext, type Scenario } from './lib/servers.js';
import { analytics } from './scenarios/analytics.js';
import { channels } from './scenarios/channels.js';
import { chat } from './scenarios/chat.js';
import { cluster } from './scenarios/cluster.js';
import { connections } from './scenarios/connections.js';
import { crm } from './scenarios/crm.js';
import { knowledge } from './scenarios/knowledge.js';
import { ingest } from './scenarios/ingest.js';
import { reconnect } from './scenarios/reconnect.js';
import { rest } from './scenarios/rest.js';
import { webhooks } from './scenarios/webhooks.js';

const REGISTRY: Scenario[] = [connections, reconnect, chat, cluster, rest, ingest, crm, analytics, webhooks, knowledge, channels];

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

let options: Options;
try {
  const parsed = parseOptions(process.argv.slice(2), process.env);
  if (parsed === 'help') {
    log(USAGE);
    log('\nScenarios:');
    for (const s of REGISTRY) log(`  ${s.name.padEnd(12)} ${s.summary}`);
    process.exit(0);
  }
  options = parsed;
} catch (err) {
  log(`bench: ${(err as Error).message}`);
  process.exit(2);
}

const machine = machineInfo();
// Every socket is a file descriptor, in the generator and in the server.
const needed = Math.max(options.visitors, options.scenarios.includes('reconnect') ? options.reconnectVisitors : 0) + options.agents + 512;
const fdLimit = Number(machine.fileDescriptorLimit);
if (options.scenarios.some((s) => s === 'connections' || s === 'reconnect' || s === 'chat' || s === 'cluster') && Number.isFinite(fdLimit) && fdLimit < needed) {
  log(`bench: ${needed - 512} sockets need about ${needed} open files, but the limit is ${fdLimit}; raise it (ulimit -n ${needed}) or lower --visitors`);
  process.exit(2);
}

childNodeFlags.push(...options.serverNodeFlags);
if (options.profile) childNodeFlags.push('--cpu-prof', `--cpu-prof-dir=${path.join(options.reportDir, 'profiles')}`);

// Servers on their cores (BENCH_SERVER_CORES, default core 0), this generator on every other core, so neither steals
// the other's CPU. Listing every core pins the servers apart from each other and leaves the generator among them.
const serverCores = options.serverCores ?? [0];
const outside = serverCores.filter((c) => c >= machine.cpus);
if (options.pin && outside.length) {
  log(`bench: BENCH_SERVER_CORES names core(s) ${outside.join(', ')}, but this machine has cores 0-${machine.cpus - 1}`);
  process.exit(2);
}
const generatorCores = Array.from({ length: machine.cpus }, (_, c) => c).filter((c) => !serverCores.includes(c));
const pinning = options.pin && machine.cpus >= 2 && tasksetAvailable();
const generatorPinned = pinning && pinSelf(generatorCores);
const ctx: RunContext = { options, runId: `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`, serverCores: pinning ? serverCores : null, log };

log(`machine: ${machine.cpus} x ${machine.model}, node ${machine.node}, ${machine.memoryGb} GB, open files ${machine.fileDescriptorLimit}`);
log(
  pinning
    ? `pinning: servers on core${serverCores.length > 1 ? `s ${serverCores.join(',')} (instance i on the i-th)` : ` ${serverCores[0]}`}, generator ${generatorPinned ? `on core(s) ${generatorCores.join(',')}` : 'unpinned (no core left for it)'} (taskset); PostgreSQL and Redis are not pinned`
    : `pinning: off (${!options.pin ? '--no-pin' : machine.cpus < 2 ? 'one CPU' : 'taskset unavailable'}): servers and generator share the CPUs`,
);
log(`database: ${options.databaseUrl ? 'PostgreSQL (DATABASE_URL)' : 'embedded PGlite'}; Redis: ${options.redisUrl ? 'REDIS_URL' : 'none'}${options.quick ? '; --quick: smoke sizes, the figures mean nothing' : ''}`);
if (options.serverNodeFlags.length) log(`server processes (app and baselines) run with ${options.serverNodeFlags.join(' ')}`);

const startedAt = new Date();
const times0 = cpuTimes();
const results: ScenarioResult[] = [];
for (const scenario of REGISTRY.filter((s) => options.scenarios.includes(s.name))) {
  const t0 = performance.now();
  const skip = scenario.skip(ctx);
  if (skip) {
    log(`\n== ${scenario.name}: skipped (${skip})`);
    results.push({ name: scenario.name, status: 'skipped', reason: skip, seconds: 0, rows: [], details: {} });
    continue;
  }
  log(`\n== ${scenario.name}: ${scenario.summary}`);
  try {
    const out = await scenario.run(ctx);
    results.push({ name: scenario.name, status: 'ok', seconds: Math.round((performance.now() - t0) / 100) / 10, ...out });
  } catch (err) {
    log(`  FAILED: ${(err as Error).stack ?? err}`);
    results.push({ name: scenario.name, status: 'failed', reason: (err as Error).message.split('\n')[0], seconds: Math.round((performance.now() - t0) / 100) / 10, rows: [], details: { error: (err as Error).stack } });
  }
  log(`   (${Math.round((performance.now() - t0) / 1000)} s)`);
}

await removeTemplate();
// On a shared VM the hypervisor takes CPU time from both cores; figures from a noisy run vary more between runs.
const steal = stealBetween(times0, cpuTimes());

log(`\n${formatTable(results)}\n`);
const invalid = results.flatMap((r) => r.rows.filter((x) => x.invalid).map((x) => `${r.name}: ${x.metric}`));
if (steal !== null && steal > 0.02) log(`CPU steal during the run: ${Math.round(steal * 100)}% of the machine's CPU time went to other guests; expect figures to vary between runs.`);
if (invalid.length) log(`INVALID figures (the generator was the bottleneck; rerun smaller or on more cores): ${invalid.join(', ')}`);
const file = writeReport(options.reportDir, {
  startedAt: startedAt.toISOString(),
  finishedAt: new Date().toISOString(),
  seconds: Math.round((Date.now() - startedAt.getTime()) / 1000),
  machine,
  cpuSteal: steal,
  pinning: pinning ? { servers: serverCores, generator: generatorPinned ? generatorCores : null } : null,
  database: options.databaseUrl ? 'postgres' : 'embedded',
  redis: !!options.redisUrl,
  options: { ...options, databaseUrl: options.databaseUrl ? '(set)' : null, redisUrl: options.redisUrl ? '(set)' : null },
  notes: [
    'ratio = app / baseline, measured in the same run on the same machine.',
    'Servers run with BCRYPT_COST=4 for setup; the login measure uses users hashed at loginCost.',
    'A figure marked invalid was limited by the load generator (event-loop delay p99 or CPU over the limits).',
  ],
  scenarios: results,
});
log(`report: ${file}`);
const failed = results.filter((r) => r.status === 'failed');
if (failed.length) log(`failed: ${failed.map((r) => r.name).join(', ')}`);
process.exit(failed.length ? 1 : 0);
