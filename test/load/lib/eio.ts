// A minimal Socket.IO v5 / Engine.IO v4 client over `ws`: cheap enough that thousands of them in one process
// do not make the generator the bottleneck. Frames (websocket transport only, no binary, no upgrade):
//   server open `0{"sid",...}`; ping `2` -> pong `3`; connect `40/nsp,{auth}` -> `40/nsp,{"sid"}` or
//   `44/nsp,{"message"}`; event `42/nsp,["name",{...}]`; emit with ack `42/nsp,7["name",{...}]` -> `43/nsp,7[{...}]`.
import WebSocket from 'ws';
import { Histogram } from './stats.js';

/**
 * Source endpoints: explicit ports 20000-32767 (below Linux's ephemeral range) on 127.0.0.2, .3, ... (all of 127/8
 * is loopback), so one process can open far more than the ~28k ephemeral ports of one address. Explicit ports
 * also matter for speed: bind() to port 0 scans for a free port, which gets slow with thousands in use. The start
 * is random and a port still held (TIME_WAIT of an earlier run) is skipped.
 */
const PORT_FIRST = 20_000;
const PORTS_PER_ADDRESS = 32_768 - PORT_FIRST;
const ADDRESSES = 250;
let sourceSlot = Math.floor(Math.random() * ADDRESSES * PORTS_PER_ADDRESS);

export function nextSource(): { localAddress: string; localPort: number } {
  const slot = sourceSlot++ % (ADDRESSES * PORTS_PER_ADDRESS);
  return { localAddress: `127.0.0.${Math.floor(slot / PORTS_PER_ADDRESS) + 2}`, localPort: PORT_FIRST + (slot % PORTS_PER_ADDRESS) };
}

export type AckHandler = (body: string) => void;

/** Why a connect failed (the refusal's message or a socket error code), and when the server asked to come back. */
export type ConnectError = Error & { retryAfterMs?: number };

export class EioClient {
  readonly nsp: string;
  private readonly eventPrefixLength: number;
  private ws: WebSocket | null = null;
  private nextAck = 1;
  private readonly acks = new Map<number, AckHandler>();
  /** Raw `42/nsp,[...]` frames; the receiver decides how much of them to parse. */
  onEvent: ((frame: string) => void) | null = null;
  connected = false;
  /** Set when the connection ended without close() from this side. */
  lost = false;
  /** Called once per connection that ends without close() from this side (a reconnecting client starts over). */
  onLost: (() => void) | null = null;
  /** Called the moment the namespace accepts the socket, before any event that arrived with the acceptance. */
  onJoin: (() => void) | null = null;

  constructor(
    readonly baseUrl: string,
    orgId: string,
    private readonly auth: Record<string, unknown>,
  ) {
    this.nsp = `/orgs/${orgId}`;
    this.eventPrefixLength = 2 + this.nsp.length + 1;
  }

