import { readFileSync } from 'node:fs';

/**
 * The version in users-server's package.json, looked for up to three
 * folders above `from` (a module's import.meta.url): the sources, dist/
 * and the bundles of dist/ sit at different depths. "unknown" when none is
 * found.
 */
export function packageVersion(from: string): string {
  for (const relative of ['../package.json', '../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, from), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'users-server' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // try the next candidate
    }
  }
  return 'unknown';
}
