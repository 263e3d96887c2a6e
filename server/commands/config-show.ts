import { SERVER_EXIT, ServerUsageError } from '../errors.js';
import { describeSettings, parseConfig } from '../ops/config.js';
import type { CommandIo } from './command-io.js';

const USAGE = `usage: users-server config --show [the server's flags]

Prints the settings a start with the same flags, variables and --config file
would use, one a line, each with where it came from (flag, variable, file or
default); secrets are shown as ***. Starts nothing and changes nothing.
Exit codes: 0 printed, 2 a flag or value a start would refuse.

Example:
  USERS_PORT=8081 users-server config --show --config /etc/users-server.json`;

/**
 * `users-server config --show [flags]`: the settings a server started with
 * the same flags, variables and --config file would use, each with where it
 * came from; signing secrets and database passwords are shown as ***.
 * Exit 0; a bad flag or value is a ServerUsageError (exit 2), the same
 * message the start gives.
 */
export function configCommand(argv: readonly string[], io: CommandIo): number {
  if (argv[0] === '--help' || argv[0] === '-h') {
    io.stdout.write(USAGE + '\n');
    return SERVER_EXIT.ok;
  }
  if (argv[0] !== '--show') throw new ServerUsageError("usage: users-server config --show [the server's flags]");
  io.stdout.write(describeSettings(parseConfig(argv.slice(1), io.env)) + '\n');
  return SERVER_EXIT.ok;
}
