// Cross-tenant ids on every route, generated from the served OpenAPI document: a route added later is covered as it
// appears (or this test fails, naming the path parameter it has no fixture for).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { Api, type ApiResponse } from './helpers/http.js';
import { newVisitor, startConversation, type Visitor } from './helpers/live.js';
import { TEST_AI_SECRET } from './helpers/server.js';
import { PDF, upload } from './helpers/storage.js';

type Schema = Record<string, any>;
interface Operation {
  method: string;
  path: string;
  op: Schema;
  pathParams: string[];
  auth: 'bearer' | 'widget' | 'ai' | 'public';
}

/** Path parameters that do not name a tenant's resource. */
const NOT_TENANT_SCOPED = new Set(['token']);

/** A value that satisfies `schema` (required members only), so validation lets the request reach its resource. */
function sample(schema: Schema | undefined, doc: Schema, depth = 0): unknown {
  if (!schema || depth > 6) return undefined;
  if (schema.$ref) return sample(doc.components?.schemas?.[String(schema.$ref).split('/').pop()!], doc, depth + 1);
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum.find((v: unknown) => v !== null) ?? schema.enum[0];
  for (const key of ['oneOf', 'anyOf'] as const) if (schema[key]) return sample(schema[key].find((s: Schema) => s.type !== 'null') ?? schema[key][0], doc, depth + 1);
  if (schema.allOf) return Object.assign({}, ...schema.allOf.map((s: Schema) => sample(s, doc, depth + 1)));
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type;
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const name of schema.required ?? []) out[name] = sample(schema.properties?.[name], doc, depth + 1);
      // Optional members too, as far as `minProperties` asks.
      for (const [name, member] of Object.entries<Schema>(schema.properties ?? {})) {
        if (Object.keys(out).length >= (schema.minProperties ?? 0)) break;
        if (!(name in out)) out[name] = sample(member, doc, depth + 1);
      }
      return out;
    }
    case 'array':
      return Array.from({ length: schema.minItems ?? 0 }, () => sample(schema.items, doc, depth + 1));
    case 'integer':
    case 'number':
      return Math.max(schema.minimum ?? 1, 1);
    case 'boolean':
      return true;
    case 'string':
      if (schema.format === 'uuid') return randomUUID();
      if (schema.format === 'email') return uniqueEmail('x');
      if (schema.format === 'date-time') return new Date().toISOString();
      if (schema.format === 'date') return new Date().toISOString().slice(0, 10);
      if (schema.format === 'uri') return 'https://example.test/x';
      return 'x'.repeat(Math.max(schema.minLength ?? 1, 1));
    default:
      return undefined;
  }
}

function operations(doc: Schema): Operation[] {
  const out: Operation[] = [];
  for (const [path, methods] of Object.entries<Schema>(doc.paths)) {
    for (const [method, op] of Object.entries<Schema>(methods)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const pathParams = (op.parameters ?? []).filter((p: Schema) => p.in === 'path').map((p: Schema) => p.name as string);
      const schemes = (op.security ?? []).flatMap((s: Schema) => Object.keys(s));
      const auth = schemes.includes('aiToolSecret') ? 'ai' : schemes.includes('widgetSession') ? 'widget' : schemes.includes('bearerAuth') ? 'bearer' : 'public';
      out.push({ method, path, op, pathParams, auth });
    }
  }
  return out;
}

