// The served OpenAPI document as tests walk it: its operations, a request body each accepts, hostile values for a
// schema's members, and one organization's resources of every kind a path can name (for tests generated over every
// route; the socket events' schemas are walked the same way).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { AppServer } from '../../server/server.js';
import { addMember, uniqueEmail, type SignedUp } from './factories.js';
import { Api, type ApiResponse } from './http.js';
import { newVisitor, startConversation } from './live.js';
import { TEST_AI_SECRET } from './server.js';
import { PDF, upload } from './storage.js';

export type Schema = Record<string, any>;
export interface Operation {
  method: string;
  path: string;
  op: Schema;
  pathParams: string[];
  auth: 'bearer' | 'widget' | 'ai' | 'public';
}

/** Path parameters that do not name a tenant's resource. */
export const NOT_TENANT_SCOPED = new Set(['token']);

/** A value that satisfies `schema` (required members only), so validation lets the request reach its resource. */
export function sample(schema: Schema | undefined, doc: Schema, depth = 0): unknown {
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

export function operations(doc: Schema): Operation[] {
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

/** The longest string tried where a schema sets no `maxLength` (a 1 MiB body holds it with room to spare). */
const LONG = 100_000;

/** `schema` with its `$ref`, `oneOf`/`anyOf` (the first non-null) and `allOf` resolved. */
export function resolve(schema: Schema | undefined, doc: Schema, depth = 0): Schema | undefined {
  if (!schema || depth > 8) return schema;
  if (schema.$ref) return resolve(doc.components?.schemas?.[String(schema.$ref).split('/').pop()!], doc, depth + 1);
  for (const key of ['oneOf', 'anyOf'] as const) if (schema[key]) return resolve(schema[key].find((s: Schema) => s.type !== 'null') ?? schema[key][0], doc, depth + 1);
  if (schema.allOf) return Object.assign({}, ...schema.allOf.map((s: Schema) => resolve(s, doc, depth + 1)));
  return schema;
}

export function typeOf(schema: Schema): string | undefined {
  return Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type;
}

/** Values a member of `schema` might be given by a careless or hostile client, most of them within the schema. */
export function hostile(schema: Schema | undefined, doc: Schema): unknown[] {
  const s = resolve(schema, doc);
  if (!s) return [null];
  if (s.enum || s.const !== undefined) return [null, 'not-one-of-them'];
  switch (typeOf(s)) {
    case 'string': {
      const max = Math.min(s.maxLength ?? LONG, LONG);
      const values: unknown[] = ['a\u0000b', '\ud800x', 'x'.repeat(max), '\u{1F600}'.repeat(Math.max(1, Math.floor(max / 2))), ' ', null, 12];
      if (s.maxLength !== undefined) values.push('x'.repeat(s.maxLength + 1));
      if (s.format === 'date-time') values.push('9999-12-31T23:59:59.999Z', '0001-01-01T00:00:00Z', '+275760-09-13T00:00:00.000Z', '2024-02-30T00:00:00Z', '2024-06-01T00:00:00+14:00');
      if (s.format === 'date') values.push('9999-12-31', '0001-01-01', '2024-02-30');
      if (s.format === 'email') values.push(`${'a'.repeat(64)}@${'b'.repeat(63)}.test`, 'a@b', '"a b"@example.test');
      if (s.format === 'uri') values.push(`https://${'a'.repeat(63)}.${'b'.repeat(2000)}.test/`, 'javascript:alert(1)', 'http://[::1]/', 'http://127.0.0.1:0/');
      if (s.format === 'uuid') values.push(randomUUID(), '00000000-0000-0000-0000-000000000000');
      return values;
    }
    case 'integer':
    case 'number': {
      const values: unknown[] = [s.maximum ?? Number.MAX_SAFE_INTEGER, s.minimum ?? -Number.MAX_SAFE_INTEGER, 2 ** 31, -1, 0, null, '1'];
      if (typeOf(s) === 'number') values.push(1e308, 5e-324);
      return values;
    }
    case 'boolean':
      return [null, 'true', 0];
    case 'array': {
      const item = sample(s.items, doc);
      return [[], Array.from({ length: Math.min(s.maxItems ?? 1_000, 1_000) }, () => item), [null], null, {}];
    }
    case 'object':
      return [{}, [], null, 'x'];
    default:
      return [null];
  }
}

export async function openApiDocument(baseUrl: string): Promise<Schema> {
  return (await new Api(baseUrl).get('/openapi.json')).body;
}

/** An organization's resources, one of each kind a path can name, by path parameter; `idFor` picks one for a path. */
export interface Fixtures {
  ids: Record<string, string>;
  idFor(param: string, path: string): string;
}

export async function tenantFixtures(server: AppServer, a: SignedUp): Promise<Fixtures> {
  const ids: Record<string, string> = {};
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
  /** `{id}` is named by the segment before it. */
  const idFor = (param: string, path: string): string => {
    if (param === 'deliveryId' && path.includes('/channels/')) return ids.channelDeliveryId!;
    if (param !== 'id') return ids[param] ?? '';
    if (path.includes('/templates/')) return ids.templateId!;
    if (path.includes('/notifications/')) return ids.notificationId!;
    if (path.includes('/conversations/')) return ids.conversationId!;
    return '';
  };
  return { ids, idFor };
}
