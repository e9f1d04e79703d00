// Analytics over a scripted tenant: conversations produced through the real services, then placed at known times
// around a day boundary that falls differently in UTC and America/New_York, with every figure computed by hand.
import { expect } from 'chai';
import type { AppServer } from '../server/server.js';
import { expectApiError, expectApiSuccess } from './helpers/auth.js';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { aiClient, createTicket } from './helpers/tickets.js';

const at = (iso: string) => new Date(iso);
const RANGE = 'from=2026-06-01&to=2026-06-02';

interface Scripted {
  id: string;
  created: string;
  firstResponse?: string;
  escalated?: string;
  firstHumanReply?: string;
  firstResolved?: string;
  /** Message times by seq. */
  messages: string[];
}

/** Moves a conversation and its messages to the scripted times (the who and whether were set by the services). */
async function place(server: AppServer, c: Scripted): Promise<void> {
  const knex = server.db.knex;
  await knex('conversations').where('id', c.id).update({
    created_at: at(c.created),
    first_response_at: c.firstResponse ? at(c.firstResponse) : null,
    escalated_at: c.escalated ? at(c.escalated) : null,
    first_human_reply_at: c.firstHumanReply ? at(c.firstHumanReply) : null,
    first_resolved_at: c.firstResolved ? at(c.firstResolved) : null,
    resolved_at: c.firstResolved ? at(c.firstResolved) : null,
  });
  const stored = await knex('messages').where('conversation_id', c.id).orderBy('seq').select('seq');
  expect(stored.length, `messages of ${c.id}`).to.equal(c.messages.length);
  for (const [i, when] of c.messages.entries()) await knex('messages').where({ conversation_id: c.id, seq: i + 1 }).update({ created_at: at(when) });
}

interface World {
  owner: SignedUp;
  x: Member;
  y: Member;
  ids: Record<'c1' | 'c2' | 'c3' | 'c4' | 'c5', string>;
}

/** Built once per test server: a run that starts a new server (mutation testing runs the file again) builds it anew. */
let world: { server: AppServer; built: Promise<World> } | null = null;

/**
 * C1 AI-only: AI reply after 60 s, resolved by the AI after 600 s.            created 06-01 12:00Z (NY 06-01)
 * C2 escalated 02:05, agent X replies 02:07, resolved by an agent at 03:00.    created 06-02 02:00Z (NY 06-01 22:00)
 * C3 AI reply after 30 s, escalated 03:40, agent Y replies 03:50, open.        created 06-02 03:30Z (NY 06-01 23:30)
 * C4 agent X replies after 300 s (+ an internal note), open.                   created 06-02 14:00Z (NY 06-02)
 * C5 agent X replies, resolved 06-01 01:00Z (in UTC's range, before NY's).    created 05-31 23:00Z
 */
