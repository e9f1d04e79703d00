// Free-form JSON fields (widget settings, AI memory facts, AI reply metadata, agent-run steps, notification data,
// AI call events) are bounded in depth and size: a value too deep (5,000 levels, or one past the bound) or too
// large answers 400 validation_failed naming the field and stores nothing; a value within the bounds still goes
// through. Socket payloads are checked the same way, and the OpenAPI document shows every bound.
import { expect } from 'chai';
import { toAppError } from '../server/errors.js';
import * as socketSchemas from '../sockets/schemas.js';
import { expectApiError, expectApiSuccess } from './helpers/auth.js';
import { sharedServer } from './helpers/hooks.js';
import { Api, type ApiResponse } from './helpers/http.js';
import { supportScene, type SupportScene } from './helpers/live.js';
import { TEST_AI_SECRET } from './helpers/server.js';
import { ackData, closeAfterEach, expectAckError, type AckBody } from './helpers/socket-acks.js';
import { connectOk, request, type ClientSocket } from './helpers/sockets.js';

const DEEP = 5_000;
const ai = { 'content-type': 'application/json', 'x-ai-tool-secret': TEST_AI_SECRET };

/** The JSON text of objects (or arrays) nested `depth` levels, written as text: no recursive code builds it. */
const deepObjectText = (depth: number) => '{"k":'.repeat(depth) + '"leaf"' + '}'.repeat(depth);
const deepArrayText = (depth: number) => '['.repeat(depth) + '"leaf"' + ']'.repeat(depth);

/** An object nested exactly `depth` levels ({ k: { k: ... 'leaf' } }), built without recursion. */
function nested(depth: number): Record<string, unknown> {
  let value: unknown = 'leaf';
  for (let i = 0; i < depth; i += 1) value = { k: value };
  return value as Record<string, unknown>;
}

/** `count` short string values whose JSON text together is over `bytes`: wide but shallow. */
function wideValues(count: number, bytes: number): string[] {
  return Array.from({ length: count }, () => 'x'.repeat(Math.ceil(bytes / count)));
}

const tenant = () => supportScene(sharedServer());

/** Sends a body given as JSON text, so a 5,000-deep value is never serialized by the test itself. */
function send(t: SupportScene, method: string, path: string, text: string, headers: Record<string, string>): Promise<ApiResponse> {
  return t.owner.api.request(method, path, { rawBody: text, headers: { 'content-type': 'application/json', ...headers } });
}

const knex = () => sharedServer().server.db.knex;

interface FreeFormField {
  name: string;
  /** The field the error detail names. */
  field: string;
  maxDepth: number;
  maxBytes: number;
  /** maxProperties of an object field, maxItems of an array field. */
  width: number;
  array?: boolean;
  /** Sends the route's body with the field's value given as JSON text. */
  send(t: SupportScene, valueText: string): Promise<ApiResponse>;
  /** Everything the route could have written, to compare before and after. */
  stored(t: SupportScene): Promise<unknown[]>;
}

const widgetField = (name: 'appearance' | 'behavior' | 'ai' | 'collectUserInfo', maxBytes: number): FreeFormField => ({
  name: `PUT /widget/manage ${name}`, field: name, maxDepth: 8, maxBytes, width: 50,
  send: (t, v) => send(t, 'PUT', '/widget/manage', `{"${name}":${v}}`, { authorization: `Bearer ${t.owner.accessToken}` }),
  stored: async (t) => [(await knex()('widgets').where({ organization_id: t.owner.orgId }).first())?.[name] ?? null],
});

