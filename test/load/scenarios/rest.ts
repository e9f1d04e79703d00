// rest: GET /conversations/{id} (50 messages), a REST reply and login, driven by autocannon. Baseline: a bare
// node:http handler running the same queries on the same database (pg with DATABASE_URL, else the app's PGlite
// directory once the app stopped), and raw bcrypt at the login cost.
import bcrypt from 'bcrypt';
import { combine, forwardedFor, measureHttp, quiesce, requestJson, type HttpMeasure } from '../lib/http-load.js';
import type { Child } from '../lib/proc.js';
import { invalidOf, row, type Row } from '../lib/report.js';
import type { SeedResult } from '../lib/seed.js';
import { startApp, startHttpDb, type RunContext, type Scenario } from '../lib/servers.js';

/** Turns each side takes per measure on PostgreSQL (each `--duration / ROUNDS` seconds). */
const ROUNDS = 2;

interface Endpoints {
  get: HttpMeasure;
  reply: HttpMeasure;
  login: HttpMeasure;
}

/** Enough login users that none is used more than 8 times (the per-email limit is 10 per 15 minutes). */
async function loginUsersFor(ctx: RunContext): Promise<number> {
  const hash = await bcrypt.hash('estimate', ctx.options.loginCost);
  const t0 = performance.now();
  await bcrypt.compare('estimate', hash);
  const perSecond = 1000 / Math.max(0.05, performance.now() - t0);
  return Math.min(20_000, Math.max(20, Math.ceil((perSecond * 3 * ctx.options.duration) / 8) + ctx.options.connections));
}

function requestRows(name: string, app: HttpMeasure, base: HttpMeasure, note: string): Row[] {
  const invalid = invalidOf(app.generator.invalid, base.generator.invalid);
  const errors = [app, base].map((m) => (m.non2xx || m.errors ? `${m.non2xx} non-2xx ${JSON.stringify(m.statusCodes)}, ${m.errors} errors` : '')).map((e, i) => (e ? `${i ? 'baseline' : 'app'}: ${e}` : '')).filter(Boolean);
  return [
    row(`${name} throughput`, 'req/s', app.rps, base.rps, { invalid, note: [note, `server CPU ${Math.round(app.serverCpu * 100)}% / ${Math.round(base.serverCpu * 100)}%`, ...errors].join('; ') }),
    row(`${name} p50`, 'ms', app.p50, base.p50, { invalid }),
    row(`${name} p99`, 'ms', app.p99, base.p99, { invalid }),
  ];
}

