// Observability: AI-call ingestion by the internal AI service (spec endpoint 4, rule 2), the per-organization
// summary, retention and the monthly usage count.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { Api, type ApiResponse } from './helpers/http.js';
import { startTestServer, TEST_AI_SECRET } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';

const PATH = '/observability/ai-calls';
const DAY = 86_400_000;

function ok(res: ApiResponse, status: number): any {
  expect(res.status, JSON.stringify(res.body)).to.equal(status);
  expect(res.body.success).to.equal(true);
  return res.body.data;
}

function event(orgId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { timestamp: new Date().toISOString(), provider: 'openai', modelId: 'gpt-4o', latencyMs: 120, success: true, inputTokens: 10, outputTokens: 5, estimatedCostUsd: 0.001, organizationId: orgId, ...extra };
}

const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

function ingest(api: Api, events: unknown[], secret: string | null = TEST_AI_SECRET, token?: string) {
  return api.post(PATH, { events }, { headers: secret === null ? {} : { 'x-ai-tool-secret': secret }, token });
}

async function storedFor(orgId: string): Promise<number> {
  const row = await sharedServer().server.db.knex('ai_call_events').where('organization_id', orgId).count('* as count').first();
  return Number(row?.count ?? 0);
}

describe('POST /observability/ai-calls (spec endpoint 4)', () => {
  let owner: SignedUp;
  let api: Api;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    api = new Api(baseUrl);
  });

  it('rule 2: without a valid x-ai-tool-secret nothing is accepted (401, never 500), and no JWT stands in for it', async () => {
    expectError(await ingest(api, [event(owner.orgId)], null), 401, 'unauthorized');
    expectError(await ingest(api, [event(owner.orgId)], ''), 401, 'unauthorized');
    expectError(await ingest(api, [event(owner.orgId)], 'x'), 401, 'unauthorized');
    expectError(await ingest(api, [event(owner.orgId)], `${TEST_AI_SECRET}-but-longer-than-the-real-one`), 401, 'unauthorized');
    expectError(await ingest(api, [event(owner.orgId)], TEST_AI_SECRET.slice(0, -1) + 'X'), 401, 'unauthorized');
    // The owner's valid access token, with or without a wrong secret.
    expectError(await ingest(api, [event(owner.orgId)], null, owner.accessToken), 401, 'unauthorized');
    expectError(await ingest(api, [event(owner.orgId)], 'wrong', owner.accessToken), 401, 'unauthorized');
    // The secret as a bearer token is not the header either.
    expectError(await ingest(api, [event(owner.orgId)], null, TEST_AI_SECRET), 401, 'unauthorized');
    // An unauthenticated caller learns 401 before anything about the body.
    expectError(await ingest(api, [], null), 401, 'unauthorized');
    expectError(await api.request('POST', PATH, { rawBody: '{"events":', headers: { 'content-type': 'application/json' } }), 401, 'unauthorized');
    expect(await storedFor(owner.orgId)).to.equal(0);
  });

  it('the batch must hold 1..500 events: empty and 501 are 400 and store nothing; 500 are stored', async () => {
    const org = await signUp(sharedServer().server, sharedServer().baseUrl);
    expectError(await ingest(api, []), 400, 'validation_failed');
    expectError(await api.post(PATH, {}, { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } }), 400, 'validation_failed');
    expectError(await api.post(PATH, { events: event(org.orgId) }, { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } }), 400, 'validation_failed');
    expectError(await api.post(PATH, { events: [event(org.orgId)], extra: 1 }, { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } }), 400, 'validation_failed');
    expectError(await ingest(api, Array.from({ length: 501 }, () => event(org.orgId))), 400, 'validation_failed');
    expect(await storedFor(org.orgId)).to.equal(0);

    const res = await ingest(api, Array.from({ length: 500 }, (_, i) => event(org.orgId, { latencyMs: i })));
    expect(ok(res, 201)).to.deep.equal({ inserted: 500, failed: 0, errors: [] });
    expect(await storedFor(org.orgId)).to.equal(500);
  });

  it('stores the valid events of a mixed batch and reports exactly the bad indexes', async () => {
    const { server } = sharedServer();
    const conversationId = randomUUID();
    const events: unknown[] = [
      event(owner.orgId, { modelId: 'good-0', conversationId, callType: 'embedding', totalTokens: 99, error: null }),
      (() => { const e = event(owner.orgId); delete e.provider; return e; })(), // 1: missing field
      event(owner.orgId, { latencyMs: '120' }), // 2: wrong type
      event(owner.orgId, { temperature: 0.2 }), // 3: unknown field
      event(owner.orgId, { modelId: 'good-4', success: false, error: 'rate limited', inputTokens: 7, outputTokens: undefined }),
      event(randomUUID()), // 5: organization that does not exist
      event('not-a-uuid'), // 6: malformed organizationId
      event(owner.orgId, { timestamp: 'yesterday' }), // 7: not a date-time
      event(owner.orgId, { success: 'yes' }), // 8: wrong type
      event(owner.orgId, { inputTokens: -1 }), // 9: negative count
      event(owner.orgId, { callType: 'chat' }), // 10: not an allowed call type
      event(owner.orgId, { modelId: 'good-11', latencyMs: 12.6 }),
    ];
    const before = await storedFor(owner.orgId);
    const data = ok(await ingest(api, events), 201);
    expect(data.inserted).to.equal(3);
    expect(data.failed).to.equal(9);
    expect(data.errors.map((e: any) => e.index)).to.deep.equal([1, 2, 3, 5, 6, 7, 8, 9, 10]);
    for (const e of data.errors) expect(e.message, JSON.stringify(e)).to.be.a('string').and.not.equal('');
    const byIndex = Object.fromEntries(data.errors.map((e: any) => [e.index, e.message]));
    expect(byIndex[1]).to.contain('provider');
    expect(byIndex[2]).to.contain('latencyMs');
    expect(byIndex[3]).to.contain('temperature');
    expect(byIndex[5]).to.contain('organizationId');
    expect(await storedFor(owner.orgId)).to.equal(before + 3);

    const rows = await server.db.knex('ai_call_events').where('organization_id', owner.orgId).whereIn('model_id', ['good-0', 'good-4', 'good-11']).orderBy('model_id');
    // The knex instance maps columns to camelCase.
    expect(rows.map((r: any) => r.modelId)).to.deep.equal(['good-0', 'good-11', 'good-4']);
    const [g0, g11, g4] = rows as any[];
    expect(g0).to.include({ conversationId, callType: 'embedding', totalTokens: 99, inputTokens: 10, outputTokens: 5, success: true, error: null });
    expect(g4).to.include({ callType: 'llm', inputTokens: 7, outputTokens: 0, totalTokens: 7, success: false, error: 'rate limited', conversationId: null });
    expect(g11.latencyMs).to.equal(13);
  });

  it('a batch of only invalid events is still 201 with inserted 0', async () => {
    const data = ok(await ingest(api, [event(randomUUID()), { nothing: true }]), 201);
    expect(data).to.deep.include({ inserted: 0, failed: 2 });
    expect(data.errors.map((e: any) => e.index)).to.deep.equal([0, 1]);
  });

  it('token counts the columns cannot hold are reported for that event instead of failing the whole batch', async () => {
    const org = await signUp(sharedServer().server, sharedServer().baseUrl);
    const data = ok(await ingest(api, [event(org.orgId), event(org.orgId, { inputTokens: 1_500_000_000, outputTokens: 1_500_000_000 }), event(org.orgId, { totalTokens: 3_000_000_000 })]), 201);
    expect(data.inserted).to.equal(1);
    expect(data.errors.map((e: any) => e.index)).to.deep.equal([1, 2]);
    expect(await storedFor(org.orgId)).to.equal(1);
  });

  it('503 service_unavailable when the server has no AI_TOOL_SECRET (fail closed), whatever the header', async () => {
    const bare = await startTestServer({ AI_TOOL_SECRET: '' });
    try {
      const bareApi = new Api(bare.baseUrl);
      // With DATABASE_URL this server shares the database with the others: count only this test's organization.
      const owner = await signUp(bare.server, bare.baseUrl);
      expectError(await ingest(bareApi, [event(owner.orgId)]), 503, 'service_unavailable');
      expectError(await ingest(bareApi, [event(owner.orgId)], null), 503, 'service_unavailable');
      expectError(await ingest(bareApi, [event(owner.orgId)], ''), 503, 'service_unavailable');
      const count = await bare.server.db.knex('ai_call_events').where('organization_id', owner.orgId).count('* as count').first();
      expect(Number(count?.count)).to.equal(0);
    } finally {
      await bare.stop();
    }
  });
});

