// Correctness probes with the real socket.io-client: the raw generator clients are fast but naive, so a few real
// clients check that the server speaks the protocol, refuses bad tokens, and delivers what the raw clients count.
import { io, type Socket } from 'socket.io-client';

export function probeConnect(url: string, orgId: string, auth: Record<string, unknown>, timeoutMs = 10_000): Promise<Socket> {
  const socket = io(`${url}/orgs/${orgId}`, { path: '/socket.io', transports: ['websocket'], auth, reconnection: false, forceNew: true });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.close();
      reject(new Error('connect timeout'));
    }, timeoutMs);
    socket.once('connect', () => {
      clearTimeout(timer);
      resolve(socket);
    });
    socket.once('connect_error', (err) => {
      clearTimeout(timer);
      socket.close();
      reject(err);
    });
  });
}

/** The refusal message for a forged token (the app must answer `unauthorized`). */
export async function refusalProbe(url: string, orgId: string): Promise<string> {
  try {
    const socket = await probeConnect(url, orgId, { token: 'not-a-token', role: 'visitor' });
    socket.close();
    return 'accepted';
  } catch (err) {
    return (err as Error).message;
  }
}

export interface RoundTrip {
  ok: boolean;
  detail: string;
  ms: number;
}

/**
 * One visitor message through socket.io-client: the ack must carry the stored message, and an agent socket on
 * `agentUrl` (another instance in the cluster scenario) must receive it as new_message.
 */
export async function roundTripProbe(
  visitorUrl: string,
  agentUrl: string,
  orgId: string,
  visitor: { token: string; sessionId: string; conversationId: string },
  agent: { token: string },
): Promise<RoundTrip> {
  const started = performance.now();
  let agentSocket: Socket | null = null;
  let visitorSocket: Socket | null = null;
  try {
    agentSocket = await probeConnect(agentUrl, orgId, { token: agent.token, role: 'agent' });
    visitorSocket = await probeConnect(visitorUrl, orgId, { token: visitor.token, role: 'visitor', sessionId: visitor.sessionId });
    const content = `probe:${Math.random().toString(36).slice(2)}`;
    const received = new Promise<{ conversationId: string; message: { content: string; id: string } }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no new_message at the agent within 10 s')), 10_000);
      agentSocket!.on('new_message', (p: { conversationId: string; message: { content: string; id: string } }) => {
        if (p.message?.content !== content) return;
        clearTimeout(timer);
        resolve(p);
      });
    });
    const ack = (await visitorSocket.timeout(10_000).emitWithAck('send_message', { conversationId: visitor.conversationId, content })) as {
      success: boolean;
      data?: { message?: { id: string; content: string; conversationId: string } };
      error?: { code: string };
    };
    if (!ack.success) return { ok: false, detail: `ack refused: ${ack.error?.code}`, ms: performance.now() - started };
    if (ack.data?.message?.content !== content || ack.data.message.conversationId !== visitor.conversationId) return { ok: false, detail: 'ack does not carry the message', ms: performance.now() - started };
    const event = await received;
    if (event.conversationId !== visitor.conversationId || event.message.id !== ack.data.message.id) return { ok: false, detail: 'new_message differs from the ack', ms: performance.now() - started };
    return { ok: true, detail: 'ack and new_message match', ms: performance.now() - started };
  } catch (err) {
    return { ok: false, detail: (err as Error).message, ms: performance.now() - started };
  } finally {
    agentSocket?.close();
    visitorSocket?.close();
  }
}

/** A socket.io-client agent counting one step's chat messages, to cross-check the raw receivers' count. */
export class ProbeCounter {
  count = 0;
  step = -1;

  private constructor(private readonly socket: Socket) {
    socket.on('new_message', (p: { message?: { content?: string } }) => {
      const m = /^bench:(\d+):/.exec(p.message?.content ?? '');
      if (m && Number(m[1]) === this.step) this.count++;
    });
  }

  static async open(url: string, orgId: string, token: string): Promise<ProbeCounter> {
    return new ProbeCounter(await probeConnect(url, orgId, { token, role: 'agent' }));
  }

  reset(step: number): void {
    this.step = step;
    this.count = 0;
  }

  close(): void {
    this.socket.close();
  }
}
