// What agents hear about channels besides messages: `channel_status_changed` when a channel's status moves (the
// WhatsApp handshake, disabling, enabling, a failed check), and the `ticket_reply_received` notification when a
// customer's mail lands on a ticket (the assignee, else the admins; a closed ticket's follow-up too).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { addMember, signUp, uniqueEmail, type Member, type SignedUp } from './helpers/factories.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { collect, connectOk, nextEvent, settle, type ClientSocket } from './helpers/sockets.js';
import { createTicket, ok } from './helpers/tickets.js';
import { mime, postSignedMail, quiesce, TEST_ENCRYPTION_KEY } from './helpers/channels.js';
import { expectError } from './helpers/tenancy.js';

describe('Channels: status and reply notifications', function () {
  this.timeout(120_000);
  let test: TestServer;
  let owner: SignedUp;
  let agent: Member;
  const sockets: ClientSocket[] = [];

  before(async () => {
    test = await startTestServer({ ENCRYPTION_KEY: TEST_ENCRYPTION_KEY });
    owner = await signUp(test.server, test.baseUrl);
    agent = await addMember(test.server, owner, 'agent');
  });

  after(async () => {
    sockets.forEach((s) => s.disconnect());
    await test?.stop();
  });

  it('tells the organization\'s agents (only them) when a channel\'s status changes, secrets masked', async () => {
    const agentSocket = await connectOk(test.baseUrl, owner.orgId, agent.accessToken);
    sockets.push(agentSocket);
    const other = await signUp(test.server, test.baseUrl);
    const outsider = await connectOk(test.baseUrl, other.orgId, other.accessToken);
    sockets.push(outsider);
    const leaked = collect(outsider, 'channel_status_changed');
    const created = ok(await owner.api.post('/channels/whatsapp', { name: 'WA', phoneNumberId: '99887766', wabaId: '1', accessToken: 'wa-live-token', appSecret: 'wa-live-secret' }, { token: owner.accessToken }), 201);
    const channelId = created.channel.id;

    const active = nextEvent(agentSocket, 'channel_status_changed', (p) => p.channel.id === channelId);
    const base = `${test.baseUrl}/api/v1/channels/whatsapp/inbound/${channelId}`;
    expect((await fetch(`${base}?hub.mode=subscribe&hub.verify_token=${encodeURIComponent(created.webhook.verifyToken)}&hub.challenge=1`)).status).to.equal(200);
    const first = await active;
    expect(first.previousStatus).to.equal('pending');
    expect(first.channel).to.include({ id: channelId, type: 'whatsapp', status: 'active' });
    expect(JSON.stringify(first)).not.to.contain('wa-live-token');
    expect(JSON.stringify(first)).not.to.contain('wa-live-secret');

    const disabled = nextEvent(agentSocket, 'channel_status_changed', (p) => p.channel.id === channelId && p.channel.status === 'disabled');
    ok(await owner.api.patch(`/channels/${channelId}`, { enabled: false }, { token: owner.accessToken }), 200);
    expect((await disabled).previousStatus).to.equal('active');

    // A change that leaves the status where it was says nothing.
    const quiet = collect(agentSocket, 'channel_status_changed');
    ok(await owner.api.patch(`/channels/${channelId}`, { name: 'WhatsApp' }, { token: owner.accessToken }), 200);
    const pending = nextEvent(agentSocket, 'channel_status_changed', (p) => p.channel.id === channelId && p.channel.status === 'pending');
    ok(await owner.api.patch(`/channels/${channelId}`, { enabled: true }, { token: owner.accessToken }), 200);
    expect((await pending).previousStatus).to.equal('disabled');
    await settle();
    expect(quiet.map((p) => p.channel.status)).to.deep.equal(['pending']);
    expect(leaked).to.deep.equal([]);
  });

  it('answers 404 at POST /channels/inbound (SES through SNS) unless EMAIL_INBOUND_SNS is on', async () => {
    expectError(await owner.api.post('/channels/inbound', { Type: 'Notification' }), 404, 'not_found');
  });

  it('answers a failed verification with channel_status_changed to failed', async () => {
    const agentSocket = await connectOk(test.baseUrl, owner.orgId, agent.accessToken);
    sockets.push(agentSocket);
    await test.server.services.organizations.changePlan(owner.orgId, 'enterprise');
    const { channel } = ok(await owner.api.post('/channels/email', { name: 'Mail', address: 'help@acme.test' }, { token: owner.accessToken }), 201);
    // Credentials sealed under another key cannot be opened: the check fails.
    await test.server.db.knex('channels').where({ id: channel.id }).update({ secrets: 'v1.AAAA.BBBB.CCCC' });
    const failed = nextEvent(agentSocket, 'channel_status_changed', (p) => p.channel.id === channel.id);
    const verified = ok(await owner.api.post(`/channels/${channel.id}/verify`, {}, { token: owner.accessToken }), 200);
    expect(verified.status).to.equal('failed');
    const heard = await failed;
    expect(heard).to.deep.include({ previousStatus: 'active' });
    expect(heard.channel).to.include({ status: 'failed' });
  });

  describe('ticket_reply_received', () => {
    let channelId: string;
    let secret: string;
    const reply = (ticket: { number: number }, from: string, text: string) =>
      postSignedMail(owner.api, channelId, secret, mime({ from, subject: `Re: [#${ticket.number}] Help`, text, messageId: `<${randomUUID()}@customer.test>` }));
    const notificationsOf = async (who: { api: SignedUp['api']; accessToken: string }) =>
      (ok(await who.api.get('/notifications', { token: who.accessToken }), 200) as { type: string; data: Record<string, unknown>; title: string }[]).filter((n) => n.type === 'ticket_reply_received');

    before(async () => {
      await test.server.services.organizations.changePlan(owner.orgId, 'enterprise');
      const data = ok(await owner.api.post('/channels/email', { name: 'Support', address: 'support@acme.test' }, { token: owner.accessToken }), 201);
      channelId = data.channel.id;
      secret = data.inbound.secret;
    });

    it('notifies the assignee, live, and not the admins', async () => {
      const requester = uniqueEmail('assigned');
      const ticket = await createTicket(owner, { title: 'Help', requester: { email: requester }, assignedTo: agent.userId });
      const agentSocket = await connectOk(test.baseUrl, owner.orgId, agent.accessToken);
      sockets.push(agentSocket);
      const live = nextEvent(agentSocket, 'notification_created', (p) => p.notification.type === 'ticket_reply_received', 15_000);
      ok(await reply(ticket, requester, 'Any news?'), 200);
      await quiesce(test.server, owner.orgId);
      const heard = await live;
      expect(heard.notification.data).to.include({ ticketId: ticket.id, number: ticket.number, from: requester });
      expect(heard.notification.body).to.equal('Any news?');
      expect((await notificationsOf(agent)).map((n) => n.data.ticketId)).to.deep.equal([ticket.id]);
      expect((await notificationsOf(owner)).some((n) => n.data.ticketId === ticket.id)).to.equal(false);
    });

    it('notifies the admins when nobody is assigned, and on a closed ticket\'s follow-up', async () => {
      const admin = await addMember(test.server, owner, 'admin');
      const requester = uniqueEmail('unassigned');
      const ticket = await createTicket(owner, { title: 'Help', requester: { email: requester } });
      ok(await reply(ticket, requester, 'Hello?'), 200);
      await quiesce(test.server, owner.orgId);
      for (const who of [owner, admin]) expect((await notificationsOf(who)).filter((n) => n.data.ticketId === ticket.id)).to.have.length(1);
      expect((await notificationsOf(agent)).some((n) => n.data.ticketId === ticket.id)).to.equal(false);

      // A closed ticket assigned to the agent: the follow-up's reply goes to whoever had it.
      ok(await owner.api.patch(`/tickets/${ticket.id}`, { assignedTo: agent.userId }, { token: owner.accessToken }), 200);
      ok(await owner.api.patch(`/tickets/${ticket.id}`, { status: 'closed' }, { token: owner.accessToken }), 200);
      ok(await reply(ticket, requester, 'It happened again'), 200);
      await quiesce(test.server, owner.orgId);
      const followUp = (await notificationsOf(agent)).find((n) => n.data.followUpOf === ticket.id);
      expect(followUp, 'the follow-up notification').to.not.equal(undefined);
      expect(followUp!.data.ticketId).to.not.equal(ticket.id);
      expect(followUp!.title).to.contain(`#${ticket.number}`);
    });

    it('does not notify anyone for a mail that only starts a conversation', async () => {
      const before = (await notificationsOf(owner)).length;
      ok(await postSignedMail(owner.api, channelId, secret, mime({ from: uniqueEmail('new'), subject: 'Hello', text: 'A new question', messageId: `<${randomUUID()}@customer.test>` })), 200);
      await quiesce(test.server, owner.orgId);
      expect(await notificationsOf(owner)).to.have.length(before);
    });
  });
});
