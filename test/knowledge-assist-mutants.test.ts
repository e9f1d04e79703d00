// Agent assist and unanswered questions, rule by rule: which visitor text the suggestions answer, what is sent to the
// AI service and which of its answers make a suggestion (anything else is null and logged), and how unanswered
// questions are told apart, announced, listed, counted, answered and dismissed.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { captureLogs } from './helpers/logs.js';
import { newVisitor, startConversation, type Visitor } from './helpers/live.js';
import { startTestServer, TEST_AI_SECRET, type TestServer } from './helpers/server.js';
import { collect, connectOk, nextEvent, type ClientSocket } from './helpers/sockets.js';
import { AssistService } from '../server/services/knowledge/index.js';
import { normalizeQuestion } from '../server/services/knowledge/unanswered.js';

const ai = { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } };

describe('agent assist: the visitor text it answers', function () {
  this.timeout(60_000);
  let org: SignedUp;

  before(async () => {
    const { server, baseUrl } = sharedServer();
    org = await signUp(server, baseUrl);
  });

  const say = async (visitor: Visitor, conversationId: string, content: string) => {
    const res = await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content }, { token: visitor.token });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
  };
  const assist = async (conversationId: string) => {
    const res = await org.api.post(`/conversations/${conversationId}/assist`, {}, { token: org.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body.data as { query: string; passages: unknown[]; templates: unknown[]; suggestion: unknown };
  };

  it('answers the visitor\'s last three messages, oldest first, one a line, without the agents\' replies and notes', async () => {
    const visitor = await newVisitor(org);
    const { conversationId } = await startConversation(visitor, 'first question');
    await say(visitor, conversationId, 'second question');
    expect((await org.api.post(`/conversations/${conversationId}/messages`, { content: 'agent reply' }, { token: org.accessToken })).status).to.equal(201);
    expect((await org.api.post(`/conversations/${conversationId}/messages`, { content: 'internal note', private: true }, { token: org.accessToken })).status).to.equal(201);
    await say(visitor, conversationId, 'third question');
    await say(visitor, conversationId, 'fourth question');
    expect((await assist(conversationId)).query).to.equal('second question\nthird question\nfourth question');
  });

  it('cuts the visitor text at 4000 characters', async () => {
    const visitor = await newVisitor(org);
    const long = 'word '.repeat(1000).trim();
    const { conversationId } = await startConversation(visitor, long);
    await say(visitor, conversationId, long);
    const answer = await assist(conversationId);
    expect(answer.query).to.equal(`${long}\n${long}`.slice(0, 4000));
    expect(answer.query).to.have.length(4000);
  });

  it('answers a conversation whose visitor wrote only blanks with nothing to search', async () => {
    const visitor = await newVisitor(org);
    const { conversationId } = await startConversation(visitor, '   ');
    const answer = await assist(conversationId);
    expect(answer).to.deep.equal({ conversationId, query: '   ', passages: [], templates: [], suggestion: null });
  });

  it('says which conversation it did not find', async () => {
    const res = await org.api.post('/conversations/00000000-0000-4000-8000-000000000000/assist', {}, { token: org.accessToken });
    expect([res.status, res.body.error?.code, res.body.message]).to.deep.equal([404, 'not_found', 'Conversation not found']);
  });
});

