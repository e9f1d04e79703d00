// Cross-tenant ids on every route, generated from the served OpenAPI document: a route added later is covered as it
// appears (or this test fails, naming the path parameter it has no fixture for).
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { newVisitor, type Visitor } from './helpers/live.js';
import { NOT_TENANT_SCOPED, openApiDocument, operations, sample, tenantFixtures, type Fixtures, type Schema } from './helpers/openapi.js';
import { TEST_AI_SECRET } from './helpers/server.js';

describe('tenancy: every route with a tenant id in its path, generated from the OpenAPI document', function () {
  this.timeout(120_000);
  let doc: Schema;
  let a: SignedUp;
  let b: SignedUp;
  let visitorB: Visitor;
  let ids: Fixtures['ids'];
  let idFor: Fixtures['idFor'];

  before(async () => {
    const { server, baseUrl } = sharedServer();
    doc = await openApiDocument(baseUrl);
    [a, b] = [await signUp(server, baseUrl), await signUp(server, baseUrl)];
    ({ ids, idFor } = await tenantFixtures(server, a));
    visitorB = await newVisitor(b);
  });

  it('answers 404 (403 for an organization path) to organization B for each of A\'s ids, and leaves A\'s data as it was', async () => {
    const checked: string[] = [];
    const failures: string[] = [];
    for (const o of operations(doc)) {
      const params = o.pathParams.filter((p) => !NOT_TENANT_SCOPED.has(p));
      if (params.length === 0 || o.auth === 'public') continue;
      let path = o.path.replace(/^\/api\/v1/, '');
      for (const param of o.pathParams) {
        let value = idFor(param, o.path);
        // An organization path names B's own organization when another parameter is the one under test.
        if (param === 'orgId' && params.length > 1) value = b.orgId;
        if (!value) throw new Error(`no cross-tenant fixture for {${param}} in ${o.method.toUpperCase()} ${o.path}: add one to this test`);
        path = path.replace(`{${param}}`, encodeURIComponent(value));
      }
      const bodySchema = o.op.requestBody?.content?.['application/json']?.schema;
      let body = bodySchema ? (sample(bodySchema, doc) as Record<string, unknown>) : undefined;
      const headers: Record<string, string> = {};
      let token: string | undefined;
      if (o.auth === 'ai') {
        headers['x-ai-tool-secret'] = TEST_AI_SECRET;
        if (body && typeof body === 'object') body = { ...body, organizationId: b.orgId };
        path += `${path.includes('?') ? '&' : '?'}organizationId=${b.orgId}`;
      } else if (o.auth === 'widget') token = visitorB.token;
      else token = b.accessToken;
      const res = await b.api.request(o.method.toUpperCase(), path, { body: o.method === 'get' ? undefined : (body ?? (o.method === 'delete' ? undefined : {})), token, headers });
      const expected = params.length === 1 && params[0] === 'orgId' ? 403 : 404;
      checked.push(`${o.method.toUpperCase()} ${o.path}`);
      if (res.status !== expected) failures.push(`${o.method.toUpperCase()} ${o.path} -> ${res.status} ${JSON.stringify(res.body).slice(0, 200)} (expected ${expected})`);
    }
    expect(failures, failures.join('\n')).to.be.empty;
    expect(checked.length).to.be.greaterThan(40);

    // Nothing of A's changed hands or disappeared.
    const t = { token: a.accessToken };
    for (const path of [`/conversations/${ids.conversationId}`, `/contacts/${ids.contactId}`, `/tickets/${ids.ticketId}`, `/templates/${ids.templateId}`, `/contacts/attribute-definitions/${ids.key}`]) {
      expect((await a.api.get(path, t)).status, path).to.equal(200);
    }
    const notes = await a.api.get(`/contacts/${ids.contactId}/notes`, t);
    expect(notes.body.data.map((n: { id: string }) => n.id)).to.include(ids.noteId);
    const members = await a.api.get(`/memberships/organizations/${a.orgId}/members`, t);
    expect(members.body.data.find((m: { id: string }) => m.id === ids.memberId)?.status).to.equal('accepted');
  });
});
