// Knowledge sources, rule by rule: what creation keeps and defaults, the list's filters and order, which edits
// reindex and which do not, pausing and resuming, reindexing one source or all, where a source can be read, and what
// the AI service reads and writes (status, sync info, embeddings), each refused for another organization.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { indexed } from './helpers/knowledge.js';
import { startTestServer, TEST_AI_SECRET, type TestServer } from './helpers/server.js';
import { reachable } from './helpers/storage.js';
import { collect, connectOk } from './helpers/sockets.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { JobQueue } from '../server/jobs/index.js';
import { KnowledgeIndexer } from '../server/services/knowledge/index.js';
import { chunkText } from '../server/services/knowledge/chunking.js';

const ai = { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } };

describe('knowledge sources, rule by rule', function () {
  this.timeout(60_000);
  let owner: SignedUp;
  let other: SignedUp;
  const tok = () => ({ token: owner.accessToken });
  const create = async (body: Record<string, unknown>, as = owner) => {
    const res = await as.api.post('/knowledge', body, { token: as.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.data as Record<string, any>;
  };
  const createIndexed = async (body: Record<string, unknown>, as = owner) => {
    const { server } = sharedServer();
    const created = await create(body, as);
    expect((await indexed(server, as, created.id)).status).to.equal('indexed');
    return created;
  };
  const patch = (id: string, body: Record<string, unknown>) => owner.api.patch(`/knowledge/${id}`, body, tok());
  const statusOf = async (id: string) => (await owner.api.get(`/knowledge/${id}`, tok())).body.data.status as string;
  const requestUpload = async (title: string, text: Buffer, as = owner) => {
    const req = await as.api.post('/knowledge/request-upload', { title, fileName: 'notes.txt', mimeType: 'text/plain', sizeBytes: text.length, catalog: 'Files' }, { token: as.accessToken });
    expect(req.status, JSON.stringify(req.body)).to.equal(201);
    expect(req.body.data.document).to.include({ title, source: 'file', status: 'awaiting_upload', catalog: 'Files', syncFrequency: 'never' });
    return req.body.data as { documentId: string; upload: { url: string; headers: Record<string, string>; objectId: string } };
  };

  before(async () => {
    const { server, baseUrl } = sharedServer();
    [owner, other] = [await signUp(server, baseUrl), await signUp(server, baseUrl)];
  });

  it('keeps what a text or FAQ source was given and defaults the rest, and refuses one without content', async () => {
    const plain = await create({ title: 'Plain', source: 'text', content: 'Plain words.' });
    expect(plain).to.include({ title: 'Plain', source: 'text', status: 'queued', url: null, fetchMode: null, crawlDepth: null, maxPages: null, syncFrequency: 'never', catalog: null });
    const detail = await owner.api.get(`/knowledge/${plain.id}`, tok());
    expect(detail.body.data.content).to.equal('Plain words.');
    const faq = await create({ title: 'How long do refunds take?', source: 'faq', content: 'Five days.', catalog: 'Billing', syncFrequency: 'weekly' });
    expect(faq).to.include({ source: 'faq', catalog: 'Billing', syncFrequency: 'weekly' });
    for (const [source, content] of [['text', undefined], ['text', ' \n\t '], ['faq', '   ']] as const) {
      const res = await owner.api.post('/knowledge', { title: 'Empty', source, ...(content === undefined ? {} : { content }) }, tok());
      expect(res.status, `${source} ${JSON.stringify(content)}`).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(res.body.message).to.equal(`A ${source} source needs content`);
      expect(res.body.error.details).to.deep.equal([{ field: 'content', message: 'is required' }]);
    }
    const noUrl = await owner.api.post('/knowledge', { title: 'Nowhere', source: 'url' }, tok());
    expect([noUrl.status, noUrl.body.message]).to.deep.equal([400, 'A URL source needs a url']);
    expect(noUrl.body.error.details).to.deep.equal([{ field: 'url', message: 'is required' }]);
  });

  it('lists newest first, filtered by status, kind and title words, with the total of the filter', async () => {
    const { server, baseUrl } = sharedServer();
    const lister = await signUp(server, baseUrl);
    const a = await createIndexed({ title: 'Alpha guide', source: 'text', content: 'First words.' }, lister);
    const b = await createIndexed({ title: 'Beta question', source: 'faq', content: 'Second words.' }, lister);
    const c = await createIndexed({ title: 'Gamma ALPHA notes', source: 'text', content: 'Third words.' }, lister);
    expect((await lister.api.patch(`/knowledge/${b.id}`, { isPaused: true }, { token: lister.accessToken })).status).to.equal(200);
    const list = async (query: string) => {
      const res = await lister.api.get(`/knowledge${query}`, { token: lister.accessToken });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return { ids: (res.body.data as { id: string }[]).map((s) => s.id), total: res.body.pagination.total as number };
    };
    expect(await list('')).to.deep.equal({ ids: [c.id, b.id, a.id], total: 3 });
    expect(await list('?limit=1&offset=1')).to.deep.equal({ ids: [b.id], total: 3 });
    expect(await list('?source=faq')).to.deep.equal({ ids: [b.id], total: 1 });
    expect(await list('?source=text')).to.deep.equal({ ids: [c.id, a.id], total: 2 });
    expect(await list('?status=paused')).to.deep.equal({ ids: [b.id], total: 1 });
    expect(await list('?status=indexed&source=text')).to.deep.equal({ ids: [c.id, a.id], total: 2 });
    expect(await list('?q=alpha')).to.deep.equal({ ids: [c.id, a.id], total: 2 });
    expect(await list('?q=alpha&status=indexed&limit=1')).to.deep.equal({ ids: [c.id], total: 2 });
    // Another organization's list holds none of them.
    expect((await owner.api.get('/knowledge?q=alpha', tok())).body.data.map((s: { id: string }) => s.id)).to.not.include.members([a.id, c.id]);
  });

  it('reindexes on new content or a new FAQ question, not on a new title, catalog or sync frequency of a text source', async () => {
    const { server } = sharedServer();
    const text = await createIndexed({ title: 'Opening hours', source: 'text', content: 'We open at nine.' });
    const kept = await patch(text.id, { title: 'Hours', catalog: 'Shop', syncFrequency: 'daily' });
    expect(kept.status, JSON.stringify(kept.body)).to.equal(200);
    expect(kept.body.data).to.include({ title: 'Hours', catalog: 'Shop', syncFrequency: 'daily', status: 'indexed' });
    expect((await patch(text.id, { catalog: null })).body.data).to.include({ catalog: null, title: 'Hours', status: 'indexed' });
    expect((await patch(text.id, { isPaused: false })).body.data.status, 'resuming a source that is not paused').to.equal('indexed');

    const edited = await patch(text.id, { content: 'We open at seven sharp.' });
    expect(edited.body.data.status).to.equal('queued');
    expect((await indexed(server, owner, text.id)).status).to.equal('indexed');
    expect((await owner.api.get(`/knowledge/${text.id}`, tok())).body.data.content).to.equal('We open at seven sharp.');
    expect((await owner.api.get(`/knowledge/search?q=sharp&sourceId=${text.id}`, tok())).body.data).to.have.length(1);

    const faq = await createIndexed({ title: 'Do you ship abroad?', source: 'faq', content: 'Yes, worldwide.' });
    const renamed = await patch(faq.id, { title: 'Do you deliver to islands?' });
    expect(renamed.body.data.status).to.equal('queued');
    expect((await indexed(server, owner, faq.id)).status).to.equal('indexed');
    expect((await owner.api.get(`/knowledge/search?q=islands&sourceId=${faq.id}`, tok())).body.data).to.have.length(1);
    expect((await patch(faq.id, { catalog: 'Delivery' })).body.data.status, 'a FAQ\'s catalog is not indexed').to.equal('indexed');
    const answered = await patch(faq.id, { content: 'Yes, by ferry.' });
    expect([answered.status, answered.body.data.status]).to.deep.equal([200, 'queued']);
    expect((await indexed(server, owner, faq.id)).status).to.equal('indexed');
    expect((await owner.api.get(`/knowledge/search?q=ferry&sourceId=${faq.id}`, tok())).body.data).to.have.length(1);
  });

  it('pauses and resumes a source: a paused source is neither indexed nor reindexed, resuming queues it', async () => {
    const { server } = sharedServer();
    const text = await createIndexed({ title: 'Pausable', source: 'text', content: 'Lanterns are lit at dusk.' });
    const paused = await patch(text.id, { isPaused: true });
    expect(paused.body.data.status).to.equal('paused');
    // Pausing with new content in the same edit pauses.
    const both = await createIndexed({ title: 'Pause and edit', source: 'text', content: 'Old words.' });
    expect((await patch(both.id, { isPaused: true, content: 'New words.' })).body.data.status).to.equal('paused');
    // New content while paused is kept, but the source stays paused.
    expect((await patch(text.id, { content: 'Lanterns are lit at dawn.' })).body.data.status).to.equal('paused');
    const refused = await owner.api.post(`/knowledge/${text.id}/reindex`, {}, tok());
    expect([refused.status, refused.body.error.code, refused.body.message]).to.deep.equal([400, 'validation_failed', 'A paused source is not reindexed']);
    expect(refused.body.error.details).to.deep.equal([{ field: 'documentId', message: 'paused' }]);
    expect(await statusOf(text.id)).to.equal('paused');
    const resumed = await patch(text.id, { isPaused: false });
    expect(resumed.body.data.status).to.equal('queued');
    expect((await indexed(server, owner, text.id)).status).to.equal('indexed');
    expect((await owner.api.get(`/knowledge/search?q=dawn&sourceId=${text.id}`, tok())).body.data).to.have.length(1);
  });

  it('refuses content edits of a file source, and reindexing one still awaiting its upload', async () => {
    const pending = await requestUpload('Awaiting', Buffer.from('Some text'));
    const pause = await patch(pending.documentId, { isPaused: true });
    expect([pause.status, pause.body.message]).to.deep.equal([400, 'A source awaiting its upload cannot be paused']);
    expect(pause.body.error.details).to.deep.equal([{ field: 'isPaused', message: 'the file has not been confirmed yet' }]);
    const content = await patch(pending.documentId, { content: 'new' });
    expect([content.status, content.body.message]).to.deep.equal([400, 'Only text and FAQ sources have editable content']);
    expect(content.body.error.details).to.deep.equal([{ field: 'content', message: 'not editable for this source' }]);
    // A title edit of a file still awaiting its upload leaves it awaiting (no job for a file that is not there).
    expect((await patch(pending.documentId, { title: 'Still awaiting' })).body.data.status).to.equal('awaiting_upload');
    const reindex = await owner.api.post(`/knowledge/${pending.documentId}/reindex`, {}, tok());
    expect([reindex.status, reindex.body.message]).to.deep.equal([400, 'A awaiting_upload source is not reindexed']);
    expect((await owner.api.post(`/knowledge/${pending.documentId}/confirm`, {}, tok())).status, 'nothing was uploaded').to.equal(400);
    const text = await create({ title: 'Not a file', source: 'text', content: 'words' });
    const confirm = await owner.api.post(`/knowledge/${text.id}/confirm`, {}, tok());
    expect([confirm.status, confirm.body.message]).to.deep.equal([400, 'Only file sources are confirmed']);
    expect(confirm.body.error.details).to.deep.equal([{ field: 'documentId', message: 'is not a file source' }]);
    for (const [method, path] of [['patch', ''], ['post', '/reindex'], ['post', '/confirm'], ['delete', ''], ['get', '/view-url']] as const) {
      const res = method === 'patch' ? await other.api.patch(`/knowledge/${text.id}`, { title: 'x' }, { token: other.accessToken }) : method === 'post' ? await other.api.post(`/knowledge/${text.id}${path}`, {}, { token: other.accessToken }) : method === 'delete' ? await other.api.delete(`/knowledge/${text.id}`, { token: other.accessToken }) : await other.api.get(`/knowledge/${text.id}${path}`, { token: other.accessToken });
      expect([res.status, res.body.message], `${method} ${path}`).to.deep.equal([404, 'Knowledge source not found']);
    }
  });

  it('reindexes one source, or every source but the paused and the awaiting ones', async () => {
    const { server, baseUrl } = sharedServer();
    const org = await signUp(server, baseUrl);
    const opts = { token: org.accessToken };
    const a = await createIndexed({ title: 'One', source: 'text', content: 'First.' }, org);
    const b = await createIndexed({ title: 'Two', source: 'text', content: 'Second.' }, org);
    const p = await createIndexed({ title: 'Paused', source: 'text', content: 'Third.' }, org);
    await org.api.patch(`/knowledge/${p.id}`, { isPaused: true }, opts);
    const pending = await requestUpload('Waiting', Buffer.from('x'), org);
    const one = await org.api.post(`/knowledge/${a.id}/reindex`, {}, opts);
    expect([one.status, one.body.data.status]).to.deep.equal([202, 'queued']);
    expect((await indexed(server, org, a.id)).status).to.equal('indexed');
    const all = await org.api.post('/knowledge/reindex', {}, opts);
    expect([all.status, all.body.data]).to.deep.equal([202, { queued: 2 }]);
    const queuedJobs = await server.db.knex('jobs').where({ queue: 'knowledge-index', organizationId: org.orgId }).whereIn('status', ['pending', 'running']).select('payload');
    expect(queuedJobs.map((j: { payload: { sourceId: string } }) => j.payload.sourceId)).to.not.include.members([p.id, pending.documentId]);
    expect((await org.api.get(`/knowledge/${p.id}`, opts)).body.data.status).to.equal('paused');
    expect((await org.api.get(`/knowledge/${pending.documentId}`, opts)).body.data.status).to.equal('awaiting_upload');
    for (const id of [a.id, b.id]) expect((await indexed(server, org, id)).status).to.equal('indexed');
    // Nothing to queue in an organization without sources.
    const empty = await signUp(server, baseUrl);
    expect((await empty.api.post('/knowledge/reindex', {}, { token: empty.accessToken })).body.data).to.deep.equal({ queued: 0 });
  });

  it('tells where a source can be read: a signed URL of an uploaded file, nothing for text or a file not yet uploaded', async () => {
    const { baseUrl } = sharedServer();
    const text = await create({ title: 'Text only', source: 'text', content: 'words' });
    expect((await owner.api.get(`/knowledge/${text.id}/view-url`, tok())).body.data).to.deep.equal({ url: null, expiresAt: null });
    const body = Buffer.from('Readable notes.');
    const pending = await requestUpload('Readable', body);
    expect((await owner.api.get(`/knowledge/${pending.documentId}/view-url`, tok())).body.data).to.deep.equal({ url: null, expiresAt: null });
    await fetch(reachable(pending.upload.url, baseUrl), { method: 'PUT', headers: pending.upload.headers, body: new Uint8Array(body) });
    expect((await owner.api.post(`/knowledge/${pending.documentId}/confirm`, {}, tok())).status).to.equal(200);
    const view = (await owner.api.get(`/knowledge/${pending.documentId}/view-url`, tok())).body.data as { url: string; expiresAt: string };
    expect(new Date(view.expiresAt).getTime()).to.be.greaterThan(Date.now());
    const file = await fetch(reachable(view.url, baseUrl));
    expect([file.status, await file.text()]).to.deep.equal([200, 'Readable notes.']);
    // A file that is not what was declared fails its source, which then no longer points at it.
    const lie = await owner.api.post('/knowledge/request-upload', { title: 'Fake', fileName: 'x.pdf', mimeType: 'application/pdf', sizeBytes: 20 }, tok());
    await fetch(reachable(lie.body.data.upload.url, baseUrl), { method: 'PUT', headers: lie.body.data.upload.headers, body: 'just some plain text' });
    expect((await owner.api.post(`/knowledge/${lie.body.data.documentId}/confirm`, {}, tok())).status).to.equal(400);
    expect((await owner.api.get(`/knowledge/${lie.body.data.documentId}`, tok())).body.data).to.include({ status: 'failed', errorMessage: 'The uploaded file did not match its declaration', objectId: null });
    // Confirming again changes nothing: no second indexing.
    expect((await indexed(sharedServer().server, owner, pending.documentId)).status).to.equal('indexed');
    const again = await owner.api.post(`/knowledge/${pending.documentId}/confirm`, {}, tok());
    expect([again.status, again.body.data.status]).to.deep.equal([200, 'indexed']);
    // The file is the uploader's.
    expect((await owner.api.get(`/storage/metadata/${pending.upload.objectId}`, tok())).body.data.createdBy).to.equal(owner.userId);
    // The failed source has no file left to confirm or to read.
    expect((await owner.api.get(`/knowledge/${lie.body.data.documentId}/view-url`, tok())).body.data).to.deep.equal({ url: null, expiresAt: null });
    const refused = await owner.api.post(`/knowledge/${lie.body.data.documentId}/confirm`, {}, tok());
    expect([refused.status, refused.body.message]).to.deep.equal([400, 'Only file sources are confirmed']);
    // It is not reindexed, alone or with the others: it has no file, so indexing could only fail again.
    const reindexed = await owner.api.post(`/knowledge/${lie.body.data.documentId}/reindex`, {}, tok());
    expect([reindexed.status, reindexed.body.error?.code, reindexed.body.message]).to.deep.equal([400, 'validation_failed', 'A file source whose file was refused is not reindexed']);
    expect((await owner.api.get(`/knowledge/${lie.body.data.documentId}`, tok())).body.data).to.include({ status: 'failed', errorMessage: 'The uploaded file did not match its declaration' });
  });

  it('reindexes every source but a file source whose file was refused', async () => {
    const { server, baseUrl } = sharedServer();
    const alone = await signUp(server, baseUrl);
    const text = await createIndexed({ title: 'Kept', source: 'text', content: 'Kept words.' }, alone);
    const lie = await alone.api.post('/knowledge/request-upload', { title: 'Fake', fileName: 'x.pdf', mimeType: 'application/pdf', sizeBytes: 20 }, { token: alone.accessToken });
    await fetch(reachable(lie.body.data.upload.url, baseUrl), { method: 'PUT', headers: lie.body.data.upload.headers, body: 'just some plain text' });
    expect((await alone.api.post(`/knowledge/${lie.body.data.documentId}/confirm`, {}, { token: alone.accessToken })).status).to.equal(400);
    const all = await alone.api.post('/knowledge/reindex', {}, { token: alone.accessToken });
    expect([all.status, all.body.data]).to.deep.equal([202, { queued: 1 }]);
    expect((await indexed(server, alone, text.id)).status).to.equal('indexed');
    const refused = (await alone.api.get(`/knowledge/${lie.body.data.documentId}`, { token: alone.accessToken })).body.data;
    expect(refused).to.include({ status: 'failed', errorMessage: 'The uploaded file did not match its declaration' });
  });

  it('deletes a text source with its chunks', async () => {
    const text = await createIndexed({ title: 'Doomed', source: 'text', content: 'Ephemeral marmalade.' });
    expect((await owner.api.delete(`/knowledge/${text.id}`, tok())).status).to.equal(200);
    expect((await owner.api.get(`/knowledge/${text.id}`, tok())).status).to.equal(404);
    expect((await owner.api.get('/knowledge/search?q=marmalade', tok())).body.data).to.deep.equal([]);
  });

  it('lets the AI service set a status (a failure with its words or "Failed"), read chunks in order and store embeddings of its own chunks', async () => {
    const long = Array.from({ length: 1500 }, (_, i) => `word${i}`).join(' ');
    const src = await createIndexed({ title: 'Long', source: 'text', content: long });
    const path = `/knowledge/ai/${src.id}`;
    const failed = await owner.api.patch(`${path}/status`, { organizationId: owner.orgId, status: 'failed', errorMessage: 'model unavailable' }, ai);
    expect([failed.status, failed.body.data.status, failed.body.data.errorMessage]).to.deep.equal([200, 'failed', 'model unavailable']);
    expect((await owner.api.patch(`${path}/status`, { organizationId: owner.orgId, status: 'failed' }, ai)).body.data.errorMessage).to.equal('Failed');
    const ok = await owner.api.patch(`${path}/status`, { organizationId: owner.orgId, status: 'indexed', errorMessage: 'ignored' }, ai);
    expect([ok.body.data.status, ok.body.data.errorMessage]).to.deep.equal(['indexed', null]);
    expect((await owner.api.patch(`${path}/status`, { organizationId: other.orgId, status: 'failed' }, ai)).status).to.equal(404);

    const info = await owner.api.get(`${path}/sync-info?organizationId=${owner.orgId}`, ai);
    expect(info.status).to.equal(200);
    expect(info.body.data.document.id).to.equal(src.id);
    const chunks = info.body.data.chunks as { chunkId: string; position: number; content: string; tokenCount: number; embedded: boolean }[];
    expect(chunks.map((c) => c.position)).to.deep.equal([0, 1]);
    expect(chunks.map((c) => c.tokenCount)).to.deep.equal([800, 800]);
    expect(chunks[0]!.content.startsWith('word0 word1 ')).to.equal(true);
    expect(chunks.map((c) => c.embedded)).to.deep.equal([false, false]);
    expect((await owner.api.get(`${path}/sync-info?organizationId=${other.orgId}`, ai)).status).to.equal(404);

    const bystander = await create({ title: 'Bystander', source: 'text', content: 'Unrelated words.' });
    // A chunk id in capitals is the same chunk.
    const put = await owner.api.put(`${path}/embeddings`, { organizationId: owner.orgId, model: 'embed-2', items: [{ chunkId: chunks[1]!.chunkId.toUpperCase(), embedding: [0.5, 0.5] }] }, ai);
    expect([put.status, put.body.data]).to.deep.equal([200, { updated: 1 }]);
    const after = await owner.api.get(`${path}/sync-info?organizationId=${owner.orgId}`, ai);
    expect(after.body.data.chunks.map((c: { embedded: boolean }) => c.embedded)).to.deep.equal([false, true]);
    expect(after.body.data.document.embeddingModel).to.equal('embed-2');
    expect((await owner.api.get(`/knowledge/${bystander.id}`, tok())).body.data.embeddingModel, 'another source keeps its model').to.equal(null);
    expect((await owner.api.put(`${path}/embeddings`, { organizationId: other.orgId, model: 'm', items: [{ chunkId: chunks[0]!.chunkId, embedding: [1] }] }, ai)).status).to.equal(404);
    const strangers = Array.from({ length: 25 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
    const wrong = await owner.api.put(`${path}/embeddings`, { organizationId: owner.orgId, model: 'm', items: [chunks[0]!.chunkId, ...strangers].map((chunkId) => ({ chunkId, embedding: [1] })) }, ai);
    expect([wrong.status, wrong.body.message]).to.deep.equal([400, 'Some chunks are not chunks of this source']);
    expect(wrong.body.error.details).to.have.length(20);
    expect(wrong.body.error.details[0]).to.deep.equal({ field: 'items', message: `${strangers[0]} is not a chunk of this source` });
    // Nothing of a refused batch is stored.
    expect((await owner.api.get(`${path}/sync-info?organizationId=${owner.orgId}`, ai)).body.data.chunks.map((c: { embedded: boolean }) => c.embedded)).to.deep.equal([false, true]);
  });

  it('fuses the full-text and embedding rankings by reciprocal rank, within the organization, the source and the limit asked', async () => {
    const { server, baseUrl } = sharedServer();
    const org = await signUp(server, baseUrl);
    const them = await signUp(server, baseUrl);
    const aiSearch = async (body: Record<string, unknown>, who = org) => {
      const res = await who.api.post('/knowledge/ai/search', { organizationId: who.orgId, ...body }, ai);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res.body.data as { chunkId: string; documentId: string; title: string; snippet: string; score: number }[];
    };
    // One chunk each: A mentions parcels most, B once, C not at all; by embedding B is nearest, then C, then A.
    const sources: [string, string, number[], SignedUp][] = [
      ['A', 'Parcels and parcels: parcels ship within two days.', [0.2, 0.1, 1], org],
      ['B', 'Parcels can be returned.', [0, 1, 0], org],
      ['C', 'Gift cards never expire.', [0, 1, 0.5], org],
      ['Zero', 'An embedding of zeros matches nothing.', [0, 0, 0], org],
      ['Short', 'An embedding of another model.', [0, 1], org],
      ['Theirs', 'Parcels of another organization.', [0, 1, 0], them],
    ];
    const chunk: Record<string, string> = {};
    const doc: Record<string, string> = {};
    for (const [title, content, embedding, who] of sources) {
      const created = await createIndexed({ title, source: 'text', content }, who);
      const info = await who.api.get(`/knowledge/ai/${created.id}/sync-info?organizationId=${who.orgId}`, ai);
      chunk[title] = info.body.data.chunks[0].chunkId;
      doc[title] = created.id;
      const put = await who.api.put(`/knowledge/ai/${created.id}/embeddings`, { organizationId: who.orgId, model: 'm', items: [{ chunkId: chunk[title], embedding }] }, ai);
      expect(put.status, JSON.stringify(put.body)).to.equal(200);
    }
    const rrf = (...ranks: number[]) => ranks.reduce((sum, r) => sum + 1 / (60 + r), 0);
    const fused = await aiSearch({ q: 'parcels', embedding: [0, 1, 0] });
    expect(fused.map((h) => h.title)).to.deep.equal(['B', 'A', 'C']);
    expect(fused.map((h) => h.chunkId)).to.deep.equal([chunk['B'], chunk['A'], chunk['C']]);
    expect(fused.map((h) => h.documentId)).to.deep.equal([doc['B'], doc['A'], doc['C']]);
    const expected = [rrf(2, 1), rrf(1, 3), rrf(2)];
    fused.forEach((h, i) => expect(h.score, h.title).to.be.closeTo(expected[i]!, 1e-12));
    expect(fused[0]!.snippet).to.equal('<b>Parcels</b> can be returned');
    expect((await aiSearch({ q: 'parcels', embedding: [0, 1, 0], limit: 2 })).map((h) => h.title)).to.deep.equal(['B', 'A']);
    const inC = await aiSearch({ q: 'parcels', embedding: [0, 1, 0], sourceId: doc['C'] });
    expect(inC.map((h) => [h.title, h.score])).to.deep.equal([['C', rrf(1)]]);
    const inA = await aiSearch({ q: 'parcels', embedding: [0, 1, 0], sourceId: doc['A'] });
    expect(inA.map((h) => [h.title, h.score])).to.deep.equal([['A', rrf(1, 1)]]);
    // Stop words alone: the embedding ranks alone, and the snippet is the chunk's start.
    const vectorsOnly = await aiSearch({ q: 'the', embedding: [0, 1, 0] });
    expect(vectorsOnly.map((h) => [h.title, h.score])).to.deep.equal([['B', rrf(1)], ['C', rrf(2)], ['A', rrf(3)]]);
    expect(vectorsOnly[0]!.snippet).to.equal('Parcels can be returned.');
    // An embedding of another length matches only the chunks of that length.
    expect((await aiSearch({ q: 'the', embedding: [0, 1] })).map((h) => h.title)).to.deep.equal(['Short']);
    expect((await aiSearch({ q: 'parcels', embedding: [0, 1, 0] }, them)).map((h) => h.title)).to.deep.equal(['Theirs']);
  });

  it('tells agents how far indexing got: started, chunks written, indexed; or failed for a file without text', async () => {
    const { server, baseUrl } = sharedServer();
    const org = await signUp(server, baseUrl);
    const socket = await connectOk(baseUrl, org.orgId, org.accessToken);
    try {
      const progress = collect(socket, 'knowledge_indexing_progress');
      const ofSource = async (id: string, last: string) => {
        for (let i = 0; i < 100 && !progress.some((p) => p.documentId === id && p.status === last); i++) await new Promise((r) => setTimeout(r, 50));
        return progress.filter((p) => p.documentId === id).map((p) => [p.status, p.chunksDone, p.chunksTotal]);
      };
      const text = await createIndexed({ title: 'Two chunks', source: 'text', content: Array.from({ length: 1500 }, (_, i) => `w${i}`).join(' ') }, org);
      expect(await ofSource(text.id, 'indexed')).to.deep.equal([['indexing', 0, 0], ['indexing', 2, 2], ['indexed', 2, 2]]);

      const blank = Buffer.from('   \n\n   \t  \n');
      const req = await requestUpload('Blank', blank, org);
      await fetch(reachable(req.upload.url, baseUrl), { method: 'PUT', headers: req.upload.headers, body: new Uint8Array(blank) });
      expect((await org.api.post(`/knowledge/${req.documentId}/confirm`, {}, { token: org.accessToken })).status).to.equal(200);
      expect(await indexed(server, org, req.documentId)).to.include({ status: 'failed', errorMessage: 'The document has no text to index', chunkCount: 0 });
      expect(await ofSource(req.documentId, 'failed')).to.deep.equal([['indexing', 0, 0], ['failed', 0, 0]]);
    } finally {
      socket.close();
    }
  });

  it('writes a source of more than 200 chunks once, 200 at a time, telling agents after each batch', async () => {
    const { server, baseUrl } = sharedServer();
    const org = await signUp(server, baseUrl);
    const socket = await connectOk(baseUrl, org.orgId, org.accessToken);
    try {
      const progress = collect(socket, 'knowledge_indexing_progress');
      // 280,000 words: exactly 400 chunks of 800 words (a step of 700), two full batches.
      const words = Array.from({ length: 280_000 }, (_, i) => 'abcdefghij'[i % 10]!).join(' ');
      expect(chunkText(words)).to.have.length(400);
      const big = await createIndexed({ title: 'Four hundred chunks', source: 'text', content: words }, org);
      expect((await org.api.get(`/knowledge/${big.id}`, { token: org.accessToken })).body.data).to.include({ status: 'indexed', chunkCount: 400 });
      const info = await org.api.get(`/knowledge/ai/${big.id}/sync-info?organizationId=${org.orgId}`, ai);
      expect(info.status).to.equal(200);
      expect(info.body.data.chunks.map((c: { position: number }) => c.position)).to.deep.equal(Array.from({ length: 400 }, (_, i) => i));
      for (let i = 0; i < 100 && !progress.some((p) => p.documentId === big.id && p.status === 'indexed'); i++) await new Promise((r) => setTimeout(r, 50));
      expect(progress.filter((p) => p.documentId === big.id).map((p) => [p.status, p.chunksDone, p.chunksTotal])).to.deep.equal([
        ['indexing', 0, 0], ['indexing', 200, 400], ['indexing', 400, 400], ['indexed', 400, 400],
      ]);
    } finally {
      socket.close();
    }
  });

  it('counts file sources against the plan\'s limit too', async () => {
    const { server, baseUrl } = sharedServer();
    const small = await signUp(server, baseUrl);
    await server.services.organizations.changePlan(small.orgId, 'free');
    for (let i = 0; i < 4; i++) await create({ title: `T${i}`, source: 'text', content: 'x' }, small);
    await requestUpload('Fifth', Buffer.from('x'), small);
    const sixth = await small.api.post('/knowledge/request-upload', { title: 'Sixth', fileName: 'a.txt', mimeType: 'text/plain', sizeBytes: 1 }, { token: small.accessToken });
    expect([sixth.status, sixth.body.error.code, sixth.body.message]).to.deep.equal([403, 'plan_limit_reached', 'The free plan allows 5 knowledge sources; delete some or upgrade']);
    expect((await small.api.post('/knowledge', { title: 'Seventh', source: 'text', content: 'x' }, { token: small.accessToken })).status).to.equal(403);
  });
});

describe('knowledge URL sources', function () {
  this.timeout(120_000);
  let t: TestServer;
  let site: Server;
  let siteUrl: string;
  let owner: SignedUp;
  // The page `holdSlowPage` names (a path under /slow) answers only once `openSlow` is called; `slowAsked` resolves when it
  // is asked for. Other requests answer at once: the server's own worker may fetch a source an earlier test resumed.
  let openSlow = () => {};
  let slowAsked: Promise<void> = Promise.resolve();

  before(async () => {
    const html = (body: string) => `<html><body>${body}</body></html>`;
    const pages: Record<string, [string, string]> = {
      '/': ['text/html', html('<p>The harbour opens at six.</p>')],
      '/start': ['text/html; charset=utf-8', html('<p>Harbour guide.</p><a href="/a">A</a> <a href="/missing">Gone</a>')],
      '/a': ['text/html', html('<p>Drop the anchor here.</p><a href="/b">B</a>')],
      '/b': ['text/html', html('<p>Follow the buoy.</p><a href="/c">C</a>')],
      '/c': ['text/html', html('<p>Trust the compass.</p>')],
      '/many': ['text/html', html(['alpha', 'bravo', 'charlie', 'delta', 'echo'].map((w) => `<a href="/word/${w}">${w}</a>`).join(' '))],
      '/plain': ['text/plain', 'Plain lighthouse text.'],
      '/loop': ['text/html', html('<p>Loop page.</p><a href="/loop">Self</a> <a href="/c">C</a> <a href="/c#again">C again</a> <a href="/a">A</a>')],
      '/xhtml': ['application/xhtml+xml', '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>Semaphore flags.</p><a href="/c">C</a></body></html>'],
      '/shouting': ['TEXT/HTML ; charset=utf-8', html('<p>Lantern signals.</p><a href="/c">C</a>')],
      '/plain-markup': ['text/plain', 'Keep <b>bold</b> & <a href="/c">C</a> as written.'],
      '/long-type': [`application/x-${'long'.repeat(400)}`, 'Unreadable.'],
    };
    site = createServer((req, res) => {
      if (req.url === '/hook') return void req.resume().on('end', () => res.writeHead(200).end('ok'));
      if (req.url === '/slow' || req.url?.startsWith('/slow-missing')) {
        const answer = () => (req.url === '/slow' ? res.writeHead(200, { 'content-type': 'text/html' }).end(html('<p>Tide tables for sailors.</p>')) : res.writeHead(404).end());
        return void slowStarted(answer, req.url ?? '');
      }
      // Each page 200 ms late, linking to nine more.
      const lagging = /^\/lagging\/(\d+)$/.exec(req.url ?? '');
      if (lagging) {
        const links = Array.from({ length: 9 }, (_, k) => `<a href="/lagging/${k + 1}">${k + 1}</a>`).join(' ');
        return void setTimeout(() => res.writeHead(200, { 'content-type': 'text/html' }).end(html(`<p>Lagword${lagging[1]}x.</p> ${links}`)), 200);
      }
      // A page linking to one that never answers.
      if (req.url === '/before-hanging') return void res.writeHead(200, { 'content-type': 'text/html' }).end(html('<p>Mooring lines.</p> <a href="/hanging">next</a>'));
      if (req.url === '/hanging') return void req.on('close', () => res.destroy());
      const word = /^\/word\/(\w+)$/.exec(req.url ?? '');
      if (word) return void res.writeHead(200, { 'content-type': 'text/html' }).end(html(`<p>Codeword ${word[1]}ish.</p>`));
      const page = pages[req.url ?? ''];
      if (!page) return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': page[0] }).end(page[1]);
    });
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    siteUrl = `http://127.0.0.1:${(site.address() as AddressInfo).port}/`;
    t = await startTestServer({ KNOWLEDGE_FETCH_ALLOW_PRIVATE: 'true', WEBHOOKS_ALLOW_PRIVATE: 'true' });
    owner = await signUp(t.server, t.baseUrl);
    const hook = await owner.api.post('/webhooks', { url: `${siteUrl}hook`, events: ['knowledge.*'] }, { token: owner.accessToken });
    expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
  });
  after(async () => {
    await t?.stop();
    site?.close();
  });
  let slowStarted: (answer: () => void, path: string) => void = (answer) => answer();
  const holdSlowPage = (held: string) => {
    let asked!: () => void;
    slowAsked = new Promise<void>((r) => (asked = r));
    const gate = new Promise<void>((r) => (openSlow = r));
    slowStarted = (answer, path) => {
      if (path !== held) return answer();
      asked();
      void gate.then(answer);
    };
  };

  it('keeps a source paused when it was paused while being indexed, whether the run succeeds or fails; resuming indexes it again', async () => {
    const tok = { token: owner.accessToken };
    const socket = await connectOk(t.baseUrl, owner.orgId, owner.accessToken);
    after(() => socket.close());
    const progress = collect(socket, 'knowledge_indexing_progress');
    /** The statuses agents were told for a source, once the run's last one (not `indexing`) has arrived. */
    const toldOf = async (id: string) => {
      for (let i = 0; i < 200 && !progress.some((p) => p.documentId === id && p.status !== 'indexing'); i++) await new Promise((r) => setTimeout(r, 25));
      return progress.filter((p) => p.documentId === id).map((p) => p.status);
    };
    for (const [path, outcome] of [['slow', 'indexed'], ['slow-missing', 'failed']] as const) {
      holdSlowPage(`/${path}`);
      const run = runDirect({ url: `${siteUrl}${path}` }, { attempt: 4 });
      await slowAsked;
      const [row] = await t.server.db.knex('knowledge_sources').where({ organizationId: owner.orgId, url: `${siteUrl}${path}` }).select('id');
      // While its page is fetched the source shows it is being indexed.
      expect((await owner.api.get(`/knowledge/${row.id}`, tok)).body.data.status, path).to.equal('indexing');
      const paused = await owner.api.patch(`/knowledge/${row.id}`, { isPaused: true }, tok);
      expect([paused.status, paused.body.data?.status], path).to.deep.equal([200, 'paused']);
      openSlow();
      const ran = await run;
      expect(ran.doc.status, `${path}: ${JSON.stringify(ran.doc)}`).to.equal('paused');
      if (outcome === 'indexed') expect(ran.doc.chunkCount, path).to.equal(1);
      else expect(ran.doc.errorMessage, path).to.equal('the page answered 404');
      // Agents are told it is paused, not what the run would have made of it.
      const told = await toldOf(row.id);
      expect(told.filter((s) => s !== 'indexing'), path).to.deep.equal(['paused']);
      // Resuming queues it to be indexed again.
      slowStarted = (answer) => answer();
      const resumed = await owner.api.patch(`/knowledge/${row.id}`, { isPaused: false }, tok);
      expect(resumed.body.data.status, path).to.equal('queued');
    }
  });

  it('tells agents a source deleted while its start page failed is queued again (a retry) or failed (the last attempt)', async () => {
    const tok = { token: owner.accessToken };
    const socket = await connectOk(t.baseUrl, owner.orgId, owner.accessToken);
    after(() => socket.close());
    const progress = collect(socket, 'knowledge_indexing_progress');
    for (const [attempt, told, error] of [[1, 'queued', 'RetryLater'], [4, 'failed', 'GiveUp']] as const) {
      holdSlowPage(`/slow-missing?attempt=${attempt}`);
      const url = `${siteUrl}slow-missing?attempt=${attempt}`;
      const run = runDirect({ url }, { attempt });
      await slowAsked;
      const [row] = await t.server.db.knex('knowledge_sources').where({ organizationId: owner.orgId, url }).select('id');
      expect((await owner.api.request('DELETE', `/knowledge/${row.id}`, tok)).status).to.equal(200);
      openSlow();
      const ran = await run;
      expect(ran.error?.name, `attempt ${attempt}`).to.equal(error);
      for (let i = 0; i < 200 && !progress.some((p) => p.documentId === row.id && p.status !== 'indexing'); i++) await new Promise((r) => setTimeout(r, 25));
      expect(progress.filter((p) => p.documentId === row.id).map((p) => p.status), `attempt ${attempt}`).to.deep.equal(['indexing', told]);
    }
    slowStarted = (answer) => answer();
  });

  it('keeps a URL source\'s address and crawl options, defaults a single page to depth 0 and a crawl to depth 1, and shows its address to read', async () => {
    const tok = { token: owner.accessToken };
    const single = await owner.api.post('/knowledge', { title: 'Harbour', source: 'url', url: siteUrl }, tok);
    expect(single.status, JSON.stringify(single.body)).to.equal(201);
    expect(single.body.data).to.include({ url: siteUrl, fetchMode: 'single', crawlDepth: 0, maxPages: 100, syncFrequency: 'never' });
    const crawl = await owner.api.post('/knowledge', { title: 'Harbour crawl', source: 'url', url: siteUrl, fetchMode: 'crawl', syncFrequency: 'monthly' }, tok);
    expect(crawl.body.data).to.include({ fetchMode: 'crawl', crawlDepth: 1, maxPages: 100, syncFrequency: 'monthly' });
    const chosen = await owner.api.post('/knowledge', { title: 'Harbour chosen', source: 'url', url: siteUrl, fetchMode: 'crawl', crawlDepth: 3, maxPages: 7 }, tok);
    expect(chosen.body.data).to.include({ crawlDepth: 3, maxPages: 7 });
    expect((await owner.api.get(`/knowledge/${single.body.data.id}/view-url`, tok)).body.data).to.deep.equal({ url: siteUrl, expiresAt: null });
    // A URL source has no content to edit.
    const edit = await owner.api.patch(`/knowledge/${single.body.data.id}`, { content: 'x' }, tok);
    expect([edit.status, edit.body.message]).to.deep.equal([400, 'Only text and FAQ sources have editable content']);
  });

  // Written and run directly: on a shared database another instance (not allowed private addresses) could claim a
  // queued job of this server.
  const runDirect = async (row: Record<string, unknown>, opts: { attempt?: number; allowPrivate?: boolean; deleted?: boolean; crawlBudgetMs?: number; fetchTimeoutMs?: number } = {}) => {
    const [source] = await t.server.db.knex('knowledge_sources').insert({ organizationId: owner.orgId, title: 'Direct', source: 'url', status: 'queued', fetchMode: 'single', crawlDepth: 0, maxPages: 100, ...row }).returning('id');
    if (opts.deleted) await t.server.db.knex('knowledge_sources').where({ id: source.id }).delete();
    const jobs = new JobQueue(t.server.db.knex, t.server.logger);
    const indexer = new KnowledgeIndexer({ models: t.server.db.models, knex: t.server.db.knex, driver: t.server.services.storage.driver, events: t.server.events, logger: t.server.logger, jobs, workers: 1, allowPrivate: opts.allowPrivate ?? true, crawlBudgetMs: opts.crawlBudgetMs, fetchTimeoutMs: opts.fetchTimeoutMs, notifications: t.server.services.notifications });
    indexer.outbox = t.server.services.webhooks;
    const error = await indexer.run({ id: 'direct', queue: 'knowledge-index', organizationId: owner.orgId, payload: { sourceId: source.id }, attempt: opts.attempt ?? 1 }).then(() => null, (err: Error) => err);
    const doc = (await owner.api.get(`/knowledge/${source.id}`, { token: owner.accessToken })).body.data as Record<string, any>;
    return { id: source.id as string, error, doc };
  };
  const found = async (id: string, words: string[]) => {
    const out: string[] = [];
    for (const w of words) if ((await owner.api.get(`/knowledge/search?q=${w}&sourceId=${id}`, { token: owner.accessToken })).body.data.length > 0) out.push(w);
    return out;
  };

  it('a job whose source was paused, is still awaiting its upload, or was deleted does nothing', async () => {
    for (const status of ['paused', 'awaiting_upload']) {
      const skipped = await runDirect({ url: siteUrl, status });
      expect(skipped.error, status).to.equal(null);
      expect(skipped.doc, status).to.include({ status, chunkCount: 0 });
    }
    const gone = await runDirect({ url: siteUrl }, { deleted: true });
    expect(gone.error).to.equal(null);
  });

  it('stops a crawl that runs out of time and indexes the pages it fetched', async () => {
    // Every page takes at least 200 ms: within 500 ms at most the start page and two more can be read.
    const lagging = await runDirect({ url: `${siteUrl}lagging/0`, fetchMode: 'crawl', crawlDepth: 1 }, { crawlBudgetMs: 500 });
    expect(lagging.error).to.equal(null);
    expect(lagging.doc.status, JSON.stringify(lagging.doc)).to.equal('indexed');
    const words = await found(lagging.id, Array.from({ length: 10 }, (_, k) => `lagword${k}x`));
    expect(words[0]).to.equal('lagword0x');
    expect(words.length).to.be.within(1, 3);
    // Given the time, the same crawl reads every page.
    const whole = await runDirect({ url: `${siteUrl}lagging/0`, fetchMode: 'crawl', crawlDepth: 1 });
    expect(await found(whole.id, Array.from({ length: 10 }, (_, k) => `lagword${k}x`))).to.have.length(10);
    // A later page gets only what is left of the crawl's time, not its own minute: the run ends long before it.
    const started = Date.now();
    const cut = await runDirect({ url: `${siteUrl}before-hanging`, fetchMode: 'crawl', crawlDepth: 1 }, { crawlBudgetMs: 500, fetchTimeoutMs: 60_000 });
    expect(Date.now() - started, 'the run waited for the page\'s own time').to.be.below(30_000);
    expect([cut.error, cut.doc.status]).to.deep.equal([null, 'indexed']);
    expect(await found(cut.id, ['mooring'])).to.deep.equal(['mooring']);
  });

  it('crawls same-host links breadth first to the depth asked, skipping a later page that fails', async () => {
    const deep = await runDirect({ url: `${siteUrl}start`, fetchMode: 'crawl', crawlDepth: 2 });
    expect(deep.error).to.equal(null);
    expect(deep.doc.status, JSON.stringify(deep.doc)).to.equal('indexed');
    expect(await found(deep.id, ['harbour', 'anchor', 'buoy', 'compass'])).to.deep.equal(['harbour', 'anchor', 'buoy']);
    // A single page follows no link, whatever depth is stored.
    const single = await runDirect({ url: `${siteUrl}start`, fetchMode: 'single', crawlDepth: 3 });
    expect(await found(single.id, ['harbour', 'anchor'])).to.deep.equal(['harbour']);
    // Every page once: not the start page again, not a page two links lead to.
    const loop = await runDirect({ url: `${siteUrl}loop`, fetchMode: 'crawl', crawlDepth: 2 });
    const text = (await owner.api.get(`/knowledge/ai/${loop.id}/sync-info?organizationId=${owner.orgId}`, ai)).body.data.chunks.map((c: { content: string }) => c.content).join(' ');
    expect([text.match(/Loop page/g)?.length, text.match(/compass/g)?.length, text.match(/anchor/g)?.length, text.match(/buoy/g)?.length]).to.deep.equal([1, 1, 1, 1]);
    // A crawl without a stored depth goes one level.
    const unset = await runDirect({ url: `${siteUrl}start`, fetchMode: 'crawl', crawlDepth: null });
    expect(await found(unset.id, ['harbour', 'anchor', 'buoy'])).to.deep.equal(['harbour', 'anchor']);
  });

  it('stops at maxPages, and reads a page that is not HTML by its type', async () => {
    const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo'].map((w) => `codeword ${w}ish`);
    const capped = await runDirect({ url: `${siteUrl}many`, fetchMode: 'crawl', crawlDepth: 1, maxPages: 3 });
    expect(capped.doc.status).to.equal('indexed');
    const texts = (await owner.api.get(`/knowledge/ai/${capped.id}/sync-info?organizationId=${owner.orgId}`, ai)).body.data.chunks.map((c: { content: string }) => c.content).join(' ');
    expect(words.filter((w) => texts.toLowerCase().includes(w))).to.have.length(2);
    const plain = await runDirect({ url: `${siteUrl}plain` });
    expect(plain.doc.status).to.equal('indexed');
    const info = (await owner.api.get(`/knowledge/ai/${plain.id}/sync-info?organizationId=${owner.orgId}`, ai)).body.data.chunks;
    expect(info.map((c: { content: string }) => c.content)).to.deep.equal(['Plain lighthouse text.']);
    // XHTML is read as HTML, its links followed.
    const xhtml = await runDirect({ url: `${siteUrl}xhtml`, fetchMode: 'crawl', crawlDepth: 1 });
    expect(xhtml.doc.status, JSON.stringify(xhtml.doc)).to.equal('indexed');
    expect(await found(xhtml.id, ['semaphore', 'compass'])).to.deep.equal(['semaphore', 'compass']);
  });

  it('reads a page by its media type whatever its case and spacing, and a text page as written (no markup taken out, no link followed)', async () => {
    const shouting = await runDirect({ url: `${siteUrl}shouting`, fetchMode: 'crawl', crawlDepth: 1 });
    expect(shouting.doc.status, JSON.stringify(shouting.doc)).to.equal('indexed');
    expect(await found(shouting.id, ['lantern', 'compass'])).to.deep.equal(['lantern', 'compass']);
    const plain = await runDirect({ url: `${siteUrl}plain-markup`, fetchMode: 'crawl', crawlDepth: 1 });
    expect(plain.doc.status, JSON.stringify(plain.doc)).to.equal('indexed');
    const chunks = (await owner.api.get(`/knowledge/ai/${plain.id}/sync-info?organizationId=${owner.orgId}`, ai)).body.data.chunks.map((c: { content: string }) => c.content);
    expect(chunks).to.deep.equal(['Keep <b>bold</b> & <a href="/c">C</a> as written.']);
  });

  it('retries a start page that fails three times, then fails for good (knowledge.failed then only); an address that is not public fails at once', async () => {
    const failedEvents = async (id: string) => (await t.server.db.knex('webhook_deliveries').where({ organizationId: owner.orgId, eventType: 'knowledge.failed' }).select('payload')).filter((d: { payload: { document: { id: string } } }) => d.payload.document.id === id);
    for (const attempt of [1, 3]) {
      const retried = await runDirect({ url: `${siteUrl}missing` }, { attempt });
      expect(retried.error?.name, `attempt ${attempt}`).to.equal('RetryLater');
      expect(retried.doc).to.include({ status: 'queued', errorMessage: 'the page answered 404' });
      expect(await failedEvents(retried.id), 'no knowledge.failed for a retry').to.have.length(0);
    }
    const last = await runDirect({ url: `${siteUrl}missing` }, { attempt: 4 });
    expect(last.error?.name).to.equal('GiveUp');
    expect(last.doc).to.include({ status: 'failed', errorMessage: 'the page answered 404' });
    const [event] = await failedEvents(last.id);
    expect(event!.payload).to.deep.include({ error: 'the page answered 404', attempts: 4 });
    // A failure's words are kept to 1,000 characters (here a page of a 1,614-character media type no parser reads).
    const long = await runDirect({ url: `${siteUrl}long-type` });
    expect(long.error?.name).to.equal('RetryLater');
    expect(long.doc.errorMessage).to.equal(`application/x-${'long'.repeat(400)} documents cannot be indexed`.slice(0, 1000));
    const unsafe = await runDirect({ url: siteUrl }, { allowPrivate: false });
    expect(unsafe.error?.name).to.equal('GiveUp');
    expect(unsafe.doc).to.include({ status: 'failed', errorMessage: 'This URL cannot be fetched: the host is not a public address' });
  });

  it('queues the next sync of a URL source by its frequency, and none for a text source or a URL source never synced', async () => {
    const syncJob = async (id: string) => (await t.server.db.knex('jobs').where({ queue: 'knowledge-index', dedupeKey: `sync:${id}` }).whereIn('status', ['pending', 'running']).select('runAt'))[0] as { runAt: Date } | undefined;
    for (const [frequency, days] of [['daily', 1], ['weekly', 7], ['monthly', 30]] as const) {
      const before = Date.now();
      const synced = await runDirect({ url: siteUrl, syncFrequency: frequency });
      expect(synced.doc.status).to.equal('indexed');
      const job = await syncJob(synced.id);
      expect(job, frequency).to.not.equal(undefined);
      expect(new Date(job!.runAt).getTime()).to.be.within(before + days * 86_400_000, Date.now() + days * 86_400_000);
    }
    // A reindex asked while the next sync waits is queued now, not folded into the sync days ahead.
    const waiting = await runDirect({ url: siteUrl, syncFrequency: 'weekly' });
    expect((await owner.api.post(`/knowledge/${waiting.id}/reindex`, {}, { token: owner.accessToken })).status).to.equal(202);
    const now = await t.server.db.knex('jobs').where({ queue: 'knowledge-index', dedupeKey: `index:${waiting.id}` }).select('runAt');
    expect(now, 'a job to index it now').to.have.length(1);
    expect(new Date(now[0].runAt).getTime()).to.be.at.most(Date.now());
    expect(await syncJob(waiting.id), 'the sync still waits').to.not.equal(undefined);
    const never = await runDirect({ url: siteUrl, syncFrequency: 'never' });
    expect(await syncJob(never.id)).to.equal(undefined);
    const text = await runDirect({ source: 'text', content: 'Tide tables.', url: null, fetchMode: null, crawlDepth: null, maxPages: null, syncFrequency: 'daily' });
    expect(text.doc.status).to.equal('indexed');
    expect(await syncJob(text.id)).to.equal(undefined);
  });
});

describe('knowledge search and assist at the edges', function () {
  this.timeout(60_000);
  let org: SignedUp;
  const docs: Record<string, string> = {};
  const chunks: Record<string, string> = {};

  before(async () => {
    const { server, baseUrl } = sharedServer();
    org = await signUp(server, baseUrl);
    const sources: [string, string, number[]][] = [
      ['Parking', 'Parking is free here on Sundays.', [0, 1, 0]],
      ['Street', 'Die Hauptstraße ist am Montag gesperrt.', [1, 0, 0]],
      ['Lighthouse', 'The lighthouse opens at noon.', [0, 0, 1]],
    ];
    for (const [title, content, embedding] of sources) {
      const created = await org.api.post('/knowledge', { title, source: 'text', content }, { token: org.accessToken });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect((await indexed(server, org, created.body.data.id)).status).to.equal('indexed');
      docs[title] = created.body.data.id;
      const info = await org.api.get(`/knowledge/ai/${docs[title]}/sync-info?organizationId=${org.orgId}`, ai);
      chunks[title] = info.body.data.chunks[0].chunkId;
      const put = await org.api.put(`/knowledge/ai/${docs[title]}/embeddings`, { organizationId: org.orgId, model: 'm', items: [{ chunkId: chunks[title], embedding }] }, ai);
      expect(put.status, JSON.stringify(put.body)).to.equal(200);
    }
    const template = await org.api.post('/templates', { title: 'Sunday parking', content: 'You can park here for free on Sundays.', shortcut: `park-${Date.now()}` }, { token: org.accessToken });
    expect(template.status, JSON.stringify(template.body)).to.equal(201);
  });

  const aiSearch = async (body: Record<string, unknown>) => {
    const res = await org.api.post('/knowledge/ai/search', { organizationId: org.orgId, ...body }, ai);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return (res.body.data as { title: string }[]).map((h) => h.title);
  };
  const assist = async (message: string) => {
    const { conversationId } = await startConversation(await newVisitor(org), message);
    const res = await org.api.post(`/conversations/${conversationId}/assist`, {}, { token: org.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return { passages: (res.body.data.passages as { title: string }[]).map((p) => p.title), templates: (res.body.data.templates as { title: string }[]).map((t) => t.title) };
  };

  it('finds nothing for a query of blanks, and ranks by embedding alone when the words are blanks', async () => {
    const blank = await org.api.get(`/knowledge/search?q=${encodeURIComponent('   ')}`, { token: org.accessToken });
    expect([blank.status, blank.body.data]).to.deep.equal([200, []]);
    expect(await aiSearch({ q: '   ' })).to.deep.equal([]);
    expect(await aiSearch({ q: '   ', embedding: [0, 1, 0], limit: 1 })).to.deep.equal(['Parking']);
    expect(await aiSearch({ q: '   ', embedding: [0.1, 1, 0.2] })).to.deep.equal(['Parking', 'Lighthouse', 'Street']);
    // Words no chunk holds and an embedding of a length no chunk has: nothing.
    expect(await aiSearch({ q: 'zzqxv', embedding: [1, 2, 3, 4, 5] })).to.deep.equal([]);
  });

  it('assists from what the visitor wrote: nothing for words too short to search, words as written in any case, at most 40 words', async () => {
    expect(await assist('ok ?')).to.deep.equal({ passages: [], templates: [] });
    expect(await assist('PARKING HERE?')).to.deep.equal({ passages: ['Parking'], templates: ['Sunday parking'] });
    expect((await assist('Hauptstraße?')).passages).to.deep.equal(['Street']);
    // The first 40 different words are searched: the lighthouse is found as the 40th word, not as the 41st.
    const fillers = (n: number) => Array.from({ length: n }, (_, i) => `filler${i}`).join(' ');
    expect((await assist(`${fillers(39)} filler0 lighthouse`)).passages).to.deep.equal(['Lighthouse']);
    expect((await assist(`${fillers(40)} lighthouse`)).passages).to.deep.equal([]);
  });
});

describe('knowledge chunks', () => {
  const words = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `w${from + i}`);

  it('cuts 800 words with 100 of overlap, positions in order, the last chunk ending the text', () => {
    expect(chunkText(words(800).join(' ')).map((c) => [c.position, c.tokenCount])).to.deep.equal([[0, 800]]);
    expect(chunkText(words(801).join(' ')).map((c) => [c.position, c.tokenCount])).to.deep.equal([[0, 800], [1, 101]]);
    const three = chunkText(words(1501).join(' '));
    expect(three.map((c) => [c.position, c.tokenCount])).to.deep.equal([[0, 800], [1, 800], [2, 101]]);
    expect(three[2]!.content).to.equal(words(101, 1400).join(' '));
    expect(chunkText('one two three', 2, 1).map((c) => c.content)).to.deep.equal(['one two', 'two three']);
    // An overlap as large as the chunk still moves on by one word.
    expect(chunkText('one two three', 2, 2).map((c) => c.content)).to.deep.equal(['one two', 'two three']);
  });

  it('keeps no NUL (PostgreSQL text cannot hold it), and gives nothing for a text of blanks', () => {
    expect(chunkText('Tide\u0000tables at\u0000 noon')[0]!.content).to.equal('Tidetables at noon');
    expect(chunkText(' \n\t\r\n \u0000 ')).to.deep.equal([]);
    // Words however spaced (lines, CRLF, tabs, blank lines) are joined by one space.
    expect(chunkText('Tide  tables\r\n\r\n\r\nat\tnoon\f\v\n')).to.deep.equal([{ position: 0, content: 'Tide tables at noon', tokenCount: 4 }]);
  });
});