export const rest: Scenario = {
  name: 'rest',
  summary: 'GET a conversation with 50 messages, a REST reply, login; baseline: bare node:http + pg/PGlite, raw bcrypt',
  skip: () => null,
  async run(ctx) {
    const o = ctx.options;
    const loginUsers = await loginUsersFor(ctx);
    const app = await startApp(ctx, 'app', { postgres: true, redis: true });
    let seeded: SeedResult;
    let appM: Endpoints;
    let base: Endpoints;
    let database = '';
    try {
      seeded = await app.child.call<SeedResult>('seed', {
        runId: ctx.runId, orgs: 1, agents: 1, visitors: 0, conversations: false,
        historyMessages: o.historyMessages, replyConversations: Math.max(8, o.connections * 2), loginUsers, loginCost: o.loginCost,
      }, 300_000);
      const org = seeded.orgs[0]!;
      const token = org.agents[0]!.token;
      const conversationId = seeded.historyConversationId!;
      const replies = seeded.replyConversationIds;
      const login = seeded.login!;
      const check = await requestJson(`${app.url}/api/v1/conversations/${conversationId}`, { headers: { authorization: `Bearer ${token}` } });
      if (check.status !== 200 || check.body?.data?.messages?.length !== o.historyMessages) throw new Error(`GET /conversations/{id} answered ${check.status} ${JSON.stringify(check.body).slice(0, 200)}`);

      // One side's three measures; `seconds` per call. Request counters live per side, so rounds continue them.
      const side = (url: string, variant: 'app' | 'baseline', server: Child) => {
        const prefix = variant === 'app' ? '/api/v1' : '';
        const auth: Record<string, string> = variant === 'app' ? { authorization: `Bearer ${token}` } : { 'x-org-id': org.id, 'x-user-id': org.agents[0]!.userId };
        let n = 0;
        let m = 0;
        let ip = Math.floor(Math.random() * 2 ** 22);
        return {
          get: (seconds: number) => measureHttp({ url: `${url}${prefix}/conversations/${conversationId}`, connections: o.connections, duration: seconds, headers: auth }, server, o.limits),
          reply: (seconds: number) =>
            measureHttp(
              {
                url,
                connections: o.connections,
                duration: seconds,
                requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, path: `${prefix}/conversations/${replies[n++ % replies.length]}/messages`, headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ content: `Bench reply ${n}` }) }) }],
              },
              server,
              o.limits,
            ),
          login: (seconds: number) =>
            measureHttp(
              {
                url,
                connections: o.connections,
                duration: seconds,
                requests: [
                  {
                    method: 'POST',
                    setupRequest: (req) => ({
                      ...req,
                      path: variant === 'app' ? '/api/v1/auth/login' : '/login',
                      headers: { 'content-type': 'application/json', 'x-forwarded-for': forwardedFor(ip++) },
                      body: JSON.stringify({ email: login.emails[m++ % login.emails.length], password: login.password }),
                    }),
                  },
                ],
              },
              server,
              o.limits,
            ),
        };
      };
      const logMeasure = (variant: string, name: string, x: HttpMeasure) => ctx.log(`  ${variant} ${name}: ${x.rps} req/s, p50 ${x.p50} ms, p99 ${x.p99} ms, server CPU ${Math.round(x.serverCpu * 100)}%`);
      const appSide = side(app.url, 'app', app.child);
      const names = ['get', 'reply', 'login'] as const;
      const labels = { get: 'GET /conversations/{id}', reply: 'REST reply', login: `login at cost ${login.cost}` };

      if (app.dataDir) {
        // PGlite serves one process: the app is measured, stops, then the baseline opens its directory.
        const measured: Partial<Endpoints> = {};
        for (const name of names) logMeasure('app', labels[name], (measured[name] = await appSide[name](o.duration)));
        appM = measured as Endpoints;
        await app.stop(true);
        const httpDb = await startHttpDb(ctx, app.dataDir);
        database = httpDb.database;
        try {
          const baseSide = side(httpDb.url, 'baseline', httpDb.child);
          const b: Partial<Endpoints> = {};
          for (const name of names) logMeasure('baseline', labels[name], (b[name] = await baseSide[name](o.duration)));
          base = b as Endpoints;
        } finally {
          await httpDb.child.stop();
        }
      } else {
        // On PostgreSQL both servers run at once and take turns (app, baseline, app, baseline): a machine that
        // slows down for a while slows both sides alike, instead of skewing the ratio.
        const httpDb = await startHttpDb(ctx, null);
        database = httpDb.database;
        try {
          const baseSide = side(httpDb.url, 'baseline', httpDb.child);
          const a: Partial<Endpoints> = {};
          const b: Partial<Endpoints> = {};
          for (const name of names) {
            // Logins take whole bcrypt rounds (a quarter second at cost 12): one turn each, the full duration.
            const rounds = name === 'login' ? 1 : ROUNDS;
            const appRounds: HttpMeasure[] = [];
            const baseRounds: HttpMeasure[] = [];
            for (let r = 0; r < rounds; r++) {
              appRounds.push(await appSide[name](o.duration / rounds));
              await quiesce(app.child);
              baseRounds.push(await baseSide[name](o.duration / rounds));
              await quiesce(httpDb.child);
            }
            logMeasure('app', labels[name], (a[name] = combine(appRounds)));
            logMeasure('baseline', labels[name], (b[name] = combine(baseRounds)));
          }
          appM = a as Endpoints;
          base = b as Endpoints;
        } finally {
          await httpDb.child.stop();
        }
      }
    } finally {
      // On a shared PostgreSQL the run removes its rows, even after a failure.
      if (!app.dataDir) await app.child.call('cleanup').catch(() => undefined);
      await app.stop();
    }
    return {
      rows: [
        ...requestRows('GET conversation', appM.get, base.get, `${o.historyMessages} messages, ${o.connections} connections, baseline: bare node:http + ${database}`),
        ...requestRows('REST reply', appM.reply, base.reply, `round-robin over ${seeded.replyConversationIds.length} conversations`),
        ...requestRows('login', appM.login, base.login, `bcrypt cost ${o.loginCost} (baseline: raw bcrypt compare), ${seeded.login!.emails.length} users, one X-Forwarded-For per request`),
      ],
      details: { database, app: appM, baseline: base, loginCost: o.loginCost, serverLog: app.child.log },
    };
  },
};
