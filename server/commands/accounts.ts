import { fileProblem } from '../../shared/file-errors.js';
import { join, resolve } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { flagUsageError, SERVER_EXIT, ServerCommandError, ServerUsageError, UsersServerError } from '../errors.js';
import { envName, isPostgresStore, passwordCostFrom } from '../ops/config.js';
import { requireDataDir, withEditLock } from '../ops/data-dir.js';
import {
  ACCOUNT_NAME,
  ACCOUNTS_FILE,
  ADMIN_PASSWORD_FILE,
  BUILT_IN_ACCOUNT,
  newAccountId,
  parseDatabaseAccounts,
  readAccountsFile,
  serializeAccount,
  writeAccountsFile,
  type AccountRecord,
} from '../security/accounts-file.js';
import { hashPassword, ROLES, type Role } from '../security/credentials.js';
import type { PasswordInput } from './command-io.js';

interface AccountsIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  env: NodeJS.ProcessEnv;
  stdin: PasswordInput;
}

/** Longest password accepted, in characters: far above any real one, and a bound on what is read. */
const MAX_PASSWORD_LENGTH = 1024;
/** Shortest password accepted by default (--min-password-length), in characters. */
export const DEFAULT_MIN_PASSWORD_LENGTH = 12;

type Command = 'add' | 'passwd' | 'role' | 'remove' | 'list';
const COMMANDS: readonly Command[] = ['add', 'passwd', 'role', 'remove', 'list'];

const USAGE = `usage: users-server accounts add NAME [--role admin|reader] [PASSWORD] [PLACE]
       users-server accounts passwd NAME [PASSWORD] [PLACE]
       users-server accounts role NAME admin|reader [PLACE]
       users-server accounts remove NAME [PLACE]
       users-server accounts list [--json] [PLACE]
PASSWORD: [--password-stdin] [--min-password-length N]
PLACE:    --data DIR | --store URL

Manages the accounts that may log in, in <data>/accounts (mode 0600). NAME is
1..64 of A-Z a-z 0-9 . _ -; "admin" is built in: its password is the one
"passwd admin" set, else $USERS_ADMIN_PASSWORD, else the one generated at the
first start into <data>/admin-password (removed by "passwd admin"). --role
defaults to reader: reads only. The password is asked twice without echo on
a terminal; else, or with --password-stdin, it is the first line of stdin;
it needs --min-password-length characters (default ${DEFAULT_MIN_PASSWORD_LENGTH}). passwd and role end
the account's sessions. Running servers take every change within a second,
the admin's password too. --data defaults to $${envName('data')},
else ./data, and must be a data directory a server has used (start one to
make it). With a PostgreSQL store (--store postgres://..., or
$${envName('store')}) the accounts are in the database, shared by every
instance. The scrypt cost of a new hash is $${envName('password-cost')} (log2
of N, default 15).
Exit codes: 0 done, 1 failed (name taken, no such account, unreadable file,
not a data directory), 2 usage error.

Examples:
  users-server accounts add alice --role reader --data ./data
  users-server accounts passwd admin --data ./data`;

/**
 * `users-server accounts add|passwd|role|remove|list`: exit 0 done; throws
 * ServerCommandError (exit 1) or ServerUsageError (exit 2), which names
 * the help to read. A file error of the accounts is one sentence.
 */
export async function accountsCommand(argv: readonly string[], io: AccountsIo): Promise<number> {
  try {
    return await run(argv, io);
  } catch (error) {
    if (error instanceof ServerUsageError)
      throw new ServerUsageError(`${error.message} (see users-server accounts --help)`);
    const e = error as NodeJS.ErrnoException;
    if (error instanceof UsersServerError || e?.code === undefined || e.syscall === undefined) throw error;
    throw new ServerCommandError(fileProblem('write', e.path ?? 'the accounts file', e));
  }
}

