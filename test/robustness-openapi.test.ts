// Hostile but well-formed input on every route, generated from the served OpenAPI document: values at and past the
// edges the schemas allow (NUL and lone surrogates in text, the longest strings, extreme numbers and dates, long
// lists, unknown ids, odd query strings). Whatever the route does with them, it answers with the contract's error
// body and a stable code, or succeeds: never a 5xx. A route added later is covered as it appears.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { Api, randomIp, type ApiResponse } from './helpers/http.js';
import { newVisitor, type Visitor } from './helpers/live.js';
import { hostile, openApiDocument, operations, resolve, sample, tenantFixtures, typeOf, type Fixtures, type Operation, type Schema } from './helpers/openapi.js';
import { TEST_AI_SECRET } from './helpers/server.js';

/** Operations that end the caller's access or its organization: they would leave the rest of the walk unauthorized. */
const ENDS_ACCESS = [/\/auth\/logout/, /\/auth\/change-password/, /\/auth\/password/, /^delete \/organizations\/\{orgId\}$/, /\/members\/\{memberId\}/, /\/account/];

/** Query values as sent on the wire (already encoded): NUL, invalid UTF-8, overflowing numbers, odd dates. */
function hostileQuery(schema: Schema | undefined, doc: Schema): string[] {
  const s = resolve(schema, doc) ?? {};
  const values = ['', '-1', '1e308', '99999999999999999999', 'x'.repeat(5_000), '9999-12-31T23:59:59.999Z', '0001-01-01', 'null', '[]'].map(encodeURIComponent);
  values.push('a%00b', '%ED%A0%80', '%FF', '%');
  if (s.enum) values.push(encodeURIComponent(String(s.enum[0]).toUpperCase()));
  return values;
}

interface Probe {
  body?: unknown;
  query?: string;
  what: string;
}

function probes(o: Operation, doc: Schema): Probe[] {
  const out: Probe[] = [];
  const bodySchema = resolve(o.op.requestBody?.content?.['application/json']?.schema, doc);
  if (bodySchema && typeOf(bodySchema) === 'object') {
    const base = (sample(bodySchema, doc) ?? {}) as Record<string, unknown>;
    for (const [name, member] of Object.entries<Schema>(bodySchema.properties ?? {})) {
      for (const value of hostile(member, doc)) out.push({ body: { ...base, [name]: value }, what: `body ${name}=${JSON.stringify(value)?.slice(0, 40)}` });
      // One level down: the members of an object member (settings, requester, options...).
      const inner = resolve(member, doc);
      if (inner && typeOf(inner) === 'object' && inner.properties) {
        const innerBase = (sample(inner, doc) ?? {}) as Record<string, unknown>;
        for (const [innerName, innerMember] of Object.entries<Schema>(inner.properties)) {
          for (const value of hostile(innerMember, doc)) out.push({ body: { ...base, [name]: { ...innerBase, [innerName]: value } }, what: `body ${name}.${innerName}=${JSON.stringify(value)?.slice(0, 40)}` });
        }
      }
    }
    out.push({ body: [], what: 'body []' }, { body: 'text', what: 'body "text"' }, { body: { ...base, ['__proto__']: { admin: true }, constructor: { prototype: { x: 1 } } }, what: 'body __proto__' });
  }
  for (const p of (o.op.parameters ?? []).filter((x: Schema) => x.in === 'query')) {
    for (const value of hostileQuery(p.schema, doc)) out.push({ query: `${p.name}=${value}`, what: `query ${p.name}=${value.slice(0, 40)}` });
    out.push({ query: `${p.name}=1&${p.name}=2`, what: `query ${p.name} twice` });
  }
  if (out.length === 0) out.push({ what: 'as documented' });
  return out;
}

/** A refusal in the contract's error body: `success: false`, a snake_case code, a request id. */
function wellFormedRefusal(res: ApiResponse): boolean {
  const b = res.body;
  return !!b && typeof b === 'object' && b.success === false && typeof b.error?.code === 'string' && /^[a-z][a-z_]*$/.test(b.error.code) && typeof b.message === 'string';
}

describe('robustness: hostile but well-formed input on every route, generated from the OpenAPI document', function () {
  this.timeout(600_000);
  let doc: Schema;
  let owner: SignedUp;
  let visitor: Visitor;
  let fixtures: Fixtures;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    doc = await openApiDocument(baseUrl);
    owner = await signUp(server, baseUrl);
    fixtures = await tenantFixtures(server, owner);
    visitor = await newVisitor(owner);
  });

  it('never answers 5xx; every refusal is the error body with a stable code', async () => {
    const failures: string[] = [];
    let sent = 0;
    const statuses: Record<number, number> = {};
    const api = new Api(owner.api.baseUrl);
    for (const o of operations(doc)) {
      const name = `${o.method} ${o.path.replace(/^\/api\/v1/, '')}`;
      if (ENDS_ACCESS.some((re) => re.test(name))) continue;
      let path = o.path.replace(/^\/api\/v1/, '');
      for (const param of o.pathParams) path = path.replace(`{${param}}`, encodeURIComponent(fixtures.idFor(param, o.path) || (param === 'token' ? 'x'.repeat(40) : randomUUID())));
      const headers: Record<string, string> = {};
      let token: string | undefined;
      if (o.auth === 'ai') headers['x-ai-tool-secret'] = TEST_AI_SECRET;
      else if (o.auth === 'widget') token = visitor.token;
      else if (o.auth === 'bearer') token = owner.accessToken;
      for (const probe of probes(o, doc)) {
        let body = probe.body;
        // An AI route names its organization: the owner's, so the request reaches the resource.
        if (o.auth === 'ai' && body && typeof body === 'object' && !Array.isArray(body) && !('organizationId' in body && probe.what.startsWith('body organizationId'))) body = { ...body, organizationId: owner.orgId };
        let query = probe.query ?? '';
        if (o.auth === 'ai' && !query.startsWith('organizationId=')) query = `organizationId=${owner.orgId}${query ? `&${query}` : ''}`;
        const url = query ? `${path}${path.includes('?') ? '&' : '?'}${query}` : path;
        // Each request from its own address: per-address limits would otherwise answer 429 to most of the walk.
        api.ip = randomIp();
        const res = await api.request(o.method.toUpperCase(), url, { body: o.method === 'get' || o.method === 'delete' ? undefined : body, token, headers });
        sent += 1;
        statuses[res.status] = (statuses[res.status] ?? 0) + 1;
        // 503 is the contract's answer for a provider that cannot be reached (no Telegram here), never a fault of ours.
        const unavailable = res.status === 503 && res.body?.error?.code === 'service_unavailable';
        if ((res.status >= 500 && !unavailable) || (res.status >= 400 && !wellFormedRefusal(res))) failures.push(`${name} ${probe.what} -> ${res.status} ${JSON.stringify(res.body).slice(0, 160)}`);
      }
    }
    expect(failures, `${failures.length} of ${sent}:\n${failures.join('\n')}`).to.be.empty;
    expect(sent).to.be.greaterThan(1_000);
    // Deep enough to mean something: hundreds of probes were within the schemas and done (the caller stayed signed
    // in throughout), not only refused by the validator.
    const done = Object.entries(statuses).filter(([status]) => Number(status) < 300).reduce((n, [, count]) => n + count, 0);
    expect(done, JSON.stringify(statuses)).to.be.greaterThan(300);
  });
});
