// A real SMTP server on a loopback port that keeps every message it receives, parsed, for tests of mail delivery.
import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { waitFor } from './wait.js';

export interface ReceivedMail {
  /** Envelope recipients (RCPT TO), lower-cased. */
  rcptTo: string[];
  mailFrom: string | null;
  /** The user the client authenticated as, if it did. */
  user: string | null;
  parsed: ParsedMail;
  /** The message as it arrived (headers and body), for checks over the exact bytes (DKIM). */
  raw: Buffer;
  text: string;
  subject: string;
}

export interface SmtpSink {
  port: number;
  /** `smtp://user:pass@127.0.0.1:port` for SMTP_URL. */
  url: string;
  received: ReceivedMail[];
  /** The first received mail to `to` that matches, waiting up to `timeoutMs`. */
  waitForMail(to: string, match?: (mail: ReceivedMail) => boolean, timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

/**
 * Plain SMTP without STARTTLS; AUTH (PLAIN/LOGIN over the plain connection) must use `user`/`pass`.
 * `gate`, when given, sees each message's recipients once its data arrived, before the server answers: the answer
 * waits for it, and a throw refuses the message with the error's message (a 550).
 */
export async function startSmtpSink(
  credentials: { user: string; pass: string } = { user: 'mailer', pass: 'mail-secret' },
  opts: { gate?: (rcptTo: string[]) => Promise<void> | void } = {},
): Promise<SmtpSink> {
  const received: ReceivedMail[] = [];
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authOptional: false,
    logger: false,
    closeTimeout: 1_000,
    onAuth(auth, _session, callback) {
      if (auth.username === credentials.user && auth.password === credentials.pass) callback(null, { user: auth.username });
      else callback(new Error('Invalid username or password'));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      new Promise<Buffer>((resolve, reject) => {
        stream.on('end', () => resolve(Buffer.concat(chunks)));
        stream.on('error', reject);
      }).then(async (raw) => {
        await opts.gate?.(session.envelope.rcptTo.map((a) => a.address.toLowerCase()));
        return { raw, parsed: await simpleParser(raw) };
      }).then(
        ({ raw, parsed }) => {
          received.push({
            raw,
            rcptTo: session.envelope.rcptTo.map((a) => a.address.toLowerCase()),
            mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : null,
            user: typeof session.user === 'string' ? session.user : null,
            parsed,
            text: parsed.text ?? '',
            subject: parsed.subject ?? '',
          });
          callback();
        },
        (err: Error) => callback(err),
      );
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as AddressInfo).port;
  return {
    port,
    url: `smtp://${encodeURIComponent(credentials.user)}:${encodeURIComponent(credentials.pass)}@127.0.0.1:${port}`,
    received,
    waitForMail(to, match = () => true, timeoutMs = 10_000) {
      const address = to.toLowerCase();
      return waitFor(() => received.find((m) => m.rcptTo.includes(address) && match(m)), { timeoutMs, what: `a mail to ${to}` });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
