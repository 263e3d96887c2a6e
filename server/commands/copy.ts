import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { SERVER_EXIT, ServerCommandError, ServerUsageError } from '../errors.js';
import { isPostgresStore, redactSecrets } from '../ops/config.js';
import {
  acquireLock,
  ADMIN_IDENTITY_FILE,
  ensureDataDir,
  markUnfinished,
  requireDataDir,
  UNFINISHED_FILE,
} from '../ops/data-dir.js';
import { replaceFileSync } from '../ops/durable-files.js';
import { requirePrivateDirectory } from '../ops/private-directory.js';
import type { Sql } from '../store/postgres/driver.js';
import type { PostgresStore } from '../store/postgres/postgres-store.js';
import { INSTANCE_GONE_MS } from '../store/store.js';
import {
  ACCOUNTS_FILE,
  ADMIN_PASSWORD_FILE,
  adminRecordOf,
  parseAccount,
  parseGeneratedAdminPassword,
  readAccountsFile,
  serializeAccount,
  writeAccountsFile,
} from '../security/accounts-file.js';
import { DECLARATIONS_FILE, readDeclarationsFile, writeDeclarationsFile } from '../store/declarations-file.js';
import { readKeptFile, writeKeptFile } from '../store/proposed-file.js';
import { SCHEMA, SCHEMA_FILE } from '../store/schema-file.js';
import { describeDump, isEmptyDump, type StoreDump } from '../store/dump.js';
import { hasJournalData, readJournalData, writeJournalData } from '../store/journal/dump-files.js';
import { journalName, snapshotName } from '../store/journal/recovery.js';
import { commandFlags, linePrefix, writtenFilesFailure, type CommandIo } from './command-io.js';

const USAGE = `usage: users-server copy --from SOURCE --to TARGET [--replace]

Copies everything a deployment holds from one store to another: a data
directory (the journal) to a PostgreSQL database (postgres://...), or
back. Users with their ids and aliases, retired ids and moves, live
reservations, Idempotency-Key records, revoked sessions, accounts,
declared fields, the schema of the users' fields, the signing secrets
(existing cookies stay valid) and the admin's password. A source or target
that a running server uses is refused, naming the servers: stop them
first. A target that holds data is refused unless --replace is given; then
what it held is kept first: a data directory's files move to a folder
replaced-TIMESTAMP inside it, a database's content is copied to a data
directory ./users-server-replaced-TIMESTAMP.
Exit codes: 0 copied, 1 failed (nothing was changed), 2 usage error.`;

type Place = { kind: 'dir'; dir: string } | { kind: 'postgres'; url: string | undefined; label: string };

/** `users-server copy`: exit 0 copied; throws ServerCommandError (exit 1) or ServerUsageError (exit 2). */
export async function copyCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  const values = commandFlags(
    'copy',
    argv,
    {
      from: { type: 'string' },
      to: { type: 'string' },
      replace: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    USAGE,
    io,
  );
  if (values === undefined) return SERVER_EXIT.ok;
  if (values.from === undefined || values.to === undefined)
    throw new ServerUsageError('copy needs --from and --to (see users-server copy --help)');
  const [from, to] = [placeOf(values.from), placeOf(values.to)];
  if (from.kind === to.kind)
    throw new ServerUsageError(
      'copy goes between a data directory and a PostgreSQL database: one of --from and --to must be postgres://...',
    );
  const now = Date.now();
  const release: (() => void)[] = [];
  let replaced: string | undefined;
  let dump: StoreDump;
  if (from.kind === 'dir') requireDataDir(from.dir, '--from');
  if (to.kind === 'dir' && existsSync(to.dir) && !statSync(to.dir).isDirectory())
    throw new ServerCommandError(`${to.dir} is a file, not a folder: give --to a data directory, new or empty`);
  // Before anything is read, or set aside in it with --replace.
  if (to.kind === 'dir' && existsSync(to.dir)) to.dir = privateTarget(to.dir, false);
  try {
    for (const place of [from, to]) release.push(await refuseInUse(place));
    dump = adminAsAccount(await read(from, now), labelOf(from));
    replaced = await keepTarget(to, now, values.replace === true);
    try {
      await write(to, dump, labelOf(from));
    } catch (error) {
      // Nothing was changed: what the target held goes back in place.
      if (to.kind === 'dir' && replaced !== undefined) putBack(to.dir, replaced);
      throw error;
    }
  } finally {
    for (const r of release) r();
  }
  if (replaced !== undefined) io.stdout.write(`kept what ${labelOf(to)} held in ${replaced}\n`);
  if (to.kind === 'dir' && dump.secrets.length > 1) {
    io.stderr.write(
      `${linePrefix('copy')}${dump.secrets.length - 1} older signing secrets were not copied (a data directory keeps one); to keep their cookies valid, start with --secret and all of them, the first first\n`,
    );
  }
  io.stdout.write(`copied ${describeDump(dump)} from ${labelOf(from)} to ${labelOf(to)}\n`);
  return SERVER_EXIT.ok;
}