function scriptedWorld(): Promise<World> {
  if (world?.server === sharedServer().server) return world.built;
  const built = (async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const x = await addMember(server, owner, 'agent', 'Xena Agent');
    const y = await addMember(server, owner, 'agent', 'Yuri Agent');
    const ai = aiClient(baseUrl);
    const org = { organizationId: owner.orgId };
    const start = async () => (await startConversation(await newVisitor(owner))).conversationId;
    const reply = async (who: Member, id: string, content: string, isPrivate = false) =>
      expectApiSuccess(await who.api.post(`/conversations/${id}/messages`, { content, private: isPrivate }, { token: who.accessToken }), 201);
    const assign = async (id: string, agentId: string) => expectApiSuccess(await owner.api.post(`/conversations/${id}/route`, { agentId }, { token: owner.accessToken }), 200);
    const resolveByAgent = async (id: string) => expectApiSuccess(await owner.api.patch(`/conversations/${id}/status`, { status: 'resolved' }, { token: owner.accessToken }), 200);

    const c1 = await start();
    expectApiSuccess(await ai.post(`/conversations/ai/${c1}/messages`, { ...org, content: 'Try turning it off and on' }), 201);
    expectApiSuccess(await ai.post(`/conversations/ai/${c1}/resolve`, org), 200);

    const c2 = await start();
    expectApiSuccess(await ai.post(`/conversations/ai/${c2}/escalate`, { ...org, reason: 'wants a human' }), 200);
    await assign(c2, x.userId);
    await reply(x, c2, 'Hi, Xena here');
    await resolveByAgent(c2);

    const c3 = await start();
    expectApiSuccess(await ai.post(`/conversations/ai/${c3}/messages`, { ...org, content: 'Let me look' }), 201);
    expectApiSuccess(await ai.post(`/conversations/ai/${c3}/escalate`, org), 200);
    await assign(c3, y.userId);
    await reply(y, c3, 'Yuri here');

    const c4 = await start();
    await assign(c4, x.userId);
    await reply(x, c4, 'Hello from Xena');
    await reply(x, c4, 'note to self', true);

    const c5 = await start();
    await reply(x, c5, 'Late answer');
    await resolveByAgent(c5);

    // What the services stored, before the times are moved.
    const rows = await server.db.knex('conversations').whereIn('id', [c1, c2, c3, c4, c5]).select('id', 'first_human_reply_by', 'first_resolved_by_ai', 'first_response_at', 'first_resolved_at');
    const row = (id: string) => rows.find((r) => r.id === id)!;
    expect(row(c1)).to.include({ firstHumanReplyBy: null, firstResolvedByAi: true });
    expect(row(c2)).to.include({ firstHumanReplyBy: x.userId, firstResolvedByAi: false });
    expect(row(c3)).to.include({ firstHumanReplyBy: y.userId });
    expect(row(c4)).to.include({ firstHumanReplyBy: x.userId });
    expect(row(c5)).to.include({ firstHumanReplyBy: x.userId, firstResolvedByAi: false });
    for (const id of [c1, c2, c3, c4, c5]) expect(row(id).firstResponseAt, id).to.be.an.instanceOf(Date);
    for (const id of [c1, c2, c5]) expect(row(id).firstResolvedAt, id).to.be.an.instanceOf(Date);

    await place(server, { id: c1, created: '2026-06-01T12:00:00Z', firstResponse: '2026-06-01T12:01:00Z', firstResolved: '2026-06-01T12:10:00Z', messages: ['2026-06-01T12:00:00Z', '2026-06-01T12:01:00Z'] });
    await place(server, { id: c2, created: '2026-06-02T02:00:00Z', escalated: '2026-06-02T02:05:00Z', firstResponse: '2026-06-02T02:07:00Z', firstHumanReply: '2026-06-02T02:07:00Z', firstResolved: '2026-06-02T03:00:00Z', messages: ['2026-06-02T02:00:00Z', '2026-06-02T02:07:00Z'] });
    await place(server, { id: c3, created: '2026-06-02T03:30:00Z', firstResponse: '2026-06-02T03:30:30Z', escalated: '2026-06-02T03:40:00Z', firstHumanReply: '2026-06-02T03:50:00Z', messages: ['2026-06-02T03:30:00Z', '2026-06-02T03:30:30Z', '2026-06-02T03:50:00Z'] });
    await place(server, { id: c4, created: '2026-06-02T14:00:00Z', firstResponse: '2026-06-02T14:05:00Z', firstHumanReply: '2026-06-02T14:05:00Z', messages: ['2026-06-02T14:00:00Z', '2026-06-02T14:05:00Z', '2026-06-02T14:06:00Z'] });
    await place(server, { id: c5, created: '2026-05-31T23:00:00Z', firstResponse: '2026-05-31T23:30:00Z', firstHumanReply: '2026-05-31T23:30:00Z', firstResolved: '2026-06-01T01:00:00Z', messages: ['2026-05-31T23:00:00Z', '2026-05-31T23:30:00Z'] });

    // Tickets: T1 created 06-02 02:30Z (NY 06-01) and resolved 06-02 15:00Z; T2 created 06-01 10:00Z, still open.
    const t1 = await createTicket(owner, { title: 'Refund' });
    const t2 = await createTicket(owner, { title: 'Invoice' });
    await server.db.knex('tickets').where('id', t1.id).update({ created_at: at('2026-06-02T02:30:00Z'), status: 'resolved', resolved_at: at('2026-06-02T15:00:00Z') });
    await server.db.knex('tickets').where('id', t2.id).update({ created_at: at('2026-06-01T10:00:00Z') });

    // Back-dated messages are older than the rollup's watermark window: recount the tenant's buckets.
    await server.services.analytics.rollup.recount(owner.orgId);
    return { owner, x, y, ids: { c1, c2, c3, c4, c5 } };
  })();
  world = { server: sharedServer().server, built };
  return built;
}

