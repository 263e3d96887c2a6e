import { accountsCommand } from './commands/accounts.js';
import { backupCommand } from './commands/backup.js';
import { configCommand } from './commands/config-show.js';
import { finishOutput, runCommand, watchOutput, type CommandIo } from './commands/command-io.js';
import { copyCommand } from './commands/copy.js';
import { indexCommand } from './commands/indexes.js';
import { manCommand } from './commands/man-page.js';
import { migrateCommand } from './commands/migrate.js';
import { repair } from './commands/repair.js';
import { schemaCommand } from './commands/schema.js';
import { serve } from './commands/serve.js';
import type { SERVER_COMMANDS } from './ops/config.js';
import { packageVersion } from '../shared/package-version.js';

export type { CommandIo as Io } from './commands/command-io.js';

type ServerCommand = (typeof SERVER_COMMANDS)[number] | 'man';

/** Each command's entry: the names are SERVER_COMMANDS (which usage errors list), and the hidden `man`. */
const COMMANDS: Record<ServerCommand, (args: string[], io: CommandIo) => number | Promise<number>> = {
  repair: (args, io) => repair(args, io),
  accounts: (args, io) => accountsCommand(args, { ...io, stdin: io.stdin ?? process.stdin }),
  migrate: migrateCommand,
  copy: copyCommand,
  backup: backupCommand,
  config: configCommand,
  index: indexCommand,
  schema: schemaCommand,
  man: (_args, io) => manCommand(io, packageVersion(import.meta.url)),
};

/**
 * The users-server executable: `repair`, `accounts`, `migrate`, `copy`,
 * `backup`, `config`, `index` and `schema` are commands of their own; anything else is the
 * server's flags (commands/serve.ts). Resolves to the exit code; a failure
 * is one line on stderr (runCommand).
 */
export async function main(
  argv: readonly string[],
  io: CommandIo = { stdout: process.stdout, stderr: process.stderr, env: process.env },
): Promise<number> {
  watchOutput(io.stdout);
  watchOutput(io.stderr);
  const name = argv[0] ?? '';
  // The server reports a failed write of its log itself, and goes on.
  if (!Object.hasOwn(COMMANDS, name)) return runCommand(undefined, () => serve(argv, io), io);
  const command = COMMANDS[name as ServerCommand];
  return runCommand(name, async () => finishOutput(io, await command(argv.slice(1), io)), io);
}