const FIELDS: FreeFormField[] = [
  widgetField('appearance', 16_384),
  widgetField('behavior', 16_384),
  widgetField('ai', 65_536),
  widgetField('collectUserInfo', 16_384),
  {
    name: 'PATCH /conversations/ai/:id/memory facts', field: 'facts', maxDepth: 8, maxBytes: 65_536, width: 200,
    send: (t, v) => send(t, 'PATCH', `/conversations/ai/${t.conversationId}/memory`, `{"organizationId":"${t.owner.orgId}","facts":${v}}`, ai),
    stored: async (t) => (await knex()('conversation_memories').where({ conversation_id: t.conversationId })).map((r) => r.facts),
  },
  {
    name: 'POST /conversations/ai/:id/messages metadata', field: 'metadata', maxDepth: 8, maxBytes: 32_768, width: 50,
    send: (t, v) => send(t, 'POST', `/conversations/ai/${t.conversationId}/messages`, `{"organizationId":"${t.owner.orgId}","content":"An answer","metadata":${v}}`, ai),
    stored: async (t) => (await knex()('messages').where({ conversation_id: t.conversationId }).orderBy('seq')).map((r) => r.metadata),
  },
  {
    name: 'POST /conversations/ai/:id/agent-runs steps', field: 'steps', maxDepth: 10, maxBytes: 524_288, width: 200, array: true,
    send: (t, v) => send(t, 'POST', `/conversations/ai/${t.conversationId}/agent-runs`, `{"organizationId":"${t.owner.orgId}","status":"succeeded","steps":${v}}`, ai),
    stored: async (t) => (await knex()('agent_runs').where({ conversation_id: t.conversationId })).map((r) => r.steps),
  },
  {
    name: 'POST /notifications/ai data', field: 'data', maxDepth: 8, maxBytes: 16_384, width: 50,
    send: (t, v) => send(t, 'POST', '/notifications/ai', `{"organizationId":"${t.owner.orgId}","userIds":["${t.agent.userId}"],"title":"Heads up","data":${v}}`, ai),
    stored: async (t) => (await knex()('notifications').where({ organization_id: t.owner.orgId, user_id: t.agent.userId }).whereNot({ type: 'new_conversation' })).map((r) => r.data),
  },
];

/** A value of the field's kind nested `depth` levels, as JSON text (arrays hold objects, as steps do). */
function deepText(f: FreeFormField, depth: number): string {
  return f.array ? `[${deepObjectText(depth - 1)}]` : deepObjectText(depth);
}
function withinBounds(f: FreeFormField): unknown {
  return f.array ? [nested(f.maxDepth - 1), { tool: 'search', args: { query: 'refund' } }] : { ...nested(f.maxDepth), theme: { colors: { primary: '#123456' } } };
}
function tooWide(f: FreeFormField): unknown {
  const values = wideValues(Math.min(f.width, 40), f.maxBytes);
  return f.array ? values.map((text) => ({ text })) : Object.fromEntries(values.map((v, i) => [`key${i}`, v]));
}

function expectRefused(res: ApiResponse, field: string): void {
  expectApiError(res, 400, 'validation_failed');
  const fields = (res.body.error.details as { field?: string }[]).map((d) => d.field);
  expect(fields, JSON.stringify(res.body.error.details)).to.include(field);
}

