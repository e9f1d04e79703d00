// The email channel end to end: provisioning (secret shown once, masked after, plan limit), signed inbound mail
// (forged, replayed and unknown refused with nothing stored; a redelivery stored once), a new customer's mail as a
// live conversation for agents, replies threaded into their ticket, agent replies mailed back threaded (notes never),
// inbound SMTP, cross-tenant ids, and an event stored before a stop processed after the restart.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import nodemailer from 'nodemailer';
import { addMember, signUp, uniqueEmail, type Member, type SignedUp } from './helpers/factories.js';
import { startSmtpSink, type SmtpSink } from './helpers/smtp.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { connectOk, nextEvent, type ClientSocket } from './helpers/sockets.js';
import { createTicket, ok } from './helpers/tickets.js';
import { inboundEvents, mime, postSignedMail, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { waitFor } from './helpers/wait.js';

const MAIL_FROM = 'Helpdesk Platform <desk@platform.test>';

describe('Channels: email', function () {
  this.timeout(120_000);
  let smtp: SmtpSink;
  let test: TestServer;
  let owner: SignedUp;
  let agent: Member;
  let channelId: string;
  let secret: string;
  let created: any;
  let socket: ClientSocket | null = null;

  before(async () => {
    smtp = await startSmtpSink({ user: 'channels', pass: 'channels-secret' });
    test = await startTestServer({ SMTP_URL: smtp.url, MAIL_FROM, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY, SMTP_IN_PORT: '0', INBOUND_EMAIL_DOMAIN: 'in.platform.test' });
    owner = await signUp(test.server, test.baseUrl, { organizationName: `Mail ${randomUUID().slice(0, 6)}` });
    agent = await addMember(test.server, owner, 'agent');
    // Made here, not by the first test: every test of this file must be able to run on its own.
    created = ok(await owner.api.post('/channels/email', { name: 'Support', address: 'Support@Acme.test' }, { token: owner.accessToken }), 201);
    channelId = created.channel.id;
    secret = created.inbound.secret;
  });

  after(async () => {
    socket?.disconnect();
    await test?.stop();
    await smtp?.close();
  });

  it('creates an email channel: webhook URL, the secret once, the SMTP address; masked afterwards; the plan limit is 403', async () => {
    expectError(await agent.api.post('/channels/email', { name: 'Support', address: 'support@acme.test' }, { token: agent.accessToken }), 403, 'forbidden');
    const data = created;
    expect(data.channel).to.include({ type: 'email', name: 'Support', status: 'active', enabled: true });
    expect(data.inbound.webhookUrl).to.match(new RegExp(`/api/v1/channels/email/inbound/${channelId}$`));
    expect(data.inbound.smtpAddress).to.match(/^in\+[0-9a-f]{24}@in\.platform\.test$/);
    expect(secret).to.have.length.greaterThan(30);
    const got = ok(await agent.api.get(`/channels/${channelId}`, { token: agent.accessToken }), 200);
    expect(JSON.stringify(got)).not.to.contain(secret);
    expect(got.config.secrets.signingSecret).to.match(/^••••.{4}$/);
    expect(got.config).to.include({ address: 'support@acme.test' });
    const stored = await test.server.db.knex('channels').where({ id: channelId }).first();
    expect(stored.secrets).not.to.contain(secret);
    // The free plan allows one channel.
    await test.server.services.organizations.changePlan(owner.orgId, 'free');
    expectError(await owner.api.post('/channels/email', { name: 'Second', address: 'second@acme.test' }, { token: owner.accessToken }), 403, 'plan_limit_reached');
    const list = await agent.api.get('/channels', { token: agent.accessToken });
    expect(list.body.data.map((c: { id: string }) => c.id)).to.deep.equal([channelId]);
  });

  it('refuses forged, replayed and unsigned mail with 401 and stores nothing; unknown channel 404', async () => {
    const raw = mime({ from: 'eve@example.test', subject: 'Forged', text: 'x', messageId: `<${randomUUID()}@example.test>` });
    expectError(await postSignedMail(owner.api, channelId, 'not-the-secret', raw), 401, 'unauthorized');
    expectError(await postSignedMail(owner.api, channelId, secret, raw, { t: Math.floor(Date.now() / 1000) - 301 }), 401, 'unauthorized');
    expectError(await postSignedMail(owner.api, channelId, secret, raw, { signature: '' }), 401, 'unauthorized');
    // Signed for other bytes than those sent.
    const other = await owner.api.request('POST', `/channels/email/inbound/${channelId}`, { rawBody: raw + 'tampered', headers: { 'content-type': 'message/rfc822', 'x-inbound-signature': (await import('../server/services/channels/index.js')).signInbound(secret, raw) } });
    expectError(other, 401, 'unauthorized');
    expectError(await postSignedMail(owner.api, randomUUID(), secret, raw), 404, 'not_found');
    expect(await inboundEvents(test.server, channelId)).to.deep.equal([]);
  });

  it('turns a new customer\'s mail into a conversation agents see live, stored once when delivered twice', async () => {
    socket = await connectOk(test.baseUrl, owner.orgId, agent.accessToken);
    const live = nextEvent(socket, 'new_message', (p) => p.message.content.includes('Where is my invoice?'), 15_000);
    const customer = uniqueEmail('customer');
    const messageId = `<${randomUUID()}@customer.test>`;
    const raw = mime({ from: `Carla Customer <${customer}>`, subject: 'Invoice question', text: 'Where is my invoice?', messageId });
    const first = await postSignedMail(owner.api, channelId, secret, raw);
    expect(ok(first, 200)).to.deep.equal({ stored: 1, duplicates: 0 });
    const again = await postSignedMail(owner.api, channelId, secret, raw);
    expect(ok(again, 200)).to.deep.equal({ stored: 0, duplicates: 1 });
    const event = (await live) as any;
    expect(event.message.content).to.contain('Where is my invoice?');
    expect(event.message.senderType).to.equal('visitor');
    await quiesce(test.server, owner.orgId);
    const events = await inboundEvents(test.server, channelId);
    expect(events.filter((e) => e.providerId === messageId)).to.have.length(1);
    const conversation = await test.server.db.knex('conversations').where({ id: event.message.conversationId }).first();
    expect(conversation).to.include({ channel: 'email', channelId, channelAddress: customer, status: 'open' });
    const contact = await test.server.db.knex('contacts').where({ id: conversation.contactId }).first();
    expect(contact.email).to.equal(customer);
    // The conversation opened with its first message, so its conversation.created reached the agents' notifications.
    const notices = await waitFor(async () => {
      const all = ok(await agent.api.get('/notifications?limit=200', { token: agent.accessToken }), 200) as { type: string; data: { conversationId?: string } }[];
      const mine = all.filter((n) => n.type === 'new_conversation' && n.data.conversationId === conversation.id);
      return mine.length > 0 && mine;
    }, { what: 'the new-conversation notification' });
    expect(notices).to.have.length(1);
  });

  it('mails agent replies back threaded, From the organization; internal notes never leave', async () => {
    const customer = uniqueEmail('threaded');
    const messageId = `<${randomUUID()}@customer.test>`;
    ok(await postSignedMail(owner.api, channelId, secret, mime({ from: customer, subject: 'Login trouble', text: 'I cannot log in', messageId })), 200);
    await quiesce(test.server, owner.orgId);
    const [event] = (await inboundEvents(test.server, channelId)).filter((e) => e.providerId === messageId);
    const conversationId = event!.conversationId!;
    ok(await agent.api.post(`/conversations/${conversationId}/messages`, { content: 'Internal: check the logs', private: true }, { token: agent.accessToken }), 201);
    ok(await agent.api.post(`/conversations/${conversationId}/messages`, { content: 'Please reset your password.' }, { token: agent.accessToken }), 201);
    await quiesce(test.server, owner.orgId);
    const reply = await smtp.waitForMail(customer);
    expect(reply.subject).to.equal('Re: Login trouble');
    expect(reply.text).to.contain('Please reset your password.');
    expect(reply.parsed.inReplyTo).to.equal(messageId);
    expect(reply.parsed.from?.value[0]?.address).to.equal('desk@platform.test');
    expect(reply.parsed.replyTo?.value[0]?.address).to.equal('support@acme.test');
    const deliveries = ok(await owner.api.get(`/channels/${channelId}/deliveries`, { token: owner.accessToken }), 200);
    const mine = deliveries.filter((d: { conversationId: string }) => d.conversationId === conversationId);
    expect(mine).to.have.length(1);
    expect(mine[0]).to.include({ status: 'sent', recipient: customer });
    expect(smtp.received.some((m) => m.text.includes('Internal: check the logs'))).to.equal(false);

    // The customer answers our mail: the same conversation.
    ok(await postSignedMail(owner.api, channelId, secret, mime({ from: customer, subject: 'Re: Login trouble', text: 'Done, thanks', messageId: `<${randomUUID()}@customer.test>`, inReplyTo: reply.parsed.messageId! })), 200);
    await quiesce(test.server, owner.orgId);
    const messages = await test.server.db.knex('messages').where({ conversationId }).orderBy('seq');
    expect(messages.map((m: { content: string }) => m.content).at(-1)).to.equal('Done, thanks');
  });

  it('threads a reply to a ticket mail into that ticket (In-Reply-To), and reopens it when resolved', async () => {
    const requester = uniqueEmail('requester');
    const ticket = await createTicket(owner, { title: 'Broken export', requester: { name: 'Rita', email: requester } });
    const created = await smtp.waitForMail(requester, (m) => m.subject.includes('Broken export'));
    ok(await owner.api.patch(`/tickets/${ticket.id}`, { status: 'resolved' }, { token: owner.accessToken }), 200);
    ok(await postSignedMail(owner.api, channelId, secret, mime({ from: requester, subject: `Re: [#${ticket.number}] Broken export`, text: 'Still broken!', messageId: `<${randomUUID()}@customer.test>`, inReplyTo: created.parsed.messageId! })), 200);
    await quiesce(test.server, owner.orgId);
    const after = ok(await owner.api.get(`/tickets/${ticket.id}`, { token: owner.accessToken }), 200);
    expect(after.status).to.equal('open');
    const timeline = ok(await owner.api.get(`/tickets/${ticket.id}/events`, { token: owner.accessToken }), 200);
    const reply = timeline.find((e: { type: string; actorType: string }) => e.type === 'reply' && e.actorType === 'contact');
    expect(reply.content).to.equal('Still broken!');
  });

  it('takes mail over SMTP for in+<token>@INBOUND_EMAIL_DOMAIN the same way', async () => {
    const channel = ok(await owner.api.get(`/channels/${channelId}`, { token: owner.accessToken }), 200);
    const port = test.server.services.channels.smtpInPort!;
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true });
    const customer = uniqueEmail('smtp');
    const messageId = `<${randomUUID()}@customer.test>`;
    await transport.sendMail({ from: customer, to: channel.config.smtpAddress, subject: 'Over SMTP', text: 'Sent over SMTP', messageId });
    await expectRejects(transport.sendMail({ from: customer, to: 'in+000000000000000000000000@elsewhere.test', subject: 'x', text: 'x' }));
    transport.close();
    await waitFor(async () => (await inboundEvents(test.server, channelId)).some((e) => e.providerId === messageId), { what: 'the SMTP mail stored' });
    await quiesce(test.server, owner.orgId);
    const [event] = (await inboundEvents(test.server, channelId)).filter((e) => e.providerId === messageId);
    expect(event!.status).to.equal('processed');
  });

  it('answers 404 for another organization\'s channel ids', async () => {
    const other = await signUp(test.server, test.baseUrl);
    expectError(await other.api.get(`/channels/${channelId}`, { token: other.accessToken }), 404, 'not_found');
    expectError(await other.api.patch(`/channels/${channelId}`, { name: 'Mine' }, { token: other.accessToken }), 404, 'not_found');
    expectError(await other.api.delete(`/channels/${channelId}`, { token: other.accessToken }), 404, 'not_found');
    expectError(await other.api.get(`/channels/${channelId}/deliveries`, { token: other.accessToken }), 404, 'not_found');
  });
});

