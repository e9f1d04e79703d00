// The platform's own mail, word for word, and its delivery: the code, account-exists, reset and invitation mails with
// their links under APP_URL; delivered From MAIL_FROM and recorded as sent; without SMTP_URL only logged (where a
// local operator reads the code); a refused delivery kept pending with its error and retried after 5·2^attempts
// seconds, given up (failed) after the 8th attempt.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { parseMailbox } from '../server/mail/address.js';
import { Mailer, type MailMessage } from '../server/mail/index.js';
import { latestMail, signUp, uniqueEmail, type SignedUp } from './helpers/factories.js';
import { Api } from './helpers/http.js';
import { sharedServer } from './helpers/hooks.js';
import { captureLogs, unhandledRejections, type CapturedLogs } from './helpers/logs.js';
import { refuseWrites } from './helpers/refusals.js';
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

/** A promise with its resolve, for a delivery the SMTP server holds until the test lets it go. */
function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

// The dispatcher itself, as each instance runs it: mail queued is sent at once (after its transaction commits),
// one pass at a time; due mail is looked for every `sweepSeconds`; stop() lets the delivery under way finish and
// leases nothing more. The sweep is an hour here unless a test is about it, so what arrives was sent at once.
describe('Mail: the dispatcher, sending at once, sweeping for due mail, stopping cleanly', function () {
  this.timeout(60_000);
  let smtp: SmtpSink;
  // Made for each run of the file (a runner may load it once and run it many times): no line of an earlier run.
  let logs: CapturedLogs;
  /** What the SMTP server does with a message to each address: hold it until released, or refuse it once. */
  const held = new Map<string, { arrived: ReturnType<typeof deferred>; release: ReturnType<typeof deferred> }>();
  const refuseOnce = new Map<string, string>();
  const mailers: Mailer[] = [];
  const mine: string[] = [];

  before(async () => {
    logs = captureLogs('info');
    smtp = await startSmtpSink({ user: 'dispatch', pass: 'dispatch-secret' }, {
      async gate(rcptTo) {
        for (const to of rcptTo) {
          const hold = held.get(to);
          if (hold) {
            hold.arrived.resolve();
            await hold.release.promise;
          }
          const refusal = refuseOnce.get(to);
          if (refusal !== undefined) {
            refuseOnce.delete(to);
            throw new Error(refusal);
          }
        }
      },
    });
  });

  // Each test's mailers stop with it: a sweep left running would take the next test's mail.
  afterEach(async () => {
    for (const h of held.values()) h.release.resolve();
    for (const m of mailers.splice(0)) await m.stop();
  });

  after(async () => {
    const { knex } = sharedServer().server.db;
    if (mine.length) await knex('outbox_emails').whereIn('id', mine).whereNot('status', 'sent').update({ status: 'failed', nextAttemptAt: null });
    await smtp?.close();
  });

  const db = () => sharedServer().server.db;
  const mailer = (opts: { sweepSeconds?: number; smtpUrl?: string | null } = {}) => {
    const m = new Mailer(db().models, db().knex, logs.logger, { smtpUrl: opts.smtpUrl === undefined ? smtp.url : opts.smtpUrl, from: MAIL_FROM, sweepSeconds: opts.sweepSeconds ?? 3600 });
    mailers.push(m);
    return m;
  };
  const queue = async (m: Mailer, to: string, extra: Partial<MailMessage> = {}, trx?: Knex.Transaction) => {
    const row = await m.queue({ kind: 'dispatch_check', to, subject: `For ${to}`, text: `Hello ${to}`, ...extra }, trx);
    mine.push(row.id);
    return row;
  };
  const reread = (id: string) => db().models.OutboxEmail.query().findById(id).throwIfNotFound();
  const sent = (id: string) => waitFor(async () => {
    const r = await reread(id);
    return r.status === 'sent' ? r : undefined;
  }, { what: `mail ${id} sent` });
  /** A pending mail due now, written as another instance would leave it (no kick). */
  const dueRow = async (to: string) => {
    const row = await db().models.OutboxEmail.query().insertAndFetch({ kind: 'dispatch_check', toAddress: to, subject: `For ${to}`, textBody: `Hello ${to}`, status: 'pending', attempts: 0, nextAttemptAt: new Date(Date.now() - 1000) });
    mine.push(row.id);
    return row;
  };

  it('says whether it delivers: with SMTP it does, without it only logs', () => {
    expect(mailer().delivers).to.equal(true);
    expect(mailer({ smtpUrl: null }).delivers).to.equal(false);
  });

  it('sends mail queued outside a transaction at once, with its HTML and headers, never writing its text to the log', async () => {
    const m = mailer();
    const asked: unknown[] = [];
    m.dkimFor = async (...args) => {
      asked.push(args);
      return null;
    };
    const to = uniqueEmail('at-once');
    const headers = {
      from: { name: 'Acme via Helpdesk', address: 'desk@platform.test' },
      replyTo: 'help@acme.test',
      cc: ['boss@acme.test'],
      messageId: '<m2@acme.test>',
      inReplyTo: '<m1@acme.test>',
      references: ['<m0@acme.test>', '<m1@acme.test>'],
    };
    const row = await queue(m, to, { html: '<p>Hello</p>', headers });
    expect(row).to.include({ status: 'pending', attempts: 0, htmlBody: '<p>Hello</p>' });
    expect(row.headers).to.deep.equal(headers);
    const mail = await smtp.waitForMail(to);
    expect(mail.parsed.html).to.equal('<p>Hello</p>');
    expect(mail.text.trim()).to.equal(`Hello ${to}`);
    expect(mail.parsed.from?.value[0]).to.deep.equal({ name: 'Acme via Helpdesk', address: 'desk@platform.test' });
    expect(mail.parsed.replyTo?.value[0]?.address).to.equal('help@acme.test');
    expect((Array.isArray(mail.parsed.cc) ? mail.parsed.cc[0] : mail.parsed.cc)?.value[0]?.address).to.equal('boss@acme.test');
    expect(mail.parsed.messageId).to.equal('<m2@acme.test>');
    expect(mail.parsed.inReplyTo).to.equal('<m1@acme.test>');
    expect(mail.parsed.references).to.deep.equal(['<m0@acme.test>', '<m1@acme.test>']);
    expect(await sent(row.id)).to.include({ attempts: 1, lastError: null });
    // No organization: nobody's DKIM key is asked for.
    expect(asked).to.deep.equal([]);
    expect(logs.matching(30, 'mail sent').filter((l) => l.mailId === row.id)).to.have.length(1);
    expect(logs.matching(30, 'mail sent').find((l) => l.mailId === row.id)).to.include({ kind: 'dispatch_check' });
    expect(logs.lines.some((l) => JSON.stringify(l).includes(`Hello ${to}`))).to.equal(false);
  });

  it('signs mail From an organization with the DKIM key it is given for that organization and address', async () => {
    const m = mailer();
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 1024, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
    const organizationId = randomUUID();
    const asked: unknown[] = [];
    m.dkimFor = async (...args) => {
      asked.push(args);
      return { domainName: 'signed.test', keySelector: 'sel2026', privateKey };
    };
    const to = uniqueEmail('signed');
    await queue(m, to, { headers: { from: { name: 'Signed', address: 'help@signed.test' }, organizationId } });
    const mail = await smtp.waitForMail(to);
    expect(asked).to.deep.equal([[organizationId, 'help@signed.test']]);
    const signature = /^DKIM-Signature:(.*(?:\r\n[ \t].*)*)/im.exec(mail.raw.toString())?.[1];
    expect(signature).to.be.a('string').that.match(/d=signed\.test;/).and.match(/s=sel2026;/);
  });

  it('sends mail queued in a transaction once it commits, and nothing of a transaction rolled back', async () => {
    const m = mailer();
    const rejections = unhandledRejections();
    rejections.start();
    try {
      const to = uniqueEmail('committed');
      let id = '';
      await db().knex.transaction(async (trx) => {
        id = (await queue(m, to, {}, trx)).id;
        expect(await db().models.OutboxEmail.query(trx).findById(id)).to.include({ status: 'pending', attempts: 0 });
      });
      await smtp.waitForMail(to);
      expect(await sent(id)).to.include({ attempts: 1 });

      const dropped = uniqueEmail('rolled-back');
      await db().knex.transaction(async (trx) => {
        await queue(m, dropped, {}, trx);
        throw new Error('changed my mind');
      }).catch(() => undefined);
      const next = uniqueEmail('after-rollback');
      await queue(m, next);
      await smtp.waitForMail(next);
      expect(smtp.received.some((r) => r.rcptTo.includes(dropped))).to.equal(false);
      expect(rejections.reasons).to.deep.equal([]);
    } finally {
      rejections.stop();
    }
  });

  it('sends the mail due when it starts, and retries a refused mail on its sweep once its backoff is over', async () => {
    const waiting = await dueRow(uniqueEmail('due-at-start'));
    const m = mailer({ sweepSeconds: 1 });
    m.start();
    await sent(waiting.id);

    // Refused once, with an answer longer than what is kept of it.
    const to = uniqueEmail('retried');
    refuseOnce.set(to, `try later ${'x'.repeat(600)}`);
    const row = await queue(m, to);
    const refused = await waitFor(async () => {
      const r = await reread(row.id);
      return r.lastError ? r : undefined;
    });
    expect(refused).to.include({ status: 'pending', attempts: 1 });
    expect(refused.lastError).to.match(/try later x+$/).and.have.length(500);
    // Its backoff is over (moved back rather than waited for): the sweep, not a new mail, sends it.
    await db().knex('outbox_emails').where({ id: row.id }).update({ nextAttemptAt: new Date(Date.now() - 1000) });
    await smtp.waitForMail(to);
    expect(await sent(row.id)).to.include({ attempts: 2, lastError: null });
  });

  it('keeps a mail pending with "delivery failed" when its signing key cannot be had for a reason that is no Error', async () => {
    const m = mailer();
    m.dkimFor = () => Promise.reject('no key store');
    const row = await queue(m, uniqueEmail('unsigned'), { headers: { from: { name: 'X', address: 'x@org.test' }, organizationId: randomUUID() } });
    const failed = await waitFor(async () => {
      const r = await reread(row.id);
      return r.lastError ? r : undefined;
    });
    expect(failed).to.include({ status: 'pending', attempts: 1, lastError: 'delivery failed' });
  });

  it('logs a delivery pass the database refuses, and runs the next one', async () => {
    const m = mailer();
    const to = uniqueEmail('pass-refused');
    const refusal = await refuseWrites(db().knex, { table: 'outbox_emails', on: 'update', when: `old.to_address = '${to}'`, message: `outbox refused for ${to}` });
    try {
      const row = await queue(m, to);
      const line = await waitFor(() => logs.matching(50, 'mail delivery pass failed').find((l) => JSON.stringify(l).includes(`outbox refused for ${to}`)));
      expect((line.err as { message?: string } | undefined)?.message).to.include(`outbox refused for ${to}`);
      await refusal.lift();
      m.kick();
      await sent(row.id);
    } finally {
      await refusal.lift();
    }
  });

  it('does not lease mail when it has no SMTP to send it with', async () => {
    const row = await dueRow(uniqueEmail('not-mine'));
    const m = mailer({ smtpUrl: null });
    m.start();
    m.kick();
    // Another instance, with SMTP, sends it on its first attempt: the one without never leased it.
    const other = mailer();
    other.start();
    expect(await sent(row.id)).to.include({ attempts: 1 });
  });

  it('stops after the delivery under way: that mail is recorded as sent, the next stays due for another instance', async () => {
    const m = mailer();
    const first = uniqueEmail('under-way');
    held.set(first, { arrived: deferred(), release: deferred() });
    const a = await queue(m, first);
    await held.get(first)!.arrived.promise;
    // Queued while the first is with the SMTP server.
    const b = await queue(m, uniqueEmail('left-due'));
    const stopping = m.stop();
    held.get(first)!.release.resolve();
    await stopping;
    expect(await reread(a.id)).to.include({ status: 'sent', attempts: 1 });
    expect(await reread(b.id), 'never leased').to.include({ status: 'pending', attempts: 0 });
    m.kick();
    const other = mailer();
    other.start();
    expect(await sent(b.id)).to.include({ attempts: 1 });
  });

  /** Counts the delivery passes' lookups for due mail that found none: each pass ends with one. */
  const emptyLookups = () => {
    const seen = { count: 0 };
    const listener = (response: unknown, query: { sql?: string }) => {
      if (/outbox_emails/.test(query.sql ?? '') && /skip locked/i.test(query.sql ?? '') && Array.isArray(response) && response.length === 0) seen.count += 1;
    };
    db().knex.on('query-response', listener);
    return { seen, off: () => void db().knex.off('query-response', listener) };
  };

  it('goes idle after a pass: one look at start, one pass per mail, nothing more until the sweep', async () => {
    const lookups = emptyLookups();
    try {
      const m = mailer({ sweepSeconds: 60 });
      m.start();
      await waitFor(() => lookups.seen.count >= 1, { what: 'the pass at start' });
      const row = await queue(m, uniqueEmail('idle'));
      await sent(row.id);
      await waitFor(() => lookups.seen.count >= 2, { what: 'the end of the pass that sent it' });
      // A few round trips to the database, while a mailer that kept passing (or sweeping) would look again and again.
      for (let i = 0; i < 5; i += 1) expect((await reread(row.id)).status).to.equal('sent');
      await m.stop();
      expect(lookups.seen.count).to.equal(2);
    } finally {
      lookups.off();
    }
  });

  it('runs one more pass after the one in progress for mail queued during it, and then goes idle', async () => {
    const lookups = emptyLookups();
    try {
      const m = mailer();
      const first = uniqueEmail('pass-busy');
      held.set(first, { arrived: deferred(), release: deferred() });
      const a = await queue(m, first);
      await held.get(first)!.arrived.promise;
      const b = await queue(m, uniqueEmail('pass-after'));
      held.get(first)!.release.resolve();
      await sent(a.id);
      await sent(b.id);
      // The pass in progress sends the second mail too, and finds nothing more; the pass asked for during it, nothing.
      await waitFor(() => lookups.seen.count >= 2, { what: 'the pass asked for during the first' });
      for (let i = 0; i < 5; i += 1) expect((await reread(b.id)).status).to.equal('sent');
      await m.stop();
      expect(lookups.seen.count).to.equal(2);
    } finally {
      lookups.off();
    }
  });
});

