// crm: the contact and ticket lists of one organization with --crm-contacts contacts and --crm-tickets tickets
// (first page, default order, with the count for pagination), driven by autocannon. Baseline: a bare node:http
// handler running the same SQL on the same database (pg with DATABASE_URL, else the app's PGlite directory once the
// app stopped), like `rest`.
import type { CrmSeedResult } from '../lib/crm-seed.js';
import { combine, measureHttp, quiesce, requestJson, type HttpMeasure } from '../lib/http-load.js';
import type { Child } from '../lib/proc.js';
import { invalidOf, row, type Row } from '../lib/report.js';
import type { SeedResult } from '../lib/seed.js';
import { startApp, startHttpDb, type Scenario } from '../lib/servers.js';

/** Turns each side takes per route on PostgreSQL (each `--duration / ROUNDS` seconds). */
const ROUNDS = 2;
const AGENTS = 4;

interface Route {
  label: string;
  /** Path and query, without the /api/v1 prefix. */
  path: string;
  /** The total the list must report. */
  total: number | null;
}

function routeRows(route: Route, app: HttpMeasure, base: HttpMeasure, note: string): Row[] {
  const invalid = invalidOf(app.generator.invalid, base.generator.invalid);
  const errors = [app, base].map((m, i) => (m.non2xx || m.errors ? `${i ? 'baseline' : 'app'}: ${m.non2xx} non-2xx ${JSON.stringify(m.statusCodes)}, ${m.errors} errors` : '')).filter(Boolean);
  return [
    row(`${route.label} throughput`, 'req/s', app.rps, base.rps, { invalid, note: [note, `server CPU ${Math.round(app.serverCpu * 100)}% / ${Math.round(base.serverCpu * 100)}%`, ...errors].join('; ') }),
    row(`${route.label} p50`, 'ms', app.p50, base.p50, { invalid }),
    row(`${route.label} p95`, 'ms', app.p95, base.p95, { invalid }),
  ];
}

