// The exact analytics statements under their filters, over a scripted tenant of two agents: `agentId` filters
// conversations and tickets by their assignee and leaves message counts alone; `channel` filters conversations and
// their messages and leaves tickets alone; conversations started before the period and open at its start carry into
// `open` and each day's `openAtEnd`. The agents' table read exactly: every sort, a filter, a page past the last.
import { expect } from 'chai';
import { expectApiSuccess } from './helpers/auth.js';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';

const at = (iso: string) => new Date(iso);
const plus = (iso: string, seconds: number) => new Date(Date.parse(iso) + seconds * 1000);
const PERIOD = 'from=2026-07-01&to=2026-07-02&timezone=UTC';

describe('Analytics read exactly: filters, carried-over conversations and the agents\' table', function () {
  this.timeout(60_000);
  let owner: SignedUp;
  let ana: Member;
  let ben: Member;

  const get = async (path: string) => {
    const res = await owner.api.get(path, { token: owner.accessToken });
    const data = expectApiSuccess(res, 200);
    expect(data.percentiles, path).to.equal('exact');
    return { data, total: (res.body as { pagination?: { total: number } }).pagination?.total };
  };

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl, { name: 'Aaron Owner' });
    ana = await addMember(server, owner, 'agent', 'Ana');
    ben = await addMember(server, owner, 'agent', 'Ben');
    const org = owner.orgId;
    const conversation = (c: { created: string; channel: string; assigned: string | null; firstResponse?: number; escalated?: number; human?: [number, string]; resolved?: string; closed?: string }) => ({
      organization_id: org, channel: c.channel, assigned_to: c.assigned, created_at: at(c.created), updated_at: at(c.created),
      status: c.resolved ? 'resolved' : c.closed ? 'closed' : 'open',
      first_response_at: c.firstResponse === undefined ? null : plus(c.created, c.firstResponse),
      escalated_at: c.escalated === undefined ? null : plus(c.created, c.escalated),
      first_human_reply_at: c.human ? plus(c.created, c.human[0]) : null, first_human_reply_by: c.human ? c.human[1] : null,
      first_resolved_at: c.resolved ? at(c.resolved) : null, resolved_at: c.resolved ? at(c.resolved) : null, first_resolved_by_ai: false,
      closed_at: c.closed ? at(c.closed) : null,
    });
    const convs = [
      // Before the period: P open throughout (Ana, widget), Q resolved on its second day (Ben, email).
      conversation({ created: '2026-06-30T10:00:00Z', channel: 'widget', assigned: ana.userId }),
      conversation({ created: '2026-06-30T11:00:00Z', channel: 'email', assigned: ben.userId, resolved: '2026-07-02T09:00:00Z' }),
      // C1 (Ana, widget) resolved after an hour; C2 (Ben, email) escalated, open; C3 (Ana, email) closed; C4 nobody's.
      conversation({ created: '2026-07-01T08:00:00Z', channel: 'widget', assigned: ana.userId, firstResponse: 60, human: [200, ana.userId], resolved: '2026-07-01T09:00:00Z' }),
      conversation({ created: '2026-07-01T10:00:00Z', channel: 'email', assigned: ben.userId, firstResponse: 120, escalated: 50, human: [100, ben.userId] }),
      conversation({ created: '2026-07-02T12:00:00Z', channel: 'email', assigned: ana.userId, firstResponse: 30, human: [400, ana.userId], closed: '2026-07-02T13:00:00Z' }),
      conversation({ created: '2026-07-02T14:00:00Z', channel: 'widget', assigned: null, firstResponse: 300 }),
    ];
    const ids = (await server.db.knex('conversations').insert(convs).returning('id')).map((r: { id: string }) => r.id);
    // A visitor's message at creation and an answer a minute later (the agent's when assigned, else the AI's); C2's
    // escalation left a system message.
    await server.db.knex('messages').insert([
      ...convs.flatMap((c, i) => [
        { organization_id: org, conversation_id: ids[i], seq: 1, sender_type: 'visitor', content: 'Hello', created_at: c.created_at },
        { organization_id: org, conversation_id: ids[i], seq: 2, sender_type: c.assigned_to ? 'agent' : 'ai', sender_id: c.assigned_to, content: 'Hi', created_at: new Date(c.created_at.getTime() + 60_000) },
      ]),
      { organization_id: org, conversation_id: ids[3], seq: 3, sender_type: 'system', content: 'Handed to a human', created_at: plus('2026-07-01T10:00:00Z', 50) },
    ]);
    // T1 Ana's, created on the first day, resolved on the second; T2 Ben's, created on the second; T3 nobody's,
    // created before the period, resolved on its first day.
    await server.db.knex('tickets').insert([
      { number: 1, assigned_to: ana.userId, status: 'resolved', created_at: at('2026-07-01T09:00:00Z'), resolved_at: at('2026-07-02T10:00:00Z') },
      { number: 2, assigned_to: ben.userId, status: 'open', created_at: at('2026-07-02T11:00:00Z'), resolved_at: null },
      { number: 3, assigned_to: null, status: 'resolved', created_at: at('2026-06-30T09:00:00Z'), resolved_at: at('2026-07-01T12:00:00Z') },
    ].map((t) => ({ ...t, organization_id: org, title: `Ticket ${t.number}`, source: 'agent' })));
    // Back-dated messages, behind the rollup's watermark.
    await server.services.analytics.rollup.recount(org);
  });

  it('summary: agentId filters conversations and tickets, not messages; channel filters conversations and messages, not tickets', async () => {
    const all = (await get(`/analytics/summary?${PERIOD}`)).data;
    expect(all.conversations).to.deep.equal({ started: 4, resolved: 2, open: 3, escalated: 1, aiResolved: 0 });
    // 30, 60, 120, 300.
    expect(all.firstResponse).to.deep.equal({ avg: 128, median: 90, p90: 246, count: 4 });
    // 200, 50 (from the escalation), 400.
    expect(all.firstHumanResponse).to.deep.equal({ avg: 217, median: 200, p90: 360, count: 3 });
    // C1 3600, Q 46 hours.
    expect(all.resolution).to.deep.equal({ avg: 84_600, median: 84_600, p90: 149_400, count: 2 });
    expect(all.messages).to.deep.equal({ visitor: 4, agent: 3, ai: 1, system: 1, total: 9 });
    expect(all.tickets).to.deep.equal({ created: 2, resolved: 2 });

    const anas = (await get(`/analytics/summary?${PERIOD}&agentId=${ana.userId}`)).data;
    expect(anas.conversations).to.deep.equal({ started: 2, resolved: 1, open: 1, escalated: 0, aiResolved: 0 });
    expect(anas.firstResponse).to.deep.equal({ avg: 45, median: 45, p90: 57, count: 2 });
    expect(anas.resolution).to.deep.equal({ avg: 3600, median: 3600, p90: 3600, count: 1 });
    expect(anas.messages).to.deep.equal(all.messages);
    expect(anas.tickets).to.deep.equal({ created: 1, resolved: 1 });

    const email = (await get(`/analytics/summary?${PERIOD}&channel=email`)).data;
    expect(email.conversations).to.deep.equal({ started: 2, resolved: 1, open: 1, escalated: 1, aiResolved: 0 });
    expect(email.resolution).to.deep.equal({ avg: 165_600, median: 165_600, p90: 165_600, count: 1 });
    expect(email.messages).to.deep.equal({ visitor: 2, agent: 2, ai: 0, system: 1, total: 5 });
    expect(email.tickets).to.deep.equal(all.tickets);

    // Both filters at once: Ana's email conversation; her tickets; the email messages.
    const both = (await get(`/analytics/summary?${PERIOD}&channel=email&agentId=${ana.userId}`)).data;
    expect(both.conversations).to.deep.equal({ started: 1, resolved: 0, open: 0, escalated: 0, aiResolved: 0 });
    expect(both.messages).to.deep.equal(email.messages);
    expect(both.tickets).to.deep.equal(anas.tickets);
  });

  it('trends: the same filters day by day, open conversations carried from before the period', async () => {
    const day1 = { date: '2026-07-01', messagesVisitor: 2, messagesAgent: 2, messagesAi: 0 };
    const day2 = { date: '2026-07-02', messagesVisitor: 2, messagesAgent: 1, messagesAi: 1 };
    // Open at the start: P and Q. Day 1: C1, C2 start, C1 is done. Day 2: C3, C4 start, Q and C3 are done.
    expect((await get(`/analytics/trends?${PERIOD}`)).data.byDay).to.deep.equal([
      { ...day1, started: 2, resolved: 1, openAtEnd: 3, ticketsCreated: 1, ticketsResolved: 1, medianFirstResponse: 90 },
      { ...day2, started: 2, resolved: 1, openAtEnd: 3, ticketsCreated: 1, ticketsResolved: 1, medianFirstResponse: 165 },
    ]);
    // Ana's: P carried; C1 starts and is done; C3 starts and is done. Her ticket T1 created, then resolved.
    expect((await get(`/analytics/trends?${PERIOD}&agentId=${ana.userId}`)).data.byDay).to.deep.equal([
      { ...day1, started: 1, resolved: 1, openAtEnd: 1, ticketsCreated: 1, ticketsResolved: 0, medianFirstResponse: 60 },
      { ...day2, started: 1, resolved: 0, openAtEnd: 1, ticketsCreated: 0, ticketsResolved: 1, medianFirstResponse: 30 },
    ]);
    // Email: Q carried; C2 starts; C3 starts, Q and C3 are done. Every ticket.
    expect((await get(`/analytics/trends?${PERIOD}&channel=email`)).data.byDay).to.deep.equal([
      { date: '2026-07-01', messagesVisitor: 1, messagesAgent: 1, messagesAi: 0, started: 1, resolved: 0, openAtEnd: 2, ticketsCreated: 1, ticketsResolved: 1, medianFirstResponse: 120 },
      { date: '2026-07-02', messagesVisitor: 1, messagesAgent: 1, messagesAi: 0, started: 1, resolved: 1, openAtEnd: 1, ticketsCreated: 1, ticketsResolved: 1, medianFirstResponse: 30 },
    ]);
  });

  it("agents: every sort of the exact table, a channel, an agent's row and a page past the last", async () => {
    const rows = (await get(`/analytics/agents?${PERIOD}`)).data.agents;
    expect(rows).to.deep.equal([
      { userId: ana.userId, name: 'Ana', assigned: 2, resolved: 1, open: 0, firstHumanResponses: 2, medianFirstResponse: 300, medianResolution: 3600 },
      { userId: ben.userId, name: 'Ben', assigned: 1, resolved: 0, open: 1, firstHumanResponses: 1, medianFirstResponse: 50, medianResolution: null },
      { userId: owner.userId, name: 'Aaron Owner', assigned: 0, resolved: 0, open: 0, firstHumanResponses: 0, medianFirstResponse: null, medianResolution: null },
    ]);
    // Ties go by user id.
    const [first, second] = [ana.userId, owner.userId].sort();
    const order = async (sort: string) => ((await get(`/analytics/agents?${PERIOD}&sort=${sort}`)).data.agents as { userId: string }[]).map((a) => a.userId);
    expect(await order('resolved')).to.deep.equal([ana.userId, ...[ben.userId, owner.userId].sort()]);
    expect(await order('open')).to.deep.equal([ben.userId, first, second]);
    expect(await order('medianFirstResponse')).to.deep.equal([ben.userId, ana.userId, owner.userId]);
    expect(await order('medianResolution')).to.deep.equal([ana.userId, ...[ben.userId, owner.userId].sort()]);
    expect(await order('name')).to.deep.equal([owner.userId, ana.userId, ben.userId]);

    const email = (await get(`/analytics/agents?${PERIOD}&channel=email&sort=name`)).data.agents;
    expect(email.map((a: { userId: string; assigned: number; open: number; firstHumanResponses: number; medianFirstResponse: number | null }) => [a.userId, a.assigned, a.open, a.firstHumanResponses, a.medianFirstResponse])).to.deep.equal([
      [owner.userId, 0, 0, 0, null], [ana.userId, 1, 0, 1, 400], [ben.userId, 1, 1, 1, 50],
    ]);

    const page = await get(`/analytics/agents?${PERIOD}&limit=1&offset=1`);
    expect([page.data.agents.map((a: { userId: string }) => a.userId), page.total]).to.deep.equal([[ben.userId], 3]);
    const past = await get(`/analytics/agents?${PERIOD}&limit=2&offset=5`);
    expect([past.data.agents, past.total]).to.deep.equal([[], 3]);
    const pastOne = await get(`/analytics/agents?${PERIOD}&agentId=${ben.userId}&offset=1`);
    expect([pastOne.data.agents, pastOne.total]).to.deep.equal([[], 1]);
  });
});
