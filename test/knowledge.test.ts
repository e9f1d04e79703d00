// Knowledge: sources indexed by the durable job queue (progress to agents), search within one organization, URL
// sources refused for non-public addresses, file sources, unanswered questions and agent assist.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { collect, connectOk, request, type ClientSocket } from './helpers/sockets.js';
import { TEST_AI_SECRET } from './helpers/server.js';
import { reachable } from './helpers/storage.js';
import { chunkText } from '../server/services/knowledge/chunking.js';
import { normalizeQuestion } from '../server/services/knowledge/unanswered.js';
import { indexed } from './helpers/knowledge.js';

const ai = { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } };

describe('knowledge', function () {
  this.timeout(60_000);
  let owner: SignedUp;
  let other: SignedUp;
  const sockets: ClientSocket[] = [];
  const tok = () => ({ token: owner.accessToken });

  before(async () => {
    const { server, baseUrl } = sharedServer();
    [owner, other] = [await signUp(server, baseUrl), await signUp(server, baseUrl)];
  });
  after(() => sockets.forEach((s) => s.close()));

  it('chunks by about 800 words with 100 of overlap', () => {
    const words = Array.from({ length: 2000 }, (_, i) => `w${i}`);
    const chunks = chunkText(words.join(' '));
    expect(chunks.map((c) => c.tokenCount)).to.deep.equal([800, 800, 600]);
    expect(chunks[1]!.content.startsWith('w700 ')).to.equal(true);
    expect(normalizeQuestion('  How do I RESET my password?? ')).to.equal('how do i reset my password');
  });

  it('indexes a text source from the job queue, tells agents its progress, and finds it only in its organization', async () => {
    const { server, baseUrl } = sharedServer();
    const socket = await connectOk(baseUrl, owner.orgId, owner.accessToken);
    sockets.push(socket);
    const progress = collect(socket, 'knowledge_indexing_progress');
    const body = 'To reset your password open Settings, choose Security and press Reset password. ' + 'Filler words about nothing in particular. '.repeat(400);
    const created = await owner.api.post('/knowledge', { title: 'Password help', source: 'text', content: body }, tok());
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect(created.body.data.status).to.equal('queued');
    const done = await indexed(server, owner, created.body.data.id);
    expect(done.status).to.equal('indexed');
    expect(done.chunkCount).to.be.greaterThan(1);
    await new Promise((r) => setTimeout(r, 100));
    expect(progress.map((p) => p.status)).to.include('indexed');
    expect(progress.every((p) => p.documentId === created.body.data.id)).to.equal(true);

    const hit = await owner.api.get('/knowledge/search?q=reset%20password', tok());
    expect(hit.status).to.equal(200);
    expect(hit.body.data[0]).to.include({ documentId: created.body.data.id, title: 'Password help' });
    expect(hit.body.data[0].snippet).to.contain('<b>');
    const none = await other.api.get('/knowledge/search?q=reset%20password', { token: other.accessToken });
    expect(none.body.data).to.deep.equal([]);
    const aiHit = await owner.api.post('/knowledge/ai/search', { organizationId: owner.orgId, q: 'reset password' }, ai);
    expect(aiHit.body.data[0].documentId).to.equal(created.body.data.id);
    const aiOther = await owner.api.post('/knowledge/ai/search', { organizationId: other.orgId, q: 'reset password' }, ai);
    expect(aiOther.body.data).to.deep.equal([]);
  });

  it('fuses full-text and embedding rankings when the AI service stored embeddings', async () => {
    const { server } = sharedServer();
    const a = await owner.api.post('/knowledge', { title: 'Shipping times', source: 'faq', content: 'Parcels ship within two days.' }, tok());
    const b = await owner.api.post('/knowledge', { title: 'Returns', source: 'faq', content: 'Parcels can be returned within thirty days.' }, tok());
    await indexed(server, owner, a.body.data.id);
    await indexed(server, owner, b.body.data.id);
    const info = await owner.api.get(`/knowledge/ai/${b.body.data.id}/sync-info?organizationId=${owner.orgId}`, ai);
    expect(info.status).to.equal(200);
    const chunkId = info.body.data.chunks[0].chunkId;
    const put = await owner.api.put(`/knowledge/ai/${b.body.data.id}/embeddings`, { organizationId: owner.orgId, model: 'test-embed', items: [{ chunkId, embedding: [0, 1, 0] }] }, ai);
    expect(put.status, JSON.stringify(put.body)).to.equal(200);
    const res = await owner.api.post('/knowledge/ai/search', { organizationId: owner.orgId, q: 'parcels', embedding: [0, 1, 0] }, ai);
    expect(res.body.data[0].chunkId).to.equal(chunkId);
    // A chunk of another source is refused.
    const wrong = await owner.api.put(`/knowledge/ai/${a.body.data.id}/embeddings`, { organizationId: owner.orgId, model: 'm', items: [{ chunkId, embedding: [1] }] }, ai);
    expect(wrong.status).to.equal(400);
  });

  it('refuses URL sources that resolve to loopback, private or link-local addresses', async () => {
    for (const url of ['http://127.0.0.1:8080/', 'http://localhost/', 'http://10.1.2.3/docs', 'http://192.168.1.10/', 'http://169.254.169.254/latest/meta-data', 'http://[::1]/', 'ftp://example.com/']) {
      const res = await owner.api.post('/knowledge', { title: 'Internal', source: 'url', url }, tok());
      expect(res.status, `${url}: ${JSON.stringify(res.body)}`).to.equal(400);
    }
  });

  it('indexes an uploaded file after confirmation, and refuses a file that is not what was declared', async () => {
    const { server, baseUrl } = sharedServer();
    const html = Buffer.from('<html><body><h1>Opening hours</h1><p>We are open Monday to Friday, nine to five.</p><script>var hidden = 1</script></body></html>');
    const req = await owner.api.post('/knowledge/request-upload', { title: 'Hours', fileName: 'hours.html', mimeType: 'text/html', sizeBytes: html.length }, tok());
    expect(req.status, JSON.stringify(req.body)).to.equal(201);
    expect(req.body.data.document.status).to.equal('awaiting_upload');
    const put = await fetch(reachable(req.body.data.upload.url, baseUrl), { method: 'PUT', headers: req.body.data.upload.headers, body: new Uint8Array(html) });
    expect(put.status).to.equal(200);
    const confirmed = await owner.api.post(`/knowledge/${req.body.data.documentId}/confirm`, {}, tok());
    expect(confirmed.status, JSON.stringify(confirmed.body)).to.equal(200);
    expect((await indexed(server, owner, req.body.data.documentId)).status).to.equal('indexed');
    const hit = await owner.api.get('/knowledge/search?q=monday', tok());
    expect(hit.body.data.map((h: { documentId: string }) => h.documentId)).to.include(req.body.data.documentId);
    expect((await owner.api.get(`/knowledge/${req.body.data.documentId}/view-url`, tok())).body.data.url).to.be.a('string');
    // Its file cannot be deleted while the source exists.
    expect((await owner.api.delete(`/storage/${req.body.data.upload.objectId}`, tok())).status).to.equal(409);

    const lie = await owner.api.post('/knowledge/request-upload', { title: 'Fake', fileName: 'x.pdf', mimeType: 'application/pdf', sizeBytes: 20 }, tok());
    await fetch(reachable(lie.body.data.upload.url, baseUrl), { method: 'PUT', headers: lie.body.data.upload.headers, body: 'just some plain text!' .slice(0, 20) });
    expect((await owner.api.post(`/knowledge/${lie.body.data.documentId}/confirm`, {}, tok())).status).to.equal(400);
    expect((await owner.api.delete(`/knowledge/${req.body.data.documentId}`, tok())).status).to.equal(200);
    expect((await owner.api.get(`/storage/metadata/${req.body.data.upload.objectId}`, tok())).status).to.equal(404);
  });

  it('records unanswered questions once per conversation, and turns an answer into an indexed FAQ', async () => {
    const { server } = sharedServer();
    const { conversationId: c1 } = await startConversation(await newVisitor(owner));
    const { conversationId: c2 } = await startConversation(await newVisitor(owner));
    const first = await owner.api.post('/knowledge/ai/unanswered-questions', { organizationId: owner.orgId, conversationId: c1, question: 'Do you ship to Mars?' }, ai);
    expect(first.status).to.equal(201);
    expect(first.body.data.saved).to.equal(true);
    const again = await owner.api.post('/knowledge/ai/unanswered-questions', { organizationId: owner.orgId, conversationId: c1, question: 'do you ship to mars' }, ai);
    expect(again.body.data).to.deep.equal({ saved: false, id: first.body.data.id });
    await owner.api.post('/knowledge/ai/unanswered-questions', { organizationId: owner.orgId, conversationId: c2, question: 'DO YOU SHIP TO MARS!' }, ai);
    // Another organization's conversation is 404.
    expect((await owner.api.post('/knowledge/ai/unanswered-questions', { organizationId: other.orgId, conversationId: c1, question: 'x' }, ai)).status).to.equal(404);
    const list = await owner.api.get('/knowledge/unanswered?sort=frequent', tok());
    expect(list.body.data[0]).to.include({ id: first.body.data.id, occurrences: 2, status: 'open' });
    expect((await owner.api.get('/knowledge/unanswered/count', tok())).body.data.count).to.equal(1);
    const answered = await owner.api.patch(`/knowledge/unanswered/${first.body.data.id}`, { answer: 'Interplanetary shipping is not offered yet.' }, tok());
    expect(answered.status, JSON.stringify(answered.body)).to.equal(200);
    expect(answered.body.data.status).to.equal('resolved');
    await indexed(server, owner, answered.body.data.sourceId);
    const hit = await owner.api.get('/knowledge/search?q=interplanetary', tok());
    expect(hit.body.data[0].documentId).to.equal(answered.body.data.sourceId);
    expect((await owner.api.get('/knowledge/unanswered/count', tok())).body.data.count).to.equal(0);
  });

  it('assists an agent from the organization\'s own knowledge and templates, over REST and the socket', async () => {
    const { server, baseUrl } = sharedServer();
    const src = await owner.api.post('/knowledge', { title: 'Refund policy', source: 'text', content: 'Refunds are paid back to the original card within five working days.' }, tok());
    await indexed(server, owner, src.body.data.id);
    await other.api.post('/knowledge', { title: 'Other refund policy', source: 'text', content: 'Refunds refunds refunds card card.' }, { token: other.accessToken });
    await owner.api.post('/templates', { title: 'Refund timing', content: 'Your refund reaches your card within five working days.', shortcut: `refund-${Date.now()}` }, tok());
    const { conversationId } = await startConversation(await newVisitor(owner), 'When will my refund reach my card?');
    const res = await owner.api.post(`/conversations/${conversationId}/assist`, {}, tok());
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.data.passages.length).to.be.greaterThan(0);
    expect(res.body.data.passages.every((p: { title: string }) => p.title !== 'Other refund policy')).to.equal(true);
    expect(res.body.data.passages[0].title).to.equal('Refund policy');
    expect(res.body.data.templates[0].title).to.equal('Refund timing');
    expect(res.body.data.suggestion).to.equal(null);
    const socket = await connectOk(baseUrl, owner.orgId, owner.accessToken);
    sockets.push(socket);
    const ack = await request(socket, 'request_assist', { conversationId });
    expect(ack.success).to.equal(true);
    expect(ack.data.passages[0].title).to.equal('Refund policy');
    expect(ack.data.aiPending).to.equal(false);
    // Another organization's conversation is 404.
    expect((await other.api.post(`/conversations/${conversationId}/assist`, {}, { token: other.accessToken })).status).to.equal(404);
  });

  it('refuses to pause a file source still awaiting its upload, which then indexes once confirmed', async () => {
    const { server, baseUrl } = sharedServer();
    const text = Buffer.from('Parcels are shipped every weekday from the warehouse.');
    const req = await owner.api.post('/knowledge/request-upload', { title: 'Shipping', fileName: 'shipping.txt', mimeType: 'text/plain', sizeBytes: text.length }, tok());
    expect(req.status, JSON.stringify(req.body)).to.equal(201);
    const paused = await owner.api.patch(`/knowledge/${req.body.data.documentId}`, { isPaused: true }, tok());
    expect(paused.status, JSON.stringify(paused.body)).to.equal(400);
    expect(paused.body.error.code).to.equal('validation_failed');
    expect((await owner.api.get(`/knowledge/${req.body.data.documentId}`, tok())).body.data.status).to.equal('awaiting_upload');
    await fetch(reachable(req.body.data.upload.url, baseUrl), { method: 'PUT', headers: req.body.data.upload.headers, body: new Uint8Array(text) });
    expect((await owner.api.post(`/knowledge/${req.body.data.documentId}/confirm`, {}, tok())).status).to.equal(200);
    expect((await indexed(server, owner, req.body.data.documentId)).status).to.equal('indexed');
  });

  it('answers 403 past the plan\'s knowledgeSources limit', async () => {
    const { server, baseUrl } = sharedServer();
    const small = await signUp(server, baseUrl);
    await server.services.organizations.changePlan(small.orgId, 'free');
    for (let i = 0; i < 5; i++) expect((await small.api.post('/knowledge', { title: `T${i}`, source: 'text', content: 'x' }, { token: small.accessToken })).status).to.equal(201);
    const res = await small.api.post('/knowledge', { title: 'T6', source: 'text', content: 'x' }, { token: small.accessToken });
    expect(res.status).to.equal(403);
    expect(res.body.error.code).to.equal('plan_limit_reached');
  });
});
