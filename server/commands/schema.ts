import { readFileSync } from 'node:fs';
import { parseArgs, isDeepStrictEqual } from 'node:util';
import { fileProblem } from '../../shared/file-errors.js';
import { flagUsageError, SERVER_EXIT, ServerCommandError, ServerUsageError } from '../errors.js';
import { envName } from '../ops/config.js';
import { SCHEMA } from '../store/schema-file.js';
import { SchemaRefusedError } from '../users/json-schema/compile-schema.js';
import { UserSchema, type SchemaSetting } from '../users/user-schema.js';
import type { CommandIo } from './command-io.js';
import {
  PLACE_OPTIONS,
  printUsage,
  settingCommand,
  settingPlace,
  type Setting,
  type SettingPlace,
} from './setting-place.js';

const USAGE = `usage: users-server schema set FILE [--check-existing yes|no] [PLACE]
       users-server schema show [PLACE]
       users-server schema remove [PLACE]
PLACE: --data DIR | --store URL

The schema of the users' fields (docs/operations.md "A schema for the
users' fields"; its keywords: docs/schema.md): FILE is a JSON Schema (draft
2020-12) for the whole user, its id included, which every write (PUT, PATCH,
POST) must fit on top of the rules the server always applies; a write that
breaks it is answered 422 invalid-user, every violation listed. A schema
that uses a keyword the server does not apply is refused, naming it and
where it is. set over users that break the schema is refused, naming how
many and the first ten, unless --check-existing no: then only what is
written from now on is checked (schema show says so). show prints the
schema as JSON. A server running on the data directory takes a change at
once; --data defaults to $${envName('data')}, else ./data. With a
PostgreSQL store (--store postgres://..., or $${envName('store')}) the
schema is in the database, and every instance applies it within 2 s.
Exit codes: 0 done (remove with no schema set too), 1 failed (a FILE that
is not JSON, a schema refused, users that break it, not a data directory),
2 usage error.

Examples:
  users-server schema set users.schema.json --data ./data
  users-server schema show --data ./data`;

type Command = 'set' | 'show' | 'remove';
const COMMANDS: readonly Command[] = ['set', 'show', 'remove'];

const OPTIONS = {
  ...PLACE_OPTIONS,
  'check-existing': { type: 'string' },
} as const;

/** The schema as a setting: the `schema` file, or the database's row. */
const USER_SCHEMA: Setting<SchemaSetting | null> = {
  file: SCHEMA,
  refusal: (_current, next, users) => (next === null ? undefined : new UserSchema(next).refusalOver(users)),
  database: async () => {
    const { changeSchema, readSchemaSetting } = await import('../store/postgres/user-schema.js');
    return { read: readSchemaSetting, change: changeSchema };
  },
};

type SchemaPlace = SettingPlace<SchemaSetting | null>;

/**
 * `users-server schema set|show|remove`: exit 0 done; throws
 * ServerCommandError (exit 1) or ServerUsageError (exit 2), which names
 * the help to read.
 */
export function schemaCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  return settingCommand('schema', USAGE, COMMANDS, argv, io, (command, rest) => run(command, rest, io));
}

async function run(command: Command, rest: readonly string[], io: CommandIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: OPTIONS, strict: true, allowPositionals: true });
  } catch (error) {
    throw flagUsageError(error);
  }
  const { values, positionals } = parsed;
  if (values.help === true) return printUsage(USAGE, io);
  if (command !== 'set' && values['check-existing'] !== undefined)
    throw new ServerUsageError(`schema ${command} takes no --check-existing`);
  if (command !== 'set' && positionals.length > 0)
    throw new ServerUsageError(`schema ${command} takes no FILE, got "${positionals[0]}"`);
  if (command === 'set' && positionals.length !== 1) throw new ServerUsageError('schema set takes exactly one FILE');
  // Read and compiled before anything is opened: a refused file changes nothing anywhere.
  const setting = command === 'set' ? readSetting(positionals[0]!, checkExisting(values['check-existing'])) : undefined;
  const place = await settingPlace(values, io.env, USER_SCHEMA);
  try {
    if (command === 'show') return await show(place, io);
    if (command === 'remove') return await remove(place, io);
    return await set(place, setting!, io);
  } finally {
    await place.close();
  }
}

function checkExisting(value: string | undefined): boolean {
  if (value === undefined || value === 'yes') return true;
  if (value === 'no') return false;
  throw new ServerUsageError(`--check-existing must be yes or no, not "${value}"`);
}

/**
 * The schema in `file`, compiled to check it: a file that is not JSON, or a schema the server cannot apply, is refused.
 */
function readSetting(file: string, checkedExisting: boolean): SchemaSetting {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ServerCommandError(`${fileProblem('read', file, error)}; nothing was changed`);
  }
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new ServerCommandError(`${file} is not JSON (${(error as Error).message}); nothing was changed`);
  }
  const setting = { document, checkedExisting };
  try {
    new UserSchema(setting);
  } catch (error) {
    if (!(error instanceof SchemaRefusedError)) throw error;
    const at = error.pointer === '' ? 'the root of the schema' : error.pointer;
    throw new ServerCommandError(
      `${file}: the schema is refused at ${at} (${error.keyword === '' ? 'not a schema' : `keyword ${error.keyword}`}): ${error.message}; nothing was changed`,
    );
  }
  return setting;
}

async function set(place: SchemaPlace, setting: SchemaSetting, io: CommandIo): Promise<number> {
  const outcome = await place.change((current) => (isDeepStrictEqual(current, setting) ? undefined : setting));
  if (outcome.refused !== undefined) throw new ServerCommandError(`${outcome.refused}; nothing was changed`);
  const unchecked = setting.checkedExisting ? '' : ' (the users written before were not checked against it)';
  io.stdout.write(
    outcome.changed
      ? `set the schema of the users' fields in ${place.where}${unchecked}\n`
      : `${place.where} has this schema already: nothing changed\n`,
  );
  return SERVER_EXIT.ok;
}

async function show(place: SchemaPlace, io: CommandIo): Promise<number> {
  const setting = await place.read();
  if (setting === null) {
    io.stdout.write(`no schema is set in ${place.where}\n`);
    return SERVER_EXIT.ok;
  }
  io.stdout.write(JSON.stringify(setting.document, null, 2) + '\n');
  // On stderr, so that what stdout holds can be given to schema set again.
  if (!setting.checkedExisting)
    io.stderr.write(
      `users-server schema: set with --check-existing no: users written before it were not checked and may break it\n`,
    );
  return SERVER_EXIT.ok;
}

async function remove(place: SchemaPlace, io: CommandIo): Promise<number> {
  const outcome = await place.change((current) => (current === null ? undefined : null));
  io.stdout.write(
    outcome.changed
      ? `removed the schema of the users' fields from ${place.where}\n`
      : `no schema is set in ${place.where}: nothing changed\n`,
  );
  return SERVER_EXIT.ok;
}
