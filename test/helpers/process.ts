// Runs the project's entry points (`server/*.ts`) as child processes, the way `npm run ...` does, from any directory.
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** tsx's loader by absolute URL, so a child whose working directory is elsewhere still finds it. */
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Starts `node --import tsx <ROOT>/<script> ...args` with exactly `env` (plus PATH). */
export function spawnScript(script: string, args: string[], opts: { env: Record<string, string | undefined>; cwd?: string }): ChildProcess {
  const env = Object.fromEntries(Object.entries({ PATH: process.env.PATH, ...opts.env }).filter(([, v]) => v !== undefined)) as Record<string, string>;
  return spawn(process.execPath, ['--import', TSX, path.join(ROOT, script), ...args], { cwd: opts.cwd ?? ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Runs a script to its end and collects its output. */
export function runScript(script: string, args: string[], opts: { env: Record<string, string | undefined>; cwd?: string }): Promise<Finished> {
  const child = spawnScript(script, args, opts);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
