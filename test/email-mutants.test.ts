// The AI service's mail, rule by rule: the templates' exact text (greeting, signature block, the optional parts of
// ticket_update, the cuts, the characters dropped), who it is from and where replies go, the recipient rule (the
// contact's address before the visitor's, either case), the resend window of verification codes (per address, not
// for other templates, open again after 60 s or once the code is used) and what a verification changes (only the
// conversation's own contact).
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { codeIn, signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { newVisitor, startConversation, widgetKey } from './helpers/live.js';
import { startSmtpSink, type SmtpSink } from './helpers/smtp.js';
import { startTestServer, TEST_AI_SECRET, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { ok } from './helpers/tickets.js';

const MAIL_FROM = 'Helpdesk Platform <desk@platform.test>';
const ai = { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } };

describe('Email: the AI service\'s mail, rule by rule', function () {
  this.timeout(90_000);
  let smtp: SmtpSink;
  let test: TestServer;
  let owner: SignedUp;
  const orgName = `Mailer ${randomUUID().slice(0, 6)}`;

  /** A widget conversation of a visitor with this name and email (none when omitted). */
  async function conversationOf(who: SignedUp, opts: { name?: string; email?: string }): Promise<string> {
    if (opts.name !== undefined) return (await startConversation(await newVisitor(who, opts))).conversationId;
    const api = new Api(test.baseUrl);
    const token = ok(await api.post('/widget/auth/token', { publicKey: await widgetKey(who), visitor: { email: opts.email } }), 201);
    return (await startConversation({ api, token: token.token, sessionId: token.sessionId, orgId: token.organizationId, publicKey: '' })).conversationId;
  }

  const send = (who: SignedUp, conversationId: string, to: string, template: string, extra: Record<string, unknown> = {}) =>
    who.api.post('/email/send', { organizationId: who.orgId, conversationId, to, template, idempotencyKey: randomUUID(), ...extra }, ai);
  const verify = (who: SignedUp, conversationId: string, email: string, code: string) =>
    who.api.post('/email/verify-otp', { organizationId: who.orgId, conversationId, email, code }, ai);
  const outbox = (id: string) => test.server.db.knex('outbox_emails').where({ id }).first();
  const conversation = (id: string) => test.server.db.knex('conversations').where({ id }).first();
  const contact = (id: string) => test.server.db.knex('contacts').where({ id }).first();

  before(async () => {
    smtp = await startSmtpSink({ user: 'ai-mail', pass: 'ai-mail-secret' });
    test = await startTestServer({ SMTP_URL: smtp.url, MAIL_FROM });
    owner = await signUp(test.server, test.baseUrl, { organizationName: orgName });
    ok(await owner.api.put('/email/identity', { fromAddress: 'help@mailer-ai.invalid', replyTo: 'replies@mailer-ai.invalid', signature: 'The Mailer team' }, { token: owner.accessToken }), 200);
  });

  after(async () => {
    await test?.stop();
    await smtp?.close();
  });

  it('renders a summary: greeting by name, the text without CR or NUL, the signature block; From the platform on the organization\'s behalf, Reply-To its address', async () => {
    const customer = uniqueEmail('summary');
    const conversationId = await conversationOf(owner, { name: 'Vic Ray', email: customer });
    // The address in another case is the same contact.
    const body = { organizationId: owner.orgId, conversationId, to: customer.toUpperCase(), template: 'conversation_summary', variables: { summary: 'Line one\r\nLine\u0000 two' }, idempotencyKey: randomUUID() };
    const first = ok(await owner.api.post('/email/send', body, ai), 202);
    expect(first.status).to.equal('queued');
    const replay = ok(await owner.api.post('/email/send', body, ai), 200);
    expect(replay).to.deep.equal({ emailId: first.emailId, status: 'queued' });
    const row = await outbox(first.emailId);
    expect(row).to.include({ kind: 'ai_conversation_summary', toAddress: customer, subject: `Summary of your conversation with ${orgName}` });
    expect(row.textBody).to.equal(`Hello Vic Ray,\n\nLine one\nLine two\n\n-- \nThe Mailer team\n${orgName}\n`);
    expect(row.headers).to.deep.equal({ from: { name: `${orgName} via Helpdesk Platform`, address: 'desk@platform.test' }, replyTo: 'replies@mailer-ai.invalid', organizationId: owner.orgId });
    const mail = await smtp.waitForMail(customer);
    expect(mail.parsed.from?.value[0]).to.deep.equal({ name: `${orgName} via Helpdesk Platform`, address: 'desk@platform.test' });
    expect(mail.parsed.replyTo?.value[0]?.address).to.equal('replies@mailer-ai.invalid');
  });

  it('without a summary thanks the customer; without a name or a signature the greeting and the block are shorter, and no Reply-To', async () => {
    const plainName = `Plain ${randomUUID().slice(0, 6)}`;
    const plain = await signUp(test.server, test.baseUrl, { organizationName: plainName });
    const customer = uniqueEmail('plain');
    const conversationId = await conversationOf(plain, { email: customer });
    const sent = ok(await send(plain, conversationId, customer, 'conversation_summary'), 202);
    const row = await outbox(sent.emailId);
    expect(row.textBody).to.equal(`Hello,\n\nThank you for contacting us.\n\n-- \n${plainName}\n`);
    expect(row.headers).to.deep.equal({ from: { name: `${plainName} via Helpdesk Platform`, address: 'desk@platform.test' }, organizationId: plain.orgId });
  });

  it('renders a ticket update with its number and status, cut to their lengths, and without them', async () => {
    const customer = uniqueEmail('update');
    const conversationId = await conversationOf(owner, { name: 'Ute', email: customer });
    const full = ok(await send(owner, conversationId, customer, 'ticket_update', { variables: { ticketNumber: '12345678901234567890', status: 'S'.repeat(60), message: 'We shipped the fix.' } }), 202);
    const row = await outbox(full.emailId);
    expect(row).to.include({ kind: 'ai_ticket_update', subject: 'Update on your ticket #123456789012' });
    expect(row.textBody).to.equal(`Hello Ute,\n\nStatus: ${'S'.repeat(40)}\n\nWe shipped the fix.\n\n-- \nThe Mailer team\n${orgName}\n`);

    // 5,000 characters outside the BMP pass the schema (it counts characters) and are cut to 5,000 UTF-16 units.
    const long = ok(await send(owner, conversationId, customer, 'ticket_update', { variables: { message: '😀'.repeat(5000) } }), 202);
    const cut = await outbox(long.emailId);
    expect(cut.subject).to.equal('Update on your ticket');
    expect(cut.textBody).to.equal(`Hello Ute,\n\n${'😀'.repeat(2500)}\n\n-- \nThe Mailer team\n${orgName}\n`);
  });

  it('mails only the conversation\'s contact: the contact\'s address before the visitor\'s, its name in the greeting; none is 400', async () => {
    const nobody = await conversationOf(owner, { name: 'Nemo' });
    const refused = await send(owner, nobody, uniqueEmail('nobody'), 'conversation_summary');
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.error.details).to.deep.equal([{ field: 'to', message: 'is not the conversation\'s contact' }]);
    const missing = await send(owner, randomUUID(), uniqueEmail('missing'), 'conversation_summary');
    expectError(missing, 404, 'not_found');
    expect(missing.body.message).to.equal('Conversation not found');

    // A verified visitor has a contact; the contact's address and name, once changed, are the ones mailed.
    const visitorEmail = uniqueEmail('visitor');
    const conversationId = await conversationOf(owner, { name: 'Vera', email: visitorEmail });
    ok(await send(owner, conversationId, visitorEmail, 'agent_verification_otp'), 202);
    const code = codeIn((await test.server.db.knex('outbox_emails').where({ toAddress: visitorEmail, kind: 'ai_agent_verification_otp' }).first()).textBody);
    ok(await verify(owner, conversationId, visitorEmail, code), 200);
    const { contactId } = await conversation(conversationId);
    const renamed = uniqueEmail('renamed');
    ok(await owner.api.patch(`/contacts/${contactId}`, { name: 'Vera Contact', email: renamed.toUpperCase() }, { token: owner.accessToken }), 200);
    expectError(await send(owner, conversationId, visitorEmail, 'conversation_summary'), 400, 'validation_failed');
    const sent = ok(await send(owner, conversationId, renamed, 'conversation_summary', { variables: { summary: 'Done.' } }), 202);
    expect((await outbox(sent.emailId)).textBody).to.match(/^Hello Vera Contact,\n\nDone\.\n/);
  });

  it('sends a code without a signature; one code per address a minute (Retry-After), not holding other templates or other addresses back', async () => {
    const customer = uniqueEmail('code');
    const conversationId = await conversationOf(owner, { name: 'Cody', email: customer });
    // The address in another case: the code is the lower-case address's, and verifies as such.
    const sent = ok(await send(owner, conversationId, customer.toUpperCase(), 'agent_verification_otp'), 202);
    const row = await outbox(sent.emailId);
    expect(row.subject).to.equal(`Your ${orgName} verification code`);
    const code = codeIn(row.textBody);
    expect(row.textBody).to.equal(`Hello Cody,\n\nyour verification code is ${code}. It is valid for 10 minutes. If you did not ask for it, ignore this mail.\n`);

    const again = await send(owner, conversationId, customer, 'agent_verification_otp');
    expectError(again, 429, 'rate_limited');
    const retryAfter = Number(again.headers.get('retry-after'));
    expect(retryAfter).to.be.within(1, 60);
    // Other templates to the same address, and a code for another address, are not held back.
    ok(await send(owner, conversationId, customer, 'conversation_summary'), 202);
    const other = uniqueEmail('other-code');
    ok(await send(owner, await conversationOf(owner, { name: 'Otto', email: other }), other, 'agent_verification_otp'), 202);

    // A minute later a new code may be sent; it replaces the first.
    await test.server.db.knex('otp_challenges').where({ type: 'contact_verification' }).whereLike('email', `%:${customer}`).update({ expiresAt: test.server.db.knex.raw(`expires_at - interval '61 seconds'`) });
    const second = ok(await send(owner, conversationId, customer, 'agent_verification_otp'), 202);
    const newCode = codeIn((await outbox(second.emailId)).textBody);
    if (newCode !== code) expectError(await verify(owner, conversationId, customer, code), 400, 'invalid_otp');
    // The address in another case verifies; a used code opens the window at once.
    ok(await verify(owner, conversationId, customer.toUpperCase(), newCode), 200);
    ok(await send(owner, conversationId, customer, 'agent_verification_otp'), 202);
  });

  it('verifies only the conversation\'s contact: another address is 400; other conversations and contacts, and the contact\'s other fields, stay as they were', async () => {
    const bystander = uniqueEmail('bystander');
    const bystanderConversation = await conversationOf(owner, { name: 'Bea', email: bystander });
    // A contact of the organization that is not verified.
    const unverified = ok(await owner.api.post('/contacts', { name: 'Una', email: uniqueEmail('una') }, { token: owner.accessToken }), 201);

    const customer = uniqueEmail('verified');
    const conversationId = await conversationOf(owner, { name: 'Val', email: customer });
    ok(await send(owner, conversationId, customer, 'agent_verification_otp'), 202);
    const code = codeIn((await test.server.db.knex('outbox_emails').where({ toAddress: customer, kind: 'ai_agent_verification_otp' }).first()).textBody);
    const wrong = await verify(owner, conversationId, bystander, code);
    expectError(wrong, 400, 'validation_failed');
    expect(wrong.body.error.details).to.deep.equal([{ field: 'email', message: 'is not the conversation\'s contact' }]);
    const done = ok(await verify(owner, conversationId, customer, code), 200);

    const linked = await conversation(conversationId);
    expect(await contact(linked.contactId)).to.include({ email: customer, name: 'Val' });
    expect(new Date((await contact(linked.contactId)).emailVerifiedAt).toISOString()).to.equal(done.verifiedAt);
    expect((await conversation(bystanderConversation)).contactId).to.equal(null);
    expect((await contact(unverified.id)).emailVerifiedAt).to.equal(null);

    // Verifying again the contact the conversation has touches only its emailVerifiedAt (its name, cleared since, stays empty).
    ok(await owner.api.patch(`/contacts/${linked.contactId}`, { name: null }, { token: owner.accessToken }), 200);
    const again = ok(await send(owner, conversationId, customer, 'agent_verification_otp'), 202);
    const redone = ok(await verify(owner, conversationId, customer, codeIn((await outbox(again.emailId)).textBody)), 200);
    expect(await contact(linked.contactId)).to.include({ email: customer, name: null });
    expect(new Date((await contact(linked.contactId)).emailVerifiedAt).toISOString()).to.equal(redone.verifiedAt);
  });
});
