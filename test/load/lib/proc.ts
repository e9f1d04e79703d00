// Child processes for the benchmark: servers run as separate node processes pinned to one core (taskset),
// the generator pins itself to another; both sides talk over the IPC channel with a tiny request/reply protocol.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const LOAD_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let tasksetChecked: boolean | null = null;
/** True when `taskset` runs here (util-linux). */
export function tasksetAvailable(): boolean {
  if (tasksetChecked === null) {
    const r = spawnSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    tasksetChecked = r.status === 0;
  }
  return tasksetChecked;
}

/** Pins every thread of this process to `cores`; returns false when it could not. */
export function pinSelf(cores: number[]): boolean {
  if (!tasksetAvailable() || !cores.length) return false;
  return spawnSync('taskset', ['-a', '-cp', cores.join(','), String(process.pid)], { stdio: 'ignore' }).status === 0;
}

/** Extra node flags for every server child (--profile adds --cpu-prof). */
export const childNodeFlags: string[] = [];

export interface ServerStats {
  rssBytes: number;
  heapUsedBytes: number;
  /** process.cpuUsage() in microseconds (user + system). */
  cpuMicros: number;
  /** Engine.IO clients connected to this process (0 for plain HTTP servers). */
  sockets: number;
  at: number;
}

export interface Child {
  name: string;
  pid: number;
  port: number;
  pinnedTo: number | null;
  call<T = unknown>(cmd: string, args?: unknown, timeoutMs?: number): Promise<T>;
  stats(gc?: boolean): Promise<ServerStats>;
  /** Asks the child to stop, then waits for its exit (SIGKILL to this pid after a grace period). */
  stop(): Promise<void>;
  log: { lines: number; tail: string[] };
}

interface Reply {
  id?: number;
  type?: string;
  port?: number;
  ok?: boolean;
  result?: unknown;
  error?: string;
}

/**
 * Starts `entry` (a .ts file under test/load) with tsx as a child with IPC; resolves once it reported its port.
 * `core` pins it with `taskset -c core` when available.
 */
export async function spawnChild(name: string, entry: string, env: Record<string, string | undefined>, core: number | null): Promise<Child> {
  const nodeArgs = ['--expose-gc', '--max-old-space-size=4096', ...childNodeFlags, '--import', 'tsx', path.join(LOAD_DIR, entry)];
  const pinned = core !== null && tasksetAvailable();
  const [cmd, args] = pinned ? ['taskset', ['-c', String(core), process.execPath, ...nodeArgs]] : [process.execPath, nodeArgs];
  const child: ChildProcess = spawn(cmd, args as string[], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const log = { lines: 0, tail: [] as string[] };
  const onOutput = (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) {
      if (!line.trim()) continue;
      log.lines++;
      log.tail.push(line.length > 400 ? `${line.slice(0, 400)}...` : line);
      if (log.tail.length > 15) log.tail.shift();
    }
  };
  child.stdout!.on('data', onOutput);
  child.stderr!.on('data', onOutput);

  let nextId = 1;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void; timer: NodeJS.Timeout }>();
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      for (const p of pending.values()) {
        clearTimeout(p.timer);
        p.reject(new Error(`${name} exited (${code ?? signal}) ${log.tail.slice(-3).join(' | ')}`));
      }
      pending.clear();
      resolve();
    }),
  );
  child.on('message', (m: Reply) => {
    if (m.id === undefined) return;
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    clearTimeout(p.timer);
    if (m.ok) p.resolve(m.result);
    else p.reject(new Error(`${name}: ${m.error}`));
  });

  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 90 s: ${log.tail.join(' | ')}`)), 90_000);
    child.on('message', (m: Reply) => {
      if (m.type === 'ready' && typeof m.port === 'number') {
        clearTimeout(timer);
        resolve(m.port);
      }
    });
    void exit.then(() => {
      clearTimeout(timer);
      reject(new Error(`${name} exited before it was ready: ${log.tail.join(' | ')}`));
    });
  });

  const call = <T>(cmd: string, args?: unknown, timeoutMs = 120_000): Promise<T> => {
    if (exited) return Promise.reject(new Error(`${name} has exited`));
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`${name}: ${cmd} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      child.send({ id, cmd, args });
    });
  };

  return {
    name,
    pid: child.pid!,
    port,
    pinnedTo: pinned ? core : null,
    call,
    stats: (gc = false) => call<ServerStats>('stats', { gc }),
    log,
    async stop() {
      if (exited) return;
      await call('stop', undefined, 20_000).catch(() => undefined);
      const grace = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exit;
      clearTimeout(grace);
    },
  };
}

export type Handler = (args: any) => Promise<unknown> | unknown;

/**
 * The child side: answers requests from the parent, reports `ready` with the port, and exits when the parent
 * goes away (so a crashed benchmark never leaves servers behind).
 */
export function serveChild(port: number, handlers: Record<string, Handler>, sockets: () => number = () => 0): void {
  const send = (m: Reply) => process.send?.(m);
  const all: Record<string, Handler> = {
    stats: ({ gc }: { gc?: boolean }) => {
      const g = (globalThis as { gc?: () => void }).gc;
      if (gc && g) {
        g();
        g();
      }
      const mem = process.memoryUsage();
      const cpu = process.cpuUsage();
      return { rssBytes: mem.rss, heapUsedBytes: mem.heapUsed, cpuMicros: cpu.user + cpu.system, sockets: sockets(), at: performance.now() } satisfies ServerStats;
    },
    ...handlers,
  };
  process.on('message', (m: { id: number; cmd: string; args?: unknown }) => {
    const handler = all[m.cmd];
    if (!handler) return send({ id: m.id, ok: false, error: `unknown command ${m.cmd}` });
    Promise.resolve()
      .then(() => handler(m.args ?? {}))
      .then(
        (result) => {
          send({ id: m.id, ok: true, result });
          if (m.cmd === 'stop') setTimeout(() => process.exit(0), 50);
        },
        (err: Error) => send({ id: m.id, ok: false, error: err?.stack ?? String(err) }),
      );
  });
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', port });
}
