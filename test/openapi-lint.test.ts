// The served OpenAPI document passes Redocly's `recommended` lint, apart from the findings listed (and explained) here.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';

interface Problem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: { pointer: string }[];
}

/**
 * Known findings, each with its reason: paths whose literal segment another route's parameter could also match (the
 * router tries the literal route first, so they resolve), and probes that take no input and so have no 4xx answer.
 */
const KNOWN: { rule: string; pointer: RegExp }[] = [
  { rule: 'no-ambiguous-paths', pointer: /^#\/paths\/~1api~1v1~1(contacts|tickets|knowledge)~1/ },
  { rule: 'operation-4xx-response', pointer: /^#\/paths\/~1api~1v1~1(health|health~1ready|openapi\.json)\/get\/responses$/ },
];

describe('OpenAPI document: Redocly lint (recommended)', function () {
  this.timeout(120_000);

  it('has no errors and no warnings beyond the known ones', async () => {
    const res = await new Api(sharedServer().baseUrl).get('/openapi.json');
    expect(res.status).to.equal(200);
    const doc = res.body;
    // Tests serve on a loopback PUBLIC_URL; a deployment names its own host here.
    doc.servers = [{ url: 'https://support.acme.test' }];
    const dir = mkdtempSync(path.join(tmpdir(), 'openapi-lint-'));
    try {
      writeFileSync(path.join(dir, 'openapi.json'), JSON.stringify(doc));
      writeFileSync(path.join(dir, 'redocly.yaml'), 'extends:\n  - recommended\n');
      const cli = path.resolve('node_modules/.bin/redocly');
      const run = await promisify(execFile)(cli, ['lint', 'openapi.json', '--format=json'], { cwd: dir, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' } }).catch(
        (err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }),
      );
      const report = JSON.parse(run.stdout.slice(run.stdout.indexOf('{'))) as { totals: { errors: number; warnings: number }; problems: Problem[] };
      const unexpected = report.problems
        .filter((p) => !KNOWN.some((k) => k.rule === p.ruleId && p.location.some((l) => k.pointer.test(l.pointer))))
        .map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location.map((l) => l.pointer).join(', ')}`);
      expect(unexpected).to.deep.equal([]);
      expect(report.totals.errors).to.equal(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