const get = async (who: { api: SignedUp['api']; accessToken: string }, path: string) => who.api.get(path, { token: who.accessToken });

describe('Analytics: summary and trends over a scripted tenant', () => {
  it('summarizes the period in UTC: started, resolved, open, escalated, AI-only, durations, messages, tickets', async () => {
    const { owner } = await scriptedWorld();
    const res = await get(owner, `/analytics/summary?${RANGE}&timezone=UTC`);
    const data = expectApiSuccess(res, 200);
    expect(data.range).to.deep.equal({ from: '2026-06-01T00:00:00.000Z', to: '2026-06-03T00:00:00.000Z', timezone: 'UTC' });
    expect(data.conversations).to.deep.equal({ started: 4, resolved: 3, open: 2, escalated: 2, aiResolved: 1 });
    // First responses 60, 420, 30, 300: median 180, p90 300 + 0.7 * 120.
    expect(data.firstResponse).to.deep.equal({ avg: 203, median: 180, p90: 384, count: 4 });
    // First human responses 120 (X, from the escalation), 600 (Y, from the escalation), 300 (X, from creation).
    expect(data.firstHumanResponse).to.deep.equal({ avg: 340, median: 300, p90: 540, count: 3 });
    // First resolutions in the period: C1 600, C2 3600, C5 7200.
    expect(data.resolution).to.deep.equal({ avg: 3800, median: 3600, p90: 6480, count: 3 });
    expect(data.messages).to.deep.equal({ visitor: 4, agent: 4, ai: 2, system: 0, total: 10 });
    expect(data.tickets).to.deep.equal({ created: 2, resolved: 1 });
    expect(Date.parse(data.generatedAt)).to.be.closeTo(Date.now(), 60_000);
  });

  it('counts the same period in America/New_York: the day boundary moves C5 out and days regroup', async () => {
    const { server } = sharedServer();
    const { owner } = await scriptedWorld();
    const data = expectApiSuccess(await get(owner, `/analytics/summary?${RANGE}&timezone=America/New_York`), 200);
    expect(data.range).to.deep.equal({ from: '2026-06-01T04:00:00.000Z', to: '2026-06-03T04:00:00.000Z', timezone: 'America/New_York' });
    expect(data.conversations).to.deep.equal({ started: 4, resolved: 2, open: 2, escalated: 2, aiResolved: 1 });
    expect(data.resolution).to.deep.equal({ avg: 2100, median: 2100, p90: 3300, count: 2 });

    const trendsUtc = expectApiSuccess(await get(owner, `/analytics/trends?${RANGE}&timezone=UTC`), 200);
    expect(trendsUtc.byDay).to.deep.equal([
      { date: '2026-06-01', started: 1, resolved: 2, openAtEnd: 0, messagesVisitor: 1, messagesAgent: 0, messagesAi: 1, ticketsCreated: 1, ticketsResolved: 0, medianFirstResponse: 60 },
      { date: '2026-06-02', started: 3, resolved: 1, openAtEnd: 2, messagesVisitor: 3, messagesAgent: 4, messagesAi: 1, ticketsCreated: 1, ticketsResolved: 1, medianFirstResponse: 300 },
    ]);
    const trendsNy = expectApiSuccess(await get(owner, `/analytics/trends?${RANGE}&timezone=America/New_York`), 200);
    expect(trendsNy.byDay).to.deep.equal([
      { date: '2026-06-01', started: 3, resolved: 2, openAtEnd: 1, messagesVisitor: 3, messagesAgent: 2, messagesAi: 2, ticketsCreated: 2, ticketsResolved: 0, medianFirstResponse: 60 },
      { date: '2026-06-02', started: 1, resolved: 0, openAtEnd: 2, messagesVisitor: 1, messagesAgent: 2, messagesAi: 0, ticketsCreated: 0, ticketsResolved: 1, medianFirstResponse: 300 },
    ]);

    // The organization's own zone is the default.
    await server.db.knex('organizations').where('id', owner.orgId).update({ settings: JSON.stringify({ timezone: 'America/New_York' }) });
    const byDefault = expectApiSuccess(await get(owner, `/analytics/trends?${RANGE}`), 200);
    expect(byDefault.range.timezone).to.equal('America/New_York');
    expect(byDefault.byDay).to.deep.equal(trendsNy.byDay);
  });

  it('filters by channel and by agent', async () => {
    const { owner, x } = await scriptedWorld();
    const byX = expectApiSuccess(await get(owner, `/analytics/summary?${RANGE}&timezone=UTC&agentId=${x.userId}`), 200);
    expect(byX.conversations).to.deep.equal({ started: 2, resolved: 1, open: 1, escalated: 1, aiResolved: 0 });
    const email = expectApiSuccess(await get(owner, `/analytics/summary?${RANGE}&timezone=UTC&channel=email`), 200);
    expect(email.conversations.started).to.equal(0);
    expect(email.messages.total).to.equal(0);
  });

  it('answers from a 60-second cache: the same query gives the same generatedAt', async () => {
    const { owner } = await scriptedWorld();
    const first = expectApiSuccess(await get(owner, `/analytics/summary?${RANGE}&timezone=Europe/Berlin`), 200);
    const second = expectApiSuccess(await get(owner, `/analytics/summary?${RANGE}&timezone=Europe/Berlin`), 200);
    expect(second.generatedAt).to.equal(first.generatedAt);
    expect(second).to.deep.equal(first);
  });
});