function placeOf(text: string): Place {
  if (isPostgresStore(text))
    return {
      kind: 'postgres',
      url: text === 'postgres' ? undefined : text,
      label: text === 'postgres' ? 'the PG* database' : redactSecrets(text),
    };
  return { kind: 'dir', dir: resolve(text) };
}

function labelOf(place: Place): string {
  return place.kind === 'dir' ? place.dir : place.label;
}

/**
 * Refuses a place a running server uses, before anything is read or
 * changed: a data directory's lock is taken (and held until the copy
 * ends); a database with an instance that gave a sign of life lately is
 * refused, naming the instances. Answers the release.
 */
async function refuseInUse(place: Place): Promise<() => void> {
  if (place.kind === 'dir') return existsSync(place.dir) ? acquireLock(place.dir, () => {}, COPY_IN_USE) : () => {};
  const live = await withDatabase(place, (_sql, store) => store.shared.liveInstances());
  if (live.length === 0) return () => {};
  const named = live.map((i) => `${i.url} on ${i.host} (pid ${i.pid})`).join(', ');
  throw new ServerCommandError(
    `${place.label} is in use by ${live.length} running users-server instance${live.length === 1 ? '' : 's'}: ${named}; stop ${live.length === 1 ? 'it' : 'them'} first (an instance killed without a stop counts as gone ${INSTANCE_GONE_MS / 1000} s after its last sign of life)`,
  );
}

/** What a copy tells the person to do about a data directory a server uses. */
const COPY_IN_USE = 'stop it first, then copy again';

async function read(place: Place, now: number): Promise<StoreDump> {
  if (place.kind === 'postgres')
    return withDatabase(place, async (sql) =>
      (await import('../store/postgres/dump-tables.js')).readPostgresDump(sql, now),
    );
  if (!existsSync(place.dir)) throw new ServerCommandError(`${place.dir} does not exist`);
  return { ...readJournalData(place.dir, now), ...readDataDirSettings(place.dir) };
}

/**
 * The settings files of a data directory: signing secret, generated admin password and the admin's identity, accounts,
 * declared fields, the schema.
 */
function readDataDirSettings(
  dir: string,
): Pick<StoreDump, 'secrets' | 'adminPassword' | 'adminIdentity' | 'accounts' | 'declarations' | 'schema'> {
  const text = (name: string) => (existsSync(join(dir, name)) ? readFileSync(join(dir, name), 'utf8').trim() : '');
  const secret = text('secret');
  const admin = text('admin-password');
  const identity = text(ADMIN_IDENTITY_FILE);
  return {
    secrets: secret === '' ? [] : [secret],
    adminPassword: admin === '' ? undefined : admin,
    adminIdentity: identity === '' ? undefined : identity,
    accounts: readAccountsFile(dir).map(serializeAccount),
    declarations: readDeclarationsFile(dir),
    schema: readKeptFile(dir, SCHEMA),
  };
}

/**
 * The admin's password as a target must hold it: its record among the
 * accounts once it was changed, else the generated password in clear. A
 * record line in the generated password's place (the layout of an older
 * users-server's data) joins the accounts; a record is never carried as a
 * password.
 */
function adminAsAccount(dump: StoreDump, where: string): StoreDump {
  if (dump.adminPassword === undefined) return dump;
  const parsed = parseGeneratedAdminPassword(dump.adminPassword, `${where}: the generated admin password`);
  const changed =
    adminRecordOf(dump.accounts.map((line, i) => parseAccount(line, `${where}: account ${i + 1}`))) !== undefined;
  if ('password' in parsed) return changed ? { ...dump, adminPassword: undefined } : dump;
  return {
    ...dump,
    adminPassword: undefined,
    accounts: changed ? dump.accounts : [...dump.accounts, serializeAccount(parsed.record)],
  };
}

/**
 * Refuses a target that holds data, unless `replace`: then keeps what it
 * held first and answers where.
 */
async function keepTarget(place: Place, now: number, replace: boolean): Promise<string | undefined> {
  const stamp = new Date(now).toISOString().replaceAll(':', '');
  if (place.kind === 'dir') {
    const names = existsSync(place.dir) ? readdirSync(place.dir).filter((n) => n !== 'lock') : [];
    if (names.length === 0) return undefined;
    if (!replace)
      throw new ServerCommandError(
        `${place.dir} is not empty (${hasJournalData(place.dir) ? 'it holds a journal' : names.join(', ')}); pass --replace to keep it aside and copy anyway`,
      );
    const aside = join(place.dir, `replaced-${stamp}`);
    mkdirSync(aside);
    for (const name of names) renameSync(join(place.dir, name), join(aside, name));
    return aside;
  }
  const held = await read(place, now);
  if (isEmptyDump(held)) return undefined;
  if (!replace)
    throw new ServerCommandError(
      `${place.label} is not empty (${describeDump(held)}); pass --replace to keep a copy and copy anyway`,
    );
  const aside = resolve(`users-server-replaced-${stamp}`);
  await write({ kind: 'dir', dir: aside }, held, place.label);
  return aside;
}

