// Command-line flags of `npm run bench -- ...`.
import path from 'node:path';
import { DEFAULT_LIMITS, type GeneratorLimits } from './stats.js';
import { LOAD_DIR } from './proc.js';

export const REDIS_ADAPTERS = ['sharded', 'classic'] as const;
export type RedisAdapterKind = (typeof REDIS_ADAPTERS)[number];

export const SCENARIOS = ['connections', 'reconnect', 'chat', 'cluster', 'rest', 'ingest', 'crm', 'analytics', 'webhooks', 'knowledge', 'channels'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export interface Options {
  scenarios: ScenarioName[];
  quick: boolean;
  visitors: number;
  agents: number;
  orgs: number;
  /** Chat: agents per organization (each message's fan-out), one knee search per value. */
  fanouts: number[];
  /** Cluster: organizations holding sockets on both instances (the chat runs in --orgs of them), one search per value. */
  tenants: number[];
  /** Cluster: the Socket.IO Redis adapters compared (REDIS_ADAPTER of the app instances), one search per value. */
  adapters: RedisAdapterKind[];
  /** Chat send rates (messages per second over all visitors), stepped up until the knee. */
  rates: number[];
  /** Seconds per chat step and per HTTP measure. */
  duration: number;
  /** Seconds a chat step waits for late deliveries after its last send. */
  drain: number;
  /** Visitor sockets of the reconnect scenario (plus --agents). */
  reconnectVisitors: number;
  /** Messages per second visitors send while the reconnect scenario's server restarts. */
  reconnectRate: number;
  /** Socket handshakes in flight during a ramp. */
  concurrency: number;
  /** HTTP connections autocannon keeps busy. */
  connections: number;
  /** bcrypt cost of the login measure (BCRYPT_COST, else the server default 12). */
  loginCost: number;
  batch: number;
  historyMessages: number;
  /** Contacts and tickets of the crm scenario's organization. */
  crmContacts: number;
  /** Documents the knowledge scenario indexes (about 2 KB each). */
  knowledgeDocs: number;
  crmTickets: number;
  /** Conversations of the analytics scenario's organization (5 messages each). */
  analyticsConversations: number;
  /** Seed the analytics organization once and keep it; later runs with the flag reuse it. */
  analyticsKeep: boolean;
  /** Seed (when not kept yet) and stop before measuring, so the measuring part alone can hold a lock. */
  analyticsSeedOnly: boolean;
  p99TargetMs: number;
  /** message.created subscriptions per organization in the chat scenario's second app run (0: no second run). */
  chatWebhooks: number;
  /** Webhooks scenario: subscriptions each event goes to, one measure per value. */
  webhookSubscriptions: number[];
  limits: GeneratorLimits;
  pin: boolean;
  /** BENCH_SERVER_CORES: cores for the servers (instance i on the i-th); null: core 0. */
  serverCores: number[] | null;
  /** Write a V8 CPU profile of every server process into <reportDir>/profiles. */
  profile: boolean;
  /** V8/Node flags for every server process, the baselines' included (runtime tunings compared on equal terms). */
  serverNodeFlags: string[];
  reportDir: string;
  databaseUrl: string | null;
  redisUrl: string | null;
}

export const USAGE = `npm run bench -- [flags]

  --scenarios=connections,reconnect,chat,cluster,rest,ingest,crm,analytics,webhooks,knowledge,channels   which to run (default: all)
  --quick              smoke run with tiny sizes (CI: proves the harness works; figures mean nothing)
  --visitors=N         widget visitors (default 10000)
  --agents=N           agents, spread over the organizations (default 100)
  --orgs=N             organizations (default 10)
  --fanouts=a,b,c      chat: agents per organization, one knee search each (default 2,5,10; --quick: 2); the chat
                       scenario seeds --orgs x the largest, --agents applies to the other scenarios
  --tenants=a,b        cluster: organizations holding sockets on both instances, one knee search each; the chat
                       traffic runs in --orgs of them, the rest each hold one idle visitor per instance (default 10,10000; --quick: 3,30)
  --adapters=a,b       cluster: Socket.IO Redis adapters compared, sharded and/or classic; the first also serves the
                       one-instance run and the relays (default sharded,classic; --quick: sharded)
  --rates=a,b,c        chat send rates in messages/s, stepped up to the knee (default 100,200,400,800,1600,2400,3200,4800,6400)
  --duration=S         seconds per chat step and per HTTP measure (default 5)
  --drain=S            seconds a chat step waits for late deliveries (default 3)
  --reconnect-visitors=N   reconnect: visitor sockets that lose their server and come back (default 10000; --quick 300)
  --reconnect-rate=N   reconnect: messages/s visitors keep sending meanwhile (default 200; --quick 20)
  --concurrency=N      socket handshakes in flight while ramping (default 200)
  --connections=N      HTTP connections for autocannon (default 16)
  --login-cost=N       bcrypt cost for the login measure (default BCRYPT_COST or 12)
  --batch=N            events per observability batch (default 500)
  --crm-contacts=N     contacts of the crm scenario's organization (default 100000)
  --knowledge-docs=N   documents the knowledge scenario indexes, about 2 KB each (default 10000)
  --crm-tickets=N      tickets of the crm scenario's organization (default 50000)
  --analytics-conversations=N   conversations of the analytics scenario's organization (default 1000000)
  --analytics-keep     seed the analytics organization once and keep it for later runs with this flag (same size):
                       on PostgreSQL in DATABASE_URL's database (organization bench-analytics-keep-N-0), embedded in
                       test/load/.analytics-N/; periods are measured up to the moment it was seeded
  --analytics-seed-only   with --analytics-keep: seed when not kept yet, then stop (measure later, e.g. under a lock:
                       npm run bench -- --scenarios=analytics --analytics-keep --analytics-seed-only &&
                       flock /tmp/bench.lock npm run bench -- --scenarios=analytics --analytics-keep)
  --chat-webhooks=N    chat: also find the knee with N message.created webhooks per organization, same run (default 1; 0: skip)
  --webhook-subscriptions=a,b   webhooks: subscriptions getting each event, one measure each (default 10,1; --quick: 10)
  --p99-target=MS      chat knee: highest rate with p99 under this and nothing lost (default 100)
  --max-loop-delay=MS  generator loop delay p99 above which a measure is INVALID (default ${DEFAULT_LIMITS.maxLoopDelayP99Ms})
  --max-cpu=F          generator CPU share above which a measure is INVALID (default ${DEFAULT_LIMITS.maxCpu})
  --profile            write a CPU profile (.cpuprofile) of every server process to <report-dir>/profiles
  --server-node-flags="F ..."   Node/V8 flags for every server process, app and baselines alike (to compare a
                       runtime tuning on equal terms), e.g. --server-node-flags=--single-threaded-gc
  --no-pin             do not pin servers (core 0) and generator (core 1) with taskset
  --report-dir=DIR     where the JSON report goes (default test/load/reports)

BENCH_SERVER_CORES=0,1  cores for the server processes, instance i of a scenario on the i-th (taskset); the
                     generator takes every core not listed (default: servers on 0, generator on 1)

DATABASE_URL (PostgreSQL) enables the cluster scenario (with REDIS_URL) and puts the app on PostgreSQL.`;

const int = (name: string, raw: string, min: number): number => {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min} (got "${raw}")`);
  return n;
};
const num = (name: string, raw: string): number => {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number (got "${raw}")`);
  return n;
};

