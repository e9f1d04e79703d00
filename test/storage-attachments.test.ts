// Files on messages: agents and visitors attach uploaded objects; every presentation (REST, socket, sync) shows
// them with working URLs; a visitor reaches only its own conversation's files.
import { expect } from 'chai';
import { sharedServer } from './helpers/hooks.js';
import { signUp, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation, type Visitor } from './helpers/live.js';
import { connectOk, nextEvent, request, type ClientSocket } from './helpers/sockets.js';
import { download, PDF, PNG, upload } from './helpers/storage.js';

describe('message attachments', function () {
  this.timeout(60_000);
  let owner: SignedUp;
  let visitor: Visitor;
  let stranger: Visitor;
  let conversationId: string;
  const sockets: ClientSocket[] = [];

  before(async () => {
    const { server, baseUrl } = sharedServer();
    owner = await signUp(server, baseUrl);
    visitor = await newVisitor(owner);
    stranger = await newVisitor(owner);
    ({ conversationId } = await startConversation(visitor));
  });
  after(() => sockets.forEach((s) => s.close()));

  it('an agent attaches files over REST; REST pages, the visitor socket and sync show them with working URLs', async () => {
    const { baseUrl } = sharedServer();
    const visitorSocket = await connectOk(baseUrl, owner.orgId, visitor.token);
    sockets.push(visitorSocket);
    const up = await upload(owner.api, owner.accessToken, baseUrl, { name: 'invoice.pdf', type: 'application/pdf', bytes: PDF });
    expect(up.complete.status).to.equal(200);
    const heard = nextEvent(visitorSocket, 'new_message', (p) => p.conversationId === conversationId);
    const sent = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'Your invoice', attachments: [up.objectId] }, { token: owner.accessToken });
    expect(sent.status, JSON.stringify(sent.body)).to.equal(201);
    expect(sent.body.data.type).to.equal('file');
    expect(sent.body.data.attachments).to.have.length(1);
    expect(sent.body.data.attachments[0]).to.include({ objectId: up.objectId, fileName: 'invoice.pdf', mimeType: 'application/pdf', sizeBytes: PDF.length });
    const event = await heard;
    expect(event.message.attachments[0].objectId).to.equal(up.objectId);
    expect((await download(event.message.attachments[0].url, baseUrl)).bytes.equals(PDF)).to.equal(true);

    const page = await owner.api.get(`/conversations/${conversationId}/messages`, { token: owner.accessToken });
    const withFile = page.body.data.find((m: { id: string }) => m.id === sent.body.data.id);
    expect(withFile.attachments[0].objectId).to.equal(up.objectId);
    expect(page.body.data.find((m: { type: string }) => m.type === 'text').attachments).to.deep.equal([]);
    const full = await owner.api.get(`/conversations/${conversationId}`, { token: owner.accessToken });
    expect(full.body.data.messages.find((m: { id: string }) => m.id === sent.body.data.id).attachments).to.have.length(1);

    const widgetPage = await visitor.api.get(`/widget/conversations/${conversationId}/messages`, { token: visitor.token });
    const seen = widgetPage.body.data.find((m: { id: string }) => m.id === sent.body.data.id);
    expect((await download(seen.attachments[0].url, baseUrl)).status).to.equal(200);
    const sync = await request(visitorSocket, 'sync', { conversationId, afterSeq: 0 });
    expect(sync.data.messages.find((m: { id: string }) => m.id === sent.body.data.id).attachments[0].objectId).to.equal(up.objectId);

    // The visitor of this conversation may ask for a link; another visitor of the same organization may not.
    expect((await visitor.api.post('/widget/storage/presigned-download', { objectId: up.objectId }, { token: visitor.token })).status).to.equal(200);
    expect((await stranger.api.post('/widget/storage/presigned-download', { objectId: up.objectId }, { token: stranger.token })).status).to.equal(404);
    // A file a message shows cannot be deleted.
    expect((await owner.api.delete(`/storage/${up.objectId}`, { token: owner.accessToken })).status).to.equal(409);
  });

  it('a visitor attaches its own uploads over the socket and REST, never another visitor\'s', async () => {
    const { baseUrl } = sharedServer();
    const agentSocket = await connectOk(baseUrl, owner.orgId, owner.accessToken);
    const visitorSocket = await connectOk(baseUrl, owner.orgId, visitor.token);
    sockets.push(agentSocket, visitorSocket);
    const mine = await upload(visitor.api, visitor.token, baseUrl, { name: 'screen.png', type: 'image/png', bytes: PNG }, { widget: true });
    expect(mine.complete.status, JSON.stringify(mine.complete.body)).to.equal(200);
    const heard = nextEvent(agentSocket, 'new_message', (p) => p.conversationId === conversationId && p.message.attachments.length > 0);
    const ack = await request(visitorSocket, 'send_message', { conversationId, content: 'See the screenshot', type: 'image', attachments: [mine.objectId] });
    expect(ack.success, JSON.stringify(ack)).to.equal(true);
    expect(ack.data.message.attachments[0]).to.include({ objectId: mine.objectId, mimeType: 'image/png' });
    const event = await heard;
    expect((await download(event.message.attachments[0].url, baseUrl)).bytes.equals(PNG)).to.equal(true);

    const rest = await visitor.api.post(`/widget/conversations/${conversationId}/messages`, { content: 'Again', attachments: [mine.objectId] }, { token: visitor.token });
    expect(rest.status).to.equal(201);
    expect(rest.body.data.attachments).to.have.length(1);

    // Another visitor cannot send it, read it, or complete it.
    const { conversationId: theirs } = await startConversation(stranger);
    const stolen = await stranger.api.post(`/widget/conversations/${theirs}/messages`, { content: 'mine now', attachments: [mine.objectId] }, { token: stranger.token });
    expect(stolen.status).to.equal(400);
    expect((await stranger.api.post('/widget/storage/presigned-download', { objectId: mine.objectId }, { token: stranger.token })).status).to.equal(404);
    expect((await stranger.api.post(`/widget/storage/objects/${mine.objectId}/complete`, {}, { token: stranger.token })).status).to.equal(404);
    // A pending object or another organization's object is not attachable either.
    const other = await signUp(sharedServer().server, baseUrl);
    const foreign = await upload(other.api, other.accessToken, baseUrl, { name: 'x.pdf', type: 'application/pdf', bytes: PDF });
    const cross = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'x', attachments: [foreign.objectId] }, { token: owner.accessToken });
    expect(cross.status).to.equal(400);
    const agentAck = await request(agentSocket, 'send_message', { conversationId, content: 'socket file', attachments: [mine.objectId] });
    expect(agentAck.success).to.equal(true);
    expect(agentAck.data.message.attachments).to.have.length(1);
  });

  it("a visitor reaches the files of the conversation's public messages, never those of an internal note", async () => {
    const { baseUrl } = sharedServer();
    const note = await upload(owner.api, owner.accessToken, baseUrl, { name: 'internal.pdf', type: 'application/pdf', bytes: PDF });
    const shown = await upload(owner.api, owner.accessToken, baseUrl, { name: 'shown.pdf', type: 'application/pdf', bytes: PDF });
    const tok = { token: owner.accessToken };
    expect((await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'For the team only', private: true, attachments: [note.objectId] }, tok)).status).to.equal(201);
    expect((await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'For you', attachments: [shown.objectId] }, tok)).status).to.equal(201);
    const ask = (objectId: string) => visitor.api.post('/widget/storage/presigned-download', { objectId }, { token: visitor.token });
    expect((await ask(shown.objectId)).status).to.equal(200);
    // The visitor's own upload, not sent yet, is the visitor's to read.
    const own = await upload(visitor.api, visitor.token, baseUrl, { name: 'mine.png', type: 'image/png', bytes: PNG }, { widget: true });
    expect((await ask(own.objectId)).status).to.equal(200);
    const refused = await ask(note.objectId);
    expect([refused.status, refused.body.message]).to.deep.equal([404, 'File not found']);
  });

  it('attaches only uploaded attachments: an avatar or a pending file is refused, naming the id', async () => {
    const { baseUrl } = sharedServer();
    const avatar = await upload(owner.api, owner.accessToken, baseUrl, { name: 'me.png', type: 'image/png', bytes: PNG }, { purpose: 'avatar' });
    const pending = await owner.api.post('/storage/presigned-upload', { fileName: 'p.pdf', mimeType: 'application/pdf', sizeBytes: PDF.length, purpose: 'attachment' }, { token: owner.accessToken });
    for (const objectId of [avatar.objectId, pending.body.data.objectId as string]) {
      const res = await owner.api.post(`/conversations/${conversationId}/messages`, { content: 'x', attachments: [objectId] }, { token: owner.accessToken });
      expect([res.status, res.body.message, res.body.error.details]).to.deep.equal([400, 'An attachment is not usable', [{ field: 'attachments', message: `${objectId} is not an uploaded attachment you may send` }]]);
    }
  });
});

