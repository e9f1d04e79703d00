// The OpenAPI document is complete: every route the live router serves is described, with its success and auth.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { Api } from './helpers/http.js';

const HTTP_METHODS = ['get', 'post', 'put', 'patch', 'delete'];

interface Operation {
  operationId?: string;
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean }[];
  responses?: Record<string, { description?: string; content?: Record<string, unknown> }>;
}

/** Method + OpenAPI path of every route layer on the mounted routers (GET layers also answer HEAD). */
function liveOperations(): { method: string; path: string }[] {
  const { routers } = sharedServer().server;
  const out: { method: string; path: string }[] = [];
  for (const layer of routers.flatMap((router) => router.stack)) {
    const methods = layer.methods.map((m) => m.toLowerCase()).filter((m) => m !== 'head' || !layer.methods.includes('GET'));
    // A layer without methods is middleware (router.use), not a route.
    if (methods.length === 0) continue;
    // A RegExp path cannot be described in OpenAPI; it stays as its source text and so shows up as missing.
    const layerPath = typeof layer.path === 'string' ? layer.path : String(layer.path);
    const raw = layerPath.startsWith('/api/v1') ? layerPath : `/api/v1${layerPath}`;
    const path = raw.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    for (const method of methods) out.push({ method, path });
  }
  return out;
}

