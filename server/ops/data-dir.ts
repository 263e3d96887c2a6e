import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CommandError } from '../errors.js';
import { replaceFileSync } from './durable-files.js';

/**
 * The data directory's files that are not the store: the lock, the
 * generated signing secret and the generated admin password. Start-up code
 * only; nothing here runs per request.
 */

export function ensureDataDir(dir: string): string {
  const path = resolve(dir);
  try {
    mkdirSync(path, { recursive: true, mode: 0o700 });
  } catch (error) {
    throw new CommandError(`cannot create the data directory ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  return path;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A killed server whose parent has not reaped it yet still answers
  // kill(pid, 0); on Linux its state in /proc says it is a zombie.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/** Lock files this process holds. */
const heldLocks = new Set<string>();

/**
 * Takes the single-writer lock: a `lock` file holding the owner's pid,
 * created exclusively. A lock whose pid is no longer running was left by a
 * killed server and is taken over. Returns the release function.
 */
export function acquireLock(dir: string): () => void {
  const path = join(dir, 'lock');
  // The pid in the file cannot tell two servers of this process apart.
  if (heldLocks.has(path)) throw new CommandError(`another users-server in this process is using the data directory ${dir}`);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      heldLocks.add(path);
      return () => {
        heldLocks.delete(path);
        try {
          unlinkSync(path);
        } catch {
          // Already gone: nothing to release.
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new CommandError(`cannot lock the data directory ${dir}: ${(error as NodeJS.ErrnoException).code}`);
      }
    }
    let owner = NaN;
    try {
      owner = Number.parseInt(readFileSync(path, 'utf8'), 10);
    } catch {
      // Unreadable or vanished: treat as stale.
    }
    if (Number.isSafeInteger(owner) && owner !== process.pid && isAlive(owner)) {
      throw new CommandError(`another users-server (pid ${owner}) is using the data directory ${dir}`);
    }
    try {
      unlinkSync(path);
    } catch {
      // Someone else removed it first; the next attempt decides.
    }
  }
  throw new CommandError(`cannot lock the data directory ${dir}: another server is starting on it`);
}


function readTrimmed(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CommandError(`cannot read ${path}: ${(error as NodeJS.ErrnoException).code}`);
  }
}

/** The secret kept in `<data>/secret`, made on first start so sessions survive a restart. */
export function loadOrCreateSecret(dir: string): string {
  const path = join(dir, 'secret');
  const existing = readTrimmed(path);
  if (existing !== undefined && existing !== '') return existing;
  const secret = randomBytes(32).toString('base64url');
  replaceFileSync(dir, path, secret + '\n', 0o600);
  return secret;
}

/**
 * The admin password: from the environment, else `<data>/admin-password`,
 * made on first start. `created` tells the caller to print where it is.
 */
export function loadOrCreateAdminPassword(dir: string, fromEnv: string | undefined): { password: string; path?: string; created: boolean } {
  if (fromEnv !== undefined && fromEnv !== '') return { password: fromEnv, created: false };
  const path = join(dir, 'admin-password');
  const existing = readTrimmed(path);
  if (existing !== undefined && existing !== '') return { password: existing, path, created: false };
  const password = randomBytes(18).toString('base64url');
  replaceFileSync(dir, path, password + '\n', 0o600);
  return { password, path, created: true };
}
