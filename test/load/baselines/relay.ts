// Baseline: a bare Socket.IO room relay with the app's engine options, namespaces and event shapes, but no
// authentication and no database. Agents (auth.role "agent") join "agents"; a visitor's send_message is announced
// to the agents and to the visitor's room and acknowledged. With REDIS_URL the Redis adapter carries emits
// (REDIS_ADAPTER: classic, or sharded as the app can run it).
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdapter, createShardedAdapter } from '@socket.io/redis-adapter';
import { Redis } from 'ioredis';
import { Server } from 'socket.io';
import { serveChild } from '../lib/proc.js';

const http = createServer((_req, res) => res.writeHead(404).end());
const io = new Server(http, { path: '/socket.io', serveClient: false, maxHttpBufferSize: 256 * 1024, cors: { origin: true, credentials: false }, cleanupEmptyChildNamespaces: true });

let pub: Redis | null = null;
let sub: Redis | null = null;
if (process.env.REDIS_URL) {
  pub = new Redis(process.env.REDIS_URL);
  sub = pub.duplicate();
  // Its own channel prefix: never mixes with an app instance on the same Redis.
  io.adapter(process.env.REDIS_ADAPTER === 'sharded' ? createShardedAdapter(pub, sub, { channelPrefix: 'bench-relay', subscriptionMode: 'dynamic' }) : createAdapter(pub, sub, { key: 'bench-relay' }));
}

let seq = 0;
io.of(/^\/orgs\/[0-9a-f-]{36}$/).on('connection', (socket) => {
  const auth = (socket.handshake.auth ?? {}) as { role?: string; sessionId?: string };
  const visitorRoom = `visitor:${auth.sessionId ?? socket.id}`;
  socket.join(auth.role === 'agent' ? 'agents' : visitorRoom);
  socket.on('send_message', (p: { conversationId: string; content: string; clientMessageId?: string }, ack?: unknown) => {
    const message = {
      id: randomUUID(),
      conversationId: p.conversationId,
      seq: ++seq,
      senderType: 'visitor',
      senderId: auth.sessionId ?? null,
      content: p.content,
      type: 'text',
      private: false,
      metadata: {},
      clientMessageId: p.clientMessageId ?? null,
      createdAt: new Date().toISOString(),
    };
    const payload = { conversationId: p.conversationId, message };
    // One emit to both rooms, as the app does for a public message.
    socket.nsp.to(['agents', visitorRoom]).emit('new_message', payload);
    if (typeof ack === 'function') ack({ success: true, data: { message } });
  });
});

// PORT: a restarted relay comes back on the address its clients reconnect to.
await new Promise<void>((resolve) => http.listen(Number(process.env.PORT) || 0, '127.0.0.1', resolve));
serveChild(
  (http.address() as AddressInfo).port,
  {
    stop: async () => {
      io.disconnectSockets(true);
      await new Promise<void>((resolve) => io.close(() => resolve()));
      await Promise.all([pub?.quit().catch(() => undefined), sub?.quit().catch(() => undefined)]);
    },
  },
  () => io.engine.clientsCount,
);