describe('GET /observability/ai-calls/summary', () => {
  let owner: SignedUp;
  let agent: Member;
  let other: SignedUp;
  let api: Api;
  const stamps = { e1: ago(3_600_000), e2: ago(DAY + 60_000), e3: ago(2 * DAY), e5: ago(3 * 3_600_000) };

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    agent = await addMember(server, owner, 'agent');
    other = await signUp(server, baseUrl);
    api = new Api(baseUrl);
    const events = [
      event(owner.orgId, { timestamp: stamps.e1, provider: 'openai', modelId: 'gpt-4o', latencyMs: 100, success: true, inputTokens: 10, outputTokens: 20, estimatedCostUsd: 0.01 }),
      event(owner.orgId, { timestamp: stamps.e2, provider: 'openai', modelId: 'gpt-4o', latencyMs: 300, success: false, inputTokens: 10, outputTokens: 10, totalTokens: 50, estimatedCostUsd: 0.02, error: 'timeout' }),
      event(owner.orgId, { timestamp: stamps.e3, provider: 'anthropic', modelId: 'claude', latencyMs: 200, success: true, inputTokens: 5, outputTokens: 5, estimatedCostUsd: 0.005 }),
      event(owner.orgId, { timestamp: stamps.e5, provider: 'openai', modelId: 'gpt-4o-mini', latencyMs: 50, success: true, inputTokens: 1, outputTokens: 1, estimatedCostUsd: 0 }),
      // Outside the default 30 days.
      event(owner.orgId, { timestamp: ago(40 * DAY), provider: 'mistral', modelId: 'large', latencyMs: 1000, success: false, inputTokens: 100, outputTokens: 100, estimatedCostUsd: 1 }),
      // Another organization's calls.
      event(other.orgId, { provider: 'openai', modelId: 'gpt-4o', latencyMs: 9999, success: true, inputTokens: 1000, outputTokens: 1000, estimatedCostUsd: 5 }),
    ];
    ok(await ingest(api, events), 201);
  });

  it('needs an agent of the organization', async () => {
    expectError(await api.get(`${PATH}/summary`), 401, 'unauthorized');
    expectError(await api.get(`${PATH}/summary`, { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } }), 401, 'unauthorized');
    expectError(await agent.api.get(`${PATH}/summary?days=0`, { token: agent.accessToken }), 400, 'validation_failed');
    expectError(await agent.api.get(`${PATH}/summary?days=366`, { token: agent.accessToken }), 400, 'validation_failed');
    expectError(await agent.api.get(`${PATH}/summary?days=abc`, { token: agent.accessToken }), 400, 'validation_failed');
  });

  it('reflects exactly what was ingested in the last 30 days for the caller\'s organization only', async () => {
    const s = ok(await agent.api.get(`${PATH}/summary`, { token: agent.accessToken }), 200);
    expect(s).to.deep.include({ days: 30, totalCalls: 4, successRate: 0.75, avgLatencyMs: 162.5, p95LatencyMs: 285, totalTokens: 92, totalCostUsd: 0.035 });
    expect(s.byProvider).to.deep.equal([
      { provider: 'openai', calls: 3, successRate: 0.67, avgLatencyMs: 150, totalTokens: 82, totalCostUsd: 0.03 },
      { provider: 'anthropic', calls: 1, successRate: 1, avgLatencyMs: 200, totalTokens: 10, totalCostUsd: 0.005 },
    ]);
    expect(s.byModel[0]).to.deep.equal({ modelId: 'gpt-4o', provider: 'openai', calls: 2, successRate: 0.5, avgLatencyMs: 200, totalTokens: 80, totalCostUsd: 0.03 });
    expect([...s.byModel.slice(1)].sort((a: any, b: any) => a.modelId.localeCompare(b.modelId))).to.deep.equal([
      { modelId: 'claude', provider: 'anthropic', calls: 1, successRate: 1, avgLatencyMs: 200, totalTokens: 10, totalCostUsd: 0.005 },
      { modelId: 'gpt-4o-mini', provider: 'openai', calls: 1, successRate: 1, avgLatencyMs: 50, totalTokens: 2, totalCostUsd: 0 },
    ]);

    // byDay: one entry per UTC day, ascending, adding up to the totals.
    const perDay = new Map<string, number>();
    for (const t of Object.values(stamps)) perDay.set(t.slice(0, 10), (perDay.get(t.slice(0, 10)) ?? 0) + 1);
    expect(s.byDay.map((d: any) => [d.day, d.calls])).to.deep.equal([...perDay.entries()].sort(([a], [b]) => a.localeCompare(b)));
    expect(s.byDay.reduce((n: number, d: any) => n + d.totalTokens, 0)).to.equal(92);
    const e3Day = s.byDay.find((d: any) => d.day === stamps.e3.slice(0, 10));
    expect(e3Day).to.include({ successRate: 1, avgLatencyMs: 200, totalTokens: 10, totalCostUsd: 0.005 });
  });

  it('`days` widens the window to older events', async () => {
    const s = ok(await owner.api.get(`${PATH}/summary?days=60`, { token: owner.accessToken }), 200);
    expect(s).to.deep.include({ days: 60, totalCalls: 5, successRate: 0.6, avgLatencyMs: 330, totalTokens: 292, totalCostUsd: 1.035 });
    expect(s.byProvider.map((p: any) => p.provider).sort()).to.deep.equal(['anthropic', 'mistral', 'openai']);
    const narrow = ok(await owner.api.get(`${PATH}/summary?days=1`, { token: owner.accessToken }), 200);
    expect(narrow).to.deep.include({ totalCalls: 2, totalTokens: 32 });
    expect(narrow.byModel.map((m: any) => m.modelId).sort()).to.deep.equal(['gpt-4o', 'gpt-4o-mini']);
  });

  it('another organization sees only its own calls; an organization without calls sees zeros', async () => {
    const s = ok(await other.api.get(`${PATH}/summary`, { token: other.accessToken }), 200);
    expect(s).to.deep.include({ totalCalls: 1, successRate: 1, avgLatencyMs: 9999, p95LatencyMs: 9999, totalTokens: 2000, totalCostUsd: 5 });
    expect(s.byModel).to.have.length(1);
    const empty = await signUp(sharedServer().server, sharedServer().baseUrl);
    const zero = ok(await empty.api.get(`${PATH}/summary`, { token: empty.accessToken }), 200);
    expect(zero).to.deep.equal({ days: 30, totalCalls: 0, successRate: 0, avgLatencyMs: 0, p95LatencyMs: 0, totalTokens: 0, totalCostUsd: 0, byModel: [], byProvider: [], byDay: [] });
  });
});