describe('Analytics: agents', () => {
  it('gives admins every member row, credits first human replies to their author, and refuses agents', async () => {
    const { owner, x, y } = await scriptedWorld();
    const res = await get(owner, `/analytics/agents?${RANGE}&timezone=UTC&sort=assigned`);
    const data = expectApiSuccess(res, 200);
    expect(res.body.pagination).to.deep.equal({ limit: 50, offset: 0, total: 3 });
    const row = (id: string) => data.agents.find((a: { userId: string }) => a.userId === id);
    expect(row(x.userId)).to.deep.equal({ userId: x.userId, name: 'Xena Agent', assigned: 2, resolved: 1, open: 1, firstHumanResponses: 2, medianFirstResponse: 210, medianResolution: 3600 });
    expect(row(y.userId)).to.deep.equal({ userId: y.userId, name: 'Yuri Agent', assigned: 1, resolved: 0, open: 1, firstHumanResponses: 1, medianFirstResponse: 600, medianResolution: null });
    expect(row(owner.userId)).to.include({ assigned: 0, firstHumanResponses: 0, medianFirstResponse: null });
    expect(data.agents[0].userId).to.equal(x.userId);

    expectApiError(await get(x, `/analytics/agents?${RANGE}`), 403, 'forbidden');
    const own = expectApiSuccess(await get(y, `/analytics/agent/stats?${RANGE}&timezone=UTC`), 200);
    expect(own).to.include({ userId: y.userId, assigned: 1, open: 1, firstHumanResponses: 1, medianFirstResponse: 600 });
    expect(own.generatedAt).to.be.a('string');
    // The older per-agent route still answers.
    expectApiSuccess(await get(x, '/agent/stats'), 200);
  });
});