describe('tenancy: every route with a tenant id in its path, generated from the OpenAPI document', function () {
  this.timeout(120_000);
  let doc: Schema;
  let a: SignedUp;
  let b: SignedUp;
  let visitorB: Visitor;
  const ids: Record<string, string> = {};

  before(async () => {
    const { server, baseUrl } = sharedServer();
    doc = (await new Api(baseUrl).get('/openapi.json')).body;
    [a, b] = [await signUp(server, baseUrl), await signUp(server, baseUrl)];
    const t = { token: a.accessToken };
    const ok = (res: ApiResponse, what: string) => {
      expect(res.status, `${what}: ${JSON.stringify(res.body)}`).to.be.within(200, 201);
      return res.body.data;
    };
    // Organization A's resources, one of each kind a path can name.
    const member = await addMember(server, a, 'agent');
    const visitorA = await newVisitor(a);
    const { conversationId } = await startConversation(visitorA);
    const contact = ok(await a.api.post('/contacts', { name: 'Ann Tenant', email: uniqueEmail('ann') }, t), 'contact');
    const note = ok(await a.api.post(`/contacts/${contact.id}/notes`, { content: 'only A sees this' }, t), 'note');
    ok(await a.api.post('/contacts/attribute-definitions', { key: 'tenant_a_only', label: 'A only', type: 'text' }, t), 'attribute definition');
    const upsert = await a.api.post('/contacts/ai/upsert', { organizationId: a.orgId, conversationId, email: contact.email, name: 'Someone Else' }, { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } });
    const conflict = ok(await a.api.get(`/contacts/conflicts?contactId=${contact.id}`, t), 'conflicts')[0];
    expect(conflict, `a conflict from ${JSON.stringify(upsert.body)}`).to.have.property('id');
    const ticket = ok(await a.api.post('/tickets', { title: 'A ticket', requester: { name: 'Ann', email: contact.email } }, t), 'ticket');
    const template = ok(await a.api.post('/templates', { title: 'A template', content: 'Hello from A', shortcut: `a-${randomUUID().slice(0, 6)}` }, t), 'template');
    ok(await new Api(a.api.baseUrl).post('/notifications/ai', { organizationId: a.orgId, userIds: [a.userId], type: 'ai', title: 'For A' }, { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } }), 'notification');
    const notification = ok(await a.api.get('/notifications', t), 'notifications')[0];
    const file = await upload(a.api, a.accessToken, a.api.baseUrl, { name: 'a.pdf', type: 'application/pdf', bytes: PDF });
    ok(file.complete, 'file');
    const document = ok(await a.api.post('/knowledge', { title: 'A only', source: 'text', content: 'Only organization A knows this.' }, t), 'knowledge source');
    const ai = { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } };
    ok(await a.api.post('/knowledge/ai/unanswered-questions', { organizationId: a.orgId, conversationId, question: 'Only A asks this?' }, ai), 'unanswered question');
    const question = ok(await a.api.get('/knowledge/unanswered', t), 'unanswered questions')[0];
    const apiKey = ok(await a.api.post('/api-keys', { name: 'A key', scopes: ['contacts:read'] }, t), 'api key').apiKey;
    // An address literal: public, so it passes the target check without DNS; the delivery row is made directly (no job).
    const webhook = ok(await a.api.post('/webhooks', { url: 'https://93.184.215.14/hook', events: ['ticket.created'], enabled: false }, t), 'webhook').webhook;
    const [delivery] = await server.db.knex('webhook_deliveries').insert({ organization_id: a.orgId, webhook_id: webhook.id, event_id: randomUUID(), event_type: 'ticket.created', payload: '{}', status: 'failed' }).returning('id');
    Object.assign(ids, {
      keyId: apiKey.id,
      webhookId: webhook.id,
      deliveryId: (delivery as { id: string }).id,
      orgId: a.orgId,
      memberId: member.membershipId,
      conversationId,
      contactId: contact.id,
      noteId: note.id,
      key: 'tenant_a_only',
      tag: 'vip',
      conflictId: conflict.id,
      ticketId: ticket.id,
      templateId: template.id,
      notificationId: notification.id,
      objectId: file.objectId,
      documentId: document.id,
      questionId: question.id,
    });
    // A channel of A's with one delivery (the row made directly: no job runs).
    const channel = ok(await a.api.post('/channels/email', { name: 'A mail', address: 'support@tenant-a.test' }, t), 'channel').channel;
    const [channelDelivery] = await server.db.knex('channel_deliveries').insert({ organization_id: a.orgId, channel_id: channel.id, conversation_id: conversationId, recipient: 'someone@tenant-a.test', status: 'failed' }).returning('id');
    Object.assign(ids, { channelId: channel.id, channelDeliveryId: (channelDelivery as { id: string }).id });
    visitorB = await newVisitor(b);
  });

  /** A's id for a path parameter; `{id}` is named by the segment before it. */
  function idFor(param: string, path: string): string {
    if (param === 'deliveryId' && path.includes('/channels/')) return ids.channelDeliveryId!;
    if (param !== 'id') return ids[param] ?? '';
    if (path.includes('/templates/')) return ids.templateId!;
    if (path.includes('/notifications/')) return ids.notificationId!;
    if (path.includes('/conversations/')) return ids.conversationId!;
    return '';
  }

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