describe('deep or oversized JSON in free-form fields', () => {
  for (const f of FIELDS) {
    it(`${f.name}: 5,000 deep, one level past ${f.maxDepth} and over ${f.maxBytes} bytes -> 400, nothing stored; within bounds -> stored`, async () => {
      const t = await tenant();
      const before = await f.stored(t);
      const refused: [string, string][] = [
        [`${DEEP} levels`, deepText(f, DEEP)],
        [`${f.maxDepth + 1} levels`, deepText(f, f.maxDepth + 1)],
        [`over ${f.maxBytes} bytes, one level deep`, JSON.stringify(tooWide(f))],
      ];
      if (f.array) refused.push([`${DEEP} nested arrays`, deepArrayText(DEEP)]);
      for (const [what, text] of refused) {
        const res = await f.send(t, text);
        expect(res.status, `${what}: ${JSON.stringify(res.body).slice(0, 300)}`).to.equal(400);
        expectRefused(res, f.field);
      }
      expect(await f.stored(t), 'nothing was written').to.deep.equal(before);

      const value = withinBounds(f);
      const res = await f.send(t, JSON.stringify(value));
      expect(res.status, JSON.stringify(res.body).slice(0, 300)).to.be.oneOf([200, 201]);
      expect(await f.stored(t)).to.deep.include(value);
    });
  }

  it('POST /observability/ai-calls: a 5,000-deep or oversized event -> 400 for the batch; a valid event is stored, a shallow wrong one reported', async () => {
    const t = await tenant();
    const count = async () => Number((await knex()('ai_call_events').where({ organization_id: t.owner.orgId }).count({ n: '*' }))[0]!.n);
    const event = { timestamp: new Date().toISOString(), provider: 'openai', modelId: 'gpt-test', latencyMs: 120, success: true, organizationId: t.owner.orgId };
    const post = (eventsText: string) => send(t, 'POST', '/observability/ai-calls', `{"events":${eventsText}}`, ai);
    const valid = JSON.stringify(event);
    for (const bad of [`{"extra":${deepObjectText(DEEP)}}`, `{"extra":${deepObjectText(4)}}`, JSON.stringify({ ...event, error: 'x'.repeat(70_000) })]) {
      expectRefused(await post(`[${valid},${bad}]`), 'events.1');
    }
    expect(await count(), 'nothing was written').to.equal(0);

    const data = expectApiSuccess(await post(`[${valid},${JSON.stringify({ ...event, extra: nested(2) })}]`), 201);
    expect(data).to.deep.include({ inserted: 1, failed: 1 });
    expect(data.errors[0].index).to.equal(1);
    expect(await count()).to.equal(1);
  });

  it('a body nested hundreds of thousands of levels (still under 1 MiB) answers 400, on a free-form field and on a fixed one', async () => {
    const t = await tenant();
    const bearer = { authorization: `Bearer ${t.owner.accessToken}` };
    expectRefused(await send(t, 'PUT', '/widget/manage', `{"appearance":${deepObjectText(150_000)}}`, bearer), 'appearance');
    expectRefused(await send(t, 'PUT', '/widget/manage', `{"displayName":${deepArrayText(450_000)}}`, bearer), 'displayName');
    expectApiError(await send(t, 'PUT', '/widget/manage', deepArrayText(450_000), bearer), 400, 'validation_failed');
    const widget = await knex()('widgets').where({ organization_id: t.owner.orgId }).first();
    expect(widget.appearance).to.deep.equal({});
  });

  it('a stack overflow that still happens is the input\'s fault: 400 validation_failed, not 500', () => {
    let overflow: unknown;
    const dive = (n: number): number => dive(n + 1) + 1;
    try {
      dive(0);
    } catch (err) {
      overflow = err;
    }
    expect(overflow).to.be.instanceOf(RangeError);
    const mapped = toAppError(overflow);
    expect({ status: mapped.status, code: mapped.code }).to.deep.equal({ status: 400, code: 'validation_failed' });
    expect(toAppError(new RangeError('Invalid array length')).status).to.equal(500);
  });
});

let rawAckId = 1_000_000;

/**
 * Emits `event` with a payload given as JSON text and resolves with its ack. The client's own encoder
 * (JSON.stringify) overflows on 5,000 levels, so the Socket.IO packet is written as text: `2<nsp>,<id>[event,payload]`.
 */
function requestRaw(socket: ClientSocket, orgId: string, event: string, payloadText: string): Promise<AckBody> {
  const id = (rawAckId += 1);
  const nsp = `/orgs/${orgId}`;
  return new Promise((resolve, reject) => {
    // Socket.IO packet type 3 is an ACK.
    const onPacket = (packet: { type: number; nsp: string; id?: number; data?: unknown }) => {
      if (packet.type !== 3 || packet.nsp !== nsp || packet.id !== id) return;
      clearTimeout(timer);
      socket.io.off('packet', onPacket);
      resolve((packet.data as AckBody[])[0]!);
    };
    const timer = setTimeout(() => {
      socket.io.off('packet', onPacket);
      reject(new Error(`no ack for ${event} within 5000 ms`));
    }, 5000);
    socket.io.on('packet', onPacket);
    socket.io.engine.write(`2${nsp},${id}[${JSON.stringify(event)},${payloadText}]`);
  });
}

