// Hostile but well-formed payloads on every client event, agents' and visitors', walked from the events' own payload
// schemas: every ack is a success or the error body with a stable code (never `internal_error`), no event goes
// unanswered, a payload sent without an ack does not upset the server, and the socket stays connected throughout.
import { expect } from 'chai';
import * as schemas from '../sockets/schemas.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { hostile, sample, type Schema } from './helpers/openapi.js';
import { closeAfterEach } from './helpers/socket-acks.js';
import { connectOk, request, type ClientSocket } from './helpers/sockets.js';
import type { ClientToServerEvents } from '../sockets/events.js';

type Event = keyof ClientToServerEvents;

const AGENT_EVENTS: [Event, Schema][] = [
  ['send_message', schemas.agentSendMessage],
  ['request_assist', schemas.conversationRef],
  ['join_conversation', schemas.conversationRef],
  ['leave_conversation', schemas.conversationRef],
  ['typing_start', schemas.conversationRef],
  ['typing_stop', schemas.conversationRef],
  ['update_status', schemas.updateStatus],
  ['sync', schemas.sync],
];

const VISITOR_EVENTS: [Event, Schema][] = [
  ['send_message', schemas.visitorSendMessage],
  ['typing_start', schemas.conversationRef],
  ['typing_stop', schemas.conversationRef],
  ['sync', schemas.sync],
  // An agent's events, which a visitor may not send at all.
  ['join_conversation', schemas.conversationRef],
  ['leave_conversation', schemas.conversationRef],
  ['request_assist', schemas.conversationRef],
  ['update_status', schemas.updateStatus],
];

/** Whole payloads that are no object of the event's shape, then the valid one with each member made hostile. */
function payloads(schema: Schema, conversationId: string): { payload: unknown; what: string }[] {
  const out: { payload: unknown; what: string }[] = [undefined, null, 'x', 0, true, [], {}, [{ conversationId }], { conversationId, ['__proto__']: { polluted: true } }].map((payload) => ({ payload, what: JSON.stringify(payload) ?? 'undefined' }));
  const base = { ...(sample(schema, {}) as Record<string, unknown>), ...('conversationId' in (schema.properties ?? {}) ? { conversationId } : {}) };
  for (const [name, member] of Object.entries<Schema>(schema.properties ?? {})) {
    for (const value of hostile(member, {})) out.push({ payload: { ...base, [name]: value }, what: `${name}=${JSON.stringify(value)?.slice(0, 40)}` });
  }
  if ('afterSeq' in (schema.properties ?? {})) for (const afterSeq of [1e20, 2 ** 63, Number.MAX_SAFE_INTEGER]) out.push({ payload: { ...base, afterSeq }, what: `afterSeq=${afterSeq}` });
  return out;
}

describe('sockets: hostile but well-formed payloads on every client event', function () {
  this.timeout(300_000);
  const track = closeAfterEach();
  let owner: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  async function walk(socket: ClientSocket, events: [Event, Schema][], conversationId: string): Promise<{ failures: string[]; answered: number; succeeded: number }> {
    const failures: string[] = [];
    let answered = 0;
    let succeeded = 0;
    for (const [event, schema] of events) {
      for (const { payload, what } of payloads(schema, conversationId)) {
        // The same payload without an ack first: a fire-and-forget client must not upset anything.
        (socket.emit as (event: string, payload: unknown) => void)(event, payload);
        let ack: Awaited<ReturnType<typeof request>>;
        try {
          ack = await request(socket, event, payload);
        } catch (err) {
          failures.push(`${event} ${what}: ${(err as Error).message}`);
          continue;
        }
        answered += 1;
        if (ack.success === true) succeeded += 1;
        else if (typeof ack.error?.code !== 'string' || !/^[a-z][a-z_]*$/.test(ack.error.code) || ack.error.code === 'internal_error') failures.push(`${event} ${what}: ${JSON.stringify(ack).slice(0, 160)}`);
      }
      if (!socket.connected) failures.push(`${event}: the socket was disconnected`);
    }
    return { failures, answered, succeeded };
  }

  it("an agent's events", async () => {
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const agent = track(await connectOk(owner.api.baseUrl, owner.orgId, owner.accessToken));
    const { failures, answered, succeeded } = await walk(agent, AGENT_EVENTS, conversationId);
    expect(failures, failures.join('\n')).to.be.empty;
    expect(answered).to.be.greaterThan(150);
    // Valid payloads among them were done, not refused.
    expect(succeeded).to.be.greaterThan(10);
    expect((await request(agent, 'join_conversation', { conversationId })).success).to.equal(true);
  });

  it("a visitor's events (and an agent's, which are refused)", async () => {
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const socket = track(await connectOk(owner.api.baseUrl, owner.orgId, visitor.token));
    const { failures, answered, succeeded } = await walk(socket, VISITOR_EVENTS, conversationId);
    expect(failures, failures.join('\n')).to.be.empty;
    expect(answered).to.be.greaterThan(100);
    expect(succeeded).to.be.greaterThan(10);
    expect((await request(socket, 'sync', { conversationId, afterSeq: 0 })).success).to.equal(true);
  });
});