describe('OpenAPI document', () => {
  let doc: any;

  before(async () => {
    const res = await new Api(sharedServer().baseUrl).get('/openapi.json');
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    doc = res.body;
  });

  function operations(): { method: string; path: string; op: Operation }[] {
    const out: { method: string; path: string; op: Operation }[] = [];
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
      for (const [method, op] of Object.entries(item)) if (HTTP_METHODS.includes(method)) out.push({ method, path, op });
    }
    return out;
  }

  it('is an OpenAPI 3.1 document, served as is (not in the success envelope)', () => {
    expect(doc.openapi).to.match(/^3\.1\.\d+$/);
    expect(doc.info.title).to.be.a('string').and.not.equal('');
    expect(doc.info.version).to.be.a('string').and.not.equal('');
    expect(doc.paths).to.be.an('object');
    expect(doc).not.to.have.property('success');
    expect(doc.components.schemas.Error.required).to.include.members(['success', 'message', 'error', 'requestId']);
  });

  it('describes every method and path the live router serves', () => {
    const live = liveOperations();
    // Not vacuous: the router holds every registered route definition (and nothing unregistered).
    const { registry } = sharedServer().server;
    expect(live.length).to.be.greaterThan(20);
    expect(live.length).to.equal(registry.routes.length);

    const missing = live.filter(({ method, path }) => !doc.paths[path]?.[method]).map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    expect(missing, 'routes the router serves but the document does not describe').to.deep.equal([]);
  });

  it('describes nothing the router does not serve', () => {
    const live = new Set(liveOperations().map(({ method, path }) => `${method} ${path}`));
    const phantom = operations().map(({ method, path }) => `${method} ${path}`).filter((key) => !live.has(key));
    expect(phantom, 'operations documented but not routed').to.deep.equal([]);
  });

  it('gives every operation a unique operationId, its success response and a security entry', () => {
    const { registry } = sharedServer().server;
    const byId = new Map(registry.routes.map((r) => [r.operationId, r]));
    const seen = new Set<string>();
    const schemes = Object.keys(doc.components.securitySchemes);
    for (const { method, path, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      expect(op.operationId, where).to.be.a('string');
      expect(seen.has(op.operationId!), `duplicate operationId ${op.operationId}`).to.equal(false);
      seen.add(op.operationId!);

      const route = byId.get(op.operationId!);
      expect(route, `${where} matches a route definition`).to.not.equal(undefined);
      expect(`/api/v1${route!.path}`.replace(/:([A-Za-z0-9_]+)/g, '{$1}'), where).to.equal(path);
      expect(route!.method, where).to.equal(method);

      const codes = Object.keys(op.responses ?? {});
      expect(codes, `${where} documents its success status`).to.include(String(route!.response.status));
      // One success response, plus the second one (a replay's or an upsert's 200) where the route answers it.
      const successes = [route!.response.status, ...(route!.response.also ? [route!.response.also.status] : [])].map(String);
      expect(codes.filter((c) => /^2\d\d$/.test(c)), `${where} documents each success status it answers`).to.have.members(successes);
      for (const [code, response] of Object.entries(op.responses!)) expect(response.description, `${where} ${code} description`).to.be.a('string').and.not.equal('');

      expect(op.security, `${where} declares its security`).to.be.an('array');
      for (const requirement of op.security!) for (const name of Object.keys(requirement)) expect(schemes, `${where} security scheme`).to.include(name);
    }
  });

  it('documents 401 on every route that is not public, and marks those routes secured', () => {
    const { registry } = sharedServer().server;
    const byId = new Map(registry.routes.map((r) => [r.operationId, r]));
    for (const { method, path, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      const route = byId.get(op.operationId!)!;
      // Anonymous access is allowed only where the security list is empty or holds an empty requirement.
      const anonymousAllowed = op.security!.length === 0 || op.security!.some((r) => Object.keys(r).length === 0);
      expect(anonymousAllowed, `${where} auth ${route.auth.kind}`).to.equal(route.auth.kind === 'public');
      if (route.auth.kind !== 'public') {
        expect(op.responses, `${where} documents 401`).to.have.property('401');
        if (route.auth.kind === 'org') expect(op.responses, `${where} documents 403`).to.have.property('403');
      }
    }
  });

  it('documents the errors every operation can give: 400 for input, 413/415 for bodies, 429 when rate limited', () => {
    const { registry } = sharedServer().server;
    const byId = new Map(registry.routes.map((r) => [r.operationId, r]));
    for (const { method, path, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      const route = byId.get(op.operationId!)!;
      const codes = Object.keys(op.responses!);
      if (['post', 'put', 'patch', 'delete'].includes(method)) expect(codes, where).to.include.members(['400', '413', '415']);
      if (route.rateLimit) expect(codes, where).to.include('429');
      for (const code of codes.filter((c) => Number(c) >= 400)) {
        expect(op.responses![code]!.content, `${where} ${code} body`).to.deep.equal({ 'application/json': { schema: { $ref: '#/components/schemas/Error' } } });
      }
    }
  });

  it('documents the 200 of a replay (or an upsert) beside the first answer\'s status, with the same body', () => {
    const replays = ['aiReply', 'sendChannelMessageAi', 'aiUpsertContact', 'replyToConversation', 'sendEmailAi', 'replyToTicket', 'aiCreateTicket', 'startWidgetConversation', 'sendWidgetMessage'];
    const byId = new Map(operations().map((o) => [o.op.operationId, o]));
    for (const id of replays) {
      const found = byId.get(id);
      expect(found, id).to.not.equal(undefined);
      const first = Object.keys(found!.op.responses!).find((c) => c !== '200' && /^2\d\d$/.test(c))!;
      expect(found!.op.responses, id).to.have.property('200');
      expect(found!.op.responses!['200']!.content, id).to.deep.equal(found!.op.responses![first]!.content);
    }
  });

  it('documents 403 where an API key is refused (personal and owner routes) and a search\'s unknown sourceId (404)', () => {
    const { registry } = sharedServer().server;
    const byId = new Map(registry.routes.map((r) => [r.operationId, r]));
    for (const { method, path, op } of operations()) {
      const auth = byId.get(op.operationId!)!.auth as { kind: string; optionalBearer?: boolean };
      if (auth.kind === 'bearer' || (auth.kind === 'public' && auth.optionalBearer)) expect(op.responses, `${method.toUpperCase()} ${path}`).to.have.property('403');
    }
    expect(doc.paths['/api/v1/knowledge/search'].get.responses).to.have.property('404');
    expect(doc.paths['/api/v1/knowledge/ai/search'].post.responses).to.have.property('404');
    expect(doc.paths['/api/v1/email/send'].post.responses).to.have.property('429');
  });

  it('describes every path parameter', () => {
    for (const { method, path, op } of operations()) {
      const names = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const documented = (op.parameters ?? []).filter((p) => p.in === 'path');
      expect(documented.map((p) => p.name).sort(), `${method.toUpperCase()} ${path}`).to.deep.equal([...names].sort());
      for (const p of documented) expect(p.required, `${path} {${p.name}}`).to.equal(true);
    }
  });
});