describe('deep JSON over the sockets', () => {
  const track = closeAfterEach();

  it('send_message with deep metadata or a deep field -> validation_failed, nothing stored; forbidden events stay forbidden; the socket keeps working', async () => {
    const { baseUrl } = sharedServer();
    const t = await tenant();
    const orgId = t.owner.orgId;
    const agentSocket = track(await connectOk(baseUrl, orgId, t.agent.accessToken));
    const visitorSocket = track(await connectOk(baseUrl, orgId, t.visitor.token));
    const messages = async () => (await knex()('messages').where({ conversation_id: t.conversationId })).length;
    const before = await messages();
    const conversationId = JSON.stringify(t.conversationId);
    for (const depth of [DEEP, 9]) {
      const deep = deepObjectText(depth);
      for (const socket of [agentSocket, visitorSocket]) {
        for (const payload of [
          `{"conversationId":${conversationId},"content":"hi","metadata":${deep}}`,
          `{"conversationId":${conversationId},"content":"hi","clientMessageId":${deep}}`,
          `{"conversationId":${deep},"content":"hi"}`,
          deep,
        ]) {
          expectAckError(await requestRaw(socket, orgId, 'send_message', payload), 'validation_failed');
        }
      }
      for (const event of ['join_conversation', 'update_status']) expectAckError(await requestRaw(visitorSocket, orgId, event, deep), 'forbidden');
      expectAckError(await requestRaw(agentSocket, orgId, 'update_status', deep), 'validation_failed');
    }
    expect(await messages(), 'nothing was written').to.equal(before);

    ackData(await request(visitorSocket, 'send_message', { conversationId: t.conversationId, content: 'still here' }));
    ackData(await request(agentSocket, 'send_message', { conversationId: t.conversationId, content: 'me too' }));
    expect(await messages()).to.equal(before + 2);
  });
});

/** Free-form parts of a schema (objects open to any key, arrays of anything, `{}`), with their paths. */
function freeFormNodes(schema: unknown, path: string, out: { path: string; node: Record<string, unknown> }[] = []) {
  if (!schema || typeof schema !== 'object') return out;
  const node = schema as Record<string, unknown>;
  const types = ([] as unknown[]).concat(node.type ?? []);
  const open = (types.includes('object') && node.additionalProperties !== false && typeof node.additionalProperties !== 'object')
    || (types.includes('array') && node.items === undefined)
    || (types.length === 0 && !node.properties && !node.items && !node.oneOf && !node.anyOf && !node.enum && node.const === undefined && !node.$ref);
  if (open) out.push({ path, node });
  for (const [key, child] of Object.entries((node.properties ?? {}) as Record<string, unknown>)) freeFormNodes(child, `${path}.${key}`, out);
  if (node.items) freeFormNodes(node.items, `${path}[]`, out);
  if (typeof node.additionalProperties === 'object') freeFormNodes(node.additionalProperties, `${path}{}`, out);
  for (const child of [...((node.oneOf ?? []) as unknown[]), ...((node.anyOf ?? []) as unknown[])]) freeFormNodes(child, path, out);
  return out;
}

function expectBounded(found: { path: string; node: Record<string, unknown> }[]): void {
  for (const { path, node } of found) {
    expect(node, path).to.include.keys('x-max-depth', 'x-max-bytes');
    expect(node['x-max-depth'], path).to.be.a('number').within(1, 16);
  }
}

describe('free-form fields in the documents', () => {
  it('every free-form field of a request body in the OpenAPI document shows its bounds', async () => {
    const doc = (await new Api(sharedServer().baseUrl).get('/openapi.json')).body;
    const found: { path: string; node: Record<string, unknown> }[] = [];
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
      for (const [method, op] of Object.entries(item)) {
        const schema = op?.requestBody?.content?.['application/json']?.schema;
        if (schema) freeFormNodes(schema, `${method.toUpperCase()} ${path}`, found);
      }
    }
    expect(found.map((f) => f.path)).to.include.members(['PUT /api/v1/widget/manage.appearance', 'POST /api/v1/conversations/ai/{id}/agent-runs.steps']);
    expectBounded(found);
    const appearance = found.find((f) => f.path.endsWith('.appearance'))!.node;
    expect(appearance).to.include({ 'x-max-depth': 8, 'x-max-bytes': 16_384, maxProperties: 50 });
    expect(appearance.description).to.match(/8 levels/);
  });

  it('socket payload schemas leave nothing open but the one whose payload is never read', () => {
    const found = Object.entries(socketSchemas)
      .filter(([name, schema]) => name !== 'anything' && schema && typeof schema === 'object')
      .flatMap(([name, schema]) => freeFormNodes(schema, name));
    expectBounded(found);
  });
});