/**
 * Writes `dump` (read from `source`) into `place`: all of it, or, in a data directory, nothing a server would start on.
 */
async function write(place: Place, dump: StoreDump, source: string): Promise<void> {
  if (place.kind === 'postgres') {
    await withDatabase(place, async (sql) =>
      (await import('../store/postgres/dump-tables.js')).writePostgresDump(sql, dump),
    );
    return;
  }
  // A directory made here is new: no server can be using it. One that existed is locked (refuseInUse).
  const made = !existsSync(place.dir);
  const dir = privateTarget(ensureDataDir(place.dir), made);
  const release = made ? acquireLock(dir, () => {}, COPY_IN_USE) : () => {};
  let failure: unknown;
  try {
    const mark = markUnfinished(dir, `copy from ${source}`);
    await writeJournalData(dir, dump);
    if (dump.secrets[0] !== undefined) replaceFileSync(dir, join(dir, 'secret'), dump.secrets[0] + '\n', 0o600);
    if (dump.adminPassword !== undefined)
      replaceFileSync(dir, join(dir, ADMIN_PASSWORD_FILE), dump.adminPassword + '\n', 0o600);
    if (dump.adminIdentity !== undefined)
      replaceFileSync(dir, join(dir, ADMIN_IDENTITY_FILE), dump.adminIdentity + '\n', 0o600);
    if (dump.accounts.length > 0)
      writeAccountsFile(
        dir,
        dump.accounts.map((line, i) => parseAccount(line, `account ${i + 1}`)),
      );
    if (dump.declarations.length > 0) writeDeclarationsFile(dir, dump.declarations);
    if (dump.schema !== null) writeKeptFile(dir, SCHEMA, dump.schema);
    mark.finish();
  } catch (error) {
    failure = error;
  } finally {
    release();
  }
  if (failure === undefined) return;
  // Leave no part of a copy that a server would start on as if it were whole.
  if (made) rmSync(dir, { recursive: true, force: true });
  else for (const name of WRITTEN_FILES) rmSync(join(dir, name), { force: true });
  throw writtenFilesFailure('copy', failure, dir);
}

/**
 * The real path of a target folder no other user can write into (requirePrivateDirectory); as root, it may be the data
 * directory of the user a server runs as.
 */
function privateTarget(dir: string, made: boolean): string {
  return requirePrivateDirectory(dir, { verb: 'copy', made, othersMayOwn: true });
}

/** What a copy writes into a data directory. */
const WRITTEN_FILES = [
  snapshotName(1),
  `${snapshotName(1)}.tmp`,
  journalName(1),
  'secret',
  ADMIN_PASSWORD_FILE,
  ADMIN_IDENTITY_FILE,
  ACCOUNTS_FILE,
  DECLARATIONS_FILE,
  SCHEMA_FILE,
  UNFINISHED_FILE,
];

/** Moves what `keepTarget` set aside in `aside` back into `dir`. */
function putBack(dir: string, aside: string): void {
  for (const name of readdirSync(aside)) renameSync(join(aside, name), join(dir, name));
  rmSync(aside, { recursive: true, force: true });
}

/** Opens the database (migrating an empty one), runs `work`, closes it. */
async function withDatabase<T>(
  place: Extract<Place, { kind: 'postgres' }>,
  work: (sql: Sql, store: PostgresStore) => Promise<T>,
): Promise<T> {
  const { openPostgresStore, COMMAND_SILENCE_SECONDS } = await import('../store/postgres/open-postgres.js');
  const { describeFailure, isUnavailable } = await import('../store/postgres/driver.js');
  const store = await openPostgresStore(place.url, {
    max: 2,
    startWaitSeconds: 0,
    log: () => {},
    silenceSeconds: COMMAND_SILENCE_SECONDS,
  });
  try {
    return await work(store.sql, store);
  } catch (error) {
    if (error instanceof ServerCommandError) throw error;
    // A connection lost or gone silent: the copy's one transaction there never committed.
    if (isUnavailable(error))
      throw new ServerCommandError(
        `lost ${place.label} during the copy (${(error as { code: string }).code}): nothing was changed; check that PostgreSQL runs there and the network to it, then copy again`,
      );
    throw new ServerCommandError(`${place.label} failed during the copy: ${describeFailure(error)}`);
  } finally {
    await store.close();
  }
}
