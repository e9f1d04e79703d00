// Optional parts load their libraries on first use (server/lazyModule.ts): a server that does not use S3, SMTP,
// inbound mail or DOCX/HTML documents holds none of them, and on PostgreSQL none of PGlite either.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';

const OPTIONAL = ['@aws-sdk/client-s3', '@aws-sdk/s3-request-presigner', 'nodemailer', 'mailparser', 'smtp-server', 'mammoth', 'html-to-text'];
const EMBEDDED = ['knex-pglite', '@electric-sql/pglite'];

/** Every .ts file of the server's own code. */
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) return sources(file);
    return file.endsWith('.ts') ? [file] : [];
  });
}

describe('optional libraries load on first use', function () {
  this.timeout(90_000);

  it('no module of the server imports them statically (only types)', () => {
    const offenders: string[] = [];
    for (const file of ['server', 'db', 'routes', 'sockets'].flatMap((dir) => sources(dir))) {
      const text = readFileSync(file, 'utf8');
      for (const pkg of [...OPTIONAL, ...EMBEDDED]) {
        // `import type` is erased; `import x from`, `import { x } from` and `import 'pkg'` load the package.
        const statement = new RegExp(`^import (?!type )[^;]*['"]${pkg.replace('/', '\\/')}(/[^'"]*)?['"]`, 'm');
        if (statement.test(text)) offenders.push(`${file}: ${pkg}`);
      }
    }
    expect(offenders).to.deep.equal([]);
  });

  it('a started server holds none of them until a part that needs one is used', () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'lazy-modules-'));
    // A fresh process: this one has loaded everything already. CommonJS keeps one registry of loaded files, shared by
    // every require (and by packages imported from ESM that are CommonJS, as all of these are when required).
    const script = `
      const { createRequire } = await import('node:module');
      const registry = createRequire(import.meta.url).cache;
      const packages = () => [...new Set(Object.keys(registry).map((file) => {
        const rest = file.split('/node_modules/').pop();
        const parts = rest.split('/');
        return rest === file ? null : parts[0].startsWith('@') ? parts[0] + '/' + parts[1] : parts[0];
      }).filter(Boolean))];
      const { loadConfig } = await import('./server/config.ts');
      const { createServer } = await import('./server/server.ts');
      const server = createServer(loadConfig(process.env));
      await server.start();
      const atStart = packages();
      const { htmlToText } = await import('./server/services/knowledge/parsers.ts');
      htmlToText('<p>Opening hours</p>');
      const { S3Driver } = await import('./server/storage/s3.ts');
      new S3Driver({ endpoint: 'http://127.0.0.1:9', region: 'us-east-1', bucket: 'b', accessKeyId: 'a', secretAccessKey: 's', forcePathStyle: true });
      const afterUse = packages();
      await server.stop();
      process.stdout.write(['', 'RESULT ' + JSON.stringify({ atStart, afterUse, embedded: server.db.embedded }), ''].join(String.fromCharCode(10)));
      process.exit(0);
    `;
    const env = { ...process.env, PORT: '0', DATA_DIR: dataDir, STORAGE_DRIVER: 'local', SMTP_URL: '', SMTP_IN_PORT: '', EMAIL_INBOUND_SNS: 'false', NODE_ENV: 'test' };
    try {
      const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: process.cwd(), env, encoding: 'utf8', timeout: 80_000 });
      expect(child.status, child.stderr).to.equal(0);
      const result = JSON.parse(child.stdout.split('\n').find((line) => line.startsWith('RESULT '))!.slice('RESULT '.length)) as { atStart: string[]; afterUse: string[]; embedded: boolean };
      expect(result.atStart.filter((p) => OPTIONAL.includes(p))).to.deep.equal([]);
      // The embedded database needs PGlite; a server on PostgreSQL must not have loaded it.
      expect(result.atStart.filter((p) => EMBEDDED.includes(p))).to.deep.equal(result.embedded ? EMBEDDED.filter((p) => result.atStart.includes(p)) : []);
      if (result.embedded) expect(result.atStart).to.include('@electric-sql/pglite');
      // The registry does see a library once its part is used: the check above could fail.
      expect(result.afterUse).to.include.members(['html-to-text', '@aws-sdk/client-s3']);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
