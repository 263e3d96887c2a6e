import { roff } from '../../shared/roff.js';
import { flagTable, usage } from '../ops/config.js';
import type { CommandIo } from './command-io.js';

/**
 * `users-server man`: the man page (section 1), built from the same flag
 * table as `--help`; `npm run build` writes it to dist/man/users-server.1.
 */
export function manCommand(io: CommandIo, version: string, date = new Date().toISOString().slice(0, 10)): number {
  const synopsis = usage()
    .split('\n\nflags')[0]!
    .replace(/^usage: /, '')
    .split('\n')
    .map((l) => l.trim());
  const lines = [
    `.TH USERS-SERVER 1 "${date}" "users-server ${version}" "User Commands"`,
    '.SH NAME',
    'users\\-server \\- an HTTP service for a user resource with signed\\-cookie sessions',
    '.SH SYNOPSIS',
    '.nf',
    ...synopsis.map(roff),
    '.fi',
    '.SH OPTIONS',
    'Each flag can also be given by its environment variable; a flag wins over its variable.',
  ];
  for (const flag of flagTable())
    lines.push(
      '.TP',
      `.B ${roff(flag.name)}`,
      `${roff(flag.description)} (variable \\fB${roff(flag.env)}\\fR, default ${roff(flag.default)})`,
    );
  lines.push(
    '.SH ENVIRONMENT',
    '.TP',
    '.B USERS_ADMIN_PASSWORD',
    'the password of the account admin; without it one is generated into <data>/admin\\-password.',
    '.SH SIGNALS',
    'SIGINT or SIGTERM stop the server gracefully; a second one cuts the open connections and still flushes the store. SIGHUP reads the accounts again.',
    '.SH SEE ALSO',
    'usersctl(1); the documentation in docs/ of the package.',
    '',
  );
  io.stdout.write(lines.join('\n'));
  return 0;
}
