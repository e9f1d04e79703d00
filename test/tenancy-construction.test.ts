// Tenancy by construction: services reach tenant tables only through `forOrg` / `acrossOrgs` (the `Models` type hides
// `query()`, see test/types/tenancy.typecheck.ts); this checks what the type cannot see (model classes used
// directly) and what forOrg does at run time.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp } from './helpers/factories.js';

const ROOT = path.resolve(import.meta.dirname, '..');

function tenantModelNames(): string[] {
  const dir = path.join(ROOT, 'db', 'models');
  return readdirSync(dir).filter((f) => /extends TenantModel\b/.test(readFileSync(path.join(dir, f), 'utf8'))).map((f) => f.replace(/\.ts$/, ''));
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return sources(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}

describe('tenancy by construction', () => {
  it('no code outside db/ calls query() or relatedQuery() on a tenant model class', () => {
    const names = tenantModelNames();
    expect(names, 'the tenant models are found').to.include.members(['Conversation', 'Message', 'Contact', 'Ticket']);
    const pattern = new RegExp(`\\b(${names.join('|')})\\s*\\.\\s*(query|relatedQuery)\\s*\\(`, 'g');
    const offenders: string[] = [];
    for (const file of ['server', 'routes', 'sockets'].flatMap((d) => sources(path.join(ROOT, d)))) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(pattern)) offenders.push(`${path.relative(ROOT, file)}: ${m[0]}`);
    }
    expect(offenders).to.deep.equal([]);
  });

  it('forOrg finds only its organization\'s rows and gives inserts their organization', async () => {
    const { server, baseUrl } = sharedServer();
    const a = await signUp(server, baseUrl);
    const b = await signUp(server, baseUrl);
    const { Template } = server.db.models;
    const made = await Template.forOrg(a.orgId).insertAndFetch({ title: `t-${Date.now()}`, content: 'Hello' } as never);
    expect(made.organizationId, 'the insert took the organization of forOrg').to.equal(a.orgId);
    expect(await Template.forOrg(b.orgId).findById(made.id), 'another organization does not see it').to.equal(undefined);
    expect(await Template.forOrg(b.orgId).patch({ content: 'Hijacked' }).where('id', made.id)).to.equal(0);
    expect(await Template.forOrg(b.orgId).deleteById(made.id)).to.equal(0);
    expect((await Template.forOrg(a.orgId).findById(made.id))?.content).to.equal('Hello');
    let refused: unknown = null;
    await Template.forOrg(b.orgId).insert({ organizationId: a.orgId, title: 'x', content: 'x' } as never).catch((err: unknown) => { refused = err; });
    expect(String(refused), 'a row naming another organization is refused').to.match(/cannot be inserted for organization/);
  });
});
