// A requester's mail answering a ticket, as the timeline and the agents see it: the reply event's author and data,
// a resolved ticket opened again by the system, and a closed ticket's follow-up (its title from the mail's subject
// without "Re:"/"Fwd:" and the ticket number, the requester carried over, created by nobody), the notification's words.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { createTicket, events, ok, patchTicket } from './helpers/tickets.js';
import { mime, postSignedMail, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';

describe('Tickets: mail from the requester', function () {
  this.timeout(120_000);
  let test: TestServer;
  let owner: SignedUp;
  let channelId: string;
  let secret: string;

  before(async () => {
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    owner = await signUp(test.server, test.baseUrl);
    await test.server.services.organizations.changePlan(owner.orgId, 'enterprise');
    const data = ok(await owner.api.post('/channels/email', { name: 'Support', address: 'support@acme.test' }, { token: owner.accessToken }), 201);
    channelId = data.channel.id;
    secret = data.inbound.secret;
  });

  after(async () => {
    await test?.stop();
  });

  const send = async (from: string, subject: string, text: string) => {
    const messageId = `<${randomUUID()}@customer.test>`;
    ok(await postSignedMail(owner.api, channelId, secret, mime({ from, subject, text, messageId })), 200);
    // This organization's jobs only: other files' servers share the database and may leave a delivery running.
    await quiesce(test.server, owner.orgId);
    return messageId;
  };
  const ticketById = async (id: string) => ok(await owner.api.get(`/tickets/${id}`, { token: owner.accessToken }), 200);
  const followUpOf = async (number: number) => {
    const all = ok(await owner.api.get('/tickets?limit=100', { token: owner.accessToken }), 200) as { description: string | null }[];
    return all.filter((t) => t.description === `Follow-up of ticket #${number}`);
  };
  const replyNotes = async () =>
    (ok(await owner.api.get('/notifications', { token: owner.accessToken }), 200) as { type: string; title: string; body: string; data: Record<string, unknown> }[]).filter(
      (n) => n.type === 'ticket_reply_received',
    );

  it('records the reply on an open ticket as the contact\'s, with who sent it and its Message-ID; the status stays', async () => {
    const requester = uniqueEmail('open');
    const ticket = await createTicket(owner, { title: 'Help', requester: { name: 'Olga', email: requester } });
    const messageId = await send(requester, `Re: [#${ticket.number}] Help`, 'Any news?');
    const after = await ticketById(ticket.id);
    expect(after.status).to.equal('open');
    expect(Date.parse(after.updatedAt)).to.be.greaterThan(Date.parse(ticket.updatedAt));
    const timeline = await events(owner, ticket.id);
    expect(timeline.map((e) => e.type)).to.deep.equal(['created', 'reply']);
    const reply = timeline[1];
    expect(reply).to.include({ actorType: 'contact', actorId: ticket.contactId, content: 'Any news?' });
    expect(reply.data).to.deep.equal({ direction: 'inbound', from: requester, messageId });
    const [note] = (await replyNotes()).filter((n) => n.data.ticketId === ticket.id);
    expect(note!.title).to.equal(`New reply on ticket #${ticket.number}`);
    expect(note!.data).to.deep.equal({ ticketId: ticket.id, number: ticket.number, from: requester });
  });

  it('keeps the first 200 characters of a long reply as the notification\'s body', async () => {
    const requester = uniqueEmail('long');
    const ticket = await createTicket(owner, { title: 'Help', requester: { email: requester } });
    const text = `${'a'.repeat(199)}bc${'d'.repeat(50)}`;
    await send(requester, `Re: [#${ticket.number}] Help`, text);
    const [note] = (await replyNotes()).filter((n) => n.data.ticketId === ticket.id);
    expect(note!.body).to.equal(`${'a'.repeat(199)}b`);
  });

  it('opens a resolved ticket again, by the system, saying why; resolvedAt is cleared', async () => {
    const requester = uniqueEmail('resolved');
    const ticket = await createTicket(owner, { title: 'Help', requester: { email: requester } });
    ok(await patchTicket(owner, ticket.id, { status: 'resolved' }), 200);
    await send(requester, `Re: [#${ticket.number}] Help`, 'Still broken');
    const after = await ticketById(ticket.id);
    expect(after.status).to.equal('open');
    expect(after.resolvedAt).to.equal(null);
    const timeline = await events(owner, ticket.id);
    expect(timeline.map((e) => e.type)).to.deep.equal(['created', 'status_changed', 'status_changed', 'reply']);
    const reopened = timeline[2];
    expect(reopened).to.include({ actorType: 'system', actorId: null, content: 'The requester answered by mail' });
    expect(reopened.data).to.deep.equal({ from: 'resolved', to: 'open' });
  });

  it('answers a closed ticket with a follow-up: the subject without Re/Fwd and the number, the requester carried over, created by nobody', async () => {
    const requester = uniqueEmail('closed');
    let ticket = await createTicket(owner, { title: 'Old title', requester: { name: 'Cleo', email: requester } });
    // A number of two digits at least, as the tag in the subject is taken away whole.
    while (ticket.number < 10) ticket = await createTicket(owner, { title: 'Old title', requester: { name: 'Cleo', email: requester } });
    ok(await patchTicket(owner, ticket.id, { status: 'closed' }), 200);
    const messageId = await send(requester, `RE : Fw: Fwd:  aw: WG:[#${ticket.number}]Printer again`, 'It happened again');
    const closed = await ticketById(ticket.id);
    expect(closed.status).to.equal('closed');
    expect((await events(owner, ticket.id)).map((e) => e.type)).to.deep.equal(['created', 'status_changed']);

    const [followUp, more] = await followUpOf(ticket.number);
    expect(more).to.equal(undefined);
    expect(followUp).to.include({ title: 'Printer again', status: 'open', source: 'email', contactId: ticket.contactId, createdBy: null, assignedTo: null });
    expect((followUp as any).requester).to.deep.equal({ name: 'Cleo', email: requester });
    const timeline = await events(owner, (followUp as any).id);
    expect(timeline.map((e) => e.type)).to.deep.equal(['created', 'reply']);
    expect(timeline[0]).to.include({ actorType: 'system', actorId: null });
    expect(timeline[1]).to.include({ actorType: 'contact', content: 'It happened again' });
    expect(timeline[1].data).to.deep.equal({ direction: 'inbound', from: requester, messageId });

    const [note] = (await replyNotes()).filter((n) => n.data.followUpOf === ticket.id);
    expect(note!.title).to.equal(`A reply to closed ticket #${ticket.number} opened ticket #${(followUp as any).number}`);
    expect(note!.data).to.deep.equal({ ticketId: (followUp as any).id, number: (followUp as any).number, from: requester, followUpOf: ticket.id });
  });

  it('a mail naming a merged ticket by its number lands on the ticket it was merged into, as its thread does', async () => {
    const requester = uniqueEmail('merged');
    const source = await createTicket(owner, { title: 'Dup', requester: { email: requester } });
    const target = await createTicket(owner, { title: 'Main', requester: { email: requester } });
    ok(await owner.api.post(`/tickets/${source.id}/merge`, { targetTicketId: target.id }, { token: owner.accessToken }), 200);
    await send(requester, `Re: [#${source.number}] Dup`, 'About the duplicate');
    expect(await followUpOf(source.number)).to.deep.equal([]);
    expect((await events(owner, source.id)).some((e) => e.type === 'reply')).to.equal(false);
    const reply = (await events(owner, target.id)).find((e) => e.type === 'reply');
    expect(reply).to.include({ actorType: 'contact', content: 'About the duplicate' });
    expect((await ticketById(target.id)).status).to.equal('open');
  });

  it('a follow-up whose subject is only "Re:" and the number keeps the closed ticket\'s title; a long subject is cut to 200', async () => {
    const requester = uniqueEmail('bare');
    const ticket = await createTicket(owner, { title: 'Kept title', requester: { email: requester } });
    ok(await patchTicket(owner, ticket.id, { status: 'closed' }), 200);
    await send(requester, `Re: [#${ticket.number}]`, 'Again');
    const [bare] = await followUpOf(ticket.number);
    expect((bare as any).title).to.equal('Kept title');

    const other = await createTicket(owner, { title: 'Short', requester: { email: requester } });
    ok(await patchTicket(owner, other.id, { status: 'closed' }), 200);
    const long = `${'x'.repeat(199)}yz`;
    await send(requester, `[#${other.number}] ${long}`, 'Again');
    const [cut] = await followUpOf(other.number);
    expect((cut as any).title).to.equal(`${'x'.repeat(199)}y`);
  });
});
