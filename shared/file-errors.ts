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
      return action === 'read' ? `${path} does not exist; check the path` : `the folder of ${path} does not exist; create it or give another path`;
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
