// The storage rules at their edges (local driver): size limits per purpose at exactly the limit, the plan's storage
// to the byte and only the organization's own bytes, completion only by the uploader and only once, deletion of a
// file a message shows, what the sweep leaves alone, uploads streamed without a length, signed links to pending
// files, files the server receives itself, and which declared types the first bytes must prove.
import { randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { addMember, signUp, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { captureLogs } from './helpers/logs.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';
import { PDF, PNG, reachable, upload } from './helpers/storage.js';
import { AppError } from '../server/errors.js';
import type { LocalDriver } from '../server/storage/local.js';
import { contentMatches } from '../server/storage/rules.js';
import { STORAGE_SWEEP_QUEUE } from '../server/storage/sweep.js';

const MiB = 1024 * 1024;

/** The error's HTTP status, or 0 when the call succeeded. */
async function statusOf(call: Promise<unknown>): Promise<number> {
  try {
    await call;
    return 0;
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    return err.status;
  }
}

describe('storage: the rules at their edges', function () {
  this.timeout(60_000);
  let owner: SignedUp;
  const tok = () => ({ token: owner.accessToken });
  const presign = (body: Record<string, unknown>, by: SignedUp = owner) => by.api.post('/storage/presigned-upload', { fileName: 'f.bin', purpose: 'attachment', ...body }, { token: by.accessToken });

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
  });

  it('takes each purpose up to exactly its limit, and one file of one byte; the signed upload lives as long as asked', async () => {
    for (const [purpose, mimeType, max] of [['attachment', 'application/pdf', 10 * MiB], ['avatar', 'image/png', 2 * MiB], ['logo', 'image/gif', 2 * MiB], ['knowledge', 'text/markdown', 25 * MiB]] as const) {
      expect((await presign({ purpose, mimeType, sizeBytes: max })).status, `${purpose} at ${max}`).to.equal(201);
      expect((await presign({ purpose, mimeType, sizeBytes: max + 1 })).status, `${purpose} at ${max + 1}`).to.equal(400);
    }
    // A refusal names the purpose, the field and what it takes.
    const big = await presign({ purpose: 'avatar', mimeType: 'image/png', sizeBytes: 2 * MiB + 1 });
    expect([big.body.message, big.body.error.details]).to.deep.equal(['A avatar file is at most 2 MiB', [{ field: 'sizeBytes', message: `must be 1..${2 * MiB}` }]]);
    const svg = await presign({ purpose: 'logo', mimeType: 'image/svg+xml', sizeBytes: 10 });
    expect([svg.status, svg.body.message, svg.body.error.details]).to.deep.equal([400, 'image/svg+xml is not allowed for logo files', [{ field: 'mimeType', message: 'must be one of image/png, image/jpeg, image/gif, image/webp' }]]);
    const one = await presign({ mimeType: 'text/plain', sizeBytes: 1 });
    expect(one.status).to.equal(201);
    const started = Date.now();
    const long = await presign({ mimeType: 'text/plain', sizeBytes: 5, expiresIn: 3600 });
    expect(Date.parse(long.body.data.expiresAt) - started).to.be.within(3590_000, 3610_000);
    expect(Date.parse(one.body.data.expiresAt) - started).to.be.within(890_000, 910_000);
    // The service refuses an empty or negative size itself, whoever calls it (the route's schema also does).
    const { storage } = sharedServer().server.services;
    const me = { kind: 'operator' as const, orgId: owner.orgId, userId: owner.userId, role: 'owner' as const };
    expect(await statusOf(storage.presignUpload(me, { fileName: 'e.txt', mimeType: 'text/plain', sizeBytes: 0, purpose: 'attachment' }))).to.equal(400);
    expect(await statusOf(storage.presignUpload(me, { fileName: 'e.txt', mimeType: 'text/plain', sizeBytes: -1, purpose: 'attachment' }))).to.equal(400);
    expect(await statusOf(storage.presignUpload(me, { fileName: 'e.txt', mimeType: 'Text/Plain; charset=utf-8', sizeBytes: 1, purpose: 'attachment' }))).to.equal(0);
  });

  it("counts the organization's own pending and uploaded bytes against its plan, to the byte; a plan without a limit takes anything", async () => {
    const { server, baseUrl } = sharedServer();
    const small = await signUp(server, baseUrl);
    await server.services.organizations.changePlan(small.orgId, 'free');
    // Other organizations' files (the shared database holds plenty) are theirs: a new free organization starts empty.
    await server.db.knex('storage_objects').insert({ organizationId: owner.orgId, key: `org/${owner.orgId}/knowledge/fill/${randomUUID()}.pdf`, purpose: 'knowledge', fileName: 'big.pdf', mimeType: 'application/pdf', sizeBytes: 600 * MiB, status: 'uploaded' });
    expect((await presign({ mimeType: 'text/plain', sizeBytes: 10 * MiB }, small)).status).to.equal(201);
    // 500 MB in all: fill up to 100 bytes short of it, with an uploaded file this time.
    await server.db.knex('storage_objects').insert({ organizationId: small.orgId, key: `org/${small.orgId}/knowledge/fill/big.pdf`, purpose: 'knowledge', fileName: 'big.pdf', mimeType: 'application/pdf', sizeBytes: 490 * MiB - 100, status: 'uploaded' });
    expect((await presign({ mimeType: 'text/plain', sizeBytes: 101 }, small)).status).to.equal(403);
    expect((await presign({ mimeType: 'text/plain', sizeBytes: 100 }, small)).status).to.equal(201);
    expect((await presign({ mimeType: 'text/plain', sizeBytes: 1 }, small)).status).to.equal(403);
    // Without a limit (enterprise) nothing is counted.
    await server.services.organizations.changePlan(small.orgId, 'enterprise');
    expect((await presign({ mimeType: 'text/plain', sizeBytes: 10 * MiB }, small)).status).to.equal(201);
    // Files the server receives itself count the same.
    await server.services.organizations.changePlan(small.orgId, 'free');
    expect(await statusOf(server.services.storage.storeReceived(small.orgId, { id: randomUUID(), purpose: 'channel_media', fileName: 'a.txt', mimeType: 'text/plain', bytes: Buffer.from('over the plan') }))).to.equal(403);
  });

  it('completes an upload for its uploader only, once; a shorter upload is kept at its real size', async () => {
    const { server, baseUrl } = sharedServer();
    const agent = await addMember(server, owner, 'agent');
    const p = await presign({ fileName: 'short.txt', mimeType: 'text/plain', sizeBytes: 100 });
    const objectId = p.body.data.objectId;
    const put = await fetch(reachable(p.body.data.upload.url, baseUrl), { method: 'PUT', headers: p.body.data.upload.headers, body: 'only ten b' });
    expect(put.status).to.equal(200);
    // Not the uploader, even an owner's colleague: not found.
    const foreign = await agent.api.post(`/storage/objects/${objectId}/complete`, {}, { token: agent.accessToken });
    expect([foreign.status, foreign.body.message]).to.deep.equal([404, 'File not found']);
    const done = await owner.api.post(`/storage/objects/${objectId}/complete`, {}, tok());
    expect(done.status).to.equal(200);
    expect(done.body.data).to.include({ status: 'uploaded', sizeBytes: 10 });
    const again = await owner.api.post(`/storage/objects/${objectId}/complete`, {}, tok());
    expect(again.status).to.equal(200);
    expect(again.body.data.uploadedAt).to.equal(done.body.data.uploadedAt);
    // The link is spent: a second PUT is a conflict.
    expect((await fetch(reachable(p.body.data.upload.url, baseUrl), { method: 'PUT', headers: p.body.data.upload.headers, body: 'again' })).status).to.equal(409);
    // Completing before the upload names what is missing.
    const early = await presign({ fileName: 'later.txt', mimeType: 'text/plain', sizeBytes: 1 });
    const notYet = await owner.api.post(`/storage/objects/${early.body.data.objectId}/complete`, {}, tok());
    expect([notYet.status, notYet.body.error.details]).to.deep.equal([400, [{ field: 'objectId', message: 'no uploaded bytes' }]]);
    // One byte is a file; so is one of exactly the purpose's limit.
    expect((await fetch(reachable(early.body.data.upload.url, baseUrl), { method: 'PUT', headers: early.body.data.upload.headers, body: '1' })).status).to.equal(200);
    expect((await owner.api.post(`/storage/objects/${early.body.data.objectId}/complete`, {}, tok())).body.data).to.include({ status: 'uploaded', sizeBytes: 1 });
    const fullAvatar = await upload(owner.api, owner.accessToken, baseUrl, { name: 'big.png', type: 'image/png', bytes: Buffer.concat([PNG, Buffer.alloc(2 * MiB - PNG.length, 1)]) }, { purpose: 'avatar' });
    expect(fullAvatar.complete.body.data).to.include({ status: 'uploaded', sizeBytes: 2 * MiB });
    // An empty upload is no upload: refused at completion and deleted.
    const e = await presign({ fileName: 'empty.txt', mimeType: 'text/plain', sizeBytes: 10 });
    expect((await fetch(reachable(e.body.data.upload.url, baseUrl), { method: 'PUT', headers: e.body.data.upload.headers, body: '' })).status).to.equal(200);
    expect((await owner.api.post(`/storage/objects/${e.body.data.objectId}/complete`, {}, tok())).status).to.equal(400);
    expect((await owner.api.get(`/storage/metadata/${e.body.data.objectId}`, tok())).status).to.equal(404);
  });

  it('lists files of the purpose and the status asked for, and no others', async () => {
    const { baseUrl } = sharedServer();
    const org = await signUp(sharedServer().server, baseUrl);
    const pending = await org.api.post('/storage/presigned-upload', { fileName: 'p.txt', mimeType: 'text/plain', sizeBytes: 5, purpose: 'attachment' }, { token: org.accessToken });
    const avatar = await upload(org.api, org.accessToken, baseUrl, { name: 'me.png', type: 'image/png', bytes: PNG }, { purpose: 'avatar' });
    const ids = async (query: string) => ((await org.api.get(`/storage/files${query}`, { token: org.accessToken })).body.data as { id: string }[]).map((o) => o.id).sort();
    expect(await ids('?purpose=avatar')).to.deep.equal([avatar.objectId]);
    expect(await ids('?purpose=attachment')).to.deep.equal([pending.body.data.objectId]);
    expect(await ids('?status=pending')).to.deep.equal([pending.body.data.objectId]);
    expect(await ids('?status=uploaded')).to.deep.equal([avatar.objectId]);
    // Newest first.
    const all = ((await org.api.get('/storage/files', { token: org.accessToken })).body.data as { id: string }[]).map((o) => o.id);
    expect(all).to.deep.equal([avatar.objectId, pending.body.data.objectId]);
  });

  it('a visitor completes its own upload only', async () => {
    const { server } = sharedServer();
    const visitor = await newVisitor(owner);
    const other = await newVisitor(owner);
    const up = await upload(visitor.api, visitor.token, sharedServer().baseUrl, { name: 'v.png', type: 'image/png', bytes: PNG }, { widget: true });
    expect(up.complete.status).to.equal(200);
    const { storage } = server.services;
    const object = await storage.get(owner.orgId, up.objectId);
    expect(object.createdBy).to.equal(null);
    const p = await visitor.api.post('/widget/storage/presigned-upload', { fileName: 'w.png', mimeType: 'image/png', sizeBytes: PNG.length }, { token: visitor.token });
    expect((await other.api.post(`/widget/storage/objects/${p.body.data.objectId}/complete`, {}, { token: other.token })).status).to.equal(404);
  });

  it('refuses to delete a file a message or a ticket reply shows (409, in its own words); one nothing shows is deleted', async () => {
    const { baseUrl } = sharedServer();
    const visitor = await newVisitor(owner);
    const { conversationId } = await startConversation(visitor);
    const up = await upload(owner.api, owner.accessToken, baseUrl, { name: 'shown.pdf', type: 'application/pdf', bytes: PDF });
    expect((await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'See attached', attachments: [up.objectId] }, tok())).status).to.equal(201);
    const refused = await owner.api.delete(`/storage/${up.objectId}`, tok());
    expect(refused.status).to.equal(409);
    // Said in the file's words, not as the database's refusal of a row still referred to.
    expect(refused.body.message).to.equal('The file is still used by a message or a knowledge source');
    expect((await owner.api.get(`/storage/metadata/${up.objectId}`, tok())).status).to.equal(200);
    // A file on a ticket's reply (a mail's attachment) is kept the same way.
    const { server } = sharedServer();
    const ticket = await owner.api.post('/tickets', { title: 'With a file' }, tok());
    expect(ticket.status).to.equal(201);
    const [event] = await server.db.knex('ticket_events').where({ ticketId: ticket.body.data.id }).limit(1);
    const onTicket = await upload(owner.api, owner.accessToken, baseUrl, { name: 'ticket.pdf', type: 'application/pdf', bytes: PDF });
    await server.db.knex('ticket_event_attachments').insert({ organizationId: owner.orgId, eventId: event.id, objectId: onTicket.objectId, position: 0 });
    const kept = await owner.api.delete(`/storage/${onTicket.objectId}`, tok());
    expect([kept.status, kept.body.message]).to.deep.equal([409, 'The file is still used by a message or a knowledge source']);
    const lone = await upload(owner.api, owner.accessToken, baseUrl, { name: 'lone.pdf', type: 'application/pdf', bytes: PDF });
    expect((await owner.api.delete(`/storage/${lone.objectId}`, tok())).status).to.equal(200);
  });

  it('sweeps only pending uploads older than the cutoff, oldest first, at most a batch at a time', async () => {
    const { server, baseUrl } = sharedServer();
    const knex = server.db.knex;
    const fresh = await presign({ fileName: 'fresh.txt', mimeType: 'text/plain', sizeBytes: 10 });
    const recent = await presign({ fileName: 'recent.txt', mimeType: 'text/plain', sizeBytes: 10 });
    const old = await presign({ fileName: 'old.txt', mimeType: 'text/plain', sizeBytes: 10 });
    const done = await upload(owner.api, owner.accessToken, baseUrl, { name: 'done.txt', type: 'text/plain', bytes: Buffer.from('kept') });
    const hours = (h: number) => new Date(Date.now() - h * 3_600_000);
    await knex('storage_objects').where({ id: recent.body.data.objectId }).update({ createdAt: hours(23) });
    await knex('storage_objects').whereIn('id', [old.body.data.objectId, done.objectId]).update({ createdAt: hours(30) });
    const removed = await server.services.storage.sweepPending();
    expect(removed).to.be.at.least(1);
    const left = (await knex('storage_objects').whereIn('id', [fresh.body.data.objectId, recent.body.data.objectId, old.body.data.objectId, done.objectId]).select('id')).map((r) => r.id);
    expect(left.sort()).to.deep.equal([fresh.body.data.objectId, recent.body.data.objectId, done.objectId].sort());
    // A shorter age given: the one of 23 hours goes too.
    await server.services.storage.sweepPending(20);
    expect(await knex('storage_objects').where({ id: recent.body.data.objectId }).first()).to.equal(undefined);
    // At most `batch` at a time, oldest first.
    const a = await presign({ fileName: 'a.txt', mimeType: 'text/plain', sizeBytes: 10 });
    const b = await presign({ fileName: 'b.txt', mimeType: 'text/plain', sizeBytes: 10 });
    await knex('storage_objects').where({ id: a.body.data.objectId }).update({ createdAt: new Date('2000-01-01T00:00:00Z') });
    await knex('storage_objects').where({ id: b.body.data.objectId }).update({ createdAt: new Date('2000-01-02T00:00:00Z') });
    expect(await server.services.storage.sweepPending(24, 1)).to.equal(1);
    expect(await knex('storage_objects').where({ id: a.body.data.objectId }).first()).to.equal(undefined);
    expect(await knex('storage_objects').where({ id: b.body.data.objectId }).first()).to.not.equal(undefined);
  });

  it('stops a streamed upload without a length at its declared size (413) and keeps nothing of it', async () => {
    const { baseUrl } = sharedServer();
    const p = await presign({ fileName: 's.txt', mimeType: 'text/plain', sizeBytes: 10 });
    const url = reachable(p.body.data.upload.url, baseUrl);
    const stream = (text: string) => new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode(text.slice(0, 6))); c.enqueue(new TextEncoder().encode(text.slice(6))); c.close(); } });
    const over = await fetch(url, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: stream('x'.repeat(11)), duplex: 'half' } as RequestInit);
    expect(over.status).to.equal(413);
    // Not even the part received before the limit is left on disk.
    const { storage } = sharedServer().server.services;
    const folder = path.dirname((storage.driver as LocalDriver).pathOf((await storage.get(owner.orgId, p.body.data.objectId)).key));
    expect(await readdir(folder)).to.deep.equal([]);
    expect((await owner.api.post(`/storage/objects/${p.body.data.objectId}/complete`, {}, tok())).status).to.equal(400);
    // Refused at its first chunk, many times over: no part of any attempt is left, and each is a 413.
    const refused = [];
    for (let i = 0; i < 150; i++) {
      const once = new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode('z'.repeat(11))); c.close(); } });
      refused.push((await fetch(url, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: once, duplex: 'half' } as RequestInit)).status);
    }
    expect(new Set(refused)).to.deep.equal(new Set([413]));
    expect(await readdir(folder)).to.deep.equal([]);
    const exact = await fetch(url, { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: stream('y'.repeat(10)), duplex: 'half' } as RequestInit);
    expect(exact.status).to.equal(200);
    expect((await owner.api.post(`/storage/objects/${p.body.data.objectId}/complete`, {}, tok())).body.data).to.include({ status: 'uploaded', sizeBytes: 10 });
    expect(await readdir(folder)).to.deep.equal(['s.txt']);
  });

  it('serves neither a signed download nor a public link for a file still pending', async () => {
    const { server, baseUrl } = sharedServer();
    const p = await presign({ fileName: 'me.png', mimeType: 'image/png', sizeBytes: PNG.length, purpose: 'avatar' });
    const objectId = p.body.data.objectId;
    const object = await server.services.storage.get(owner.orgId, objectId);
    const signed = await server.services.storage.driver.downloadUrl({ id: object.id, key: object.key, mimeType: object.mimeType, fileName: object.fileName, sizeBytes: object.sizeBytes }, 60, 'inline');
    const said = async (url: string) => {
      const res = await fetch(url);
      return [res.status, ((await res.json()) as { message: string }).message];
    };
    expect(await said(reachable(signed, baseUrl))).to.deep.equal([404, 'File not found']);
    expect(await said(`${baseUrl}/api/v1/storage/public/${objectId}`)).to.deep.equal([404, 'File not found']);
    expect((await owner.api.post('/storage/presigned-download', { objectId }, tok())).status).to.equal(400);
    expect((await fetch(`${baseUrl}/api/v1/storage/public/${randomUUID()}`)).status).to.equal(404);
  });

  it('stores a received file once per id, within its purpose\'s limits', async () => {
    const { storage } = sharedServer().server.services;
    const id = randomUUID();
    const first = await storage.storeReceived(owner.orgId, { id, purpose: 'attachment', fileName: 'r.txt', mimeType: 'text/plain', bytes: Buffer.from('received') });
    expect(first).to.include({ status: 'uploaded', sizeBytes: 8 });
    const second = await storage.storeReceived(owner.orgId, { id, purpose: 'attachment', fileName: 'other.txt', mimeType: 'text/plain', bytes: Buffer.from('something else') });
    expect([second.id, second.fileName, second.sizeBytes]).to.deep.equal([id, 'r.txt', 8]);
    const received = (bytes: Buffer, mimeType = 'text/plain') => statusOf(storage.storeReceived(owner.orgId, { id: randomUUID(), purpose: 'attachment', fileName: 'x', mimeType, bytes }));
    expect(await received(Buffer.alloc(0))).to.equal(400);
    expect(await received(Buffer.from('1'))).to.equal(0);
    // The refusal's words become the note on the customer's message: the limit in MiB.
    const tooBig = await storage.storeReceived(owner.orgId, { id: randomUUID(), purpose: 'channel_media', fileName: 'x', mimeType: 'text/plain', bytes: Buffer.alloc(25 * MiB + 1, 'a') }).catch((err: Error) => err);
    expect((tooBig as Error).message).to.equal('A channel_media file is at most 25 MiB');
    expect(await received(Buffer.alloc(10 * MiB + 1, 'a'))).to.equal(400);
    expect(await received(Buffer.alloc(10 * MiB, 'a'))).to.equal(0);
    expect(await received(Buffer.from('x'), 'application/x-msdownload')).to.equal(400);
    expect(await received(PDF, 'image/png')).to.equal(400);
  });

  it('asks the first bytes to prove the types that have a signature, and text to be text', () => {
    const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
    const ZIP = Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00]);
    const WEBP = Buffer.concat([Buffer.from('RIFF'), Buffer.from([0, 0, 0, 0]), Buffer.from('WEBPVP8 ')]);
    expect(contentMatches('image/png', PNG)).to.equal(true);
    expect(contentMatches('IMAGE/PNG; x=1', PNG)).to.equal(true);
    expect(contentMatches('image/png', PDF)).to.equal(false);
    expect(contentMatches('image/jpeg', PNG)).to.equal(false);
    expect(contentMatches('image/webp', WEBP)).to.equal(true);
    expect(contentMatches('image/webp', Buffer.from('RIFF\0\0\0\0WAVEfmt '))).to.equal(false);
    expect(contentMatches('application/pdf', Buffer.from('hello'))).to.equal(false);
    // Office files are zip containers: a zip signature proves them, and a zip is not a PDF.
    expect(contentMatches(DOCX, ZIP)).to.equal(true);
    expect(contentMatches('application/zip', ZIP)).to.equal(true);
    expect(contentMatches(DOCX, PDF)).to.equal(false);
    expect(contentMatches('application/pdf', ZIP)).to.equal(false);
    expect(contentMatches('image/png', ZIP)).to.equal(false);
    // Text: no binary signature and no NUL byte.
    expect(contentMatches('text/plain', Buffer.from('plain words'))).to.equal(true);
    expect(contentMatches('text/csv', Buffer.from('a,b\0c'))).to.equal(false);
    expect(contentMatches('text/markdown', PNG)).to.equal(false);
    expect(contentMatches('Text/HTML', Buffer.from('<p>hi</p>'))).to.equal(true);
    // Types without a signature we know pass whatever they start with.
    expect(contentMatches('audio/mpeg', Buffer.from([0, 1, 2, 3]))).to.equal(true);
    expect(contentMatches('video/mp4', PNG)).to.equal(true);
    // A file exactly as long as its signature is proven by it; a signature is the whole signature, in its place.
    expect(contentMatches('image/jpeg', Buffer.from([0xff, 0xd8, 0xff]))).to.equal(true);
    expect(contentMatches('image/webp', Buffer.from('RIFF\0\0\0\0WEBP'))).to.equal(true);
    expect(contentMatches('image/webp', Buffer.from('RIFX\0\0\0\0WEBPVP8 '))).to.equal(false);
    expect(contentMatches('image/webp', Buffer.from('RIFF\0\0\0\0WEB'))).to.equal(false);
    // Spaces around the declared type do not let a PNG claim pass unproven.
    expect(contentMatches(' image/png ; q=1', PDF)).to.equal(false);
  });

  it('names a stored file safely: the last path part, letters and digits of any script, odd runs as one underscore, no leading dots', async () => {
    const named = async (fileName: string, mimeType = 'text/plain') => {
      const p = await presign({ fileName, mimeType, sizeBytes: 1 });
      expect(p.status, `${fileName}: ${JSON.stringify(p.body)}`).to.equal(201);
      return p.body.data.object.fileName as string;
    };
    expect(await named('C:\\Users\\me\\Q3 report-v2.pdf', 'application/pdf')).to.equal('Q3_report-v2.pdf');
    expect(await named('../../etc/passwd')).to.equal('passwd');
    expect(await named('résumé 2024.txt')).to.equal('résumé_2024.txt');
    expect(await named('a<>:"|?*b.txt')).to.equal('a_b.txt');
    expect(await named('a   b.txt')).to.equal('a_b.txt');
    expect(await named('..env')).to.equal('env');
    expect(await named('.htaccess')).to.equal('htaccess');
    // Compatibility forms become their plain letters (full-width letters, digits and full stop, the "ﬁ" ligature).
    expect(await named('ｒｅｐｏｒｔ１．ｔｘｔ')).to.equal('report1.txt');
    expect(await named('ﬁle.txt')).to.equal('file.txt');
    // Nothing left of the name: "file".
    expect(await named('folder/')).to.equal('file');
    expect(await named('...')).to.equal('file');
    expect(await named('***')).to.equal('_');
    // At most 100 characters, the end kept (the extension).
    const long = await named(`${'x'.repeat(150)}.txt`);
    expect([long.length, long.endsWith('x.txt')]).to.deep.equal([100, true]);
    // A declared type with spaces and parameters is read as its base type.
    const spaced = await presign({ fileName: 'p.txt', mimeType: 'Text/Plain ; charset=utf-8', sizeBytes: 1 });
    expect([spaced.status, spaced.body.data?.object?.mimeType]).to.deep.equal([201, 'text/plain']);
  });

  it('says each refusal in its own words: what is missing, what did not match, which limit, which link', async () => {
    const { server, baseUrl } = sharedServer();
    const said = (res: { status: number; body: { message: string; error?: { details?: unknown } } }) => [res.status, res.body.message, res.body.error?.details];
    const put = async (url: string, contentType: string, body: string) => {
      const res = await fetch(reachable(url, baseUrl), { method: 'PUT', headers: { 'Content-Type': contentType }, body });
      return [res.status, ((await res.json()) as { message: string }).message];
    };
    // Completing or downloading a file whose bytes never came.
    const early = await presign({ fileName: 'early.txt', mimeType: 'text/plain', sizeBytes: 10 });
    expect(said(await owner.api.post(`/storage/objects/${early.body.data.objectId}/complete`, {}, tok()))).to.deep.equal([400, 'The file has not been uploaded yet', [{ field: 'objectId', message: 'no uploaded bytes' }]]);
    expect(said(await owner.api.post('/storage/presigned-download', { objectId: early.body.data.objectId }, tok()))).to.deep.equal([400, 'The file has not been uploaded yet', [{ field: 'objectId', message: 'is pending' }]]);
    // The signed upload link: the declared type, the declared size, the signature, once.
    const url = early.body.data.upload.url as string;
    expect(await put(url, 'image/png', 'x')).to.deep.equal([415, 'Content-Type must be text/plain']);
    expect(await put(url, 'text/plain', 'x'.repeat(11))).to.deep.equal([413, 'This upload is at most 10 bytes']);
    const streamed = await fetch(reachable(url, baseUrl), { method: 'PUT', headers: { 'Content-Type': 'text/plain' }, body: new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode('y'.repeat(11))); c.close(); } }), duplex: 'half' } as RequestInit);
    expect([streamed.status, ((await streamed.json()) as { message: string }).message]).to.deep.equal([413, 'This upload is at most 10 bytes']);
    expect(await put(url.replace(/signature=[^&]+/, 'signature=forged'), 'text/plain', 'x')).to.deep.equal([403, 'The link is invalid or has expired']);
    expect(await put(url, 'text/plain', 'ten bytes!')).to.deep.equal([200, 'Stored']);
    expect((await owner.api.post(`/storage/objects/${early.body.data.objectId}/complete`, {}, tok())).status).to.equal(200);
    expect(await put(url, 'text/plain', 'again')).to.deep.equal([409, 'This file was already uploaded']);
    // Bytes that are not what was declared: deleted, and the answer says what differed.
    const lying = await upload(owner.api, owner.accessToken, baseUrl, { name: 'photo.png', type: 'image/png', bytes: PDF });
    expect(said(lying.complete)).to.deep.equal([400, "The uploaded file's content is not image/png", [{ field: 'objectId', message: 'the upload did not match its declaration and was deleted' }]]);
    const empty = await presign({ fileName: 'empty.txt', mimeType: 'text/plain', sizeBytes: 10 });
    expect(await put(empty.body.data.upload.url, 'text/plain', '')).to.deep.equal([200, 'Stored']);
    expect(said(await owner.api.post(`/storage/objects/${empty.body.data.objectId}/complete`, {}, tok()))).to.deep.equal([400, 'The uploaded file has 0 bytes; 10 were declared', [{ field: 'objectId', message: 'the upload did not match its declaration and was deleted' }]]);
    // A file that is gone: its metadata, and a download link signed before it was deleted.
    const gone = await upload(owner.api, owner.accessToken, baseUrl, { name: 'gone.txt', type: 'text/plain', bytes: Buffer.from('soon gone') });
    const link = (await owner.api.post('/storage/presigned-download', { objectId: gone.objectId }, tok())).body.data.url as string;
    expect((await owner.api.delete(`/storage/${gone.objectId}`, tok())).status).to.equal(200);
    expect(said(await owner.api.get(`/storage/metadata/${gone.objectId}`, tok())).slice(0, 2)).to.deep.equal([404, 'File not found']);
    const stale = await fetch(reachable(link, baseUrl));
    expect([stale.status, ((await stale.json()) as { message: string }).message]).to.deep.equal([404, 'File not found']);
    // The plan's storage, named.
    const small = await signUp(server, baseUrl);
    await server.services.organizations.changePlan(small.orgId, 'free');
    const over = await presign({ mimeType: 'text/plain', sizeBytes: 10 * MiB }, small);
    await server.db.knex('storage_objects').insert({ organizationId: small.orgId, key: `org/${small.orgId}/knowledge/fill/big.pdf`, purpose: 'knowledge', fileName: 'big.pdf', mimeType: 'application/pdf', sizeBytes: 495 * MiB, status: 'uploaded' });
    expect(over.status).to.equal(201);
    expect(said(await presign({ mimeType: 'text/plain', sizeBytes: 10 * MiB }, small)).slice(0, 2)).to.deep.equal([403, 'The free plan allows 500 MB of storage; delete files or upgrade']);
    // A received file (a channel's media): the refusal's words become the note on the customer's message.
    const { storage } = server.services;
    const refusal = async (mimeType: string, bytes: Buffer) => {
      const err = (await storage.storeReceived(owner.orgId, { id: randomUUID(), purpose: 'channel_media', fileName: 'x', mimeType, bytes }).catch((e: unknown) => e)) as AppError & { details?: unknown };
      return [err.status, err.message, err.details];
    };
    expect(await refusal('application/x-msdownload', Buffer.from('MZ'))).to.deep.equal([400, 'application/x-msdownload is not allowed for channel_media files', [{ field: 'mimeType', message: 'not an allowed type' }]]);
    expect(await refusal('text/plain', Buffer.alloc(0))).to.deep.equal([400, 'A channel_media file is at most 25 MiB', [{ field: 'sizeBytes', message: `must be 1..${25 * MiB}` }]]);
    expect(await refusal('image/png', PDF)).to.deep.equal([400, "The file's content is not image/png", [{ field: 'mimeType', message: 'does not match the content' }]]);
  });

  it('the sweep job goes on past a full batch until the uploads left behind are all gone', async function () {
    // 501 removals, each asking whether something still refers to the file: slow on a busy machine.
    this.timeout(240_000);
    const { server } = sharedServer();
    const org = await signUp(server, sharedServer().baseUrl);
    const knex = server.db.knex;
    // Older than anything else pending, so the job's first batch of 500 is these and the 501st is left for a second.
    const rows = Array.from({ length: 501 }, (_, i) => ({ organizationId: org.orgId, key: `org/${org.orgId}/attachment/${randomUUID()}/old.txt`, purpose: 'attachment', fileName: 'old.txt', mimeType: 'text/plain', sizeBytes: 1, status: 'pending', createdAt: new Date(Date.UTC(1990, 0, 1, 0, 0, i)) }));
    await knex.batchInsert('storage_objects', rows, 200);
    const left = async () => Number((await knex('storage_objects').where({ organizationId: org.orgId }).count({ n: '*' }))[0]!.n);
    // The job runs here or on the queue's own worker: wait for it to be done either way.
    const { id } = await server.jobs.enqueue(STORAGE_SWEEP_QUEUE, {});
    await waitFor(async () => (await server.jobs.drain(STORAGE_SWEEP_QUEUE), (await knex('jobs').where({ id }).first())?.status === 'done'), { timeoutMs: 200_000, what: 'the sweep job' });
    expect(await left()).to.equal(0);
  });
});


