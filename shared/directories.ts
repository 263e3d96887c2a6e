import { mkdirSync } from 'node:fs';
import { sep } from 'node:path';

/**
 * `mkdir -p` for an absolute path, one level at a time and each tried
 * once, new directories with `mode`: node's recursive mkdir never returns
 * under /proc (mkdir answers ENOENT there although the parent exists),
 * which would hang a server's start on `--data /proc/...` and usersctl on
 * `--cookie-jar /proc/...`. Throws what mkdir throws, but EEXIST.
 */
export function makeDirectories(path: string, mode: number): void {
  const parts = path.split(sep).filter((part) => part !== '');
  for (let i = 1; i <= parts.length; i++) {
    try {
      mkdirSync(sep + parts.slice(0, i).join(sep), { mode });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}
