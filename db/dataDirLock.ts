// One process per embedded data directory: a lock file in DATA_DIR naming its owner, taken before PGlite opens it.
import { randomUUID } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, realpathSync, renameSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';

export const DATA_DIR_LOCK_FILE = 'server.lock';

/** What the lock file says about the process holding the directory. */
export interface DataDirOwner {
  pid: number;
  hostname: string;
  since: string;
  /** Tells this holder's file from a later one, so a release never removes someone else's lock. */
  id: string;
}

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly owner: DataDirOwner,
  ) {
    const file = path.join(dataDir, DATA_DIR_LOCK_FILE);
    super(
      `DATA_DIR ${dataDir} is in use by another server (pid ${owner.pid} on ${owner.hostname}, since ${owner.since}); ` +
        `the embedded database serves one process: stop that one first, or delete ${file} if it is no longer running`,
    );
    this.name = 'DataDirLockedError';
  }
}

export interface DataDirLock {
  readonly file: string;
  /** Removes the lock file if it is still this holder's; safe to call twice. */
  release(): void;
}

/** Lock files held by this process, so a stale file bearing our own pid (a restarted container) is recognized. */
const heldHere = new Set<string>();

/**
 * Takes DATA_DIR for this process, or throws DataDirLockedError naming the live owner. A lock whose process is
 * gone is taken over. Synchronous, because it must happen before the database is constructed (PGlite starts
 * opening its directory at once, and a second opener would replay the first one's WAL under it).
 */
export function lockDataDir(dataDir: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  // The real path, so two spellings of one directory in this process still meet at one lock.
  const file = path.join(realpathSync(dataDir), DATA_DIR_LOCK_FILE);
  const owner: DataDirOwner = { pid: process.pid, hostname: hostname(), since: new Date().toISOString(), id: randomUUID() };
  // A few rounds only: each one either takes the lock, refuses, or clears one stale file another starter may race for.
  for (let round = 0; round < 5; round++) {
    if (publish(file, owner)) {
      heldHere.add(file);
      let held = true;
      return {
        file,
        release() {
          if (!held) return;
          held = false;
          heldHere.delete(file);
          if (readOwner(readText(file))?.id === owner.id) rmSync(file, { force: true });
        },
      };
    }
    const text = readText(file);
    if (text === null) continue; // released meanwhile
    const current = readOwner(text);
    if (current && isAlive(current, file)) throw new DataDirLockedError(dataDir, current);
    clearStale(file, text);
  }
  throw new Error(`could not take ${file}: other processes keep replacing it`);
}

/**
 * Creates the lock file with its whole content at once: written to a private file, then hard-linked into place,
 * which fails if the lock exists. A reader therefore never sees a half-written lock.
 */
function publish(file: string, owner: DataDirOwner): boolean {
  const draft = `${file}.${owner.id}`;
  const fd = openSync(draft, 'wx', 0o644);
  try {
    writeSync(fd, `${JSON.stringify(owner)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(draft, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    unlinkSync(draft);
  }
}

/**
 * Moves a stale lock aside. Two starters may both judge the same file stale; the one that moved a newer file
 * (the other's fresh lock) puts it back, so at most one of them goes on to publish.
 */
function clearStale(file: string, staleText: string): void {
  const aside = `${file}.stale-${randomUUID()}`;
  try {
    renameSync(file, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  try {
    if (readText(aside) !== staleText) linkSync(aside, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    rmSync(aside, { force: true });
  }
}

function readText(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** The owner a lock file names, or null for a file this code never writes (then it is treated as stale). */
function readOwner(text: string | null): DataDirOwner | null {
  if (text === null) return null;
  try {
    const value = JSON.parse(text) as Partial<DataDirOwner> | null;
    if (value && Number.isInteger(value.pid) && typeof value.hostname === 'string') {
      return { pid: value.pid!, hostname: value.hostname, since: String(value.since ?? 'unknown'), id: String(value.id ?? '') };
    }
  } catch {
    // Unreadable: not a lock this code wrote.
  }
  return null;
}

function isAlive(owner: DataDirOwner, file: string): boolean {
  // Another machine's (or container's) process cannot be checked from here: assume it runs, and say so.
  if (owner.hostname !== hostname()) return true;
  // Our own pid in a file we do not hold: left by an earlier run that had the same pid, as a container's pid 1 does.
  if (owner.pid === process.pid) return heldHere.has(file);
  try {
    process.kill(owner.pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
