// Storage on both drivers: presigned round trips, limits at presign and at completion (a lying client), local
// signed URLs, plan storage, deletion rules and the sweep of abandoned uploads.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { indexed } from './helpers/knowledge.js';
import { download, PDF, PNG, reachable, startFakeS3, upload, type FakeS3 } from './helpers/storage.js';
import type { LocalDriver } from '../server/storage/local.js';

const MiB = 1024 * 1024;

for (const driver of ['local', 's3'] as const) {
  describe(`storage (${driver} driver)`, function () {
    this.timeout(60_000);
    let s3: FakeS3 | null = null;
    let own: TestServer | null = null;
    let t: TestServer;
    let owner: SignedUp;
    let tok: { token: string };

    before(async () => {
      if (driver === 's3') {
        s3 = await startFakeS3();
        own = await startTestServer(s3.env);
        t = own;
      } else t = sharedServer();
      owner = await signUp(t.server, t.baseUrl);
      tok = { token: owner.accessToken };
    });
    after(async () => {
      await own?.stop();
      await s3?.stop();
    });

    it('round-trips a presigned upload, completion and download', async () => {
      const bytes = Buffer.from('Hello storage ' + driver + '\n'.repeat(3));
      const up = await upload(owner.api, owner.accessToken, t.baseUrl, { name: '../../etc/notes .txt', type: 'text/plain', bytes });
      expect(up.put.status).to.equal(200);
      expect(up.complete.status, JSON.stringify(up.complete.body)).to.equal(200);
      const object = up.complete.body.data;
      expect(object).to.include({ status: 'uploaded', sizeBytes: bytes.length, mimeType: 'text/plain', purpose: 'attachment' });
      expect(object.key).to.match(new RegExp(`^org/${owner.orgId}/attachment/[0-9a-f-]{36}/notes_\\.txt$`));
      const d = await owner.api.post('/storage/presigned-download', { objectId: up.objectId, expiresIn: 60 }, tok);
      expect(d.status).to.equal(200);
      const got = await download(d.body.data.url, t.baseUrl);
      expect(got.status).to.equal(200);
      expect(got.bytes.equals(bytes)).to.equal(true);
      const meta = await owner.api.get(`/storage/metadata/${up.objectId}`, tok);
      expect(meta.body.data.status).to.equal('uploaded');
      const list = await owner.api.get('/storage/files?purpose=attachment', tok);
      expect(list.body.data.map((o: { id: string }) => o.id)).to.include(up.objectId);
      expect(list.body.pagination.total).to.be.greaterThan(0);
    });

    it('serves images inline and other files as downloads, by a link that lives as long as asked', async () => {
      const png = await upload(owner.api, owner.accessToken, t.baseUrl, { name: 'photo.png', type: 'image/png', bytes: PNG });
      const pdf = await upload(owner.api, owner.accessToken, t.baseUrl, { name: 'invoice.pdf', type: 'application/pdf', bytes: PDF });
      for (const [up, disposition, name] of [[png, 'inline', 'photo.png'], [pdf, 'attachment', 'invoice.pdf']] as const) {
        const started = Date.now();
        const d = await owner.api.post('/storage/presigned-download', { objectId: up.objectId, expiresIn: 120 }, tok);
        expect(d.status).to.equal(200);
        expect(Date.parse(d.body.data.expiresAt) - started, name).to.be.within(110_000, 130_000);
        const res = await fetch(reachable(d.body.data.url, t.baseUrl));
        expect([res.status, res.headers.get('content-disposition')], name).to.deep.equal([200, `${disposition}; filename="${name}"; filename*=UTF-8''${name}`]);
      }
    });

    it('hands out links that say what the upload must send and live as long as asked', async () => {
      const started = Math.floor(Date.now() / 1000);
      const p = await owner.api.post('/storage/presigned-upload', { fileName: 'a.txt', mimeType: 'text/plain', sizeBytes: 5, purpose: 'attachment', expiresIn: 600 }, tok);
      expect(p.status).to.equal(201);
      expect(p.body.data.upload.method).to.equal('PUT');
      expect(p.body.data.upload.headers).to.deep.equal({ 'Content-Type': 'text/plain' });
      const put = new URL(p.body.data.upload.url).searchParams;
      if (driver === 's3') {
        expect(put.get('X-Amz-Expires')).to.equal('600');
        // The declared type is part of the signature (S3 refuses the bytes sent as another type).
        expect(put.get('X-Amz-SignedHeaders')!.split(';')).to.include('content-type');
      } else expect(Number(put.get('expires')) - started).to.be.within(595, 605);
      await fetch(reachable(p.body.data.upload.url, t.baseUrl), { method: 'PUT', headers: p.body.data.upload.headers, body: 'hello' });
      expect((await owner.api.post(`/storage/objects/${p.body.data.objectId}/complete`, {}, tok)).status).to.equal(200);
      const d = await owner.api.post('/storage/presigned-download', { objectId: p.body.data.objectId, expiresIn: 120 }, tok);
      const get = new URL(d.body.data.url).searchParams;
      if (driver === 's3') expect(get.get('X-Amz-Expires')).to.equal('120');
      else expect(Number(get.get('expires')) - started).to.be.within(115, 125);
    });

    it('names a download by its file name, with a plain ASCII fallback', async () => {
      const up = await upload(owner.api, owner.accessToken, t.baseUrl, { name: 'Résumé.pdf', type: 'application/pdf', bytes: PDF });
      const d = await owner.api.post('/storage/presigned-download', { objectId: up.objectId }, tok);
      const res = await fetch(reachable(d.body.data.url, t.baseUrl));
      expect([res.status, res.headers.get('content-disposition')]).to.deep.equal([200, `attachment; filename="R_sum_.pdf"; filename*=UTF-8''R%C3%A9sum%C3%A9.pdf`]);
    });

    it('removes the bytes of a deleted file from the store', async () => {
      const up = await upload(owner.api, owner.accessToken, t.baseUrl, { name: 'gone.pdf', type: 'application/pdf', bytes: PDF });
      const d = await owner.api.post('/storage/presigned-download', { objectId: up.objectId }, tok);
      expect((await fetch(reachable(d.body.data.url, t.baseUrl))).status).to.equal(200);
      expect((await owner.api.delete(`/storage/${up.objectId}`, tok)).status).to.equal(200);
      if (driver === 's3') {
        // The link signed before the deletion reaches the bucket itself, which no longer has the object.
        expect((await fetch(d.body.data.url)).status).to.equal(404);
      } else {
        const file = (t.server.services.storage.driver as LocalDriver).pathOf(up.complete.body.data.key);
        expect(existsSync(file)).to.equal(false);
      }
    });

    if (driver === 's3') {
      it('keeps in the bucket the files the server receives itself, and indexes knowledge files read from it', async () => {
        const received = await t.server.services.storage.storeReceived(owner.orgId, { id: randomUUID(), purpose: 'attachment', fileName: 'fax.pdf', mimeType: 'application/pdf', bytes: PDF });
        const d = await owner.api.post('/storage/presigned-download', { objectId: received.id }, tok);
        const got = await download(d.body.data.url, t.baseUrl);
        expect([got.status, got.type, got.bytes.equals(PDF)]).to.deep.equal([200, 'application/pdf', true]);

        const text = Buffer.from('We ship to the moon on Tuesdays.');
        const req = await owner.api.post('/knowledge/request-upload', { title: 'Moon', fileName: 'moon.txt', mimeType: 'text/plain', sizeBytes: text.length }, tok);
        expect(req.status, JSON.stringify(req.body)).to.equal(201);
        await fetch(req.body.data.upload.url, { method: 'PUT', headers: req.body.data.upload.headers, body: new Uint8Array(text) });
        expect((await owner.api.post(`/knowledge/${req.body.data.documentId}/confirm`, {}, tok)).status).to.equal(200);
        expect((await indexed(t.server, owner, req.body.data.documentId)).status).to.equal('indexed');
        const hit = await owner.api.get('/knowledge/search?q=moon', tok);
        expect(hit.body.data.map((h: { documentId: string }) => h.documentId)).to.include(req.body.data.documentId);
      });
    }

    it('refuses oversize files and wrong types at presign', async () => {
      const big = await owner.api.post('/storage/presigned-upload', { fileName: 'big.pdf', mimeType: 'application/pdf', sizeBytes: 10 * MiB + 1, purpose: 'attachment' }, tok);
      expect(big.status).to.equal(400);
      const avatar = await owner.api.post('/storage/presigned-upload', { fileName: 'me.png', mimeType: 'image/png', sizeBytes: 2 * MiB + 1, purpose: 'avatar' }, tok);
      expect(avatar.status).to.equal(400);
      const svg = await owner.api.post('/storage/presigned-upload', { fileName: 'me.svg', mimeType: 'image/svg+xml', sizeBytes: 100, purpose: 'avatar' }, tok);
      expect(svg.status).to.equal(400);
      const exe = await owner.api.post('/storage/presigned-upload', { fileName: 'x.exe', mimeType: 'application/x-msdownload', sizeBytes: 100, purpose: 'attachment' }, tok);
      expect(exe.status).to.equal(400);
    });

    it('refuses at completion a file whose bytes are not what was declared, and deletes it', async () => {
      // Declared a PNG, sent a PDF (with the PNG content type the signature asks for).
      const lying = await upload(owner.api, owner.accessToken, t.baseUrl, { name: 'photo.png', type: 'image/png', bytes: PDF });
      expect(lying.complete.status).to.equal(400);
      expect((await owner.api.get(`/storage/metadata/${lying.objectId}`, tok)).status).to.equal(404);
      if (driver === 's3') {
        // S3 takes whatever is sent to the URL; completion finds the real size and type.
        const oversize = await upload(owner.api, owner.accessToken, t.baseUrl, { name: 'a.txt', type: 'text/plain', bytes: Buffer.alloc(500, 'a') }, { declared: { size: 20 } });
        expect(oversize.put.status).to.equal(200);
        expect([oversize.complete.status, oversize.complete.body.message]).to.deep.equal([400, 'The uploaded file has 500 bytes; 20 were declared']);
        expect((await owner.api.get(`/storage/metadata/${oversize.objectId}`, tok)).status).to.equal(404);
        const retyped = await upload(owner.api, owner.accessToken, t.baseUrl, { name: 'a.txt', type: 'text/plain', bytes: Buffer.from('plain text') }, { contentType: 'application/pdf' });
        expect([retyped.complete.status, retyped.complete.body.message]).to.deep.equal([400, 'The uploaded file is application/pdf; text/plain was declared']);
        // The local driver's own links are not served when files are in S3.
        for (const method of ['GET', 'PUT']) {
          const res = await fetch(`${t.baseUrl}/api/v1/storage/local/${oversize.objectId}?expires=4102444800&signature=x`, { method, ...(method === 'PUT' ? { headers: { 'Content-Type': 'text/plain' }, body: 'x' } : {}) });
          expect([res.status, ((await res.json()) as { message: string }).message], method).to.deep.equal([404, 'File not found']);
        }
      }
    });

    it('answers 400 to a completion before the upload, and lets the upload follow', async () => {
      const p = await owner.api.post('/storage/presigned-upload', { fileName: 'later.png', mimeType: 'image/png', sizeBytes: PNG.length, purpose: 'avatar' }, tok);
      const early = await owner.api.post(`/storage/objects/${p.body.data.objectId}/complete`, {}, tok);
      expect(early.status).to.equal(400);
      const put = await fetch(reachable(p.body.data.upload.url, t.baseUrl), { method: 'PUT', headers: p.body.data.upload.headers, body: new Uint8Array(PNG) });
      expect(put.status).to.equal(200);
      expect((await owner.api.post(`/storage/objects/${p.body.data.objectId}/complete`, {}, tok)).status).to.equal(200);
      // Avatars are public without a signature; attachments are not.
      const pub = await fetch(`${t.baseUrl}/api/v1/storage/public/${p.body.data.objectId}`);
      expect(pub.status).to.equal(200);
      expect(Buffer.from(await pub.arrayBuffer()).equals(PNG)).to.equal(true);
      // Local storage serves the bytes itself; S3 answers a redirect to a fresh signed URL of the bucket.
      const direct = await fetch(`${t.baseUrl}/api/v1/storage/public/${p.body.data.objectId}`, { redirect: 'manual' });
      expect(direct.status).to.equal(driver === 's3' ? 302 : 200);
      if (driver === 's3') expect(direct.headers.get('location')).to.match(new RegExp(`/${p.body.data.objectId}/`));
    });

    it('lets only the uploader or an admin delete, and never a file a message still shows', async () => {
      const agent = await addMember(t.server, owner, 'agent');
      const up = await upload(owner.api, owner.accessToken, t.baseUrl, { name: 'keep.pdf', type: 'application/pdf', bytes: PDF });
      expect((await owner.api.delete(`/storage/${up.objectId}`, { token: agent.accessToken })).status).to.equal(403);
      const mine = await upload(owner.api, agent.accessToken, t.baseUrl, { name: 'mine.pdf', type: 'application/pdf', bytes: PDF });
      expect((await owner.api.delete(`/storage/${mine.objectId}`, { token: agent.accessToken })).status).to.equal(200);
      expect((await owner.api.get(`/storage/metadata/${mine.objectId}`, tok)).status).to.equal(404);
      expect((await owner.api.delete(`/storage/${up.objectId}`, tok)).status).to.equal(200);
    });

    it('counts pending and uploaded bytes against the plan\'s storage', async () => {
      const other = await signUp(t.server, t.baseUrl);
      await t.server.services.organizations.changePlan(other.orgId, 'free');
      // 500 MB on the free plan: fill it with one large (pending) row.
      await t.server.db.knex('storage_objects').insert({ organizationId: other.orgId, key: `org/${other.orgId}/knowledge/fill/big.pdf`, purpose: 'knowledge', fileName: 'big.pdf', mimeType: 'application/pdf', sizeBytes: 500 * MiB - 10, status: 'pending' });
      const res = await other.api.post('/storage/presigned-upload', { fileName: 'a.txt', mimeType: 'text/plain', sizeBytes: 100, purpose: 'attachment' }, { token: other.accessToken });
      expect(res.status).to.equal(403);
      expect(res.body.error.code).to.equal('plan_limit_reached');
    });
  });
}