export const crm: Scenario = {
  name: 'crm',
  summary: 'contact and ticket lists (search, tag, status/assignee) over a large organization; baseline: bare node:http + pg/PGlite running the same SQL',
  skip: () => null,
  async run(ctx) {
    const o = ctx.options;
    const app = await startApp(ctx, 'app', { postgres: true, redis: true });
    const appM: HttpMeasure[] = [];
    const baseM: HttpMeasure[] = [];
    let routes: Route[] = [];
    let crmSeed: CrmSeedResult;
    let database = '';
    try {
      const seeded = await app.child.call<SeedResult>('seed', { runId: ctx.runId, orgs: 1, agents: AGENTS, visitors: 0, conversations: false }, 300_000);
      const org = seeded.orgs[0]!;
      const token = org.agents[0]!.token;
      const agentIds = org.agents.map((a) => a.userId);
      crmSeed = await app.child.call<CrmSeedResult>('seedCrm', { orgId: org.id, agentIds, contacts: o.crmContacts, tickets: o.crmTickets }, 1_800_000);
      ctx.log(`  seeded ${crmSeed.contacts} contacts and ${crmSeed.tickets} tickets in ${Math.round(crmSeed.seconds)} s`);
      const agent = agentIds[1] ?? agentIds[0]!;
      routes = [
        { label: 'GET /contacts', path: '/contacts', total: crmSeed.contacts },
        { label: 'GET /contacts?q=', path: `/contacts?q=${crmSeed.rareText}`, total: crmSeed.rareContacts },
        { label: 'GET /contacts?tag=', path: `/contacts?tag=${crmSeed.tag}`, total: null },
        { label: 'GET /tickets', path: '/tickets', total: crmSeed.tickets },
        { label: 'GET /tickets?status=open&assignedTo=', path: `/tickets?status=open&assignedTo=${agent}`, total: null },
        { label: 'GET /tickets?q=', path: `/tickets?q=${crmSeed.rareText}`, total: crmSeed.rareTickets },
      ];
      // Both sides must list the same thing: the app's totals are what was seeded, and the baseline's match them.
      const appTotals: number[] = [];
      for (const r of routes) {
        const res = await requestJson(`${app.url}/api/v1${r.path}`, { headers: { authorization: `Bearer ${token}` } });
        const total = res.body?.pagination?.total;
        if (res.status !== 200 || (r.total !== null && total !== r.total) || !(total > 0)) throw new Error(`${r.label} answered ${res.status} total ${total} (expected ${r.total ?? '> 0'}): ${JSON.stringify(res.body).slice(0, 200)}`);
        appTotals.push(total);
      }
      ctx.log(`  totals: ${routes.map((r, i) => `${r.label} ${appTotals[i]}`).join(', ')}`);

      const measure = (url: string, variant: 'app' | 'baseline', server: Child, r: Route, seconds: number) =>
        measureHttp(
          { url: `${url}${variant === 'app' ? '/api/v1' : ''}${r.path}`, connections: o.connections, duration: seconds, headers: variant === 'app' ? { authorization: `Bearer ${token}` } : { 'x-org-id': org.id } },
          server,
          o.limits,
        );
      const checkBaseline = async (url: string) => {
        for (const [i, r] of routes.entries()) {
          const res = await requestJson(`${url}${r.path}`, { headers: { 'x-org-id': org.id } });
          if (res.status !== 200 || res.body?.data?.total !== appTotals[i]) throw new Error(`baseline ${r.label} answered ${res.status} total ${res.body?.data?.total} (app: ${appTotals[i]})`);
        }
      };
      const logMeasure = (variant: string, r: Route, x: HttpMeasure) => ctx.log(`  ${variant} ${r.label}: ${x.rps} req/s, p50 ${x.p50} ms, p95 ${x.p95} ms, server CPU ${Math.round(x.serverCpu * 100)}%`);

      if (app.dataDir) {
        // PGlite serves one process: the app is measured, stops, then the baseline opens its directory.
        for (const r of routes) {
          appM.push(await measure(app.url, 'app', app.child, r, o.duration));
          logMeasure('app', r, appM.at(-1)!);
        }
        await app.stop(true);
        const httpDb = await startHttpDb(ctx, app.dataDir);
        database = httpDb.database;
        try {
          await checkBaseline(httpDb.url);
          for (const r of routes) {
            baseM.push(await measure(httpDb.url, 'baseline', httpDb.child, r, o.duration));
            logMeasure('baseline', r, baseM.at(-1)!);
          }
        } finally {
          await httpDb.child.stop();
        }
      } else {
        // On PostgreSQL both servers run at once and take turns per route (app, baseline, app, baseline).
        const httpDb = await startHttpDb(ctx, null);
        database = httpDb.database;
        try {
          await checkBaseline(httpDb.url);
          for (const r of routes) {
            const a: HttpMeasure[] = [];
            const b: HttpMeasure[] = [];
            for (let k = 0; k < ROUNDS; k++) {
              a.push(await measure(app.url, 'app', app.child, r, o.duration / ROUNDS));
              await quiesce(app.child);
              b.push(await measure(httpDb.url, 'baseline', httpDb.child, r, o.duration / ROUNDS));
              await quiesce(httpDb.child);
            }
            appM.push(combine(a));
            baseM.push(combine(b));
            logMeasure('app', r, appM.at(-1)!);
            logMeasure('baseline', r, baseM.at(-1)!);
          }
        } finally {
          await httpDb.child.stop();
        }
      }
    } finally {
      // On a shared PostgreSQL the run removes its rows (the organization's contacts and tickets cascade).
      if (!app.dataDir) await app.child.call('cleanup', undefined, 600_000).catch(() => undefined);
      await app.stop();
    }
    const sizes = `${crmSeed.contacts} contacts, ${crmSeed.tickets} tickets, ${o.connections} connections, baseline: bare node:http + ${database}`;
    return {
      rows: routes.flatMap((r, i) => routeRows(r, appM[i]!, baseM[i]!, i === 0 ? sizes : `${r.path.split('?')[1] ?? 'default page'}`)),
      details: { database, contacts: crmSeed.contacts, tickets: crmSeed.tickets, routes: routes.map((r) => r.path), app: appM, baseline: baseM, serverLog: app.child.log },
    };
  },
};
