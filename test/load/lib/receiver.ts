// A local webhook receiver for the benchmark: answers 200 to every POST and counts what arrived.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Receiver {
  url: string;
  count(): number;
  bytes(): number;
  /** The body of the last POST received. */
  last(): string;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  let count = 0;
  let bytes = 0;
  let last: Buffer[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      bytes += c.length;
      chunks.push(c);
    });
    req.on('end', () => {
      count++;
      last = chunks;
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    count: () => count,
    bytes: () => bytes,
    last: () => Buffer.concat(last).toString('utf8'),
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}
