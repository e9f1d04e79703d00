// Outbox retention: the bodies of delivered (or only logged) mail are cleared after MAIL_RETENTION_DAYS; the rest stays.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { loadConfig } from '../server/config.js';
import type { OutboxStatus } from '../db/models/OutboxEmail.js';
import { createServer, type AppServer } from '../server/server.js';
import { uniqueEmail } from './helpers/factories.js';
import { sharedServer } from './helpers/hooks.js';
import { TEST_SECRETS } from './helpers/server.js';
import { waitFor } from './helpers/wait.js';

const DAY_MS = 86_400_000;

/** An outbox row as it would be `ageDays` after it was queued (and, when sent, delivered a minute later). */
async function mailRow(server: AppServer, status: OutboxStatus, ageDays: number) {
  const at = new Date(Date.now() - ageDays * DAY_MS);
  const row = await server.db.models.OutboxEmail.query().insertAndFetch({
    kind: 'signup_code',
    toAddress: uniqueEmail('kept'),
    subject: 'Your code',
    textBody: 'Your code is 123456',
    htmlBody: '<p>Your code is 123456</p>',
    status,
    attempts: status === 'logged' ? 0 : 1,
    sentAt: status === 'sent' ? new Date(at.getTime() + 60_000) : null,
  });
  await server.db.knex('outbox_emails').update({ created_at: at }).where('id', row.id);
  return row.id;
}

const reread = (server: AppServer, id: string) => server.db.models.OutboxEmail.query().findById(id).throwIfNotFound();

describe('mail retention', () => {
  it('clears the bodies of mail sent or logged more than the retention period ago, and keeps the record', async () => {
    const { server } = sharedServer();
    const oldSent = await mailRow(server, 'sent', 10);
    const oldLogged = await mailRow(server, 'logged', 8);
    const recentSent = await mailRow(server, 'sent', 6);
    const oldPending = await mailRow(server, 'pending', 10);
    const oldFailed = await mailRow(server, 'failed', 10);

    expect(await server.services.mailer.clearOldBodies(7)).to.be.at.least(2);

    for (const id of [oldSent, oldLogged]) {
      const row = await reread(server, id);
      expect(row.textBody, 'text cleared').to.equal('');
      expect(row.htmlBody, 'html cleared').to.equal(null);
      expect(row.bodyClearedAt).to.be.instanceOf(Date);
      expect(row, 'the record stays').to.include({ kind: 'signup_code', subject: 'Your code' });
    }
    for (const id of [recentSent, oldPending, oldFailed]) {
      const row = await reread(server, id);
      expect(row.textBody, `${row.status} kept`).to.equal('Your code is 123456');
      expect(row.htmlBody).to.equal('<p>Your code is 123456</p>');
      expect(row.bodyClearedAt).to.equal(null);
    }
    // A shorter period reaches the recent one too; a second pass finds nothing new to clear.
    await server.services.mailer.clearOldBodies(5);
    expect((await reread(server, recentSent)).textBody).to.equal('');
    const cleared = await reread(server, oldSent);
    await server.services.mailer.clearOldBodies(5);
    expect((await reread(server, oldSent)).bodyClearedAt!.getTime()).to.equal(cleared.bodyClearedAt!.getTime());
  });

  it('runs when the server starts, with MAIL_RETENTION_DAYS', async function () {
    this.timeout(120_000);
    const dataDir = mkdtempSync(path.join(tmpdir(), 'support-mail-retention-'));
    const start = (days: string) =>
      createServer(loadConfig({ NODE_ENV: 'test', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, DATABASE_URL: process.env.DATABASE_URL, LOG_LEVEL: 'silent', MAIL_RETENTION_DAYS: days, ...TEST_SECRETS }));
    let server: AppServer | null = start('30');
    try {
      await server.start();
      const threeDaysOld = await mailRow(server, 'sent', 3);
      await server.stop();
      server = start('2');
      await server.start();
      const s = server;
      await waitFor(async () => (await reread(s, threeDaysOld)).textBody === '', { what: 'the body cleared at start' });
    } finally {
      await server?.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