describe('storage: what the sweep job tells the operator', function () {
  this.timeout(120_000);
  let app: TestServer;
  const logs = captureLogs('info');
  before(async () => {
    app = await startTestServer({}, { logger: logs.logger });
  });
  after(async () => {
    await app?.stop();
  });

  it('logs how many uploads it removed, and nothing when there were none', async () => {
    const org = await signUp(app.server, app.baseUrl);
    const knex = app.server.db.knex;
    const rows = Array.from({ length: 2 }, (_, i) => ({ organizationId: org.orgId, key: `org/${org.orgId}/attachment/${randomUUID()}/old.txt`, purpose: 'attachment', fileName: 'old.txt', mimeType: 'text/plain', sizeBytes: 1, status: 'pending', createdAt: new Date(Date.UTC(1991, 0, 1, 0, 0, i)) }));
    await knex('storage_objects').insert(rows);
    const sweep = async () => {
      const { id } = await app.server.jobs.enqueue(STORAGE_SWEEP_QUEUE, {});
      await waitFor(async () => (await app.server.jobs.drain(STORAGE_SWEEP_QUEUE), (await knex('jobs').where({ id }).first())?.status === 'done'), { timeoutMs: 60_000, what: 'the sweep job' });
    };
    const told = () => logs.matching(30, 'removed uploads never completed');
    await sweep();
    expect(Number((await knex('storage_objects').where({ organizationId: org.orgId }).count({ n: '*' }))[0]!.n)).to.equal(0);
    expect(told()).to.have.length(1);
    expect(told()[0]!.msg).to.equal('removed uploads never completed');
    // Every instance's abandoned uploads are swept together: at least these two.
    expect(told()[0]!.removed).to.be.a('number').and.at.least(2);
    await sweep();
    expect(told()).to.have.length(1);
  });
});
