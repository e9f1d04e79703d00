// socket.io-client helpers: connect to an organization's namespace, wait for events, emit with acks.
import { io, type Socket } from 'socket.io-client';
import type { ClientToServerEvents, ServerToClientEvents } from '../../sockets/events.js';

export type ClientSocket = Socket<ServerToClientEvents, ClientToServerEvents>;

export function connect(baseUrl: string, orgId: string, token: string | undefined, opts: { origin?: string } = {}): ClientSocket {
  return io(`${baseUrl}/orgs/${orgId}`, {
    path: '/socket.io',
    transports: ['websocket'],
    auth: token === undefined ? {} : { token },
    reconnection: false,
    forceNew: true,
    extraHeaders: opts.origin ? { origin: opts.origin } : undefined,
  }) as ClientSocket;
}

/** Resolves once connected; rejects with the connect_error message (unauthorized / forbidden / ...). */
export function connected(socket: ClientSocket, timeoutMs = 5000): Promise<ClientSocket> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('connect timeout')), timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('connect_error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

export async function connectOk(baseUrl: string, orgId: string, token: string, opts: { origin?: string } = {}): Promise<ClientSocket> {
  return connected(connect(baseUrl, orgId, token, opts));
}

/** The connect_error message of a refused handshake. */
export async function refusal(baseUrl: string, orgId: string, token: string | undefined, opts: { origin?: string } = {}): Promise<string> {
  const socket = connect(baseUrl, orgId, token, opts);
  try {
    await connected(socket);
    throw new Error('the handshake was accepted');
  } catch (err) {
    return (err as Error).message;
  } finally {
    socket.close();
  }
}

/** The next `event` (optionally the first one matching `filter`), or a rejection after the timeout. */
export function nextEvent<E extends keyof ServerToClientEvents>(
  socket: ClientSocket,
  event: E,
  filter: (payload: Parameters<ServerToClientEvents[E]>[0]) => boolean = () => true,
  timeoutMs = 5000,
): Promise<Parameters<ServerToClientEvents[E]>[0]> {
  return new Promise((resolve, reject) => {
    const listener = (payload: Parameters<ServerToClientEvents[E]>[0]) => {
      if (!filter(payload)) return;
      clearTimeout(timer);
      socket.off(event, listener as never);
      resolve(payload);
    };
    const timer = setTimeout(() => {
      socket.off(event, listener as never);
      reject(new Error(`no ${String(event)} within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on(event, listener as never);
  });
}

/** Collects every `event` from now on, for asserting that something did NOT arrive. */
export function collect<E extends keyof ServerToClientEvents>(socket: ClientSocket, event: E): Parameters<ServerToClientEvents[E]>[0][] {
  const seen: Parameters<ServerToClientEvents[E]>[0][] = [];
  socket.on(event, ((payload: Parameters<ServerToClientEvents[E]>[0]) => seen.push(payload)) as never);
  return seen;
}

/** Emits with an acknowledgement and resolves with the ack body. */
export function request<T = any>(socket: ClientSocket, event: keyof ClientToServerEvents, payload: unknown, timeoutMs = 5000): Promise<{ success: boolean; data?: T; error?: { code: string; message: string; details: { field?: string; message: string; in?: string }[] } }> {
  return (socket.timeout(timeoutMs) as any).emitWithAck(event, payload);
}

export function disconnected(socket: ClientSocket, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    if (socket.disconnected) return resolve('already');
    const timer = setTimeout(() => reject(new Error('still connected')), timeoutMs);
    socket.once('disconnect', (reason) => {
      clearTimeout(timer);
      resolve(reason);
    });
  });
}

/** Lets in-flight events arrive before asserting that something did not. */
export const settle = (ms = 300) => new Promise((r) => setTimeout(r, ms));
