// Mail goes through an outbox table first, so nothing acknowledged is lost; a dispatcher delivers it over SMTP.
import nodemailer, { type Transporter } from 'nodemailer';
import type { Knex } from 'knex';
import type { Models } from '../../db/index.js';
import type { MailHeaders, OutboxEmail } from '../../db/models/OutboxEmail.js';
import type { Logger } from '../logger.js';

export interface MailMessage {
  kind: string;
  to: string;
  subject: string;
  text: string;
  html?: string;
  /** Sender, Reply-To, Cc and threading headers, for mail sent on an organization's behalf (tickets). */
  headers?: MailHeaders;
}

const MAX_ATTEMPTS = 8;
const LEASE_SECONDS = 60;

export class Mailer {
  private readonly transport: Transporter | null;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  /** The DKIM key to sign a mail From this address with (an organization's verified domain), if any. */
  dkimFor: ((organizationId: string, address: string) => Promise<{ domainName: string; keySelector: string; privateKey: string } | null>) | null = null;

  constructor(
    private readonly models: Models,
    private readonly knex: Knex,
    private readonly logger: Logger,
    /** `sweepSeconds`: how often due mail (retries, mail an instance stopped before sending) is looked for. */
    private readonly options: { smtpUrl: string | null; from: string; sweepSeconds: number },
  ) {
    this.transport = options.smtpUrl ? nodemailer.createTransport(options.smtpUrl) : null;
  }

  /** True when mail really leaves the server (an SMTP transport is configured). */
  get delivers(): boolean {
    return this.transport !== null;
  }

  start(): void {
    if (!this.transport) return;
    this.timer = setInterval(() => this.kick(), this.options.sweepSeconds * 1000);
    this.timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
    this.transport?.close();
  }

  /**
   * Stores the mail; it is delivered once the surrounding transaction (if any) commits.
   * Without a transport it is written to the log instead, where a local operator can read codes and links.
   */
  async queue(message: MailMessage, trx?: Knex.Transaction): Promise<OutboxEmail> {
    // The row as inserted (RETURNING), not read again after: the dispatcher may already have attempted it by then.
    const row = await this.models.OutboxEmail.query(trx).insert({
      kind: message.kind,
      toAddress: message.to,
      subject: message.subject,
      textBody: message.text,
      htmlBody: message.html ?? null,
      headers: message.headers ?? null,
      status: this.transport ? 'pending' : 'logged',
      attempts: 0,
      nextAttemptAt: this.transport ? new Date() : null,
    }).returning('*');
    if (!this.transport) {
      this.logger.info({ mail: { kind: message.kind, to: message.to, subject: message.subject, text: message.text } }, 'mail (no SMTP_URL set, not sent)');
    } else if (trx) {
      trx.executionPromise.then(() => this.kick(), () => undefined);
    } else {
      this.kick();
    }
    return row;
  }

  /**
   * Clears the text and HTML of mail sent (or only logged) more than `days` ago: they hold codes and links long
   * expired. Kind, recipient, subject and times stay as the record; pending and failed mail is kept whole.
   */
  async clearOldBodies(days: number): Promise<number> {
    return this.models.OutboxEmail.query()
      .patch({ textBody: '', htmlBody: null, bodyClearedAt: new Date() })
      .whereNull('bodyClearedAt')
      .whereIn('status', ['sent', 'logged'])
      .whereRaw('coalesce(sent_at, created_at) < now() - make_interval(days => ?)', [days]);
  }

  /** Starts a delivery pass now, or right after the one in progress. */
  kick(): void {
    if (!this.transport || this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.deliverDue()
      .catch((err) => this.logger.error({ err }, 'mail delivery pass failed'))
      .finally(() => {
        this.running = null;
        if (this.again && !this.stopped) {
          this.again = false;
          this.kick();
        }
      });
  }

  private async deliverDue(): Promise<void> {
    // A stopping instance leases nothing more: what it leased it delivers, the rest stays due for the others.
    while (!this.stopped) {
      // Lease a batch so several instances never send the same mail twice at the same time.
      // Through Objection, so the returned rows are camelCase models (a raw query's rows stay snake_case).
      const { OutboxEmail } = this.models;
      const due = OutboxEmail.query().select('id').where('status', 'pending').where('nextAttemptAt', '<=', this.knex.fn.now())
        .orderBy('nextAttemptAt').limit(20).forUpdate().skipLocked();
      const rows = (await OutboxEmail.query()
        .patch({
          nextAttemptAt: this.knex.raw(`now() + interval '${LEASE_SECONDS} seconds'`),
          attempts: this.knex.raw('attempts + 1'),
        } as unknown as Partial<OutboxEmail>)
        .whereIn('id', due)
        .returning('*')) as unknown as OutboxEmail[];
      if (rows.length === 0) return;
      await Promise.all(rows.map((row) => this.deliver(row)));
    }
  }

  private async deliver(row: OutboxEmail): Promise<void> {
    try {
      const h = row.headers ?? {};
      const dkim = h.from && h.organizationId && this.dkimFor ? await this.dkimFor(h.organizationId, h.from.address) : null;
      await this.transport!.sendMail({
        from: h.from ?? this.options.from, to: row.toAddress, subject: row.subject, text: row.textBody, html: row.htmlBody ?? undefined,
        replyTo: h.replyTo, cc: h.cc, messageId: h.messageId, inReplyTo: h.inReplyTo, references: h.references,
        ...(dkim ? { dkim } : {}),
      });
      await this.models.OutboxEmail.query().patch({ status: 'sent', sentAt: new Date(), lastError: null }).where('id', row.id);
      this.logger.info({ mailId: row.id, kind: row.kind }, 'mail sent');
    } catch (err) {
      const attempts = row.attempts;
      const failed = attempts >= MAX_ATTEMPTS;
      const backoffSeconds = Math.min(3600, 5 * 2 ** attempts);
      await this.models.OutboxEmail.query()
        .patch({
          status: failed ? 'failed' : 'pending',
          lastError: err instanceof Error ? err.message.slice(0, 500) : 'delivery failed',
          nextAttemptAt: failed ? null : new Date(Date.now() + backoffSeconds * 1000),
        })
        .where('id', row.id);
      this.logger.warn({ mailId: row.id, attempts, failed }, 'mail delivery failed');
    }
  }
}