describe('agent assist: the AI service\'s suggestion', function () {
  this.timeout(120_000);
  let site: Server;
  let siteUrl: string;
  let t!: TestServer;
  let owner: SignedUp;
  let conversationId: string;
  const logs = captureLogs('info');
  /** What the AI service answers next: status and raw body. */
  let reply: { status: number; body: string } = { status: 200, body: '{}' };
  let calls: { headers: Record<string, string | string[] | undefined>; body: Record<string, unknown> }[] = [];

  before(async () => {
    site = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        calls.push({ headers: req.headers, body: JSON.parse(raw) });
        res.writeHead(reply.status, { 'content-type': 'application/json' }).end(reply.body);
      });
    });
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}/assist`;
    t = await startTestServer({ AI_ASSIST_URL: siteUrl }, { logger: logs.logger });
    owner = await signUp(t.server, t.baseUrl);
    expect((await owner.api.post('/templates', { title: 'Refund timing', content: 'Your refund reaches your card within five working days.', shortcut: `refund-${Date.now()}` }, { token: owner.accessToken })).status).to.equal(201);
    ({ conversationId } = await startConversation(await newVisitor(owner), 'When will my refund arrive?'));
  });
  after(async () => {
    await t?.stop();
    site?.close();
  });

  const failures = () => logs.matching(40, 'the AI assist request failed');
  /** The suggestion the route answers when the AI service answers `body` (JSON-encoded unless a string) with `status`. */
  const suggestionFor = async (body: unknown, status = 200) => {
    reply = { status, body: typeof body === 'string' ? body : JSON.stringify(body) };
    calls = [];
    const res = await owner.api.post(`/conversations/${conversationId}/assist`, {}, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(calls).to.have.length(1);
    return res.body.data.suggestion as unknown;
  };

  it('sends the organization, the conversation, the agent, the visitor text and the local suggestions as JSON', async () => {
    await suggestionFor({ suggestion: 'x' });
    const [call] = calls;
    expect(call!.headers['content-type']).to.equal('application/json');
    expect(call!.headers['x-ai-tool-secret']).to.equal(TEST_AI_SECRET);
    expect(call!.body).to.include({ organizationId: owner.orgId, conversationId, requestedBy: owner.userId, query: 'When will my refund arrive?' });
    expect((call!.body.templates as { title: string }[]).map((x) => x.title)).to.deep.equal(['Refund timing']);
    expect(call!.body.passages).to.deep.equal([]);
  });

  it('takes a suggestion as text, as an object, bare or under `data`', async () => {
    expect(await suggestionFor({ suggestion: 'Offer a refund.' })).to.deep.equal({ text: 'Offer a refund.' });
    expect(await suggestionFor({ data: { suggestion: 'Offer a refund.' } })).to.deep.equal({ text: 'Offer a refund.' });
    expect(await suggestionFor({ data: 'Offer a refund.' })).to.deep.equal({ text: 'Offer a refund.' });
    expect(await suggestionFor({ suggestion: { text: 'Offer a refund.', confidence: 0.9 } })).to.deep.equal({ text: 'Offer a refund.', confidence: 0.9 });
    // An object without `suggestion` is the suggestion itself.
    expect(await suggestionFor({ text: 'Offer a refund.', sources: ['a'] })).to.deep.equal({ text: 'Offer a refund.', sources: ['a'] });
    expect(await suggestionFor({ data: { text: 'Offer a refund.' } })).to.deep.equal({ text: 'Offer a refund.' });
    expect(failures()).to.deep.equal([]);
  });

  it('answers null for what is not a suggestion: a bare string or number, null, a list, a number', async () => {
    expect(await suggestionFor('"Offer a refund."')).to.equal(null);
    expect(await suggestionFor('42')).to.equal(null);
    expect(await suggestionFor('null')).to.equal(null);
    expect(await suggestionFor({ suggestion: ['a', 'b'] })).to.equal(null);
    expect(await suggestionFor({ suggestion: 42 })).to.equal(null);
    expect(await suggestionFor({ suggestion: null })).to.equal(null);
    expect(await suggestionFor({ data: null })).to.equal(null);
    expect(await suggestionFor({ data: { suggestion: null } })).to.equal(null);
    // Nonsense is not a failure of the service: nothing is logged.
    expect(failures()).to.deep.equal([]);
  });

  it('answers null, and logs why, when the service fails, answers more than 20,000 characters or not JSON', async () => {
    const logged = () => failures().map((l) => [(l.err as { message: string }).message, l.organizationId, l.conversationId]);
    logs.lines.length = 0;
    expect(await suggestionFor({ suggestion: 'Offer a refund.' }, 503)).to.equal(null);
    expect(logged()).to.deep.equal([['the AI service answered 503', owner.orgId, conversationId]]);

    logs.lines.length = 0;
    const padded = (n: number) => {
      const body = JSON.stringify({ suggestion: 'Offer a refund.', pad: '' });
      return body.replace('"pad":""', `"pad":"${'x'.repeat(n - body.length)}"`);
    };
    expect(padded(20_000)).to.have.length(20_000);
    expect(await suggestionFor(padded(20_000))).to.deep.equal({ text: 'Offer a refund.' });
    expect(logged()).to.deep.equal([]);
    expect(await suggestionFor(padded(20_001))).to.equal(null);
    expect(logged()).to.deep.equal([['the AI service answered too much', owner.orgId, conversationId]]);

    logs.lines.length = 0;
    expect(await suggestionFor('not json')).to.equal(null);
    expect(logged()).to.have.length(1);
  });

  it('asks nothing when no AI service is configured, and sends an empty secret when none is set', async () => {
    const deps = { models: t.server.db.models, knex: t.server.db.knex, statement: t.server.db.statement, logger: logs.logger };
    const local = { conversationId, query: 'refund', passages: [], templates: [] };
    logs.lines.length = 0;
    calls = [];
    expect(await new AssistService({ ...deps, aiAssistUrl: null, aiToolSecret: TEST_AI_SECRET }).suggestion(owner.orgId, local, owner.userId)).to.equal(null);
    expect([calls.length, failures().length]).to.deep.equal([0, 0]);

    reply = { status: 200, body: JSON.stringify({ suggestion: 'Offer a refund.' }) };
    const unsigned = new AssistService({ ...deps, aiAssistUrl: siteUrl, aiToolSecret: null });
    expect(await unsigned.suggestion(owner.orgId, local, owner.userId)).to.deep.equal({ text: 'Offer a refund.' });
    expect(calls.map((c) => c.headers['x-ai-tool-secret'])).to.deep.equal(['']);
  });
});

describe('unanswered questions, rule by rule', function () {
  this.timeout(60_000);
  let owner: SignedUp;
  let socket: ClientSocket | undefined;
  const tok = () => ({ token: owner.accessToken });
  const conversation = async () => (await startConversation(await newVisitor(owner))).conversationId;
  const capture = async (conversationId: string, question: string) => {
    const res = await owner.api.post('/knowledge/ai/unanswered-questions', { organizationId: owner.orgId, conversationId, question }, ai);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.data as { saved: boolean; id: string };
  };
  const list = async (query: string) => {
    const res = await owner.api.get(`/knowledge/unanswered?${query}`, tok());
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body as { data: { id: string; question: string; occurrences: number; status: string; answer: string | null; sourceId: string | null }[]; pagination: { total: number } };
  };

  beforeEach(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });
  afterEach(() => {
    socket?.close();
    socket = undefined;
  });

  it('tells questions apart by their words only: case, punctuation, spacing and what follows the 500th character do not count', () => {
    expect(normalizeQuestion('  Do you -- ship, to MARS?!  ')).to.equal('do you ship to mars');
    expect(normalizeQuestion(`${'a'.repeat(500)} more`)).to.equal('a'.repeat(500));
  });

  it('refuses a question with no words, and a conversation it does not know', async () => {
    const c = await conversation();
    const empty = await owner.api.post('/knowledge/ai/unanswered-questions', { organizationId: owner.orgId, conversationId: c, question: '?! …' }, ai);
    expect([empty.status, empty.body.error.code, empty.body.message, empty.body.error.details]).to.deep.equal([400, 'validation_failed', 'The question has no words', [{ field: 'question', message: 'is empty' }]]);
    const unknown = await owner.api.post('/knowledge/ai/unanswered-questions', { organizationId: owner.orgId, conversationId: '00000000-0000-4000-8000-000000000000', question: 'Where?' }, ai);
    expect([unknown.status, unknown.body.message]).to.deep.equal([404, 'Conversation not found']);
    expect((await list('')).data).to.deep.equal([]);
  });

  it('counts a long question once, whatever follows its first 500 characters', async () => {
    const c = await conversation();
    const first = await capture(c, `${'why '.repeat(125)}is the sky blue`);
    const again = await capture(c, `${'why '.repeat(125)}is the sea green`);
    expect(again).to.deep.equal({ saved: false, id: first.id });
  });

  it('announces a question to the agents when a conversation first asks it, not when it asks again', async () => {
    const { baseUrl } = sharedServer();
    socket = await connectOk(baseUrl, owner.orgId, owner.accessToken);
    const announced = collect(socket, 'unanswered_question_created');
    const [c1, c2] = [await conversation(), await conversation()];
    const first = await capture(c1, '  Do you ship to Mars?  ');
    await capture(c1, 'do you ship to mars');
    // Events reach a socket in order: once the second conversation's is in, the repeat's would have been too.
    const second = nextEvent(socket, 'unanswered_question_created', (p) => p.question.occurrences === 2);
    await capture(c2, 'DO YOU SHIP TO MARS');
    await second;
    expect(announced).to.deep.equal([
      { question: { id: first.id, question: 'Do you ship to Mars?', occurrences: 1, status: 'open' } },
      { question: { id: first.id, question: 'Do you ship to Mars?', occurrences: 2, status: 'open' } },
    ]);
  });

  it('lists by last asked or by how often, filters by status, and counts by status', async () => {
    const [c1, c2, c3] = [await conversation(), await conversation(), await conversation()];
    const often = await capture(c1, 'Do you ship to Mars?');
    await capture(c2, 'Do you ship to Mars?');
    const recent = await capture(c3, 'Can I pay in gold?');
    expect((await list('')).data.map((q) => q.id)).to.deep.equal([recent.id, often.id]);
    expect((await list('sort=recent')).data.map((q) => q.id)).to.deep.equal([recent.id, often.id]);
    expect((await list('sort=frequent')).data.map((q) => q.id)).to.deep.equal([often.id, recent.id]);

    const dismissed = await owner.api.patch(`/knowledge/unanswered/${recent.id}`, { status: 'dismissed' }, tok());
    expect(dismissed.status, JSON.stringify(dismissed.body)).to.equal(200);
    expect(dismissed.body.data).to.include({ id: recent.id, status: 'dismissed', answer: null, sourceId: null });
    const open = await list('status=open');
    expect([open.data.map((q) => q.id), open.pagination.total]).to.deep.equal([[often.id], 1]);
    expect((await list('status=dismissed')).data.map((q) => q.id)).to.deep.equal([recent.id]);
    expect((await list('status=resolved')).data).to.deep.equal([]);
    expect((await list('')).pagination.total).to.equal(2);
    const count = async (q: string) => (await owner.api.get(`/knowledge/unanswered/count${q}`, tok())).body.data.count as number;
    expect([await count(''), await count('?status=dismissed'), await count('?status=resolved')]).to.deep.equal([1, 1, 0]);
  });

  it('answers a question with an FAQ source titled by its first 300 characters; an unknown question is 404', async () => {
    const question = `${'Where exactly '.repeat(30)}is my parcel?`;
    const q = await capture(await conversation(), question);
    const answered = await owner.api.patch(`/knowledge/unanswered/${q.id}`, { answer: 'In the depot.', status: 'dismissed' }, tok());
    expect(answered.status, JSON.stringify(answered.body)).to.equal(200);
    expect(answered.body.data).to.include({ status: 'dismissed', answer: 'In the depot.' });
    const source = await owner.api.get(`/knowledge/${answered.body.data.sourceId}`, tok());
    expect(source.body.data).to.include({ title: question.slice(0, 300), source: 'faq' });

    const unknown = await owner.api.patch('/knowledge/unanswered/00000000-0000-4000-8000-000000000000', { status: 'dismissed' }, tok());
    expect([unknown.status, unknown.body.message]).to.deep.equal([404, 'Question not found']);
  });
});
