// Ticket mail over real SMTP: From "<Org> via <platform>", subject "[#n] title", one thread per ticket (Message-ID,
// In-Reply-To, References) across created -> reply -> resolved, Cc, idempotent replies, and what a reply refuses.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { startSmtpSink, type ReceivedMail, type SmtpSink } from './helpers/smtp.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { settle } from './helpers/sockets.js';
import { aiClient, createTicket, ok, patchTicket } from './helpers/tickets.js';

const MAIL_FROM = 'Helpdesk Platform <desk@platform.test>';

const refs = (m: ReceivedMail): string[] => {
  const r = m.parsed.references;
  return r === undefined ? [] : Array.isArray(r) ? r : r.split(/\s+/).filter(Boolean);
};

describe('Tickets: mail to the requester', function () {
  this.timeout(60_000);
  let smtp: SmtpSink;
  let test: TestServer;
  let owner: SignedUp;
  const orgName = `Acme ${randomUUID().slice(0, 6)}`;

  before(async () => {
    smtp = await startSmtpSink({ user: 'tickets', pass: 'tickets-secret' });
    test = await startTestServer({ SMTP_URL: smtp.url, MAIL_FROM });
    owner = await signUp(test.server, test.baseUrl, { organizationName: orgName });
  });

  after(async () => {
    await test?.stop();
    await smtp?.close();
  });

  const mailsTo = (to: string) => smtp.received.filter((m) => m.rcptTo.includes(to));

  it('threads created -> reply -> resolved: own Message-IDs, In-Reply-To the previous, References the thread', async () => {
    const requester = uniqueEmail('requester');
    const cc = uniqueEmail('cc');
    const t = await createTicket(owner, { title: 'Cannot log in', requester: { name: 'Rosa', email: requester } });

    const created = await smtp.waitForMail(requester, (m) => m.subject === `[#${t.number}] Cannot log in`);
    expect(created.parsed.from?.value[0]).to.deep.equal({ name: `${orgName} via Helpdesk Platform`, address: 'desk@platform.test' });
    expect(created.text).to.contain('Rosa');
    const m1 = created.parsed.messageId!;
    expect(m1).to.match(/^<[^<>\s]+@platform\.test>$/);
    expect(created.parsed.inReplyTo).to.equal(undefined);
    expect(refs(created)).to.deep.equal([]);

    const res = await owner.api.post(`/tickets/${t.id}/replies`, { content: 'Please try the reset link.', cc: [cc], clientMessageId: 'r-1' }, { token: owner.accessToken });
    const { event, delivery } = ok(res, 201);
    expect(event).to.include({ type: 'reply', content: 'Please try the reset link.', clientMessageId: 'r-1', actorType: 'agent', actorId: owner.userId });
    expect(delivery).to.include({ status: 'queued', to: requester });
    expect(delivery.cc).to.deep.equal([cc]);
    const reply = await smtp.waitForMail(requester, (m) => m.parsed.messageId === delivery.messageId);
    expect(reply.subject).to.equal(`[#${t.number}] Cannot log in`);
    expect(reply.text).to.contain('Please try the reset link.');
    expect(reply.rcptTo).to.include(cc);
    expect((reply.parsed.cc as any).value.map((a: any) => a.address)).to.deep.equal([cc]);
    expect(reply.parsed.inReplyTo).to.equal(m1);
    expect(refs(reply)).to.deep.equal([m1]);
    const m2 = reply.parsed.messageId!;
    expect(m2).to.not.equal(m1);

    ok(await patchTicket(owner, t.id, { status: 'resolved' }), 200);
    const resolved = await smtp.waitForMail(requester, (m) => m.parsed.inReplyTo === m2);
    expect(resolved.subject).to.equal(`[#${t.number}] Cannot log in`);
    expect(resolved.text).to.match(/resolved/i);
    expect(refs(resolved)).to.deep.equal([m1, m2]);
    const m3 = resolved.parsed.messageId!;
    expect(new Set([m1, m2, m3]).size).to.equal(3);

    // What inbound matching needs is stored per ticket, in order.
    const stored = await test.server.db.models.TicketMail.acrossOrgs().where('ticketId', t.id).orderBy('createdAt');
    expect(stored.map((m) => [m.kind, m.messageId, m.inReplyTo])).to.deep.equal([['created', m1, null], ['reply', m2, m1], ['resolved', m3, m2]]);
    expect((await test.server.services.tickets.core.deps.mail.ticketForMessageIds(owner.orgId, [m2]))?.id).to.equal(t.id);

    // The same clientMessageId again: 200, the first reply, no second mail.
    const again = await owner.api.post(`/tickets/${t.id}/replies`, { content: 'Something else', clientMessageId: 'r-1' }, { token: owner.accessToken });
    const repeated = ok(again, 200);
    expect(repeated.event).to.deep.equal(event);
    expect(repeated.delivery).to.deep.equal(delivery);
    await settle(500);
    expect(mailsTo(requester)).to.have.length(3);
  });

  it('mails on close too, threaded; a merged ticket\'s thread is matched to the target', async () => {
    const requester = uniqueEmail('closer');
    const t = await createTicket(owner, { title: 'Close me', requester: { email: requester } });
    const first = await smtp.waitForMail(requester);
    ok(await patchTicket(owner, t.id, { status: 'closed' }), 200);
    const closed = await smtp.waitForMail(requester, (m) => m.parsed.inReplyTo === first.parsed.messageId);
    expect(closed.text).to.match(/closed/i);
    expect(closed.subject).to.equal(`[#${t.number}] Close me`);

    const other = uniqueEmail('merged');
    const source = await createTicket(owner, { title: 'Dup', requester: { email: other } });
    const sourceMail = await smtp.waitForMail(other);
    const target = await createTicket(owner, { title: 'Main' });
    ok(await owner.api.post(`/tickets/${source.id}/merge`, { targetTicketId: target.id }, { token: owner.accessToken }), 200);
    expect((await test.server.services.tickets.core.deps.mail.ticketForMessageIds(owner.orgId, [sourceMail.parsed.messageId!]))?.id).to.equal(target.id);
  });

  it('refuses a reply without requester email (400), to a closed ticket (400 invalid_transition), bad cc (400)', async () => {
    const none = await createTicket(owner, { title: 'No requester' });
    const res = await owner.api.post(`/tickets/${none.id}/replies`, { content: 'Hello?' }, { token: owner.accessToken });
    expectError(res, 400, 'validation_failed');
    const requester = uniqueEmail('refused');
    const t = await createTicket(owner, { title: 'Refusals', requester: { email: requester } });
    for (const body of [{ content: '' }, { content: 'x', cc: ['not-an-email'] }, { content: 'x', cc: Array.from({ length: 11 }, () => uniqueEmail('cc')) }, { content: 'x', bcc: [requester] }]) {
      expectError(await owner.api.post(`/tickets/${t.id}/replies`, body, { token: owner.accessToken }), 400, 'validation_failed');
    }
    ok(await patchTicket(owner, t.id, { status: 'closed' }), 200);
    expectError(await owner.api.post(`/tickets/${t.id}/replies`, { content: 'Too late' }, { token: owner.accessToken }), 400, 'invalid_transition');
    await settle(500);
    // Created and closed only.
    expect(mailsTo(requester).map((m) => m.text.match(/closed|received/i)?.[0]?.toLowerCase())).to.deep.equal(['received', 'closed']);
  });

  it('the AI closing twice sends one closing mail', async () => {
    const ai = aiClient(test.baseUrl);
    const requester = uniqueEmail('ai-close');
    const created = ok(await ai.post('/tickets/ai', { organizationId: owner.orgId, idempotencyKey: `close-${requester}`, title: 'Bot ticket', requesterEmail: requester }), 201);
    const first = await smtp.waitForMail(requester);
    const closed = ok(await ai.patch(`/tickets/ai/${created.id}/close`, { organizationId: owner.orgId, resolutionNote: 'Solved in chat' }), 200);
    expect(closed.status).to.equal('closed');
    await smtp.waitForMail(requester, (m) => m.parsed.inReplyTo === first.parsed.messageId);
    const again = ok(await ai.patch(`/tickets/ai/${created.id}/close`, { organizationId: owner.orgId, resolutionNote: 'Solved in chat' }), 200);
    expect(again).to.deep.equal(closed);
    await settle(800);
    expect(mailsTo(requester)).to.have.length(2);
    const outbox = await test.server.db.models.OutboxEmail.query().where({ toAddress: requester, kind: 'ticket_closed' });
    expect(outbox).to.have.length(1);
  });

  it('a long thread\'s References keep the root and the latest 19 mails', async () => {
    const requester = uniqueEmail('long-thread');
    const t = await createTicket(owner, { title: 'Long thread', requester: { email: requester } });
    let last = '';
    for (let i = 1; i <= 21; i++) {
      const res = await owner.api.post(`/tickets/${t.id}/replies`, { content: `Answer ${i}` }, { token: owner.accessToken });
      last = ok(res, 201).delivery.messageId;
    }
    const thread = (await test.server.db.models.TicketMail.acrossOrgs().where('ticketId', t.id).orderBy('createdAt').orderBy('id')).map((m) => m.messageId);
    expect(thread).to.have.length(22);
    expect(thread[21]).to.equal(last);
    // The 21st mail follows 20: all of them; the 22nd follows 21: the root, then the latest 19 (the second is left out).
    const twentyFirst = await smtp.waitForMail(requester, (m) => m.parsed.messageId === thread[20]);
    expect(refs(twentyFirst)).to.deep.equal(thread.slice(0, 20));
    const twentySecond = await smtp.waitForMail(requester, (m) => m.parsed.messageId === last);
    expect(twentySecond.parsed.inReplyTo).to.equal(thread[20]);
    expect(refs(twentySecond)).to.deep.equal([thread[0], ...thread.slice(2, 21)]);
  });
});