describe('Analytics: owners, tenants and input', () => {
  it('totals only over organizations the caller owns; any other is 403', async () => {
    const { server, baseUrl } = sharedServer();
    const { owner } = await scriptedWorld();
    const second = expectApiSuccess(await owner.api.post('/organizations', { name: 'Second shop' }, { token: owner.accessToken }), 201);
    await server.db.knex('conversations').insert({ organization_id: second.id, status: 'open', created_at: at('2026-06-01T12:00:00Z'), first_response_at: at('2026-06-01T12:01:40Z') });
    const stranger = await signUp(server, baseUrl);

    const res = await get(owner, `/analytics/owner/summary?${RANGE}&organizationIds=${owner.orgId},${second.id}`);
    const data = expectApiSuccess(res, 200);
    expect(data.totals.conversations.started).to.equal(5);
    // 30, 60, 100, 300, 420 over both organizations.
    expect(data.totals.firstResponse).to.include({ median: 100, count: 5 });
    expect(data.organizations.map((o: { organizationId: string; conversations: { started: number } }) => [o.organizationId, o.conversations.started]))
      .to.have.deep.members([[owner.orgId, 4], [second.id, 1]]);
    const trends = expectApiSuccess(await get(owner, `/analytics/owner/trends?${RANGE}&organizationIds=${second.id},${owner.orgId}`), 200);
    expect(trends.totals.byDay.map((d: { started: number }) => d.started)).to.deep.equal([2, 3]);

    expectApiError(await get(owner, `/analytics/owner/summary?${RANGE}&organizationIds=${owner.orgId},${stranger.orgId}`), 403, 'forbidden');
    expectApiError(await get(stranger, `/analytics/owner/summary?organizationIds=${owner.orgId}`), 403, 'forbidden');
    // An agent of an organization is not its owner.
    const member = await addMember(server, stranger, 'admin');
    expectApiError(await get(member, `/analytics/owner/trends?organizationIds=${stranger.orgId}`), 403, 'forbidden');
    expectApiError(await get(owner, '/analytics/owner/summary?organizationIds=nope'), 400, 'validation_failed');
    expectApiError(await get(owner, '/analytics/owner/summary'), 400, 'validation_failed');
  });

  it("never counts another tenant's conversations", async () => {
    const { server, baseUrl } = sharedServer();
    const { owner } = await scriptedWorld();
    const other = await signUp(server, baseUrl);
    const { conversationId } = await startConversation(await newVisitor(other));
    await server.db.knex('conversations').where('id', conversationId).update({ created_at: at('2026-06-01T09:00:00Z') });
    const mine = expectApiSuccess(await get(owner, `/analytics/summary?${RANGE}&timezone=UTC`), 200);
    const theirs = expectApiSuccess(await get(other, `/analytics/summary?${RANGE}&timezone=UTC`), 200);
    expect(theirs.conversations.started).to.equal(1);
    expect(mine.conversations.started).to.equal(4);
    // Another tenant's agent id filters to nothing rather than reaching across.
    const cross = expectApiSuccess(await get(other, `/analytics/summary?${RANGE}&agentId=${owner.userId}`), 200);
    expect(cross.conversations.started).to.equal(0);
  });

  it('refuses bad periods and zones with 400', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const bad = [
      'from=2026-06-03&to=2026-06-01',
      'from=2025-01-01&to=2026-01-05',
      'from=yesterday',
      'to=2026-02-30',
      'from=2026-06-01T10:00:00',
      'timezone=Mars/Olympus',
      'agentId=42',
      'channel=',
      // Years before 1000 (0..99 would otherwise be read as 1900..1999).
      'from=0050-01-01&to=0050-12-31',
      'from=0050-01-01T00:00:00Z&to=0050-06-01T00:00:00Z',
    ];
    for (const q of bad) expectApiError(await get(owner, `/analytics/summary?${q}`), 400, 'validation_failed');
    expectApiError(await get(owner, '/analytics/trends?timezone=Nowhere/City'), 400, 'validation_failed');
    // 366 days is the most.
    expectApiSuccess(await get(owner, '/analytics/summary?from=2025-01-01&to=2026-01-01T00:00:00Z'), 200);
    const byDefault = expectApiSuccess(await get(owner, '/analytics/trends'), 200);
    expect(byDefault.byDay.length).to.be.within(30, 31);
    expect(Date.parse(byDefault.range.to) - Date.parse(byDefault.range.from)).to.equal(30 * 86_400_000);
  });
});
