import { randomBytes } from 'node:crypto';
import { close, closeSync, fchownSync, fsync, fsyncSync, open, openSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';

/**
 * The file system calls every durable write of users-server shares: a
 * callback call as a promise, directory syncs, and whole-file replacement.
 */

/** A node-style callback call as a promise. */
export function call<T>(start: (cb: (error: NodeJS.ErrnoException | null, value?: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value as T))));
}

/** Makes new and renamed names in `dir` durable: a file's fsync does not cover its directory entry. */
export async function fsyncDir(dir: string): Promise<void> {
  const fd = await call<number>((cb) => open(dir, 'r', cb));
  try {
    await call<void>((cb) => fsync(fd, cb));
  } finally {
    await call<void>((cb) => close(fd, cb));
  }
}

/** The same, synchronously: for start-up and the commands, before anything is served. */
export function fsyncDirSync(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * As root, gives a file just made in `dir` the directory's owner: an edit
 * run by root on a server's data directory (accounts, repair, copy) leaves
 * files the server's own user can still open, when it runs as another
 * (systemd's DynamicUser, say). Any other user makes files of its own, as always.
 */
export function shareOwnerSync(fd: number, dir: string): void {
  if (process.getuid?.() !== 0) return;
  const { uid, gid } = statSync(dir);
  if (uid !== 0 || gid !== 0) fchownSync(fd, uid, gid);
}

/**
 * Writes all of `data` at the file's position: on a disk that fills up, a
 * write may take only part of the bytes without an error, and the next one
 * fails (ENOSPC); one writeSync alone would leave a short file behind.
 */
export function writeAllSync(fd: number, data: Buffer | string): void {
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
}

/**
 * Replaces `path` with `content` atomically and durably: a reader sees the
 * old file or the new one, never a mix, and after a crash the directory
 * holds one of the two. The temp file is created with `mode` (so a secret is
 * never readable by others, not even briefly) under a name of its own per
 * call, so two writers never share a temp file (the last rename wins); its
 * data is synced before the rename, and the directory after it.
 */
export function replaceFileSync(dir: string, path: string, content: string, mode: number): void {
  const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(temp, 'wx', mode);
  try {
    try {
      shareOwnerSync(fd, dir);
      writeAllSync(fd, content);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch (error) {
    try {
      unlinkSync(temp);
    } catch {
      // Already renamed, or never made.
    }
    throw error;
  }
  fsyncDirSync(dir);
}

/** Removes `path` durably (the directory synced after); a file already gone is no error. */
export function removeFileSync(dir: string, path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  fsyncDirSync(dir);
}
