import { existsSync, lstatSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import { performance } from 'node:perf_hooks';
import { makeDirectories } from '../../shared/directories.js';
import { fileProblem } from '../../shared/file-errors.js';
import { SERVER_EXIT, ServerCommandError, ServerUsageError } from '../errors.js';
import { isPostgresStore } from '../ops/config.js';
import { ADMIN_IDENTITY_FILE, markUnfinished, requireDataDir } from '../ops/data-dir.js';
import { fsyncDirSync, writeNewFileSync } from '../ops/durable-files.js';
import { requirePrivateDirectory } from '../ops/private-directory.js';
import { ACCOUNTS_FILE } from '../security/accounts-file.js';
import { DECLARATIONS_FILE } from '../store/declarations-file.js';
import { SCHEMA_FILE } from '../store/schema-file.js';
import { backupDataFiles } from '../store/journal/backup-files.js';
import { commandFlags, writtenFilesFailure, type CommandIo } from './command-io.js';

const USAGE = `usage: users-server backup --data DIR --to DEST

Writes a consistent copy of the data directory DIR to DEST, which must not
exist or be an empty folder only you can write, and must be outside DIR
(docs/operations.md "Backups"), while a server may keep serving and
writing on DIR: every write acknowledged before the backup began is in the
copy. DEST is a data directory of its own (its secret, generated admin
password, accounts, declared fields and schema included): start a server
on it to restore. --data defaults to USERS_DATA, then ./data. A PostgreSQL
store is backed up with pg_dump instead.
Exit codes: 0 written, 1 failed (DEST removed again), 2 usage error.`;

/** The small files of a data directory besides the journal, copied as they are. */
const SETTINGS_FILES = ['secret', 'admin-password', ADMIN_IDENTITY_FILE, ACCOUNTS_FILE, DECLARATIONS_FILE, SCHEMA_FILE];

/**
 * `users-server backup`: exit 0 written; throws ServerCommandError (exit 1, DEST removed again) or ServerUsageError
 * (exit 2).
 */
export function backupCommand(argv: readonly string[], io: CommandIo): number {
  const values = commandFlags(
    'backup',
    argv,
    {
      data: { type: 'string' },
      to: { type: 'string' },
      store: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    USAGE,
    io,
  );
  if (values === undefined) return SERVER_EXIT.ok;
  const store = values.store ?? io.env.USERS_STORE;
  if (store !== undefined && isPostgresStore(store))
    throw new ServerUsageError(
      'a PostgreSQL store is backed up with pg_dump (docs/scaling.md "Backups"), not with this command',
    );
  if (values.to === undefined) throw new ServerUsageError('backup needs --to DEST (see users-server backup --help)');
  const source = resolve(values.data ?? nonEmpty(io.env.USERS_DATA) ?? 'data');
  const given = resolve(values.to);
  requireDataDir(source);
  if (given === source) throw new ServerUsageError('--to must be another directory than --data');
  if (given.startsWith(source + sep))
    throw new ServerUsageError('--to must be outside --data: a backup inside the data directory is lost with it');
  const { target, made } = prepareTarget(given);
  const started = performance.now();
  try {
    const mark = markUnfinished(target, `backup from ${source}`);
    const copied = backupDataFiles(source, target);
    for (const name of SETTINGS_FILES)
      if (existsSync(join(source, name)))
        writeNewFileSync(target, join(target, name), readFileSync(join(source, name)), 0o600);
    fsyncDirSync(target);
    mark.finish();
    const bytes = copied.files.reduce((sum, f) => sum + f.bytes, 0);
    const ms = Math.round(performance.now() - started);
    io.stdout.write(
      `backed up ${copied.users} users (${copied.files.map((f) => f.name).join(', ')}: ${bytes} bytes of data) from ${source} to ${target} in ${ms} ms\n`,
    );
    return SERVER_EXIT.ok;
  } catch (error) {
    // Leave no half backup that could be mistaken for a whole one.
    if (made) rmSync(target, { recursive: true, force: true });
    else for (const name of readdirSync(target)) rmSync(join(target, name), { recursive: true, force: true });
    throw writtenFilesFailure('backup', error, target);
  }
}

/**
 * Makes the folder `given` (or accepts it empty, and only this user's:
 * requirePrivateDirectory); answers its real path, and whether this
 * command made it.
 */
function prepareTarget(given: string): { target: string; made: boolean } {
  const made = !lexists(given);
  if (!made && existsSync(given) && !statSync(given).isDirectory())
    throw new ServerUsageError(`--to ${given} is a file, not a folder; give a new or empty folder`);
  if (made) {
    try {
      makeDirectories(given, 0o700);
    } catch (error) {
      throw new ServerCommandError(`cannot create the backup folder: ${fileProblem('create', given, error)}`);
    }
  }
  const target = requirePrivateDirectory(given, { verb: 'back up', made });
  const held = readdirSync(target);
  if (held.length > 0)
    throw new ServerCommandError(
      `${target} is not empty (${held.slice(0, 3).join(', ')}${held.length > 3 ? ', ...' : ''}): back up into a new directory, so no earlier backup is overwritten`,
    );
  return { target, made };
}

/** True when something has the name `path`, a link that leads nowhere included. */
function lexists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
