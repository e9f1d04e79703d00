// Knowledge on a server of its own: an indexing job left running by an instance that died is finished by the next
// one on the same database; URL sources crawl the same host (private addresses allowed only for this test server);
// assist forwards to the AI service when AI_ASSIST_URL is set, and a failing service changes nothing.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { signUp, type SignedUp } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, TEST_AI_SECRET, type TestServer } from './helpers/server.js';
import { connectOk, nextEvent, request } from './helpers/sockets.js';
import { indexed } from './helpers/knowledge.js';
import { JobQueue } from '../server/jobs/index.js';
import { KnowledgeIndexer } from '../server/services/knowledge/index.js';

describe('knowledge: restarts, crawling and the AI assist service', function () {
  this.timeout(120_000);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'support-knowledge-'));
  let site: Server;
  let siteUrl: string;
  let assistCalls: { secret: string | undefined; body: Record<string, unknown> }[] = [];
  let assistFails = false;
  let t!: TestServer;

  const env = () => ({ DATA_DIR: dataDir, KNOWLEDGE_FETCH_ALLOW_PRIVATE: 'true', AI_ASSIST_URL: `${siteUrl}/assist` });

  before(async () => {
    site = createServer((req, res) => {
      if (req.url === '/assist') {
        let raw = '';
        req.on('data', (c) => (raw += c));
        req.on('end', () => {
          assistCalls.push({ secret: req.headers['x-ai-tool-secret'] as string | undefined, body: JSON.parse(raw) });
          if (assistFails) return void res.writeHead(500).end('broken');
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ suggestion: { text: 'Offer a refund to the original card.' } }));
        });
        return;
      }
      const pages: Record<string, string> = {
        '/': '<html><body><h1>Help centre</h1><p>Welcome to the lighthouse help centre.</p><a href="/billing">Billing</a> <a href="https://elsewhere.example/x">Away</a></body></html>',
        '/billing': '<html><body><p>Invoices are issued on the first of each month by the lighthouse keeper.</p></body></html>',
      };
      const page = pages[req.url ?? ''];
      if (!page) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page);
    });
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    // Started here, not in the first test: each test must be able to run alone.
    t = await startTestServer(env());
  });
  after(async () => {
    await t?.stop();
    site.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('finishes after a restart an indexing job whose instance died mid-job', async () => {
    let owner: SignedUp = await signUp(t.server, t.baseUrl);
    const created = await owner.api.post('/knowledge', { title: 'Lighthouse manual', source: 'text', content: 'The lighthouse lamp is cleaned every morning. '.repeat(300) }, { token: owner.accessToken });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.data.id as string;
    expect((await indexed(t.server, owner, id)).status).to.equal('indexed');

    // What a dead instance leaves behind: its claim still marked running, the source half written. This instance's
    // queue stops first, so its own poller cannot take the faked claim back before the instance goes away.
    await t.server.jobs.stop();
    await t.server.db.knex('jobs').where({ queue: 'knowledge-index' }).whereRaw(`payload->>'sourceId' = ?`, [id]).update({ status: 'running', attempts: 1, lockedUntil: t.server.db.knex.raw(`now() - interval '1 second'`), finishedAt: null });
    await t.server.db.knex('knowledge_chunks').where({ sourceId: id }).delete();
    await t.server.db.knex('knowledge_chunks').insert({ organizationId: owner.orgId, sourceId: id, position: 0, content: 'half written leftover', tokenCount: 3 });
    await t.server.db.knex('knowledge_sources').where({ id }).update({ status: 'indexing', chunkCount: 0 });
    const { email, password } = owner;
    await t.stop();

    // A new instance on the same database (and DATA_DIR) takes the job over once its lease ran out.
    t = await startTestServer(env());
    const api = new Api(t.baseUrl);
    const login = await api.post('/auth/login', { email, password });
    owner = { ...owner, api, accessToken: login.body.data.accessToken };
    const after = await indexed(t.server, owner, id);
    expect(after.status, JSON.stringify(after)).to.equal('indexed');
    expect(after.chunkCount).to.be.greaterThan(1);
    expect((await owner.api.get('/knowledge/search?q=leftover', { token: owner.accessToken })).body.data).to.deep.equal([]);
    expect((await owner.api.get('/knowledge/search?q=lighthouse', { token: owner.accessToken })).body.data.length).to.be.greaterThan(0);
  });

  it('crawls a URL source on the same host only', async () => {
    const server = t!.server;
    const owner = await signUp(server, t!.baseUrl);
    // Written and run directly: on a shared database another instance (not allowed private addresses) could claim a queued job.
    const [source] = await server.db.knex('knowledge_sources').insert({ organizationId: owner.orgId, title: 'Help centre', source: 'url', status: 'queued', url: `${siteUrl}/`, fetchMode: 'crawl', crawlDepth: 1, maxPages: 10 }).returning('id');
    const jobs = new JobQueue(server.db.knex, server.logger);
    const indexer = new KnowledgeIndexer({ models: server.db.models, knex: server.db.knex, driver: server.services.storage.driver, events: server.events, logger: server.logger, jobs, workers: 1, allowPrivate: true, notifications: server.services.notifications });
    await indexer.run({ id: 'direct', queue: 'knowledge-index', organizationId: owner.orgId, payload: { sourceId: source.id }, attempt: 1 });
    const doc = await owner.api.get(`/knowledge/${source.id}`, { token: owner.accessToken });
    expect(doc.body.data.status, JSON.stringify(doc.body.data)).to.equal('indexed');
    const billing = await owner.api.get('/knowledge/search?q=invoices', { token: owner.accessToken });
    expect(billing.body.data[0]?.documentId, 'the crawl reached /billing').to.equal(source.id);
  });

  it('forwards assist to the AI service (REST answer, socket assist_result) and shrugs off its failures', async () => {
    const server = t!;
    const owner = await signUp(server.server, server.baseUrl);
    const { conversationId } = await startConversation(await newVisitor(owner), 'Can I get a refund?');
    assistCalls = [];
    // Set by the end of this test: a runner that runs it again in one process must start with a working AI service.
    assistFails = false;
    const res = await owner.api.post(`/conversations/${conversationId}/assist`, {}, { token: owner.accessToken });
    expect(res.status).to.equal(200);
    expect(res.body.data.suggestion).to.deep.equal({ text: 'Offer a refund to the original card.' });
    expect(assistCalls[0]!.secret).to.equal(TEST_AI_SECRET);
    expect(assistCalls[0]!.body).to.include({ organizationId: owner.orgId, conversationId });

    const socket = await connectOk(server.baseUrl, owner.orgId, owner.accessToken);
    try {
      const later = nextEvent(socket, 'assist_result', (p) => p.conversationId === conversationId);
      const ack = await request(socket, 'request_assist', { conversationId });
      expect(ack.success).to.equal(true);
      expect(ack.data.aiPending).to.equal(true);
      expect((await later).suggestion).to.deep.equal({ text: 'Offer a refund to the original card.' });
      assistFails = true;
      const failing = await owner.api.post(`/conversations/${conversationId}/assist`, {}, { token: owner.accessToken });
      expect(failing.status).to.equal(200);
      expect(failing.body.data.suggestion).to.equal(null);
    } finally {
      socket.close();
    }
  });
});
