// A fake provider API (Telegram Bot API, WhatsApp Graph API) on loopback: records each call and answers from a
// queue per path suffix, else from the test's defaults.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeCall {
  path: string;
  body: any;
  headers: IncomingMessage['headers'];
}
export interface FakeAnswer {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
  /** Closes the connection without an answer (a provider that cannot be reached). */
  hangUp?: boolean;
}
/** A provider API that records each call and answers from a queue per path suffix (else the default). */
export async function fakeProvider(defaults: (path: string, body: any) => FakeAnswer): Promise<{ url: string; calls: FakeCall[]; queue: Map<string, FakeAnswer[]>; close(): Promise<void> }> {
  const calls: FakeCall[] = [];
  const queue = new Map<string, FakeAnswer[]>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const body = text ? JSON.parse(text) : {};
      const path = req.url ?? '';
      calls.push({ path, body, headers: req.headers });
      const key = [...queue.keys()].find((k) => path.endsWith(k) && queue.get(k)!.length > 0);
      const answer = key ? queue.get(key)!.shift()! : defaults(path, body);
      if (answer.hangUp) return void req.socket.destroy();
      res.writeHead(answer.status, { 'content-type': 'application/json', ...(answer.headers ?? {}) });
      res.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, calls, queue, close: () => new Promise((r) => server.close(() => r())) };
}

export type FakeProvider = Awaited<ReturnType<typeof fakeProvider>>;
