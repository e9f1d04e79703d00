// What a knowledge source's indexing tells the outside: `knowledge.indexed` and `knowledge.failed` webhooks, recorded
// with the status change, and a `knowledge_failed` notification to the organization's admins (not its agents) when
// indexing fails for good.
import { expect } from 'chai';
import { addMember, signUp, type Member, type SignedUp } from './helpers/factories.js';
import { indexed } from './helpers/knowledge.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { reachable } from './helpers/storage.js';
import { startReceiver, type Received, type WebhookReceiver } from './helpers/webhookReceiver.js';

const ofType = (type: string, documentId: string) => (r: Received) => r.json?.type === type && r.json?.data?.document?.id === documentId;

describe('knowledge events', function () {
  this.timeout(120_000);
  let server: TestServer;
  let receiver: WebhookReceiver;
  let owner: SignedUp;
  let admin: Member;
  let agent: Member;
  const tok = () => ({ token: owner.accessToken });

  const notesOf = async (who: { api: SignedUp['api']; accessToken: string }) =>
    ((await who.api.get('/notifications', { token: who.accessToken })).body.data as { type: string; title: string; body: string; data: Record<string, unknown> }[]).filter((n) => n.type === 'knowledge_failed');

  before(async () => {
    server = await startTestServer({ WEBHOOKS_ALLOW_PRIVATE: 'true' });
    receiver = await startReceiver();
    owner = await signUp(server.server, server.baseUrl);
    admin = await addMember(server.server, owner, 'admin', 'Ada Admin');
    agent = await addMember(server.server, owner, 'agent', 'Abe Agent');
    const hook = await owner.api.post('/webhooks', { url: receiver.url, events: ['knowledge.*'] }, tok());
    expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
  });
  after(async () => {
    await server?.stop();
    await receiver?.close();
  });

  it('sends knowledge.indexed with the indexed source, and notifies nobody', async () => {
    const created = await owner.api.post('/knowledge', { title: 'Returns', source: 'text', content: 'Returns are accepted within thirty days of delivery. '.repeat(50) }, tok());
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const id = created.body.data.id as string;
    expect((await indexed(server.server, owner, id)).status).to.equal('indexed');
    const [event] = await receiver.waitFor(1, ofType('knowledge.indexed', id), 60_000);
    expect(event!.json).to.include({ type: 'knowledge.indexed', organizationId: owner.orgId });
    expect(event!.json.data.document).to.include({ id, title: 'Returns', status: 'indexed', source: 'text' });
    expect(event!.json.data.document.chunkCount).to.be.greaterThan(0);
    expect(receiver.received.filter(ofType('knowledge.failed', id))).to.have.length(0);
    expect(await notesOf(owner)).to.have.length(0);
  });

  it('sends knowledge.failed and notifies the owner and admins, not agents, when a file cannot be read', async () => {
    // A PDF by its first bytes (so the upload is accepted) that no parser can read: indexing gives up at once.
    const broken = Buffer.from('%PDF-1.7\nthis is not a real PDF document at all\n%%EOF\n');
    const req = await owner.api.post('/knowledge/request-upload', { title: 'Price list', fileName: 'prices.pdf', mimeType: 'application/pdf', sizeBytes: broken.length }, tok());
    expect(req.status, JSON.stringify(req.body)).to.equal(201);
    const put = await fetch(reachable(req.body.data.upload.url, server.baseUrl), { method: 'PUT', headers: req.body.data.upload.headers, body: new Uint8Array(broken) });
    expect(put.status).to.equal(200);
    const id = req.body.data.documentId as string;
    expect((await owner.api.post(`/knowledge/${id}/confirm`, {}, tok())).status).to.equal(200);
    const done = await indexed(server.server, owner, id);
    expect(done.status).to.equal('failed');

    // A loaded machine can take a while (the embedded database shares the event loop with the PDF parser); if it
    // never arrives, the delivery log says what happened to it.
    const [event] = await receiver.waitFor(1, ofType('knowledge.failed', id), 60_000).catch(async (err: Error) => {
      const log = await server.server.db.knex('webhook_deliveries').where({ organizationId: owner.orgId }).select('eventType', 'status', 'attempts', 'lastError');
      throw new Error(`${err.message}; delivery log: ${JSON.stringify(log)}`);
    });
    expect(event!.json.data.document).to.include({ id, status: 'failed', source: 'file' });
    expect(event!.json.data.error).to.be.a('string').and.contain('could not be read');
    expect(event!.json.data.error).to.equal(done.errorMessage);
    expect(receiver.received.filter(ofType('knowledge.indexed', id))).to.have.length(0);

    for (const who of [owner, admin]) {
      const notes = await notesOf(who);
      expect(notes, 'one notification per admin').to.have.length(1);
      expect(notes[0]!.data).to.include({ documentId: id, source: 'file' });
      expect(notes[0]).to.include({ title: '"Price list" could not be indexed', body: done.errorMessage });
    }
    expect(await notesOf(agent)).to.have.length(0);
  });
});