async function run(argv: readonly string[], io: AccountsIo): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') {
    io.stdout.write(USAGE + '\n');
    return SERVER_EXIT.ok;
  }
  if (!COMMANDS.includes(command as Command)) {
    throw new ServerUsageError(
      command === undefined
        ? 'accounts needs a command: add, passwd, role, remove or list'
        : `unknown accounts command "${command}"`,
    );
  }
  const { values, positionals } = parse(command as Command, rest);
  if (values.help === true) {
    io.stdout.write(USAGE + '\n');
    return SERVER_EXIT.ok;
  }
  const wanted = command === 'list' ? 0 : command === 'role' ? 2 : 1;
  if (positionals.length !== wanted)
    throw new ServerUsageError(
      command === 'list'
        ? `accounts list takes no NAME, got "${positionals[0]}"`
        : `accounts ${command} takes ${command === 'role' ? 'NAME and a role' : 'exactly one NAME'}`,
    );
  const name = positionals[0] ?? '';
  if (command !== 'list' && !ACCOUNT_NAME.test(name))
    throw new ServerUsageError(`the account name must be 1..64 of A-Z a-z 0-9 . _ -, not ${JSON.stringify(name)}`);
  const role = command === 'role' ? positionals[1] : (values.role ?? 'reader');
  if (typeof role !== 'string' || !ROLES.includes(role as Role))
    throw new ServerUsageError(
      `${command === 'role' ? 'the role' : '--role'} must be admin or reader, not "${String(role)}"`,
    );
  const password = { fromStdin: values['password-stdin'] === true, min: minLength(values['min-password-length']) };
  const place = await placeOf(values, io.env);
  try {
    switch (command as Command) {
      case 'list':
        return await list(place, values.json === true, io);
      case 'remove':
        return await remove(place, name, io);
      case 'passwd':
        return await passwd(place, name, password, io);
      case 'role':
        return await changeRole(place, name, role as Role, io);
      case 'add':
        return await add(place, name, role as Role, password, io);
    }
  } finally {
    await place.close();
  }
}

interface PasswordRules {
  fromStdin: boolean;
  min: number;
}

function minLength(value: string | boolean | undefined): number {
  if (value === undefined) return DEFAULT_MIN_PASSWORD_LENGTH;
  const n = typeof value === 'string' && /^\d{1,4}$/.test(value) ? Number(value) : NaN;
  if (!(n >= 1 && n <= MAX_PASSWORD_LENGTH))
    throw new ServerUsageError(`--min-password-length must be a number from 1 to ${MAX_PASSWORD_LENGTH}`);
  return n;
}

/** Where the accounts are kept: the data directory's file, or a PostgreSQL database every instance shares. */
interface AccountsPlace {
  /** For messages: the directory, or the database (its password redacted). */
  readonly where: string;
  /** The data directory, when the accounts are in one (the admin's password file is there too). */
  readonly dir?: string;
  read(): Promise<AccountRecord[]>;
  /** Replaces the records with what `edit` makes of them, in one step. */
  change(edit: (records: AccountRecord[]) => AccountRecord[]): Promise<void>;
  close(): Promise<void>;
}

/** `--store` (or USERS_STORE) naming PostgreSQL picks the database; anything else, `--data`. */
async function placeOf(
  values: Record<string, string | boolean | undefined>,
  env: NodeJS.ProcessEnv,
): Promise<AccountsPlace> {
  const store = typeof values.store === 'string' ? values.store : env[envName('store')];
  if (store !== undefined && isPostgresStore(store)) return databasePlace(store === 'postgres' ? undefined : store);
  const dir = resolve(typeof values.data === 'string' ? values.data : (env[envName('data')] ?? './data'));
  requireDataDir(dir);
  return {
    where: dir,
    dir,
    read: async () => readAccountsFile(dir),
    change: (edit) => withEditLock(dir, ACCOUNTS_FILE, () => writeAccountsFile(dir, edit(readAccountsFile(dir)))),
    close: async () => {},
  };
}

async function databasePlace(url: string | undefined): Promise<AccountsPlace> {
  const { openPostgresStore, describeDatabase, COMMAND_SILENCE_SECONDS } =
    await import('../store/postgres/open-postgres.js');
  const store = await openPostgresStore(url, {
    max: 1,
    startWaitSeconds: 0,
    log: () => {},
    silenceSeconds: COMMAND_SILENCE_SECONDS,
  });
  const byName = (records: readonly AccountRecord[]) => new Map(records.map((r) => [r.name, serializeAccount(r)]));
  return {
    where: describeDatabase(url),
    read: async () => parseDatabaseAccounts(await store.shared.accountRecords()),
    change: (edit) =>
      store.shared.updateAccountRecords((records) => {
        const edited = byName(edit(parseDatabaseAccounts([...records.values()])));
        records.clear();
        for (const [name, line] of edited) records.set(name, line);
      }),
    close: () => store.close(),
  };
}

