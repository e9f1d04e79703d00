// Inbound mail over SMTP (SMTP_IN_PORT): accepts mail for in+<channel token>@INBOUND_EMAIL_DOMAIN only, and takes
// the same path as the signed webhook (stored once by Message-ID, processed by the job queue).
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import type { Logger } from '../../logger.js';
import type { ChannelInbound } from './inbound.js';

const MAX_BYTES = 25 * 1024 * 1024;

export class SmtpInbound {
  private server: SMTPServer | null = null;

  constructor(private readonly deps: { inbound: ChannelInbound; domain: string; logger: Logger }) {}

  /** The channel token of a recipient address (smtp-server hands it over parsed), or null when it is not one of ours. */
  private tokenOf(address: string): string | null {
    const m = /^in\+([0-9a-f]{24})@(.+)$/.exec(address.toLowerCase());
    return m && m[2] === this.deps.domain ? m[1]! : null;
  }

  async listen(port: number, host: string): Promise<number> {
    const server = new SMTPServer({
      // Without AUTH no sender is asked to authenticate.
      disabledCommands: ['AUTH'],
      // Mail from the internet arrives without TLS from many senders; STARTTLS needs a certificate we do not have here.
      hideSTARTTLS: true,
      size: MAX_BYTES,
      logger: false,
      closeTimeout: 1_000,
      onRcptTo: (address, _session, callback) => {
        // Refused with smtp-server's 550 for a recipient.
        callback(this.tokenOf(address.address) ? undefined : new Error('No such mailbox here'));
      },
      onData: (stream, session, callback) => {
        const chunks: Buffer[] = [];
        let size = 0;
        stream.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size <= MAX_BYTES) chunks.push(chunk);
        });
        stream.on('end', () => {
          // Counted here: `size` only announces the limit (and refuses a larger SIZE declared in MAIL FROM).
          if (size > MAX_BYTES) return callback(Object.assign(new Error('Message too large'), { responseCode: 552 }));
          const raw = Buffer.concat(chunks);
          // Every recipient of the envelope has a token: onRcptTo refused the others.
          const tokens = [...new Set(session.envelope.rcptTo.map((r) => this.tokenOf(r.address)!))];
          Promise.all(tokens.map((t) => this.deps.inbound.smtp(t, raw))).then(
            () => callback(),
            (err: unknown) => {
              this.deps.logger.warn({ err }, 'storing inbound SMTP mail failed');
              callback(Object.assign(new Error('Try again later'), { responseCode: 451 }));
            },
          );
        });
      },
    });
    server.on('error', (err) => this.deps.logger.warn({ err }, 'inbound SMTP error'));
    await new Promise<void>((resolve, reject) => {
      // Named: the start fails with it, and PORT, METRICS_PORT and SMTP_IN_PORT all fail alike on a taken port.
      server.server.once('error', (err) => reject(new Error(`SMTP_IN_PORT ${port} on ${host} cannot be opened: ${err.message}`, { cause: err })));
      server.listen(port, host, () => resolve());
    });
    this.server = server;
    return (server.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