// MAIL_FROM as configuration writes it: the platform's name in "<Org> via <name>" and its domain (SPF, ticket mail).
describe('Mail: MAIL_FROM read as a mailbox', () => {
  it('takes `Name <address>`, a quoted name, or a bare address, and leaves anything else whole as the address', () => {
    expect(parseMailbox('Support Platform <no-reply@localhost>')).to.deep.equal({ name: 'Support Platform', address: 'no-reply@localhost' });
    expect(parseMailbox('  "Acme, Inc."   <help@acme.test>  ')).to.deep.equal({ name: 'Acme, Inc.', address: 'help@acme.test' });
    expect(parseMailbox('Desk<desk@x.test>')).to.deep.equal({ name: 'Desk', address: 'desk@x.test' });
    expect(parseMailbox('" Acme "<help@acme.test>')).to.deep.equal({ name: 'Acme', address: 'help@acme.test' });
    expect(parseMailbox('  Desk  Team \t<desk@x.test>')).to.deep.equal({ name: 'Desk  Team', address: 'desk@x.test' });
    expect(parseMailbox('<bare@x.test>')).to.deep.equal({ name: '', address: 'bare@x.test' });
    expect(parseMailbox('  bare@x.test  ')).to.deep.equal({ name: '', address: 'bare@x.test' });
    // Not a mailbox: kept whole (trimmed) as the address, with no name.
    for (const odd of ['Desk <desk@x.test> more', 'Desk <desk @x.test>', 'Desk <>', 'Desk <a<b@x.test>', 'Desk <desk@x.test'])
      expect(parseMailbox(` ${odd} `), odd).to.deep.equal({ name: '', address: odd });
  });
});
