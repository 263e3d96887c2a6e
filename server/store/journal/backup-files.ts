/**
 * An online backup of a data directory: a copy that is a data directory of
 * its own and holds every write acknowledged before the backup began,
 * taken while a server keeps writing and compacting in the source.
 *
 * Journals are only appended to and snapshots never change, so a
 * consistent copy is the newest snapshot and every journal after it, each
 * read to the length it has once all of them are open. Opening them all
 * first is what makes it safe against compaction: a file removed after it
 * was opened stays readable through its descriptor (POSIX), and if one
 * vanishes between the listing and its opening, the listing is taken again.
 * A record being written while the copy reads it is cut off as a torn tail
 * when the copy is first read (it was not acknowledged yet), as after a
 * crash.
 */
import { closeSync, fstatSync, fsyncSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { DataError } from '../../errors.js';
import { createFileSync, fsyncDirSync, writeAllSync } from '../../ops/durable-files.js';
import { journalName, listDataFiles, recover, snapshotName } from './recovery.js';

/** How many times the listing is taken again when a compaction removes a file under it. */
const ATTEMPTS = 10;
const CHUNK = 4 * 1024 * 1024;

interface BackedUp {
  /**
   * The data files copied, with the bytes of data each holds (a journal's preallocated zeros after its last record left
   * out).
   */
  files: { name: string; bytes: number }[];
  users: number;
}

/**
 * Copies the data files of `source` into `target` (an empty directory), fsyncs them, and checks the copy reads back.
 */
export function backupDataFiles(source: string, target: string): BackedUp {
  const opened = openConsistentSet(source);
  const files: BackedUp['files'] = [];
  try {
    for (const { name, fd } of opened) files.push({ name, bytes: copyOpenFile(fd, join(target, name)) });
  } finally {
    for (const { fd } of opened) closeSync(fd);
  }
  fsyncDirSync(target);
  // What a server starting on the copy will do: replay it (a torn tail is cut there).
  const { state } = recover(target);
  return { files, users: state.users.size };
}

/** The newest snapshot and the journals from its generation on, all opened. */
function openConsistentSet(dir: string): { name: string; fd: number }[] {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const listed = listDataFiles(dir);
    const base = listed.snapshots.at(-1) ?? 0;
    const names = [
      ...(base > 0 ? [snapshotName(base)] : []),
      ...listed.journals.filter((g) => g >= base).map(journalName),
    ];
    if (names.length === 0) throw new DataError(`${dir} holds no journal or snapshot: there is nothing to back up`);
    const opened: { name: string; fd: number }[] = [];
    try {
      for (const name of names) opened.push({ name, fd: openSync(join(dir, name), 'r') });
      return opened;
    } catch (error) {
      for (const { fd } of opened) closeSync(fd);
      // A compaction finished between the listing and the opening: list again.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  throw new DataError(`${dir} kept changing under the backup (a compaction every moment?); try again`);
}

/**
 * Copies what `fd` holds now to a new file at `path` (mode 0600, createFileSync), synced; the bytes up to the last that
 * is not zero (the data; a journal's preallocated tail is zeros).
 */
function copyOpenFile(fd: number, path: string): number {
  const length = fstatSync(fd).size;
  const out = createFileSync(path, 0o600);
  try {
    const buf = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(1, length)));
    let done = 0;
    let data = 0;
    while (done < length) {
      const n = readSync(fd, buf, 0, Math.min(buf.length, length - done), done);
      if (n === 0) break;
      writeAllSync(out, buf.subarray(0, n));
      let last = n;
      while (last > 0 && buf[last - 1] === 0) last--;
      if (last > 0) data = done + last;
      done += n;
    }
    fsyncSync(out);
    return data;
  } finally {
    closeSync(out);
  }
}