describe('storage: an S3 store that refuses the server', function () {
  this.timeout(60_000);
  let store: Server;
  let t: TestServer;
  before(async () => {
    // Answers every request 403 AccessDenied, as a bucket whose policy or keys are wrong does.
    store = createServer((req, res) => {
      req.resume();
      res.writeHead(403, { 'Content-Type': 'application/xml' }).end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>');
    });
    await new Promise<void>((resolve) => store.listen(0, '127.0.0.1', resolve));
    const { port } = store.address() as AddressInfo;
    t = await startTestServer({ STORAGE_DRIVER: 's3', S3_ENDPOINT: `http://127.0.0.1:${port}`, S3_BUCKET: 'support-test', S3_REGION: 'us-east-1', S3_ACCESS_KEY_ID: 'wrong', S3_SECRET_ACCESS_KEY: 'wrong', S3_FORCE_PATH_STYLE: 'true' });
  });
  after(async () => {
    await t?.stop();
    await new Promise((resolve) => store?.close(resolve));
  });

  it('fails a completion as a server error, never as an upload the client has not made', async () => {
    const owner = await signUp(t.server, t.baseUrl);
    const p = await owner.api.post('/storage/presigned-upload', { fileName: 'a.txt', mimeType: 'text/plain', sizeBytes: 5, purpose: 'attachment' }, { token: owner.accessToken });
    expect(p.status).to.equal(201);
    const done = await owner.api.post(`/storage/objects/${p.body.data.objectId}/complete`, {}, { token: owner.accessToken });
    expect([done.status, done.body.error?.code]).to.deep.equal([500, 'internal_error']);
  });
});

