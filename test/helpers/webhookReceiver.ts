// A local HTTP server that receives webhook deliveries for tests: records each request and answers as planned.
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  /** Path and query the delivery was posted to. */
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: any;
}

/** The receiver's check, written apart from the server's: any `v1=` HMAC-SHA256(secret, `ts.body`) matches. */
export function signedWith(r: Received, secret: string): boolean {
  const expected = createHmac('sha256', secret).update(`${String(r.headers['x-webhook-timestamp'])}.${r.body}`).digest('hex');
  return String(r.headers['x-webhook-signature']).split(',').some((part) => part.trim() === `v1=${expected}`);
}

export interface Answer {
  status: number;
  delayMs?: number;
  headers?: Record<string, string>;
  /** The answer's body; 'ok' when not given. */
  body?: string;
  /** Answered only once this settles (after `delayMs`, if both). */
  hold?: Promise<unknown>;
}

export interface WebhookReceiver {
  url: string;
  received: Received[];
  /** The most requests this receiver held at once (arrived, not yet answered). */
  mostAtOnce(): number;
  /** Requests arrived and not yet answered. */
  openNow(): number;
  /** Answers for the next requests, in order; afterwards 200. */
  plan(...answers: Answer[]): void;
  /** Resolves once `count` requests matching `filter` arrived. */
  waitFor(count: number, filter?: (r: Received) => boolean, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<WebhookReceiver> {
  const received: Received[] = [];
  let answers: Answer[] = [];
  let open = 0;
  let most = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    most = Math.max(most, ++open);
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown = null;
      try {
        json = JSON.parse(body);
      } catch {
        /* kept as text */
      }
      const answer = answers.shift() ?? { status: 200 };
      const respond = () => {
        open--;
        received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, json });
        if (!res.destroyed) res.writeHead(answer.status, answer.headers).end(answer.body ?? 'ok');
      };
      const answerNow = () => (answer.hold ? void answer.hold.then(respond, respond) : respond());
      if (answer.delayMs) setTimeout(answerNow, answer.delayMs);
      else answerNow();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    mostAtOnce: () => most,
    openNow: () => open,
    plan: (...a) => {
      answers = a;
    },
    async waitFor(count, filter = () => true, timeoutMs = 5000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const matching = received.filter(filter);
        if (matching.length >= count) return matching;
        if (Date.now() > until) throw new Error(`received ${matching.length} of ${count} webhook deliveries`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
