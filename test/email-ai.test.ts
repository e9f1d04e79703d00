// The AI service's mail: server-side templates to the conversation's contact only, idempotent by key, and the
// contact's email verification by one-time code (single use, resend within 60 s refused).
import { expect } from 'chai';
import { codeIn, latestMail, signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { newVisitor, startConversation } from './helpers/live.js';
import { startTestServer, TEST_AI_SECRET, type TestServer } from './helpers/server.js';
import { expectError } from './helpers/tenancy.js';
import { ok } from './helpers/tickets.js';

describe('Email: the AI service\'s templated mail and OTP', function () {
  this.timeout(60_000);
  let test: TestServer;
  let owner: SignedUp;
  let conversationId: string;
  const customer = uniqueEmail('verify');
  const ai = { headers: { 'x-ai-tool-secret': TEST_AI_SECRET } };

  before(async () => {
    test = await startTestServer();
    owner = await signUp(test.server, test.baseUrl);
    ({ conversationId } = await startConversation(await newVisitor(owner, { name: 'Vic', email: customer })));
  });

  after(async () => {
    await test?.stop();
  });

  it('mails only the conversation\'s contact, from a template, once per idempotency key', async () => {
    const body = { organizationId: owner.orgId, conversationId, to: customer, template: 'conversation_summary', variables: { summary: 'We reset your password.' }, idempotencyKey: 'sum-1' };
    expectError(await owner.api.post('/email/send', { ...body, to: 'someone-else@example.test' }, ai), 400, 'validation_failed');
    expectError(await owner.api.post('/email/send', { ...body, html: '<b>x</b>' }, ai), 400, 'validation_failed');
    const other = await signUp(test.server, test.baseUrl);
    expectError(await owner.api.post('/email/send', { ...body, organizationId: other.orgId }, ai), 404, 'not_found');
    const first = ok(await owner.api.post('/email/send', body, ai), 202);
    const replay = ok(await owner.api.post('/email/send', body, ai), 200);
    expect(replay.emailId).to.equal(first.emailId);
    // Without SMTP_URL the mail is only logged, and the answer says so, the replay's too.
    expect([first.status, replay.status]).to.deep.equal(['logged', 'logged']);
    expectError(await owner.api.post('/email/send', { ...body, variables: { summary: 'Other' } }, ai), 409, 'conflict');
    const mail = await latestMail(test.server, customer, 'ai_conversation_summary');
    expect(mail!.textBody).to.contain('We reset your password.');
  });

  it('verifies the contact\'s email with a code: resend within 60 s is 429, a wrong code 400, the right one sets emailVerifiedAt', async () => {
    const send = (key: string) => owner.api.post('/email/send', { organizationId: owner.orgId, conversationId, to: customer, template: 'agent_verification_otp', idempotencyKey: key }, ai);
    ok(await send('otp-1'), 202);
    expectError(await send('otp-2'), 429, 'rate_limited');
    const code = codeIn((await latestMail(test.server, customer, 'ai_agent_verification_otp'))!.textBody);
    const verify = (c: string) => owner.api.post('/email/verify-otp', { organizationId: owner.orgId, conversationId, email: customer, code: c }, ai);
    expectError(await verify(code === '000000' ? '111111' : '000000'), 400, 'invalid_otp');
    const done = ok(await verify(code), 200);
    expect(done.verified).to.equal(true);
    expectError(await verify(code), 400, 'invalid_otp');
    const conversation = await test.server.db.knex('conversations').where({ id: conversationId }).first();
    const contact = await test.server.db.knex('contacts').where({ id: conversation.contactId }).first();
    expect(contact.emailVerifiedAt).to.not.equal(null);
  });
});