  /** Opens the websocket and joins the namespace; rejects with the refusal message (unauthorized, forbidden, ...). */
  async connect(timeoutMs = 15_000): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.attempt(timeoutMs);
      } catch (err) {
        // The source port is still taken (another socket, or TIME_WAIT): take the next one.
        if ((err as Error).message !== 'EADDRINUSE' || attempt >= 20) throw err;
      }
    }
  }

  private attempt(timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      let joined = false;
      const settle = (err?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) {
          this.ws?.terminate();
          reject(err);
        } else resolve();
      };
      const timer = setTimeout(() => settle(new Error('timeout')), timeoutMs);
      const ws = new WebSocket(`${this.baseUrl.replace(/^http/, 'ws')}/socket.io/?EIO=4&transport=websocket`, {
        ...nextSource(),
        perMessageDeflate: false,
        handshakeTimeout: timeoutMs,
      });
      this.ws = ws;
      ws.on('error', (err: NodeJS.ErrnoException) => settle(new Error(err.code ?? err.message)));
      ws.on('close', () => {
        if (this.connected) this.lost = true;
        this.connected = false;
        settle(new Error('closed'));
        // close() from this side forgets the websocket first; anything else ends a connection that was up.
        if (joined && this.ws === ws) this.onLost?.();
      });
      ws.on('message', (data: Buffer) => {
        const frame = data.toString();
        const kind = frame.charCodeAt(0);
        if (kind === 52 /* 4: socket.io packet */) {
          const type = frame.charCodeAt(1);
          if (type === 50 /* 2 event */) this.onEvent?.(frame);
          else if (type === 51 /* 3 ack */) this.handleAck(frame);
          else if (type === 48 /* 0 connect */) {
            joined = true;
            this.connected = true;
            this.onJoin?.();
            settle();
          } else if (type === 52 /* 4 connect_error */) {
            const body = frame.slice(this.eventPrefixLength);
            let message = 'connect_error';
            let retryAfter: unknown;
            try {
              const parsed = JSON.parse(body) as { message?: string; data?: { retryAfter?: unknown } };
              message = parsed.message ?? message;
              retryAfter = parsed.data?.retryAfter;
            } catch {
              /* keep the generic message */
            }
            const err: ConnectError = new Error(message);
            // A refusal that says when to come back (service_unavailable, rate_limited): seconds.
            if (typeof retryAfter === 'number' && retryAfter >= 0) err.retryAfterMs = retryAfter * 1000;
            settle(err);
          } else if (type === 49 /* 1 disconnect */) {
            this.lost = true;
            this.connected = false;
            // The namespace is gone for this connection: drop it, so that 'close' starts a reconnect.
            ws.terminate();
          }
        } else if (kind === 50 /* 2 ping */) ws.send('3');
        else if (kind === 48 /* 0 open */) ws.send(`40${this.nsp},${JSON.stringify(this.auth)}`);
        else if (kind === 49 /* 1 close */) ws.close();
      });
    });
  }

  private handleAck(frame: string): void {
    let i = this.eventPrefixLength;
    let id = 0;
    for (let c = frame.charCodeAt(i); c >= 48 && c <= 57; c = frame.charCodeAt(++i)) id = id * 10 + (c - 48);
    const handler = this.acks.get(id);
    if (!handler) return;
    this.acks.delete(id);
    handler(frame.slice(i));
  }

  /** Emits `event` with an already serialized JSON payload and waits for the acknowledgement (raw body). */
  emitWithAck(event: string, payloadJson: string, onAck: AckHandler): void {
    const id = this.nextAck++;
    this.acks.set(id, onAck);
    this.ws!.send(`42${this.nsp},${id}["${event}",${payloadJson}]`);
  }

  get pendingAcks(): number {
    return this.acks.size;
  }

  close(): void {
    this.connected = false;
    this.ws?.terminate();
    this.ws = null;
    this.acks.clear();
  }
}

export interface RampResult {
  attempted: number;
  connected: number;
  failed: number;
  /** Failure reasons (refusal message or socket error code) and how often. */
  errors: Record<string, number>;
  seconds: number;
  /** Sockets per second over the whole ramp. */
  rate: number;
  /** Handshake time (websocket open to namespace connect) per socket. */
  handshake: ReturnType<Histogram['summary']>;
}

/** Connects every client, at most `concurrency` handshakes at a time. Bounded: every connect has a timeout. */
export async function ramp(clients: EioClient[], concurrency: number, timeoutMs = 15_000): Promise<RampResult> {
  const handshake = new Histogram();
  const errors: Record<string, number> = {};
  let next = 0;
  let connected = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < clients.length) {
      const client = clients[next++]!;
      const t0 = performance.now();
      try {
        await client.connect(timeoutMs);
        handshake.record(performance.now() - t0);
        connected++;
      } catch (err) {
        const reason = (err as Error).message;
        errors[reason] = (errors[reason] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, clients.length) }, worker));
  const seconds = (performance.now() - started) / 1000;
  return { attempted: clients.length, connected, failed: clients.length - connected, errors, seconds, rate: connected / seconds, handshake: handshake.summary() };
}
