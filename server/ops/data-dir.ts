/**
 * The data directory's files that are not the store: the lock, the
 * generated signing secret and the generated admin password. Start-up code
 * only; nothing here runs per request.
 */
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { makeDirectories } from '../../shared/directories.js';
import { fileProblem } from '../../shared/file-errors.js';
import { ServerCommandError } from '../errors.js';
import { removeFileSync, replaceFileSync } from './durable-files.js';

export function ensureDataDir(dir: string): string {
  const path = resolve(dir);
  try {
    makeDirectories(path, 0o700);
  } catch (error) {
    throw new ServerCommandError(`cannot create the data directory: ${fileProblem('create', path, error)}`);
  }
  if (!statSync(path).isDirectory())
    throw new ServerCommandError(`the data directory ${path} is a file, not a folder; give --data a folder`);
  return path;
}

/**
 * The data directory of a command that reads one a server made (accounts,
 * repair, backup, copy --from): a path that does not exist, is a file, or
 * holds nothing of a server is refused, since a typo in --data would
 * otherwise read or make a directory no server uses.
 */
export function requireDataDir(dir: string, flag = '--data'): void {
  if (!existsSync(dir))
    throw new ServerCommandError(
      `${dir} does not exist: give the server's data directory with ${flag}, or start users-server once with --data ${dir} to make it`,
    );
  if (!statSync(dir).isDirectory())
    throw new ServerCommandError(`${dir} is a file, not a folder: give the server's data directory with ${flag}`);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    throw new ServerCommandError(`cannot read the data directory: ${fileProblem('read', dir, error)}`);
  }
  refuseUnfinished(dir);
  const known = names.some((name) => DATA_DIR_FILES.has(name) || /^(journal|snapshot)-\d{8}$/.test(name));
  if (!known)
    throw new ServerCommandError(
      `${dir} is not a users-server data directory (no journal, secret or accounts in it): give the server's data directory with ${flag}, or start users-server once with --data ${dir} to make it`,
    );
}

/** Where the built-in admin's identity is kept (security/admin-identity.ts). */
export const ADMIN_IDENTITY_FILE = 'admin-identity';

/** Files only a data directory holds, besides its journals and snapshots. */
const DATA_DIR_FILES = new Set(['secret', 'admin-password', ADMIN_IDENTITY_FILE, 'accounts', 'lock']);

/**
 * The data directory for a start, made if need be, with the way to take
 * back what the start added when it fails before serving: the directories
 * it made, else the entries that were not there before. Nothing that was
 * there before is touched.
 */
export function prepareDataDir(dir: string): { path: string; discard(): void } {
  const path = resolve(dir);
  let top: string | undefined;
  for (let at = path; !existsSync(at); at = dirname(at)) top = at;
  ensureDataDir(path);
  refuseUnfinished(path);
  const before = new Set(readdirSync(path));
  const discard = () => {
    const made =
      top === undefined
        ? readdirSync(path)
            .filter((name) => !before.has(name))
            .map((name) => join(path, name))
        : [top];
    for (const entry of made) rmSync(entry, { recursive: true, force: true });
  };
  return { path, discard };
}

/**
 * In a directory that `backup` or `copy` is filling, until it is whole. A
 * copy stopped part way (killed, the machine went down) keeps it, and a
 * server, repair, backup, copy or accounts refuses the directory: what it
 * holds may be cut short, and a server started on it would look whole.
 */
export const UNFINISHED_FILE = 'unfinished';

/**
 * Marks `dir` as being filled by `what` (synced); the returned `finish` removes the mark once everything is written and
 * synced.
 */
export function markUnfinished(dir: string, what: string): { finish(): void } {
  replaceFileSync(
    dir,
    join(dir, UNFINISHED_FILE),
    `${what}\nbegun ${new Date().toISOString()}; this directory is not whole while this file is here\n`,
    0o600,
  );
  return { finish: () => removeFileSync(dir, join(dir, UNFINISHED_FILE)) };
}

