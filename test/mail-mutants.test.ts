// The platform's own mail, word for word, and its delivery: the code, account-exists, reset and invitation mails with
// their links under APP_URL; delivered From MAIL_FROM and recorded as sent; without SMTP_URL only logged (where a
// local operator reads the code); a refused delivery kept pending with its error and retried after 5·2^attempts
// seconds, given up (failed) after the 8th attempt.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { latestMail, signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { captureLogs } from './helpers/logs.js';
import { startSmtpSink, type SmtpSink } from './helpers/smtp.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

const MAIL_FROM = 'Helpdesk Platform <desk@platform.test>';
const APP_URL = 'https://app.mailer.test';

describe('Mail: the platform\'s mail, word for word, delivered over SMTP', function () {
  this.timeout(90_000);
  let smtp: SmtpSink;
  let test: TestServer;
  let owner: SignedUp;
  const orgName = `Words ${randomUUID().slice(0, 6)}`;

  before(async () => {
    smtp = await startSmtpSink({ user: 'words', pass: 'words-secret' });
    test = await startTestServer({ SMTP_URL: smtp.url, MAIL_FROM, APP_URL });
    owner = await signUp(test.server, test.baseUrl, { organizationName: orgName, name: 'Olivia Owner' });
  });

  after(async () => {
    await test?.stop();
    await smtp?.close();
  });

  it('sends the signup code From MAIL_FROM, greeting the name given, and records the mail as sent', async () => {
    const email = uniqueEmail('code-words');
    expect((await new Api(test.baseUrl).post('/auth/initiate-signup', { name: '  Ada Lovelace ', email })).status).to.equal(202);
    const row = await latestMail(test.server, email, 'signup_code');
    expect(row!.subject).to.equal('Your verification code');
    const code = /is (\d{6})\./.exec(row!.textBody)?.[1];
    expect(row!.textBody).to.equal(`Hello Ada Lovelace,\n\nYour verification code is ${code}.\nIt is valid for 10 minutes. If you did not ask for it, ignore this mail.\n`);
    const mail = await smtp.waitForMail(email);
    expect(mail.parsed.from?.value[0]).to.deep.equal({ name: 'Helpdesk Platform', address: 'desk@platform.test' });
    expect(mail.subject).to.equal('Your verification code');
    expect(mail.text.trim()).to.equal(row!.textBody.trim());
    const sent = await waitFor(async () => {
      const r = await test.server.db.models.OutboxEmail.query().findById(row!.id);
      return r?.status === 'sent' ? r : undefined;
    });
    expect(sent).to.include({ attempts: 1, lastError: null });
    expect(sent.sentAt).to.be.instanceOf(Date);
  });

  it('tells an address that already has an account where to sign in, instead of sending a code', async () => {
    expect((await new Api(test.baseUrl).post('/auth/initiate-signup', { name: 'Again', email: owner.email })).status).to.equal(202);
    const row = await latestMail(test.server, owner.email, 'account_exists');
    expect(row).to.include({ subject: 'You already have an account' });
    expect(row!.textBody).to.equal(`Someone tried to sign up with this email address, which already has an account.\nSign in at ${APP_URL}/login or reset your password there. If it was not you, ignore this mail.\n`);
    await smtp.waitForMail(owner.email, (m) => m.subject === 'You already have an account');
  });

  it('sends a password reset with its code and a link under APP_URL', async () => {
    expect((await new Api(test.baseUrl).post('/auth/forgot-password', { email: owner.email })).status).to.be.within(200, 202);
    const row = await latestMail(test.server, owner.email, 'password_reset');
    expect(row!.subject).to.equal('Reset your password');
    const [, code, token] = /code is (\d{6})\.[\s\S]*\/reset-password\?token=(\S+)\n/.exec(row!.textBody) ?? [];
    expect(row!.textBody).to.equal(`Your password reset code is ${code}. It is valid for 10 minutes.\n\nOr open this link within an hour to choose a new password:\n${APP_URL}/reset-password?token=${token}\n\nIf you did not ask for this, ignore this mail; your password stays as it is.\n`);
    await smtp.waitForMail(owner.email, (m) => m.subject === 'Reset your password');
  });

  it('invites by name of the organization and of the inviter, with a link under APP_URL', async () => {
    const email = uniqueEmail('invited-words');
    const res = await owner.api.post(`/memberships/organizations/${owner.orgId}/members/invite`, { email, role: 'agent' }, { token: owner.accessToken });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const row = await latestMail(test.server, email, 'invitation');
    expect(row!.subject).to.equal(`You are invited to join ${orgName}`);
    const token = /accept-invite\?token=(\S+)\n/.exec(row!.textBody)?.[1];
    expect(row!.textBody).to.equal(`Olivia Owner invited you to join ${orgName}.\n\nAccept the invitation within 7 days:\n${APP_URL}/accept-invite?token=${token}\n`);
    const mail = await smtp.waitForMail(email);
    expect(mail.subject).to.equal(`You are invited to join ${orgName}`);
  });
});

