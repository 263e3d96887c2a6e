import { accountsCommand } from './commands/accounts.js';
import { backupCommand } from './commands/backup.js';
import { configCommand } from './commands/config-show.js';
import type { CommandIo } from './commands/command-io.js';
import { copyCommand } from './commands/copy.js';
import { manCommand } from './commands/man-page.js';
import { migrateCommand } from './commands/migrate.js';
import { repair } from './commands/repair.js';
import { packageVersion, serve } from './commands/serve.js';

export type { CommandIo as Io } from './commands/command-io.js';

/**
 * The users-server executable: `repair`, `accounts`, `migrate`, `copy`,
 * `backup` and `config` are commands of their own; anything else is the server's flags (commands/serve.ts). Resolves to
 * the exit code.
 */
export async function main(argv: readonly string[], io: CommandIo = { stdout: process.stdout, stderr: process.stderr, env: process.env }): Promise<number> {
  if (argv[0] === 'repair') return repair(argv.slice(1), io);
  if (argv[0] === 'accounts') return accountsCommand(argv.slice(1), { ...io, stdin: io.stdin ?? process.stdin });
  if (argv[0] === 'migrate') return migrateCommand(argv.slice(1), io);
  if (argv[0] === 'copy') return copyCommand(argv.slice(1), io);
  if (argv[0] === 'backup') return backupCommand(argv.slice(1), io);
  if (argv[0] === 'config') return configCommand(argv.slice(1), io);
  if (argv[0] === 'man') return manCommand(io, packageVersion());
  return serve(argv, io);
}