export function parseOptions(argv: string[], env: NodeJS.ProcessEnv): Options | 'help' {
  const flags = new Map<string, string>();
  for (const arg of argv) {
    if (arg === '--help' || arg === '-h') return 'help';
    const m = /^--([a-z0-9-]+)(?:=(.*))?$/.exec(arg);
    if (!m) throw new Error(`unknown argument "${arg}" (see --help)`);
    flags.set(m[1]!, m[2] ?? 'true');
  }
  const quick = flags.get('quick') === 'true';
  const o: Options = {
    scenarios: [...SCENARIOS],
    quick,
    visitors: quick ? 60 : 10_000,
    agents: quick ? 6 : 100,
    orgs: quick ? 3 : 10,
    fanouts: quick ? [2] : [2, 5, 10],
    tenants: quick ? [3, 30] : [10, 10_000],
    adapters: quick ? [REDIS_ADAPTERS[0]] : [...REDIS_ADAPTERS],
    rates: quick ? [20, 40] : [100, 200, 400, 800, 1600, 2400, 3200, 4800, 6400],
    duration: quick ? 2 : 5,
    drain: quick ? 2 : 3,
    reconnectVisitors: quick ? 300 : 10_000,
    reconnectRate: quick ? 20 : 200,
    concurrency: quick ? 20 : 200,
    connections: quick ? 4 : 16,
    loginCost: env.BCRYPT_COST ? int('login-cost', env.BCRYPT_COST, 4) : 12,
    batch: 500,
    historyMessages: 50,
    crmContacts: quick ? 2_000 : 100_000,
    knowledgeDocs: quick ? 200 : 10_000,
    crmTickets: quick ? 1_000 : 50_000,
    analyticsConversations: quick ? 2_000 : 1_000_000,
    analyticsKeep: false,
    analyticsSeedOnly: false,
    p99TargetMs: 100,
    chatWebhooks: 1,
    webhookSubscriptions: quick ? [10] : [10, 1],
    limits: { ...DEFAULT_LIMITS },
    pin: true,
    serverCores: null,
    profile: false,
    serverNodeFlags: [],
    reportDir: path.join(LOAD_DIR, 'reports'),
    databaseUrl: env.DATABASE_URL?.trim() || null,
    redisUrl: env.REDIS_URL?.trim() || null,
  };
  for (const [name, value] of flags) {
    switch (name) {
      case 'quick':
        break;
      case 'scenarios': {
        const names = value.split(',').map((s) => s.trim()).filter(Boolean);
        for (const n of names) if (!(SCENARIOS as readonly string[]).includes(n)) throw new Error(`unknown scenario "${n}" (one of ${SCENARIOS.join(', ')})`);
        o.scenarios = names as ScenarioName[];
        break;
      }
      case 'visitors': o.visitors = int(name, value, 0); break;
      case 'agents': o.agents = int(name, value, 1); break;
      case 'orgs': o.orgs = int(name, value, 1); break;
      case 'fanouts': o.fanouts = [...new Set(value.split(',').map((r) => int(name, r, 1)))].sort((a, b) => a - b); break;
      case 'tenants': o.tenants = [...new Set(value.split(',').map((r) => int(name, r, 1)))].sort((a, b) => a - b); break;
      case 'adapters': {
        const names = value.split(',').map((s) => s.trim()).filter(Boolean);
        for (const n of names) if (!(REDIS_ADAPTERS as readonly string[]).includes(n)) throw new Error(`unknown adapter "${n}" (one of ${REDIS_ADAPTERS.join(', ')})`);
        o.adapters = [...new Set(names)] as RedisAdapterKind[];
        break;
      }
      case 'rates': o.rates = value.split(',').map((r) => num(name, r)).sort((a, b) => a - b); break;
      case 'duration': o.duration = num(name, value); break;
      case 'drain': o.drain = num(name, value); break;
      case 'reconnect-visitors': o.reconnectVisitors = int(name, value, 1); break;
      case 'reconnect-rate': o.reconnectRate = num(name, value); break;
      case 'concurrency': o.concurrency = int(name, value, 1); break;
      case 'connections': o.connections = int(name, value, 1); break;
      case 'login-cost': o.loginCost = int(name, value, 4); break;
      case 'batch': o.batch = int(name, value, 1); break;
      case 'crm-contacts': o.crmContacts = int(name, value, 1); break;
      case 'knowledge-docs': o.knowledgeDocs = int(name, value, 1); break;
      case 'crm-tickets': o.crmTickets = int(name, value, 1); break;
      case 'analytics-conversations': o.analyticsConversations = int(name, value, 1); break;
      case 'analytics-keep': o.analyticsKeep = true; break;
      case 'analytics-seed-only': o.analyticsSeedOnly = true; break;
      case 'p99-target': o.p99TargetMs = num(name, value); break;
      case 'chat-webhooks': o.chatWebhooks = int(name, value, 0); break;
      case 'webhook-subscriptions': o.webhookSubscriptions = [...new Set(value.split(',').map((r) => int(name, r, 1)))]; break;
      case 'max-loop-delay': o.limits.maxLoopDelayP99Ms = num(name, value); break;
      case 'max-cpu': o.limits.maxCpu = num(name, value); break;
      case 'no-pin': o.pin = false; break;
      case 'profile': o.profile = true; break;
      case 'server-node-flags': {
        const flags = value.split(/\s+/).filter(Boolean);
        const bad = flags.find((f) => !f.startsWith('--'));
        if (bad !== undefined) throw new Error(`--server-node-flags takes flags that start with -- (got "${bad}")`);
        o.serverNodeFlags = flags;
        break;
      }
      case 'report-dir': o.reportDir = path.resolve(value); break;
      default:
        throw new Error(`unknown flag --${name} (see --help)`);
    }
  }
  const cores = env.BENCH_SERVER_CORES?.trim();
  if (cores) o.serverCores = cores.split(',').map((c) => int('BENCH_SERVER_CORES (environment)', c.trim(), 0));
  if (o.analyticsSeedOnly && !o.analyticsKeep) throw new Error('--analytics-seed-only needs --analytics-keep (an unkept seed is removed at the end of the run)');
  if (o.batch > 500) throw new Error('--batch must be at most 500 (the route accepts 1..500 events)');
  if (!o.fanouts.length || !o.tenants.length || !o.adapters.length) throw new Error('--fanouts, --tenants and --adapters need at least one value');
  if (o.orgs > o.agents) throw new Error('--orgs must not exceed --agents (every organization needs an agent to receive)');
  return o;
}