const PASSWORD_OPTIONS = { 'password-stdin': { type: 'boolean' }, 'min-password-length': { type: 'string' } } as const;
const OPTIONS: Record<Command, ParseArgsConfig['options']> = {
  add: {
    data: { type: 'string' },
    store: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
    role: { type: 'string' },
    ...PASSWORD_OPTIONS,
  },
  passwd: {
    data: { type: 'string' },
    store: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
    ...PASSWORD_OPTIONS,
  },
  role: { data: { type: 'string' }, store: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  remove: { data: { type: 'string' }, store: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  list: {
    data: { type: 'string' },
    store: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
    json: { type: 'boolean' },
  },
};

function parse(
  command: Command,
  args: string[],
): { values: Record<string, string | boolean | undefined>; positionals: string[] } {
  try {
    const { values, positionals } = parseArgs({
      args,
      options: OPTIONS[command],
      strict: true,
      allowPositionals: true,
    });
    return { values: values as Record<string, string | boolean | undefined>, positionals };
  } catch (error) {
    throw flagUsageError(error);
  }
}

async function add(
  place: AccountsPlace,
  name: string,
  role: Role,
  rules: PasswordRules,
  io: AccountsIo,
): Promise<number> {
  if (name === BUILT_IN_ACCOUNT) {
    throw new ServerCommandError(
      `the account "${BUILT_IN_ACCOUNT}" is built in: change its password with users-server accounts passwd ${BUILT_IN_ACCOUNT}`,
    );
  }
  // Refuse a taken name before asking for a password.
  if ((await place.read()).some((a) => a.name === name))
    throw new ServerCommandError(`the account "${name}" already exists`);
  const password = await readPassword(name, rules, io);
  const hashed = await hashPassword(password, { cost: passwordCostFrom(io.env) });
  const record: AccountRecord = { name, role, id: newAccountId(), created: new Date().toISOString(), password: hashed };
  // Looked at again in the change: the accounts may have changed while scrypt ran.
  await place.change((records) => {
    if (records.some((a) => a.name === name)) throw new ServerCommandError(`the account "${name}" already exists`);
    return [...records, record];
  });
  io.stdout.write(`added the account "${name}" with role ${role}\n`);
  return SERVER_EXIT.ok;
}

/**
 * A new password, and a new account id: every session of the account ends
 * (sessions carry the id). The admin's record joins the accounts, which
 * removes the generated password; running servers take it as they take
 * any account change.
 */
async function passwd(place: AccountsPlace, name: string, rules: PasswordRules, io: AccountsIo): Promise<number> {
  if (name !== BUILT_IN_ACCOUNT && !(await place.read()).some((a) => a.name === name))
    throw new ServerCommandError(`no account "${name}" in ${place.where}`);
  const password = await hashPassword(await readPassword(name, rules, io), { cost: passwordCostFrom(io.env) });
  if (name === BUILT_IN_ACCOUNT) {
    const record: AccountRecord = {
      name,
      role: 'admin',
      id: newAccountId(),
      created: new Date().toISOString(),
      password,
    };
    await place.change((records) => [...records.filter((r) => r.name !== name), record]);
    const removed =
      place.dir === undefined
        ? 'the generated one is no longer in the database'
        : `${join(place.dir, ADMIN_PASSWORD_FILE)} is removed`;
    io.stdout.write(
      `changed the password of "${name}"; running servers take it within a second, its sessions end, and ${removed}\n`,
    );
    return SERVER_EXIT.ok;
  }
  await place.change((records) =>
    replaceRecord(records, name, place.where, (r) => ({ ...r, id: newAccountId(), password })),
  );
  io.stdout.write(`changed the password of "${name}"; its sessions end\n`);
  return SERVER_EXIT.ok;
}

/** A new role, and a new account id: the account's sessions end. */
async function changeRole(place: AccountsPlace, name: string, role: Role, io: AccountsIo): Promise<number> {
  if (name === BUILT_IN_ACCOUNT)
    throw new ServerCommandError(`the account "${BUILT_IN_ACCOUNT}" is built in and always admin`);
  let unchanged = false;
  await place.change((records) =>
    replaceRecord(records, name, place.where, (r) => {
      unchanged = r.role === role;
      return unchanged ? r : { ...r, role, id: newAccountId() };
    }),
  );
  io.stdout.write(
    unchanged
      ? `"${name}" already has role ${role}; nothing changed\n`
      : `"${name}" now has role ${role}; its sessions end\n`,
  );
  return SERVER_EXIT.ok;
}

function replaceRecord(
  records: AccountRecord[],
  name: string,
  where: string,
  edit: (r: AccountRecord) => AccountRecord,
): AccountRecord[] {
  if (!records.some((a) => a.name === name)) throw new ServerCommandError(`no account "${name}" in ${where}`);
  return records.map((r) => (r.name === name ? edit(r) : r));
}

async function remove(place: AccountsPlace, name: string, io: AccountsIo): Promise<number> {
  if (name === BUILT_IN_ACCOUNT)
    throw new ServerCommandError(`the account "${BUILT_IN_ACCOUNT}" is built in and cannot be removed`);
  await place.change((records) => {
    const kept = records.filter((a) => a.name !== name);
    if (kept.length === records.length) throw new ServerCommandError(`no account "${name}" in ${place.where}`);
    return kept;
  });
  io.stdout.write(`removed the account "${name}"; its sessions end\n`);
  return SERVER_EXIT.ok;
}

async function list(place: AccountsPlace, json: boolean, io: AccountsIo): Promise<number> {
  const records = await place.read();
  const others = records.filter((a) => a.name !== BUILT_IN_ACCOUNT);
  const rows = [
    { name: BUILT_IN_ACCOUNT, role: 'admin', created: 'built-in' },
    ...others.map((a) => ({ name: a.name, role: a.role, created: a.created })),
  ];
  if (json) {
    const items = rows.map((r, i) =>
      i === 0 ? { name: r.name, role: r.role, builtIn: true } : { name: r.name, role: r.role, created: r.created },
    );
    io.stdout.write(JSON.stringify(items) + '\n');
    return SERVER_EXIT.ok;
  }
  const width = Math.max(4, ...rows.map((r) => r.name.length));
  io.stdout.write(`${'NAME'.padEnd(width)}  ROLE    CREATED\n`);
  for (const r of rows) io.stdout.write(`${r.name.padEnd(width)}  ${r.role.padEnd(6)}  ${r.created}\n`);
  return SERVER_EXIT.ok;
}

async function readPassword(name: string, rules: PasswordRules, io: AccountsIo): Promise<string> {
  let password: string;
  if (!rules.fromStdin && io.stdin.isTTY === true && io.stdin.setRawMode !== undefined) {
    password = await promptHidden(`Password for "${name}": `, io);
    const again = await promptHidden('Again: ', io);
    if (again !== password) throw new ServerCommandError('the two passwords differ; nothing was changed');
  } else {
    password = await readFirstLine(io.stdin);
  }
  if (password === '') throw new ServerUsageError('the password is empty');
  if (password.length > MAX_PASSWORD_LENGTH)
    throw new ServerUsageError(`the password is longer than ${MAX_PASSWORD_LENGTH} characters`);
  if ([...password].length < rules.min)
    throw new ServerUsageError(
      `the password has ${[...password].length} characters; it needs at least ${rules.min} (--min-password-length)`,
    );
  return password;
}

/**
 * The first line of a piped stdin, without its line ending (LF or CRLF);
 * the rest is not read. Spaces are kept: they may be part of the password.
 */
async function readFirstLine(input: NodeJS.ReadableStream): Promise<string> {
  const decoder = new StringDecoder('utf8');
  let text = '';
  for await (const chunk of input) {
    text += typeof chunk === 'string' ? chunk : decoder.write(chunk as Buffer);
    // One character past the limit is enough to refuse it.
    if (text.includes('\n') || text.length > MAX_PASSWORD_LENGTH + 2) break;
  }
  text += decoder.end();
  const newline = text.indexOf('\n');
  const line = newline === -1 ? text : text.slice(0, newline);
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}

const ENTER = new Set(['\r', '\n']);
const BACKSPACE = new Set(['\u007f', '\b']);

/** Reads one line from a terminal in raw mode, echoing nothing. Ctrl-C or Ctrl-D abort. */
function promptHidden(question: string, io: AccountsIo): Promise<string> {
  const input = io.stdin;
  // Echo goes off before the prompt shows, so nothing typed after it is echoed.
  input.setRawMode!(true);
  io.stderr.write(question);
  input.setEncoding('utf8');
  input.resume();
  return new Promise((resolvePassword, reject) => {
    let typed = '';
    const finish = (error?: Error) => {
      input.off('data', onData);
      input.setRawMode!(false);
      input.pause();
      io.stderr.write('\n');
      if (error) reject(error);
      else resolvePassword(typed);
    };
    const onData = (chunk: string | Buffer) => {
      for (const char of String(chunk)) {
        if (ENTER.has(char)) return finish();
        if (char === '\u0003' || (char === '\u0004' && typed === ''))
          return finish(new ServerCommandError('cancelled; nothing was changed'));
        if (BACKSPACE.has(char)) typed = [...typed].slice(0, -1).join('');
        else if (char >= ' ') typed += char;
      }
    };
    input.on('data', onData);
  });
}