function refuseUnfinished(dir: string): void {
  const mark = readTrimmed(join(dir, UNFINISHED_FILE));
  if (mark === undefined) return;
  throw new ServerCommandError(
    `${dir} is not whole: the ${mark.split('\n')[0]} stopped before it finished (${UNFINISHED_FILE} says so), so it may hold part of the data; make it again, or remove ${join(dir, UNFINISHED_FILE)} to use what it holds`,
  );
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

/** Who holds a lock: a pid, and where the system tells them, the process's start time and the boot. */
interface LockOwner {
  readonly pid: number;
  /** Field 22 of /proc/PID/stat: clock ticks after boot; a reused pid has another. */
  readonly started: string | undefined;
  /** /proc/sys/kernel/random/boot_id: a lock from before a reboot names no running process. */
  readonly boot: string | undefined;
}

function readProc(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** The start time of a running process (Linux); undefined where /proc cannot tell. */
function startedAt(pid: number): string | undefined {
  const stat = readProc(`/proc/${pid}/stat`);
  // After the command name in parentheses: state is field 3, start time field 22.
  return stat?.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

function ownerText(pid: number): string {
  const started = startedAt(pid);
  const boot = readProc('/proc/sys/kernel/random/boot_id');
  return started === undefined || boot === undefined ? String(pid) : `${pid} ${started} ${boot}`;
}

/**
 * The owner a lock names: a symbolic link's target, or the first line of a lock written as a file (by an older
 * users-server).
 */
function readOwner(path: string): LockOwner | undefined {
  let text: string;
  try {
    text = readlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EINVAL') return undefined;
    text = readProc(path) ?? '';
  }
  const [pid, started, boot] = text.trim().split(' ');
  const owner = Number.parseInt(pid ?? '', 10);
  return Number.isSafeInteger(owner) ? { pid: owner, started, boot } : undefined;
}

/** The pid a data directory's lock names, if any (for tests and tools). */
export function lockOwnerPid(dir: string): number | undefined {
  return readOwner(join(dir, 'lock'))?.pid;
}

/** Why the owner cannot be holding the lock any more; undefined while it can. */
function staleReason(owner: LockOwner): string | undefined {
  if (owner.boot !== undefined && owner.boot !== readProc('/proc/sys/kernel/random/boot_id'))
    return `it was taken before the system last started`;
  if (!isAlive(owner.pid)) return `its process ${owner.pid} is not running`;
  const started = startedAt(owner.pid);
  if (owner.started !== undefined && started !== undefined && started !== owner.started)
    return `its pid ${owner.pid} now belongs to another process`;
  return undefined;
}

/**
 * Takes the single-writer lock: `lock`, a symbolic link created
 * exclusively whose target names the owner (pid, start time, boot). A link
 * needs no data block, so a server starts on a full disk. A lock whose
 * owner is gone (not running, a pid reused by another process, an earlier
 * boot) was left by a killed server: it is taken over, with a line on
 * `log`. Returns the release function. `nextStep` is what a refusal tells
 * the person to do, in the words of the command that asks.
 */
export function acquireLock(
  dir: string,
  log: (line: string) => void = () => {},
  nextStep = 'stop it first, or give another --data',
): () => void {
  const path = join(dir, 'lock');
  // The pid in the lock cannot tell two servers of this process apart.
  if (heldLocks.has(path))
    throw new ServerCommandError(`another users-server in this process is using the data directory ${dir}`);
  const taken = takeLink(path, 'the data directory', (stale) =>
    log(`users-server: took over the lock of ${dir}: ${stale}`),
  );
  if ('owner' in taken) {
    if (taken.owner === undefined)
      throw new ServerCommandError(`cannot lock the data directory ${dir}: another server is starting on it`);
    throw new ServerCommandError(
      `another users-server (pid ${taken.owner.pid}) is using the data directory ${dir}: ${nextStep}`,
    );
  }
  heldLocks.add(path);
  return () => {
    heldLocks.delete(path);
    taken.release();
  };
}

/**
 * The data directory's lock for a command that changes what a server
 * would own (the declared fields): its release, or undefined while a
 * server runs on `dir` (or starts on it), which then makes the change.
 */
export function lockIfIdle(dir: string): (() => void) | undefined {
  const path = join(dir, 'lock');
  if (heldLocks.has(path)) return undefined;
  const taken = takeLink(path, 'the data directory', () => {});
  if ('owner' in taken) return undefined;
  heldLocks.add(path);
  return () => {
    heldLocks.delete(path);
    taken.release();
  };
}

/**
 * Creates the lock link `path` naming this process: its release, or the
 * live owner that holds it (undefined when others kept taking it over). A
 * link whose owner is gone is taken over once, `tookOver` told why;
 * `label` names what is locked in a failure.
 */
function takeLink(
  path: string,
  label: string,
  tookOver: (stale: string) => void,
): { release: () => void } | { owner: LockOwner | undefined } {
  let owner: LockOwner | undefined;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      symlinkSync(ownerText(process.pid), path);
      return {
        release: () => {
          try {
            unlinkSync(path);
          } catch {
            // Already gone: nothing to release.
          }
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST')
        throw new ServerCommandError(`cannot lock ${label}: ${fileProblem('write', path, error)}`);
    }
    owner = readOwner(path);
    const stale =
      owner === undefined
        ? 'it names no process'
        : owner.pid === process.pid
          ? 'it was left by this process'
          : staleReason(owner);
    if (stale === undefined) return { owner };
    try {
      unlinkSync(path);
      tookOver(stale);
    } catch {
      // Someone else removed it first; the next attempt decides.
    }
    owner = undefined;
  }
  return { owner };
}

/** How long an edit of a settings file waits for another process's edit of it. */
const EDIT_WAIT_MS = 10_000;

/**
 * Runs `edit` (a read, a change and a write of one file of `dir`)
 * holding `<dir>/<name>.lock`, a lock link like the data directory's:
 * commands run at once by several processes (`accounts add` from a
 * script, in parallel) edit one after another, and none loses what
 * another wrote. Waits up to EDIT_WAIT_MS for an edit under way.
 */
export async function withEditLock<T>(dir: string, name: string, edit: () => T | Promise<T>): Promise<T> {
  const path = join(dir, `${name}.lock`);
  const deadline = Date.now() + EDIT_WAIT_MS;
  for (;;) {
    const taken = takeLink(path, join(dir, name), () => {});
    if ('release' in taken) {
      try {
        return await edit();
      } finally {
        taken.release();
      }
    }
    if (Date.now() > deadline) {
      throw new ServerCommandError(
        `${join(dir, name)} is being changed by another process${taken.owner === undefined ? '' : ` (pid ${taken.owner.pid})`} for more than ${EDIT_WAIT_MS / 1000} s; try again once it has finished`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 2 + Math.random() * 10));
  }
}

/**
 * What shows that an earlier start used `dir` (the secret or the admin
 * password it generated, both written after the journal's header), for the
 * store to refuse a missing journal; undefined for a new directory.
 */
export function usedBefore(dir: string): string | undefined {
  for (const name of ['secret', 'admin-password']) if (existsSync(join(dir, name))) return `its ${name} file`;
  return undefined;
}

function readTrimmed(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new ServerCommandError(`cannot read ${path}: ${(error as NodeJS.ErrnoException).code}`);
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
 * The generated admin password in `<data>/admin-password` (raw text, for
 * the caller to parse), made on first use. `created` tells the caller to
 * say where it is.
 */
export function loadOrCreateAdminPassword(dir: string): { text: string; path: string; created: boolean } {
  const path = join(dir, 'admin-password');
  const existing = readTrimmed(path);
  if (existing !== undefined && existing !== '') return { text: existing, path, created: false };
  const password = newAdminPassword();
  replaceFileSync(dir, path, password + '\n', 0o600);
  return { text: password, path, created: true };
}

/**
 * Replaces `<data>/admin-identity` with what `update` makes of it (it is
 * given the kept text, or undefined), when that differs; returns it.
 */
export function updateAdminIdentity(dir: string, update: (kept: string | undefined) => string): string {
  const path = join(dir, ADMIN_IDENTITY_FILE);
  const kept = readTrimmed(path);
  const next = update(kept === '' ? undefined : kept);
  if (next !== kept) replaceFileSync(dir, path, next + '\n', 0o600);
  return next;
}

/** A generated admin password: 24 base64url characters (144 bits), never starting with "{". */
export function newAdminPassword(): string {
  return randomBytes(18).toString('base64url');
}
