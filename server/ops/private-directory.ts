import { lstatSync, realpathSync, rmdirSync, statSync, type Stats } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ServerCommandError } from '../errors.js';

/**
 * The folder a command writes a data directory into (backup --to, copy
 * --to) must be one no other user can write into, nor move: another user
 * who can add names to it plants symbolic links under the names about to
 * be written (and reads the secret they lead to, or has a file of root's
 * overwritten), or swaps files after they are written. Files are also
 * created new, never through a link (durable-files.ts, createFileSync);
 * this keeps others from touching the folder at all.
 */
interface PrivateDirectoryOptions {
  /** The command's verb, for its sentences: "back up", "copy". */
  readonly verb: string;
  /** True when the command made the folder just now: a refused one is removed again (while empty). */
  readonly made: boolean;
  /** Root may write into a folder another user owns: a server's data directory, for the user that server runs as. */
  readonly othersMayOwn?: boolean;
}

/**
 * Answers the real path of the folder `path` (made or accepted by the
 * caller), to write into from now on, once it is no symbolic link, belongs
 * to this user, is writable by no group or other user, and every folder
 * above it belongs to root or this user and is writable by no one else
 * (or sticky, as /tmp: there no one else moves what is not theirs).
 * Refuses in one sentence otherwise.
 */
export function requirePrivateDirectory(path: string, options: PrivateDirectoryOptions): string {
  const me = process.geteuid?.();
  // No owners or modes to check (Windows).
  if (me === undefined) return path;
  try {
    const real = join(realpathSync(dirname(path)), basename(path));
    refuseSharedFolder(path, lstatSync(real), me, options);
    for (let above = dirname(real); ; above = dirname(above)) {
      refuseSharedParent(above, path, statSync(above), me, options.verb);
      if (above === dirname(above)) return real;
    }
  } catch (error) {
    if (options.made) removeEmptyQuietly(path);
    throw error;
  }
}

function refuseSharedFolder(path: string, held: Stats, me: number, options: PrivateDirectoryOptions): void {
  if (held.isSymbolicLink())
    throw new ServerCommandError(
      `${path} is a symbolic link: give the folder itself, so that no one can point it elsewhere while it is written`,
    );
  if (held.uid !== me && !(me === 0 && options.othersMayOwn === true))
    throw new ServerCommandError(
      `${path} belongs to another user (uid ${held.uid}): ${options.verb} into a folder of your own, or a new one`,
    );
  if ((held.mode & 0o022) !== 0)
    throw new ServerCommandError(
      `${path} can be written by other users (mode ${modeText(held)}): ${options.verb} into a folder only you can write (chmod go-w), or a new one`,
    );
}

function refuseSharedParent(above: string, path: string, held: Stats, me: number, verb: string): void {
  const othersWrite = (held.mode & 0o022) !== 0 && (held.mode & 0o1000) === 0;
  if ((held.uid === 0 || held.uid === me) && !othersWrite) return;
  throw new ServerCommandError(
    `${above}, above ${path}, can be changed by another user (uid ${held.uid}, mode ${modeText(held)}), who could put a folder of their own in its place: ${verb} into a folder whose parents only you or root can change`,
  );
}

function modeText(held: Stats): string {
  return (held.mode & 0o7777).toString(8).padStart(4, '0');
}

/** Removes the folder a refused command made (rmdir: only while it is empty, and never through a link). */
function removeEmptyQuietly(path: string): void {
  try {
    rmdirSync(path);
  } catch {
    // Not empty, or not a folder: then it is not only what the command made.
  }
}