async function expectRejects(p: Promise<unknown>): Promise<void> {
  let failed = false;
  await p.catch(() => (failed = true));
  expect(failed, 'expected a refusal').to.equal(true);
}

describe('Channels: an inbound event stored before a stop is processed after the restart', function () {
  this.timeout(120_000);

  it('processes it on the next server over the same database', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'channels-restart-'));
    const env = { DATA_DIR: dataDir, ENCRYPTION_KEY: TEST_ENCRYPTION_KEY };
    let first: TestServer | null = await startTestServer(env);
    let second: TestServer | null = null;
    try {
      const owner = await signUp(first.server, first.baseUrl);
      const created = ok(await owner.api.post('/channels/email', { name: 'Support', address: 'support@restart.test' }, { token: owner.accessToken }), 201);
      // No worker runs: the event is stored and its job waits, as when the process dies right after the commit.
      await first.server.jobs.stop();
      const messageId = `<${randomUUID()}@customer.test>`;
      ok(await postSignedMail(owner.api, created.channel.id, created.inbound.secret, mime({ from: uniqueEmail('restart'), subject: 'Before the stop', text: 'Hello?', messageId })), 200);
      const [stored] = await inboundEvents(first.server, created.channel.id);
      expect(stored!.status).to.equal('pending');
      await first.stop();
      first = null;
      second = await startTestServer(env);
      await quiesce(second.server, owner.orgId);
      const [processed] = await inboundEvents(second.server, created.channel.id);
      expect(processed!.status).to.equal('processed');
      const messages = await second.server.db.knex('messages').where({ conversationId: processed!.conversationId });
      expect(messages.map((m: { content: string }) => m.content).join()).to.contain('Hello?');
    } finally {
      await first?.stop();
      await second?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
