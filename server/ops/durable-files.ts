/**
 * The file system calls every durable write of users-server shares: a
 * callback call as a promise, directory syncs, the creation of new files,
 * whole writes, temp names and whole-file replacement.
 */
import { randomBytes } from 'node:crypto';
import {
  close,
  closeSync,
  constants,
  fchownSync,
  fsync,
  fsyncSync,
  open,
  openSync,
  rename,
  renameSync,
  statSync,
  unlink,
  unlinkSync,
  write,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';

/**
 * How every file users-server writes is opened: created new, write-only.
 * O_EXCL fails on any name already there, a symbolic link among them
 * (dangling or not), so a link planted under the name is never followed
 * and what it points to is never written; O_NOFOLLOW says the same again.
 */
const NEW_FILE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

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

/** Creates `path` as a new file with `mode` and answers its descriptor; a name already taken throws EEXIST. */
export function createFileSync(path: string, mode: number): number {
  return openSync(path, NEW_FILE, mode);
}

/**
 * Creates `path` afresh, for a name an earlier write cut short may have
 * left (a snapshot's temp file, a journal without its header): whatever
 * holds the name is removed first (a link itself, never what it points
 * to), then the file is created new.
 */
export function recreateFileSync(path: string, mode: number): number {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  return createFileSync(path, mode);
}

/** The same, asynchronously: for compaction while the server serves. */
export async function recreateFile(path: string, mode: number): Promise<number> {
  await call<void>((cb) => unlink(path, cb)).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
  return call<number>((cb) => open(path, NEW_FILE, mode, cb));
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

/** A file's bytes: a text, a buffer, or buffers written one after the other (so that none is copied into one). */
type FileContent = Buffer | string | readonly Buffer[];

/** A temp file's path for a write that replaces `path`: of this process and this call alone. */
export function tempPathFor(path: string): string {
  return `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
}

/** Whether `name` is the name of a temp file (tempPathFor) for the file named `file` in the same directory. */
export function isTempNameOf(name: string, file: string): boolean {
  return name.startsWith(`${file}.`) && /^\.\d+\.[0-9a-f]{8}\.tmp$/.test(name.slice(file.length));
}

/** Writes all of `buf` at the file's position, asynchronously (writeAllSync's reason holds). */
async function writeAll(fd: number, buf: Buffer): Promise<void> {
  for (let done = 0; done < buf.length;)
    done += await call<number>((cb) => write(fd, buf, done, buf.length - done, null, cb));
}

/**
 * Writes a new file under `temp` and gives it the name `path` once it is
 * whole and synced, asynchronously: for the files compaction writes while
 * the server serves. Whatever already holds `temp` is removed first (a link
 * itself, never what it points to). `fill` writes the bytes through `write`
 * and answers false to give up; `wanted`, asked once the file is synced and
 * closed, can give up too. Then the temp file is removed, `path` is left as
 * it was and the answer is false. A failure removes the temp file too, then
 * throws. The caller syncs the directory.
 */
export async function replaceFileSoon(
  temp: string,
  path: string,
  mode: number,
  fill: (write: (data: Buffer) => Promise<void>) => Promise<boolean>,
  wanted: () => boolean = () => true,
): Promise<boolean> {
  const fd = await recreateFile(temp, mode);
  try {
    let whole: boolean;
    try {
      shareOwnerSync(fd, dirname(temp));
      whole = await fill((data) => writeAll(fd, data));
      if (whole) await call<void>((cb) => fsync(fd, cb));
    } finally {
      await call<void>((cb) => close(fd, cb));
    }
    if (!whole || !wanted()) {
      await call<void>((cb) => unlink(temp, cb));
      return false;
    }
    await call<void>((cb) => rename(temp, path, cb));
    return true;
  } catch (error) {
    // A partial file is left for no one (a full disk, say).
    await call<void>((cb) => unlink(temp, cb)).catch(() => {});
    throw error;
  }
}

/**
 * Replaces `path` with `content` atomically and durably: a reader sees the
 * old file or the new one, never a mix, and after a crash the directory
 * holds one of the two. The temp file is created with `mode` (so a secret is
 * never readable by others, not even briefly) under a name of its own per
 * call, so two writers never share a temp file (the last rename wins); its
 * data is synced before the rename, and the directory after it.
 */
export function replaceFileSync(dir: string, path: string, content: FileContent, mode: number): void {
  const temp = tempPathFor(path);
  writeNewFileSync(dir, temp, content, mode);
  try {
    renameSync(temp, path);
  } catch (error) {
    unlinkQuietlySync(temp);
    throw error;
  }
  fsyncDirSync(dir);
}

/**
 * Writes `content` to `path` in `dir`, a new file (createFileSync) with
 * `mode`, synced; the caller syncs `dir`. A file it could not write whole
 * (a full disk) is removed again.
 */
export function writeNewFileSync(dir: string, path: string, content: FileContent, mode: number): void {
  const fd = createFileSync(path, mode);
  try {
    try {
      shareOwnerSync(fd, dir);
      for (const part of typeof content === 'string' || Buffer.isBuffer(content) ? [content] : content)
        writeAllSync(fd, part);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    unlinkQuietlySync(path);
    throw error;
  }
}

/** Removes `path` if it can: for clean-ups after a failure, which must not hide that failure. */
function unlinkQuietlySync(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Never made, or already renamed.
  }
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
