// How a stored inbound message finds its place: a new sender's first mail opens a conversation whose first message
// starts with the subject, later mails of that sender join it as they are; a closed conversation is never reopened
// by a customer (the next mail opens another), a resolved one is; `[#number]` in a subject joins that ticket only from
// its requester's address; a reply to a mail we sent joins its conversation only from that conversation's customer;
// what a message or a subject cannot hold is cut, not lost; a WhatsApp sender whose number does not parse still
// gets a contact.
import { createHmac, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startTestServer, TEST_AI_SECRET, type TestServer } from './helpers/server.js';
import { Api } from './helpers/http.js';
import { createTicket, ok } from './helpers/tickets.js';
import { inboundEvents, postSignedMail, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { fakeProvider } from './helpers/providers.js';
import { MESSAGE_CONTENT_MAX } from '../server/limits.js';
import { PDF, PNG } from './helpers/storage.js';
import { INBOUND_QUEUE } from '../server/services/channels/index.js';

describe('Channels: where an inbound message goes', function () {
  this.timeout(120_000);
  let test: TestServer;
  let graph: Awaited<ReturnType<typeof fakeProvider>>;
  let owner: SignedUp;
  let channelId: string;
  let secret: string;

  before(async () => {
    graph = await fakeProvider(() => ({ status: 200, body: { messaging_product: 'whatsapp', messages: [{ id: `wamid.OUT-${randomUUID()}` }] } }));
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, WHATSAPP_GRAPH_URL: graph.url, WEBHOOKS_ALLOW_PRIVATE: 'true' });
    owner = await signUp(test.server, test.baseUrl);
    await test.server.services.organizations.changePlan(owner.orgId, 'enterprise');
    const created = ok(await owner.api.post('/channels/email', { name: 'Process', address: 'process@acme.test' }, { token: owner.accessToken }), 201);
    channelId = created.channel.id;
    secret = created.inbound.secret;
  });

  after(async () => {
    await test?.stop();
    await graph?.close();
  });

  /** Posts a mail as the JSON a mail provider sends, runs its processing and answers its stored event. */
  const mail = async (m: { from: string; subject?: string; text: string; inReplyTo?: string; references?: string; attachments?: { fileName: string; mimeType: string; content: string }[] }) => {
    const messageId = `<${randomUUID()}@customer.test>`;
    ok(await postSignedMail(owner.api, channelId, secret, JSON.stringify({ ...m, messageId }), { contentType: 'application/json' }), 200);
    await quiesce(test.server, owner.orgId);
    const event = (await inboundEvents(test.server, channelId)).find((e) => e.providerId === messageId)!;
    expect(event.status, JSON.stringify(event)).to.equal('processed');
    return event;
  };
  const messages = async (conversationId: string) =>
    ((await test.server.db.knex('messages').where({ conversationId }).orderBy('seq')) as { content: string; senderType: string }[]).map((m) => m.content);
  const shown = async (conversationId: string) =>
    ok(await owner.api.get(`/conversations/${conversationId}/messages`, { token: owner.accessToken }), 200) as { content: string; type: string; attachments: { fileName: string }[] }[];
  const conversation = (id: string) => test.server.db.knex('conversations').where({ id }).first();

  it('opens a conversation with the subject over the first mail; the sender\'s next mails join it as they are', async () => {
    const from = uniqueEmail('first');
    const first = await mail({ from: `Fay First <${from}>`, subject: 'Order 7 is late', text: 'Where is it?' });
    expect(first.ticketId).to.equal(null);
    expect(await conversation(first.conversationId!)).to.include({ subject: 'Order 7 is late', visitorName: 'Fay First', visitorEmail: from, channelAddress: from, status: 'open' });
    // Neither threaded nor numbered: the sender's open conversation on the channel.
    const second = await mail({ from, subject: 'Another subject', text: 'Any news?' });
    expect(second.conversationId).to.equal(first.conversationId);
    expect(await messages(first.conversationId!)).to.deep.equal(['Order 7 is late\n\nWhere is it?', 'Any news?']);
  });

  it('reopens a resolved conversation with the customer\'s mail, and opens another after a closed one', async () => {
    const from = uniqueEmail('status');
    const first = await mail({ from, subject: 'Refund', text: 'Please refund' });
    ok(await owner.api.patch(`/conversations/${first.conversationId}/status`, { status: 'resolved' }, { token: owner.accessToken }), 200);
    const again = await mail({ from, subject: 'Re: Refund', text: 'Not received yet' });
    expect(again.conversationId).to.equal(first.conversationId);
    expect((await conversation(first.conversationId!)).status).to.equal('open');
    ok(await owner.api.patch(`/conversations/${first.conversationId}/status`, { status: 'closed' }, { token: owner.accessToken }), 200);
    const later = await mail({ from, subject: 'Refund, once more', text: 'Still nothing' });
    expect(later.conversationId).to.not.equal(first.conversationId);
    expect((await conversation(first.conversationId!)).status).to.equal('closed');
    expect(await conversation(later.conversationId!)).to.include({ status: 'open', subject: 'Refund, once more', contactId: (await conversation(first.conversationId!)).contactId });
    expect(await messages(later.conversationId!)).to.deep.equal(['Refund, once more\n\nStill nothing']);
  });

  it('joins a ticket by [#number] in the subject from its requester (in any case), and not from anyone else', async () => {
    const requester = uniqueEmail('requester');
    const ticket = await createTicket(owner, { title: 'Numbered', requester: { name: 'Rae', email: requester } });
    const stranger = await mail({ from: uniqueEmail('stranger'), subject: `Re: [#${ticket.number}] Numbered`, text: 'Not my ticket' });
    expect(stranger).to.include({ ticketId: null });
    expect(stranger.conversationId).to.be.a('string');
    const own = await mail({ from: requester.toUpperCase(), subject: `Re: [#${ticket.number}] Numbered`, text: 'My answer' });
    expect(own).to.include({ ticketId: ticket.id, conversationId: null });
    const timeline = ok(await owner.api.get(`/tickets/${ticket.id}/events`, { token: owner.accessToken }), 200) as { type: string; actorType: string; content: string }[];
    expect(timeline.filter((e) => e.type === 'reply' && e.actorType === 'contact').map((e) => e.content)).to.deep.equal(['My answer']);
    // A ticket without a requester's address is nobody's to answer by number: a conversation.
    const anonymous = await createTicket(owner, { title: 'No requester' });
    expect(await mail({ from: requester, subject: `Re: [#${anonymous.number}] No requester`, text: 'Which ticket?' })).to.include({ ticketId: null });
    // A number no ticket has: a conversation.
    const none = await mail({ from: requester, subject: `Re: [#${ticket.number + 1000}] Numbered`, text: 'No such ticket' });
    expect(none).to.include({ ticketId: null });
  });

  it('joins a known customer\'s mail answering a ticket (In-Reply-To, References or [#number]) to the ticket, not to the customer\'s open conversation', async () => {
    const from = uniqueEmail('known');
    const chat = await mail({ from, subject: 'A chat first', text: 'Hello' });
    const ticket = await createTicket(owner, { title: 'Known requester', requester: { name: 'Kim', email: from } });
    const sent = await test.server.db.knex('ticket_mails').where({ ticketId: ticket.id }).first();
    const byReply = await mail({ from, subject: 'Re: Known requester', text: 'By In-Reply-To', inReplyTo: sent.messageId });
    const byReferences = await mail({ from, subject: 'Re: Known requester', text: 'By References', references: `<other@customer.test> ${sent.messageId}` });
    const byNumber = await mail({ from, subject: `Re: [#${ticket.number}] Known requester`, text: 'By number' });
    for (const event of [byReply, byReferences, byNumber]) expect(event).to.include({ ticketId: ticket.id, conversationId: null });
    const timeline = ok(await owner.api.get(`/tickets/${ticket.id}/events`, { token: owner.accessToken }), 200) as { type: string; actorType: string; content: string }[];
    expect(timeline.filter((e) => e.type === 'reply' && e.actorType === 'contact').map((e) => e.content)).to.deep.equal(['By In-Reply-To', 'By References', 'By number']);
    expect(await messages(chat.conversationId!)).to.deep.equal(['A chat first\n\nHello']);
  });

  it('joins a reply to our mail to its conversation from that conversation\'s customer only', async () => {
    const from = uniqueEmail('threaded');
    const first = await mail({ from, subject: 'Threads', text: 'Hello' });
    ok(await owner.api.post(`/conversations/${first.conversationId}/messages`, { content: 'Our answer' }, { token: owner.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    // No SMTP here: the delivery fails, but its Message-ID was written before the attempt, as for any mail we send.
    const delivery = await test.server.db.knex('channel_deliveries').where({ conversationId: first.conversationId }).first();
    expect(delivery.providerMessageId).to.match(/^<conversation-/);
    const other = uniqueEmail('forwarded');
    const forwarded = await mail({ from: other, subject: 'Fwd: Threads', text: 'Someone forwarded me this', inReplyTo: delivery.providerMessageId });
    expect(forwarded.conversationId).to.not.equal(first.conversationId);
    expect((await conversation(forwarded.conversationId!)).channelAddress).to.equal(other);
    const reply = await mail({ from, subject: 'Re: Threads', text: 'Thanks', inReplyTo: delivery.providerMessageId });
    expect(reply.conversationId).to.equal(first.conversationId);
    expect((await messages(first.conversationId!)).at(-1)).to.equal('Thanks');
    // Once closed, a reply to our mail opens another conversation of the same customer.
    ok(await owner.api.patch(`/conversations/${first.conversationId}/status`, { status: 'closed' }, { token: owner.accessToken }), 200);
    const late = await mail({ from, subject: 'Re: Threads', text: 'One more thing', inReplyTo: delivery.providerMessageId });
    expect(late.conversationId).to.not.equal(first.conversationId);
    expect(await conversation(late.conversationId!)).to.include({ status: 'open', contactId: (await conversation(first.conversationId!)).contactId });
    expect(await messages(late.conversationId!)).to.deep.equal(['Re: Threads\n\nOne more thing']);
  });

  it('shows the file names, comma-separated, for files without text joining a conversation or a ticket', async () => {
    const files = [{ fileName: 'invoice.pdf', mimeType: 'application/pdf', content: PDF.toString('base64') }, { fileName: 'photo.png', mimeType: 'image/png', content: PNG.toString('base64') }];
    const from = uniqueEmail('files');
    const first = await mail({ from, subject: 'Papers', text: 'Papers follow' });
    const joined = await mail({ from, subject: 'Re: Papers', text: '', attachments: files });
    expect(joined.conversationId).to.equal(first.conversationId);
    const last = (await shown(first.conversationId!)).at(-1)!;
    expect(last).to.include({ content: 'invoice.pdf, photo.png', type: 'file' });
    expect(last.attachments.map((a) => a.fileName)).to.deep.equal(['invoice.pdf', 'photo.png']);
    const ticket = await createTicket(owner, { title: 'Files by number', requester: { name: 'Fi', email: from } });
    const reply = await mail({ from, subject: `Re: [#${ticket.number}] Files by number`, text: '', attachments: files });
    expect(reply).to.include({ ticketId: ticket.id, conversationId: null });
    const timeline = ok(await owner.api.get(`/tickets/${ticket.id}/events`, { token: owner.accessToken }), 200) as { type: string; actorType: string; content: string; attachments: unknown[] }[];
    const answer = timeline.find((e) => e.type === 'reply' && e.actorType === 'contact')!;
    expect(answer.content).to.equal('invoice.pdf, photo.png');
    expect(answer.attachments).to.have.length(2);
    // A refused file without text: its note alone, not the names.
    const refused = await mail({ from, subject: `Re: [#${ticket.number}] Files by number`, text: '', attachments: [files[0]!, { fileName: 'tool.exe', mimeType: 'application/x-msdownload', content: Buffer.from('MZ binary').toString('base64') }] });
    expect(refused).to.include({ ticketId: ticket.id });
    const later = ok(await owner.api.get(`/tickets/${ticket.id}/events`, { token: owner.accessToken }), 200) as { type: string; actorType: string; content: string }[];
    expect(later.filter((e) => e.type === 'reply' && e.actorType === 'contact').at(-1)!.content).to.equal('[tool.exe was not stored: application/x-msdownload is not allowed for channel_media files]');
  });

  it('cuts a mail longer than a message holds and a subject longer than a conversation\'s, keeping both', async () => {
    const subject = `S${'s'.repeat(299)}`;
    const event = await mail({ from: uniqueEmail('long'), subject, text: 'x'.repeat(MESSAGE_CONTENT_MAX + 10) });
    expect((await conversation(event.conversationId!)).subject).to.equal(subject.slice(0, 255));
    const [content] = await messages(event.conversationId!);
    expect(content).to.have.length(MESSAGE_CONTENT_MAX);
    expect(content!.startsWith(`${subject}\n\nxxx`)).to.equal(true);
  });

  it('gives a new sender the contact that holds its email, adding the channel identity once (one contact.updated)', async () => {
    const hook = ok(await owner.api.post('/webhooks', { url: 'http://127.0.0.1:9/contacts', events: ['contact.created', 'contact.updated'] }, { token: owner.accessToken }), 201).webhook;
    const from = uniqueEmail('known-sender');
    const known = ok(await owner.api.post('/contacts', { name: 'Kim Known', email: from }, { token: owner.accessToken }), 201);
    const first = await mail({ from: `Someone Else <${from}>`, subject: 'Hello', text: 'It is me' });
    expect((await conversation(first.conversationId!)).contactId).to.equal(known.id);
    const second = await mail({ from, subject: 'Again', text: 'Me again' });
    expect(second.conversationId).to.equal(first.conversationId);
    const shownContact = ok(await owner.api.get(`/contacts/${known.id}`, { token: owner.accessToken }), 200);
    // The name it was saved with stays (the mail's is only proposed: a conflict).
    expect(shownContact).to.deep.include({ name: 'Kim Known', email: from, identities: [{ channel: 'email', externalId: from }] });
    expect((await test.server.db.knex('contacts').where({ organizationId: owner.orgId, email: from }).select('id')).map((r) => r.id)).to.deep.equal([known.id]);
    const recorded = (await test.server.db.knex('webhook_deliveries').where({ webhookId: hook.id }).orderBy('createdAt').select('eventType', 'payload')) as { eventType: string; payload: any }[];
    expect(recorded.map((r) => [r.eventType, r.payload.contact.id, r.payload.contact.identities])).to.deep.equal([
      ['contact.created', known.id, []],
      ['contact.updated', known.id, [{ channel: 'email', externalId: from }]],
    ]);
    // The AI's upsert answers the contact with its identities.
    const upserted = ok(await new Api(test.baseUrl).post('/contacts/ai/upsert', { organizationId: owner.orgId, email: from }, { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } }), 200);
    expect(upserted.contact).to.deep.include({ id: known.id, identities: [{ channel: 'email', externalId: from }] });
  });

  it('gives a sender nobody knows a new contact with its channel identity and no tags', async () => {
    const from = uniqueEmail('unknown-sender');
    const event = await mail({ from: `Una Known <${from}>`, subject: 'Hi', text: 'New here' });
    const contactId = (await conversation(event.conversationId!)).contactId;
    expect(ok(await owner.api.get(`/contacts/${contactId}`, { token: owner.accessToken }), 200)).to.deep.include({ name: 'Una Known', email: from, tags: [], identities: [{ channel: 'email', externalId: from }] });
  });

  it('joins a known sender\'s text to its open conversation without looking the contact up again by its fields', async () => {
    const from = uniqueEmail('known-fast');
    const first = await mail({ from: `Kay Known <${from}>`, subject: 'Fast', text: 'First' });
    const { conflicts } = test.server.services.contacts;
    const upsert = conflicts.upsertFromSource;
    const upserts: unknown[] = [];
    conflicts.upsertFromSource = async function (this: typeof conflicts, ...args: Parameters<typeof upsert>) {
      upserts.push(args[2]);
      return upsert.apply(this, args);
    };
    try {
      const second = await mail({ from: `Kay Known <${from}>`, text: 'Second' });
      expect(second.conversationId).to.equal(first.conversationId);
    } finally {
      conflicts.upsertFromSource = upsert;
    }
    // The channel identity names the contact (one statement for the events of a tick): its fields are not matched again.
    expect(upserts).to.deep.equal([]);
    expect(await messages(first.conversationId!)).to.deep.equal(['Fast\n\nFirst', 'Second']);
  });

  it('ends a job run again for events already processed, or no longer stored, and changes nothing', async () => {
    const from = uniqueEmail('again');
    const first = await mail({ from, subject: 'Once', text: 'Only once' });
    const second = await mail({ from, text: 'Not twice' });
    const { knex } = test.server.db;
    const stored = () => knex('inbound_events').whereIn('id', [first.id, second.id]).orderBy('seq');
    const before = await stored();
    // Runs are at least once: a job may come again after its events were processed, or after they were deleted.
    const gone = randomUUID();
    const jobs = [
      await test.server.jobs.enqueue(INBOUND_QUEUE, { eventIds: [second.id, first.id, gone] }, { organizationId: owner.orgId }),
      await test.server.jobs.enqueue(INBOUND_QUEUE, { eventId: first.id }, { organizationId: owner.orgId }),
      await test.server.jobs.enqueue(INBOUND_QUEUE, { eventId: gone }, { organizationId: owner.orgId }),
    ];
    await quiesce(test.server, owner.orgId);
    expect((await knex('jobs').whereIn('id', jobs.map((j) => j.id))).map((j: { status: string; attempts: number }) => [j.status, j.attempts])).to.deep.equal(Array(3).fill(['done', 1]));
    // Not processed again: the same outcome, written at the same time.
    expect(await stored()).to.deep.equal(before);
    expect(await messages(first.conversationId!)).to.deep.equal(['Once\n\nOnly once', 'Not twice']);
  });

  it('gives a WhatsApp sender whose number does not parse a contact by its identity alone, and keeps the message', async () => {
    const appSecret = 'process-app-secret';
    const data = ok(await owner.api.post('/channels/whatsapp', { name: 'WA', phoneNumberId: '99887766', wabaId: '1', accessToken: 'wa-token', appSecret }, { token: owner.accessToken }), 201);
    const raw = JSON.stringify({ object: 'whatsapp_business_account', entry: [{ id: 'W', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', contacts: [{ wa_id: '12', profile: { name: 'Shorty' } }], messages: [{ id: 'wamid.SHORT', from: '12', type: 'text', text: { body: 'Short number' } }] } }] }] });
    ok(await owner.api.request('POST', `/channels/whatsapp/inbound/${data.channel.id}`, { rawBody: raw, headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${createHmac('sha256', appSecret).update(raw).digest('hex')}` } }), 200);
    await quiesce(test.server, owner.orgId);
    const [event] = await inboundEvents(test.server, data.channel.id);
    expect(event!.status).to.equal('processed');
    const row = await conversation(event!.conversationId!);
    expect(row).to.include({ channel: 'whatsapp', channelAddress: '12', visitorEmail: null });
    const contact = await test.server.db.knex('contacts').where({ id: row.contactId }).first();
    expect(contact).to.include({ name: 'Shorty', phone: null });
    expect(await messages(row.id)).to.deep.equal(['Short number']);
  });
});
