/**
 * A failed file operation as one plain sentence with a next step, never a
 * raw errno (docs/cli.md "Conventions"): usersctl's files, and the
 * server's data directory (`create`).
 */
export function fileProblem(action: 'read' | 'write' | 'create', path: string, error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOENT':
      if (action === 'create') return `${path} cannot be made there; give a path on a writable file system`;
      return action === 'read'
        ? `${path} does not exist; check the path`
        : `the folder of ${path} does not exist; create it or give another path`;
    case 'EISDIR':
      return `${path} is a folder, not a file; give the path of a file`;
    case 'ENOTDIR':
      return `a part of ${path} is a file, not a folder; check the path`;
    case 'EACCES':
    case 'EPERM':
      return `no permission to ${action} ${path}; check its owner and mode`;
    case 'ENOSPC':
    case 'EDQUOT':
      return `no space left to write ${path}; free some space`;
    case 'EROFS':
      return `${path} is on a read-only file system; give a path elsewhere`;
    default:
      return `cannot ${action} ${path}${code === undefined ? '' : ` (${code})`}`;
  }
}

/** The system calls of reading a file or a folder, and of writing one (a socket's are neither). */
const READ_CALLS = new Set(['open', 'read', 'scandir', 'stat', 'lstat', 'fstat', 'access', 'readlink']);
const WRITE_CALLS = new Set([
  'write',
  'writev',
  'mkdir',
  'rename',
  'fsync',
  'fdatasync',
  'ftruncate',
  'unlink',
  'rmdir',
  'close',
  'copyfile',
  'link',
  'chmod',
  'fchmod',
]);

/**
 * A node file error (its `syscall` reads or writes a file) as
 * `fileProblem` words it, about its own path or else `path`; undefined for
 * any other error (a socket's among them).
 */
export function systemFileProblem(error: unknown, path: string): string | undefined {
  const failed = error as (NodeJS.ErrnoException & { dest?: string }) | undefined;
  if (typeof failed?.code !== 'string' || typeof failed.syscall !== 'string') return undefined;
  const action = READ_CALLS.has(failed.syscall) ? 'read' : WRITE_CALLS.has(failed.syscall) ? 'write' : undefined;
  return action === undefined ? undefined : fileProblem(action, failed.dest ?? failed.path ?? path, error);
}

/** A failed write's code in words, for a message. */
export function writeFailure(code: string | undefined): string {
  switch (code) {
    case 'ENOSPC':
    case 'EDQUOT':
      return 'no space left on the device';
    case 'EFBIG':
      return 'the file is too large for its file system';
    case 'EIO':
      return 'an input/output error of the device';
    default:
      return `the write failed${code === undefined ? '' : ` (${code})`}`;
  }
}