describe('storage: a stopped server lets go of the S3 store', function () {
  this.timeout(60_000);
  let s3: FakeS3;
  before(async () => {
    s3 = await startFakeS3();
  });
  after(() => s3?.stop());

  it('closes its pooled connections to the store when it stops', async () => {
    const t = await startTestServer(s3.env);
    try {
      const owner = await signUp(t.server, t.baseUrl);
      // Only the server talks to the store: a completion of nothing uploaded asks it for the object (HEAD), over a
      // pooled keep-alive connection that stays open.
      const p = await owner.api.post('/storage/presigned-upload', { fileName: 'a.txt', mimeType: 'text/plain', sizeBytes: 5, purpose: 'attachment' }, { token: owner.accessToken });
      expect(p.status).to.equal(201);
      const done = await owner.api.post(`/storage/objects/${p.body.data.objectId}/complete`, {}, { token: owner.accessToken });
      expect(done.status, JSON.stringify(done.body)).to.equal(400);
      expect(await s3.connections()).to.be.above(0);
    } finally {
      await t.stop();
    }
    let open = await s3.connections();
    for (let i = 0; i < 100 && open > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      open = await s3.connections();
    }
    expect(open, 'connections left open to the store').to.equal(0);
  });
});

describe('storage: local signed URLs and the sweep', () => {
  let owner: SignedUp;
  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('enforces the signature, the declared type (415) and the declared size (413)', async () => {
    const { baseUrl } = sharedServer();
    const p = await owner.api.post('/storage/presigned-upload', { fileName: 'a.txt', mimeType: 'text/plain', sizeBytes: 10, purpose: 'attachment' }, { token: owner.accessToken });
    const url = reachable(p.body.data.upload.url, baseUrl);
    expect((await fetch(url, { method: 'PUT', headers: { 'Content-Type': 'image/png' }, body: 'x' })).status).to.equal(415);
    expect((await fetch(url, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: 'x'.repeat(11) })).status).to.equal(413);
    expect((await fetch(url.replace(/signature=[^&]+/, 'signature=forged'), { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: 'x' })).status).to.equal(403);
    // A genuine signature whose time has passed is refused as well.
    const past = Math.floor(Date.now() / 1000) - 5;
    const genuine = `${baseUrl}/api/v1/storage/local/${p.body.data.objectId}?expires=${past}&signature=${(sharedServer().server.services.storage.driver as LocalDriver).sign('PUT', p.body.data.objectId, past)}`;
    expect((await fetch(genuine, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: 'x' })).status).to.equal(403);
    const expired = url.replace(/expires=\d+/, 'expires=1000');
    expect((await fetch(expired, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: 'x' })).status).to.equal(403);
    expect((await fetch(url, { method: 'PUT', headers: { 'Content-Type': 'text/plain; charset=utf-8' }, body: 'x'.repeat(10) })).status).to.equal(200);
    // An upload link does not download, and an attachment has no public link.
    expect((await fetch(url)).status).to.equal(403);
    expect((await fetch(`${baseUrl}/api/v1/storage/public/${p.body.data.objectId}`)).status).to.equal(404);
  });

  it('sweeps uploads left pending for a day', async () => {
    const { server } = sharedServer();
    const p = await owner.api.post('/storage/presigned-upload', { fileName: 'old.txt', mimeType: 'text/plain', sizeBytes: 10, purpose: 'attachment' }, { token: owner.accessToken });
    await server.db.knex('storage_objects').where({ id: p.body.data.objectId }).update({ createdAt: new Date(Date.now() - 25 * 3_600_000) });
    await server.services.storage.sweepPending();
    expect((await owner.api.get(`/storage/metadata/${p.body.data.objectId}`, { token: owner.accessToken })).status).to.equal(404);
  });

  it('keeps a pending upload a knowledge source still waits for, and sweeps the others of the same batch', async () => {
    const { server } = sharedServer();
    const t = { token: owner.accessToken };
    const source = await owner.api.post('/knowledge/request-upload', { title: 'Late', fileName: 'late.txt', mimeType: 'text/plain', sizeBytes: 10 }, t);
    expect(source.status, JSON.stringify(source.body)).to.equal(201);
    const waited = source.body.data.upload.objectId as string;
    const loose = (await owner.api.post('/storage/presigned-upload', { fileName: 'loose.txt', mimeType: 'text/plain', sizeBytes: 10, purpose: 'attachment' }, t)).body.data.objectId as string;
    // Older first: the referenced one comes first in the sweep's order, so the loose one is only reached past it.
    await server.db.knex('storage_objects').where({ id: waited }).update({ createdAt: new Date(Date.now() - 26 * 3_600_000) });
    await server.db.knex('storage_objects').where({ id: loose }).update({ createdAt: new Date(Date.now() - 25 * 3_600_000) });
    await server.services.storage.sweepPending();
    expect((await owner.api.get(`/storage/metadata/${waited}`, t)).status).to.equal(200);
    expect((await owner.api.get(`/storage/metadata/${loose}`, t)).status).to.equal(404);
    expect((await owner.api.get(`/knowledge/${source.body.data.documentId}`, t)).body.data.status).to.equal('awaiting_upload');
  });
});
