import { parseArgs } from 'node:util';
import { flagUsageError, SERVER_EXIT, ServerCommandError, ServerUsageError } from '../errors.js';
import { envName } from '../ops/config.js';
import { DECLARATIONS, describeFields } from '../store/declarations-file.js';
import {
  declarationRefusal,
  MAX_DECLARED_FIELDS,
  parseFieldPath,
  sameDeclaration,
  withField,
  withoutField,
  type FieldDeclaration,
} from '../users/declared-fields.js';
import type { CommandIo } from './command-io.js';
import {
  PLACE_OPTIONS,
  printUsage,
  settingCommand,
  settingPlace,
  type Setting,
  type SettingPlace,
} from './setting-place.js';

const USAGE = `usage: users-server index add PATH [--unique] [--case-insensitive] [PLACE]
       users-server index remove PATH [PLACE]
       users-server index list [--json] [PLACE]
PLACE: --data DIR | --store URL

Declares fields of the users, each kept in an index (docs/operations.md
"Declared fields"): a filter's eq, sw, gt, ge, lt and le on PATH, and a sort
that starts with PATH, are answered from the index instead of reading every
user. PATH is a filter's path: names joined by dots (email, emails.value).
--unique: no two users may hold equal values at PATH (users without it never
conflict); refused, naming them, while two users hold one. --case-insensitive:
the strings at PATH compare lowercased in filters, sorts and uniqueness.
Adding a declared PATH again with other flags changes it. A server running on
the data directory takes the change within a second and builds the index
(about a second per million users, while requests wait); without one, the
command checks the users itself. --data defaults to $${envName('data')}, else ./data.
With a PostgreSQL store (--store postgres://..., or $${envName('store')}) the
declarations are in the database, and every instance applies them within 2 s.
Exit codes: 0 done, 1 failed (a unique PATH over values two users hold, no
such declaration, not a data directory), 2 usage error.

Examples:
  users-server index add email --unique --case-insensitive --data ./data
  users-server index list --data ./data`;

type Command = 'add' | 'remove' | 'list';
const COMMANDS: readonly Command[] = ['add', 'remove', 'list'];

const OPTIONS = {
  ...PLACE_OPTIONS,
  unique: { type: 'boolean' },
  'case-insensitive': { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

type Flags = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

/** The flags each command takes besides --data, --store and --help. */
const OWN_FLAGS: Record<Command, readonly (keyof Flags)[]> = {
  add: ['unique', 'case-insensitive'],
  remove: [],
  list: ['json'],
};

/** Where the declarations are: a data directory's file, or a PostgreSQL database every instance shares. */
type DeclarationsPlace = SettingPlace<readonly FieldDeclaration[]>;

/**
 * `users-server index add|remove|list`: exit 0 done; throws
 * ServerCommandError (exit 1) or ServerUsageError (exit 2), which names
 * the help to read.
 */
export function indexCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  return settingCommand('index', USAGE, COMMANDS, argv, io, (command, rest) => run(command, rest, io));
}

async function run(command: Command, rest: readonly string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parse(command, rest);
  if (values.help === true) return printUsage(USAGE, io);
  const path = pathOf(command, positionals);
  const place = await settingPlace(values, io.env, DECLARED_FIELDS);
  try {
    if (command === 'list') return await list(place, values.json === true, io);
    if (command === 'remove') return await remove(place, path!, io);
    const field = { path: path!, unique: values.unique === true, caseInsensitive: values['case-insensitive'] === true };
    return await add(place, field, io);
  } finally {
    await place.close();
  }
}

function parse(command: Command, args: readonly string[]) {
  let parsed;
  try {
    parsed = parseArgs({ args, options: OPTIONS, strict: true, allowPositionals: true });
  } catch (error) {
    throw flagUsageError(error);
  }
  for (const flag of ['unique', 'case-insensitive', 'json'] as const)
    if (parsed.values[flag] !== undefined && !OWN_FLAGS[command].includes(flag))
      throw new ServerUsageError(`index ${command} takes no --${flag}`);
  return parsed;
}

/** The PATH of add and remove, checked; list takes none. */
function pathOf(command: Command, positionals: readonly string[]): string | undefined {
  if (command === 'list') {
    if (positionals.length > 0) throw new ServerUsageError(`index list takes no PATH, got "${positionals[0]}"`);
    return undefined;
  }
  if (positionals.length !== 1) throw new ServerUsageError(`index ${command} takes exactly one PATH`);
  const parsed = parseFieldPath(positionals[0]!);
  if (!parsed.ok) throw new ServerUsageError(parsed.detail);
  return parsed.path;
}

async function add(place: DeclarationsPlace, field: FieldDeclaration, io: CommandIo): Promise<number> {
  const outcome = await place.change((fields) => {
    if (fields.some((f) => sameDeclaration(f, field))) return undefined;
    const next = withField(fields, field);
    if (next.length > MAX_DECLARED_FIELDS)
      throw new ServerCommandError(
        `${MAX_DECLARED_FIELDS} fields are declared in ${place.where}, the most there may be: remove one first`,
      );
    return next;
  });
  if (outcome.refused !== undefined) throw new ServerCommandError(`${outcome.refused}; nothing was changed`);
  const what = describeFields([field]);
  io.stdout.write(
    outcome.changed
      ? `declared ${what} in ${place.where}\n`
      : `${what} is declared in ${place.where} already: nothing changed\n`,
  );
  return SERVER_EXIT.ok;
}

async function remove(place: DeclarationsPlace, path: string, io: CommandIo): Promise<number> {
  await place.change((fields) => {
    if (!fields.some((f) => f.path === path))
      throw new ServerCommandError(
        `${path} is not declared in ${place.where} (declared: ${describeFields(fields)}); nothing was changed`,
      );
    return withoutField(fields, path);
  });
  io.stdout.write(`removed the declaration of ${path} from ${place.where}\n`);
  return SERVER_EXIT.ok;
}

async function list(place: DeclarationsPlace, json: boolean, io: CommandIo): Promise<number> {
  const fields = await place.read();
  if (json) io.stdout.write(JSON.stringify({ items: fields }) + '\n');
  else if (fields.length === 0) io.stdout.write(`no fields are declared in ${place.where}\n`);
  else {
    const width = Math.max(...fields.map((f) => f.path.length));
    for (const f of fields) io.stdout.write(`${f.path.padEnd(width)}  ${flagsOf(f)}\n`.replace(/ +\n$/, '\n'));
  }
  return SERVER_EXIT.ok;
}

function flagsOf(field: FieldDeclaration): string {
  return [field.unique && 'unique', field.caseInsensitive && 'case-insensitive'].filter(Boolean).join(', ');
}

/** The declared fields as a setting: the `indexes` file, or the database's declarations. */
const DECLARED_FIELDS: Setting<readonly FieldDeclaration[]> = {
  file: DECLARATIONS,
  refusal: declarationRefusal,
  database: async () => {
    const { changeDeclarations, readDeclarations } = await import('../store/postgres/declared-fields.js');
    return {
      read: readDeclarations,
      change: (sql, edit) => changeDeclarations(sql, (fields) => edit(fields)?.slice()),
    };
  },
};