describe('Mail: without SMTP_URL, logged only', function () {
  this.timeout(60_000);
  let test: TestServer;
  const logs = captureLogs('info');

  before(async () => {
    test = await startTestServer({ SMTP_URL: undefined }, { logger: logs.logger });
  });

  after(async () => {
    await test?.stop();
  });

  it('keeps the mail as logged, never due, and writes it to the log, code included', async () => {
    const email = uniqueEmail('logged-words');
    expect((await new Api(test.baseUrl).post('/auth/initiate-signup', { name: 'Lou', email })).status).to.equal(202);
    const row = await latestMail(test.server, email, 'signup_code');
    expect(row).to.include({ status: 'logged', attempts: 0, nextAttemptAt: null, htmlBody: null, headers: null });
    const line = logs.matching(30, 'mail (no SMTP_URL set, not sent)').find((l) => (l.mail as { to?: string } | undefined)?.to === email);
    expect(line?.mail).to.deep.equal({ kind: 'signup_code', to: email, subject: 'Your verification code', text: row!.textBody });
  });
});

describe('Mail: a delivery the SMTP server refuses', function () {
  this.timeout(90_000);
  let smtp: SmtpSink;
  let test: TestServer;
  const mine: string[] = [];
  const logs = captureLogs('info');

  before(async () => {
    smtp = await startSmtpSink({ user: 'refusing', pass: 'the-right-secret' });
    // The wrong password: every delivery is refused at AUTH.
    test = await startTestServer({ SMTP_URL: smtp.url.replace('the-right-secret', 'a-wrong-secret'), MAIL_FROM }, { logger: logs.logger });
  });

  after(async () => {
    // What this file left pending is nobody's to deliver later.
    if (mine.length) await test?.server.db.knex('outbox_emails').whereIn('id', mine).update({ status: 'failed', nextAttemptAt: null });
    await test?.stop();
    await smtp?.close();
  });

  const reread = (id: string) => test.server.db.models.OutboxEmail.query().findById(id).throwIfNotFound();

  it('keeps the mail pending with the error and retries it 10 s after the first attempt, 640 s after the 7th; the 8th failure is final', async () => {
    const { mailer } = test.server.services;
    const to = uniqueEmail('refused');
    const t0 = Date.now();
    const queued = await mailer.queue({ kind: 'signup_code', to, subject: 'Refused', text: 'Refused 1' });
    mine.push(queued.id);
    expect(queued).to.include({ status: 'pending', attempts: 0 });
    const failed = await waitFor(async () => {
      const r = await reread(queued.id);
      return r.attempts === 1 && r.lastError ? r : undefined;
    });
    const t1 = Date.now();
    expect(failed.status).to.equal('pending');
    expect(failed.lastError).to.match(/auth|credentials|invalid/i);
    expect(failed.sentAt).to.equal(null);
    expect(failed.nextAttemptAt!.getTime()).to.be.within(t0 + 10_000, t1 + 10_000);
    expect(logs.matching(40, 'mail delivery failed').some((l) => l.mailId === queued.id && l.attempts === 1 && l.failed === false)).to.equal(true);

    // The 7th attempt fails: the next one waits 5·2^7 s.
    await test.server.db.knex('outbox_emails').where({ id: queued.id }).update({ attempts: 6, nextAttemptAt: new Date(Date.now() - 1000) });
    const t2 = Date.now();
    mailer.kick();
    const seventh = await waitFor(async () => {
      const r = await reread(queued.id);
      return r.attempts === 7 && r.nextAttemptAt && r.nextAttemptAt.getTime() > Date.now() + 120_000 ? r : undefined;
    });
    expect(seventh.status).to.equal('pending');
    expect(seventh.nextAttemptAt!.getTime()).to.be.within(t2 + 640_000, Date.now() + 640_000);

    // The 8th is the last.
    await test.server.db.knex('outbox_emails').where({ id: queued.id }).update({ nextAttemptAt: new Date(Date.now() - 1000) });
    mailer.kick();
    const last = await waitFor(async () => {
      const r = await reread(queued.id);
      return r.status === 'failed' ? r : undefined;
    });
    expect(last).to.include({ attempts: 8, nextAttemptAt: null });
    expect(last.lastError).to.be.a('string').and.not.equal('');
    expect(logs.matching(40, 'mail delivery failed').some((l) => l.mailId === queued.id && l.attempts === 8 && l.failed === true)).to.equal(true);
    expect(smtp.received.filter((m) => m.rcptTo.includes(to))).to.deep.equal([]);
  });
});
