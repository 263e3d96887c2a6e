import { resolve } from 'node:path';
import { SERVER_EXIT, ServerUsageError } from '../errors.js';
import { envName, isPostgresStore } from '../ops/config.js';
import { requireDataDir } from '../ops/data-dir.js';
import type { Sql } from '../store/postgres/driver.js';
import {
  changeKeptFile,
  readKeptFile,
  type KeptChange,
  type KeptFile,
  type UsersOnDisk,
} from '../store/proposed-file.js';
import type { CommandIo } from './command-io.js';

/** The flags every command of a setting takes: where (`--data`, `--store`), and `--help`. */
export const PLACE_OPTIONS = {
  data: { type: 'string' },
  store: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** What a change makes of the current value: the new one, or undefined for no change. */
type Edit<T> = (current: T) => T | undefined;

/**
 * Something a deployment declares about its users that every write obeys
 * (the declared fields, the schema): in a data directory a kept file, in a
 * PostgreSQL database rows every instance reads.
 */
export interface Setting<T> {
  readonly file: KeptFile<T>;
  /** The refusal of `next` over the users of a data directory no server runs on; undefined: they fit. */
  refusal(current: T, next: T, users: UsersOnDisk): string | undefined;
  /** The database's side, loaded only for a database (the PostgreSQL store is a chunk of its own). */
  database(): Promise<{ read(sql: Sql): Promise<T>; change(sql: Sql, edit: Edit<T>): Promise<KeptChange> }>;
}

/** Where a command reads and changes a setting. */
export interface SettingPlace<T> {
  /** For messages: the directory, or the database (its password redacted). */
  readonly where: string;
  read(): Promise<T>;
  /**
   * Applies `edit` in one step, checked against the users: a running
   * server on a data directory makes the change itself; a database's
   * instances read it within 2 s. A refusal is its sentence, and nothing changed.
   */
  change(edit: Edit<T>): Promise<KeptChange>;
  close(): Promise<void>;
}

/**
 * The place of a command's `--store` and `--data`: the database when
 * `--store` (or USERS_STORE) names PostgreSQL; else the data directory
 * `--data`, USERS_DATA or ./data, which must be one.
 */
export async function settingPlace<T>(
  values: { readonly data?: string | undefined; readonly store?: string | undefined },
  env: NodeJS.ProcessEnv,
  setting: Setting<T>,
): Promise<SettingPlace<T>> {
  const store = values.store ?? env[envName('store')];
  if (store !== undefined && isPostgresStore(store))
    return databasePlace(store === 'postgres' ? undefined : store, setting);
  const dir = resolve(values.data ?? env[envName('data')] ?? './data');
  requireDataDir(dir);
  return {
    where: dir,
    read: async () => readKeptFile(dir, setting.file),
    change: (edit) =>
      changeKeptFile(dir, setting.file, edit, (current, next, users) => setting.refusal(current, next, users)),
    close: async () => {},
  };
}

/** A setting in a PostgreSQL database: a change is one transaction. */
async function databasePlace<T>(url: string | undefined, setting: Setting<T>): Promise<SettingPlace<T>> {
  const { openPostgresStore, describeDatabase, COMMAND_SILENCE_SECONDS } =
    await import('../store/postgres/open-postgres.js');
  const rows = await setting.database();
  const store = await openPostgresStore(url, {
    max: 1,
    startWaitSeconds: 0,
    log: () => {},
    silenceSeconds: COMMAND_SILENCE_SECONDS,
  });
  return {
    where: describeDatabase(url),
    read: () => rows.read(store.sql),
    change: (edit) => rows.change(store.sql, edit),
    close: () => store.close(),
  };
}

/**
 * A command of a setting (`users-server index`, `users-server schema`):
 * `argv` starts with one of `commands`, which `run` does with the words
 * after it, or asks for `usage`; exit 0 done. Throws ServerCommandError
 * (exit 1) or ServerUsageError (exit 2), which names the help to read.
 */
export async function settingCommand<C extends string>(
  name: string,
  usage: string,
  commands: readonly C[],
  argv: readonly string[],
  io: CommandIo,
  run: (command: C, rest: readonly string[]) => Promise<number>,
): Promise<number> {
  try {
    const [command, ...rest] = argv;
    if (command === '--help' || command === '-h' || command === 'help') return printUsage(usage, io);
    if (!commands.includes(command as C)) {
      const listed = `${commands.slice(0, -1).join(', ')} or ${commands.at(-1)!}`;
      throw new ServerUsageError(
        command === undefined ? `${name} needs a command: ${listed}` : `unknown ${name} command "${command}"`,
      );
    }
    return await run(command as C, rest);
  } catch (error) {
    if (error instanceof ServerUsageError)
      throw new ServerUsageError(`${error.message} (see users-server ${name} --help)`);
    throw error;
  }
}

/** A command's `--help`: its usage on stdout, exit 0. */
export function printUsage(usage: string, io: CommandIo): number {
  io.stdout.write(usage + '\n');
  return SERVER_EXIT.ok;
}