describe('AI call retention and usage', () => {
  it('prune(90) removes events older than 90 days and keeps recent ones', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const api = new Api(baseUrl);
    ok(await ingest(api, [event(owner.orgId, { timestamp: ago(100 * DAY), modelId: 'old' }), event(owner.orgId, { timestamp: ago(89 * DAY), modelId: 'kept-89' }), event(owner.orgId, { modelId: 'recent' })]), 201);
    expect(await storedFor(owner.orgId)).to.equal(3);
    const removed = await server.services.observability.prune(90);
    expect(removed).to.be.at.least(1);
    const left = await server.db.knex('ai_call_events').where('organization_id', owner.orgId).orderBy('model_id').pluck('model_id');
    expect(left).to.deep.equal(['kept-89', 'recent']);
  });

  it('GET /organizations/billing/usage counts this month\'s AI calls of the organization', async () => {
    const { server, baseUrl } = sharedServer();
    const owner = await signUp(server, baseUrl);
    const agent = await addMember(server, owner, 'agent');
    const other = await signUp(server, baseUrl);
    const api = new Api(baseUrl);
    const before = ok(await agent.api.get('/organizations/billing/usage', { token: agent.accessToken }), 200);
    expect(before.usage.aiCalls).to.equal(0);
    ok(await ingest(api, [event(owner.orgId), event(owner.orgId), event(owner.orgId, { success: false }), event(owner.orgId, { timestamp: ago(40 * DAY) }), event(other.orgId)]), 201);
    const usage = ok(await agent.api.get('/organizations/billing/usage', { token: agent.accessToken }), 200);
    expect(usage.usage.aiCalls).to.equal(3);
    expect(new Date(usage.periodStart).getTime()).to.be.at.most(Date.now());
    expect(new Date(usage.periodEnd).getTime()).to.be.above(Date.now());
    expect(ok(await other.api.get('/organizations/billing/usage', { token: other.accessToken }), 200).usage.aiCalls).to.equal(1);
  });
});
