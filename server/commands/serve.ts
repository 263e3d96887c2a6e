import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import { fileProblem, systemFileProblem } from '../../shared/file-errors.js';
import { packageVersion } from '../../shared/package-version.js';
import { SERVER_EXIT, ServerCommandError, ServerUsageError, StoreUnavailableError } from '../errors.js';
import { createApp, type App } from '../http/app.js';
import { listen, type Listening, type TIMEOUTS } from '../http/server.js';
import { AccessLog, type LogSink } from '../ops/access-log.js';
import { isPostgresStore, parseConfig, redactSecrets, usage, type Config } from '../ops/config.js';
import {
  acquireLock,
  loadOrCreateAdminPassword,
  prepareDataDir,
  loadOrCreateSecret,
  newAdminPassword,
  updateAdminIdentity,
  usedBefore,
  withEditLock,
} from '../ops/data-dir.js';
import {
  ACCOUNTS_FILE,
  AccountsFileWatcher,
  ADMIN_PASSWORD_FILE,
  adminRecordOf,
  parseGeneratedAdminPassword,
  readAccountsFile,
  serializeAccount,
  SharedAccountsPoller,
  writeAccountsFile,
  type AccountRecord,
} from '../security/accounts-file.js';
import { adminIdentity } from '../security/admin-identity.js';
import { Accounts, hashPassword, type ScryptFunction } from '../security/credentials.js';
import { SharedLoginLimits, type LoginLimits } from '../security/login-limit.js';
import { DeclarationsWatcher } from '../store/declarations-file.js';
import { SchemaWatcher } from '../store/schema-file.js';
import type { JournalIo } from '../store/journal/journal.js';
import { openStore } from '../store/open-store.js';
import type { SharedSettings, Store } from '../store/store.js';
import { DEFAULT_MIN_PASSWORD_LENGTH } from './accounts.js';
import { finishOutput, type CommandIo, type SignalSource } from './command-io.js';

const SWEEP_INTERVAL_MS = 60_000;

export interface RunningServer {
  readonly url: string;
  readonly server: Listening['server'];
  readonly app: App;
  readonly store: Store;
  /** Where the generated admin password is kept (a file, or the database), while it is the one in use. */
  readonly adminPasswordFile: string | undefined;
  /** The length of USERS_ADMIN_PASSWORD while it is the admin's password; undefined when another one is. */
  readonly adminPasswordFromEnv: number | undefined;
  /** Graceful stop: refuse new connections, let in-flight requests finish, flush the store. */
  stop(): Promise<void>;
  /** During a stop: cut the connections still open; the store is still flushed and the lock released. */
  hurry(): void;
  /** Reads the accounts again now (SIGHUP). */
  reloadAccounts(): Promise<void>;
  /**
   * HTTPS: reads --tls-cert and --tls-key again for new connections (SIGHUP); throws ServerCommandError when they do
   * not do.
   */
  reloadCertificate: (() => void) | undefined;
}

export interface StartOptions {
  env?: NodeJS.ProcessEnv;
  logError?: (message: string) => void;
  clock?: () => number;
  /**
   * Called once if the journal cannot write or sync: the affected requests
   * have failed and the server must stop. Without it the server stops itself.
   */
  onFatal?: (error: Error) => void;
  /** Tests inject failing file system calls into the journal's write path. */
  journalIo?: JournalIo;
  /** Tests only: shorter timeouts than API.md's, so a timeout test takes a second, not half a minute. */
  timeouts?: Partial<typeof TIMEOUTS>;
  /** Where access log lines go (`--log-format`); stdout when not given. */
  accessLog?: LogSink;
  /** Called after the running server re-read a changed accounts file. */
  onAccountsReload?: () => void;
  /** Where operational lines go (every login); logError's place when absent. */
  log?: (line: string) => void;
  /** Tests only: a store of their own (one whose writes fail, say) instead of the one `--store` names. */
  store?: Store;
  /** Tests only: the password hash function (one that counts its calls, say). */
  scrypt?: ScryptFunction;
  /**
   * Tests only: the failed-login limit (one with a smaller table, say) instead of this process's own or the shared
   * store's.
   */
  loginLimits?: LoginLimits;
  /** Aborted by a stop asked for during the start: the wait for a database ends at once. */
  signal?: AbortSignal;
}

/** The settings an instance reads at start: from its data directory, or from a shared store. */
interface Settings {
  keys: Buffer[];
  /**
   * The admin's password in clear (generated, or USERS_ADMIN_PASSWORD), or its record once `accounts passwd admin` set
   * one.
   */
  admin: string | AccountRecord;
  /** Where the generated admin password is kept in clear, while it is the one in use. */
  adminPasswordAt: string | undefined;
  /**
   * Replaces the kept identity of the admin (security/admin-identity.ts) with what `update` makes of it; answers it.
   */
  keepAdminIdentity: (update: (kept: string | undefined) => string) => string | Promise<string>;
  /** Keeps the accounts in step with their source; stopped on close. */
  accountsSource: { refresh(): void | Promise<void>; close(): void };
  loginLimits: LoginLimits | undefined;
}

/** What a start says of who may use the server, by `--require-session`. */
const ACCESS_LINES: Record<Config['requireSession'], string> = {
  all: 'access: /users, /changes and /metrics need a session or an API token (--require-session all); /, /login, /healthz, /readyz and /openapi.json are open',
  writes:
    'access: reads of /users, /changes and /metrics are open to anyone who can reach the server; writes need a session or an API token (--require-session writes)',
  none: 'access: /users, /changes and /metrics are open to anyone who can reach the server, to read and to write (--require-session none)',
};

/**
 * Why USERS_ADMIN_PASSWORD is too short to be the admin's, by the rule accounts are held to; undefined when it is not.
 */
function shortAdminPassword(running: Pick<RunningServer, 'adminPasswordFromEnv'>): string | undefined {
  const length = running.adminPasswordFromEnv;
  if (length === undefined || length >= DEFAULT_MIN_PASSWORD_LENGTH) return undefined;
  return `USERS_ADMIN_PASSWORD has ${length} characters, fewer than the ${DEFAULT_MIN_PASSWORD_LENGTH} an account's password needs: give a longer one, or set one with users-server accounts passwd admin`;
}

/** The start's line on who may use the server. */
function accessLine(config: Config): string {
  return ACCESS_LINES[config.requireSession];
}

/**
 * Why the configuration lets anyone who can reach the server from another
 * machine read or change users: an address other than loopback while reads
 * or writes need no credential. Undefined when it does not.
 */
function openToOthers(config: Config): string | undefined {
  if (config.requireSession === 'all' || isLoopback(config.host)) return undefined;
  const what =
    config.requireSession === 'none' ? 'read and change every user' : 'read every user and the feed of changes';
  return `listening on ${config.host}, not only on this machine, with --require-session ${config.requireSession}: anyone who can reach it can ${what}. --require-session all closes that`;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** A URL of the server a client on this machine can use: a wildcard address is reached through loopback. */
function reachableUrl(url: string): string {
  return url.replace('//0.0.0.0:', '//127.0.0.1:').replace('//[::]:', '//[::1]:');
}

/** The default --url of usersctl: a server there needs no --url in the login line. */
const USERSCTL_DEFAULT_URL = 'http://127.0.0.1:8080';

/**
 * What a person needs at start, besides "listening on": where the data
 * is, and while the admin's password is the generated one, how to log in
 * with it and change it, in the commands as installed.
 */
function startLines(config: Config, running: Pick<RunningServer, 'url' | 'adminPasswordFile'>): string[] {
  const postgres = isPostgresStore(config.store);
  const where = postgres
    ? config.store === 'postgres'
      ? 'the database of the PG* variables'
      : redactSecrets(config.store)
    : resolve(config.data);
  const lines = [
    config.store === 'memory'
      ? 'users in memory only: they are gone when the server stops'
      : `data in ${where}${postgres ? '' : ' (journal)'}`,
    accessLine(config),
  ];
  if (running.adminPasswordFile === undefined) return lines;
  const reach = reachableUrl(running.url);
  const url = reach === USERSCTL_DEFAULT_URL ? '' : ` --url ${reach}`;
  const store = postgres ? `--store ${config.store === 'postgres' ? 'postgres' : 'URL'}` : `--data ${where}`;
  const password = postgres
    ? `${generatedPasswordQuery(config.store)} | usersctl${url} login --password-stdin`
    : `usersctl${url} login --password-stdin < ${running.adminPasswordFile}`;
  lines.push(`first login: ${password} (then change it: users-server accounts passwd admin ${store})`);
  return lines;
}

/**
 * The built-in admin's account id for `password`: the kept identity's when
 * it was made for the same password, else a new one, kept with `settings`.
 * A new id ends the sessions of the password before.
 */
async function keptAdminId(password: string, settings: Pick<Settings, 'keepAdminIdentity'>): Promise<string> {
  const record = await settings.keepAdminIdentity((kept) => adminIdentity(password, kept).record);
  return adminIdentity(password, record).id;
}

/**
 * The psql command that prints the generated admin password a PostgreSQL
 * store holds: the store's URL with its password left out (psql asks for
 * it, or reads ~/.pgpass), or none for the PG* variables.
 */
function generatedPasswordQuery(store: string): string {
  const target = store === 'postgres' ? '' : ` '${redactSecrets(store).replace(':***@', '@')}'`;
  return `psql${target} -Atc "select value from settings where name = 'admin-password'"`;
}

/** A signing secret: 32 random bytes. */
function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** A database that stopped answering while the start was `doing` something with it: one sentence, the start ends. */
async function lostAtStart(config: Config, doing: string, error: unknown): Promise<never> {
  if (!(error instanceof StoreUnavailableError)) throw error;
  const { describeDatabase } = await import('../store/postgres/open-postgres.js');
  const code = (error.cause as { code?: string } | undefined)?.code ?? 'error';
  throw new ServerCommandError(
    `lost ${describeDatabase(config.store === 'postgres' ? undefined : config.store)} while ${doing} at the start (${code}): check that PostgreSQL runs there and the network to it, then start again`,
  );
}

/** The settings a shared store (PostgreSQL) holds for every instance. */
async function sharedSettings(
  shared: SharedSettings,
  config: Config,
  accounts: Accounts,
  env: NodeJS.ProcessEnv,
  log: (m: string) => void,
  onReload?: () => void,
): Promise<Settings> {
  const secrets = config.secrets.length > 0 ? config.secrets : await shared.secrets(newSecret);
  const accountsSource = await SharedAccountsPoller.start(shared, accounts, log, onReload);
  const where = "the database (settings 'admin-password')";
  const admin = await adminPassword(
    accountsSource.records,
    env,
    async () => {
      const { password, created } = await shared.generatedAdminPassword(newAdminPassword);
      return { text: password, path: where, created };
    },
    (record) => shared.updateAccountRecords((records) => void records.set(record.name, serializeAccount(record))),
    where,
  );
  const keepAdminIdentity = (update: (kept: string | undefined) => string) => shared.updateAdminIdentity(update);
  return {
    keys: secrets.map((s) => Buffer.from(s, 'utf8')),
    ...admin,
    keepAdminIdentity,
    accountsSource,
    loginLimits: new SharedLoginLimits(shared),
  };
}

/** The settings an instance keeps in its own data directory. */
function dataDirSettings(
  dataDir: string,
  config: Config,
  accounts: Accounts,
  env: NodeJS.ProcessEnv,
  log: (m: string) => void,
  onReload?: () => void,
): Promise<Settings> {
  const accountsSource = new AccountsFileWatcher(dataDir, accounts, log, onReload);
  const keys = (config.secrets.length > 0 ? config.secrets : [loadOrCreateSecret(dataDir)]).map((s) =>
    Buffer.from(s, 'utf8'),
  );
  // Under the accounts' edit lock: an accounts command may be editing the file meanwhile.
  const adopt = (record: AccountRecord) =>
    withEditLock(dataDir, ACCOUNTS_FILE, () => writeAccountsFile(dataDir, [...readAccountsFile(dataDir), record]));
  return adminPassword(
    accountsSource.records,
    env,
    async () => loadOrCreateAdminPassword(dataDir),
    adopt,
    join(dataDir, ADMIN_PASSWORD_FILE),
  ).then(
    (admin) => ({
      keys,
      ...admin,
      keepAdminIdentity: (update: (kept: string | undefined) => string) => updateAdminIdentity(dataDir, update),
      accountsSource,
      loginLimits: undefined,
    }),
    (error: unknown) => {
      accountsSource.close();
      throw error;
    },
  );
}

/**
 * The admin's password, the same way on every store: the record the
 * accounts hold once `accounts passwd admin` changed it; else
 * USERS_ADMIN_PASSWORD; else the generated one, said where it is on every
 * start. A record line where the generated password goes (the layout of
 * an older users-server's data) is moved into the accounts (`adopt`),
 * never taken as a password.
 */
async function adminPassword(
  records: () => readonly AccountRecord[],
  env: NodeJS.ProcessEnv,
  generated: () => Promise<{ text: string; path: string; created: boolean }>,
  adopt: (record: AccountRecord) => Promise<void>,
  where: string,
): Promise<Pick<Settings, 'admin' | 'adminPasswordAt'>> {
  const record = adminRecordOf(records());
  if (record !== undefined) return { admin: record, adminPasswordAt: undefined };
  const fromEnv = env.USERS_ADMIN_PASSWORD;
  if (fromEnv !== undefined && fromEnv !== '') return { admin: fromEnv, adminPasswordAt: undefined };
  const { text, path } = await generated();
  const parsed = parseGeneratedAdminPassword(text, where);
  if ('password' in parsed) return { admin: parsed.password, adminPasswordAt: path };
  await adopt(parsed.record);
  return { admin: parsed.record, adminPasswordAt: undefined };
}

/** The store `config` names, opened with the server's logging, fatal-error hook and test seams. */
function openConfiguredStore(
  config: Config,
  dataDir: string | undefined,
  evidence: ReturnType<typeof usedBefore> | undefined,
  options: StartOptions,
  logError: (message: string) => void,
  onFatal: (error: Error) => void,
): Promise<Store> {
  return openStore(config.store, dataDir ?? '', {
    compactionFloor: config.compactionFloor,
    changesRetentionMs: config.changesRetention * 1000,
    ...(evidence !== undefined && { usedBefore: evidence }),
    log: logError,
    onFatal,
    postgres: {
      max: config.dbPool,
      timeoutSeconds: config.dbTimeout,
      startWaitSeconds: config.dbStartWait,
      ...(options.signal && { signal: options.signal }),
    },
    ...(options.clock && { now: options.clock }),
    ...(options.journalIo && { io: options.journalIo }),
  });
}

/**
 * Boots a server: the data directory and its lock (not for a shared
 * PostgreSQL store, which needs neither), the store, the signing keys and
 * accounts (from the data directory, or from the shared store), the app,
 * and the listening socket. Everything it opened is released again if a
 * later step fails.
 */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const logError = options.logError ?? ((message: string) => process.stderr.write(message + '\n'));
  const { prepared, dataDir, releaseLock } = lockDataDir(config, options, logError);
  const evidence = dataDir === undefined ? undefined : usedBefore(dataDir);
  const opened: Opened = {};
  try {
    let stop: () => Promise<void> = async () => {};
    const onFatal = (error: Error) => {
      logError(`users-server: ${error.message}; stopping: a failed sync cannot be retried safely`);
      if (options.onFatal) options.onFatal(error);
      else void stop();
    };
    const store = (opened.store =
      options.store ?? (await openConfiguredStore(config, dataDir, evidence, options, logError, onFatal)));
    const declarations = (opened.declarations = watchDeclarations(store, dataDir, logError));
    opened.schema = watchSchema(store, dataDir, logError);
    const hashing = { cost: config.passwordCost, ...(options.scrypt && { scrypt: options.scrypt }) };
    const accounts = new Accounts(hashing);
    const env = options.env ?? process.env;
    const settings = (opened.settings =
      store.shared !== undefined
        ? await sharedSettings(store.shared, config, accounts, env, logError, options.onAccountsReload).catch(
            (error: unknown) => lostAtStart(config, 'reading its settings', error),
          )
        : await dataDirSettings(dataDir!, config, accounts, env, logError, options.onAccountsReload));
    const admin = settings.admin;
    if (typeof admin === 'string')
      accounts.add('admin', 'admin', await hashPassword(admin, hashing), await keptAdminId(admin, settings));
    else accounts.add('admin', 'admin', admin.password, admin.id);
    const loginLimits = options.loginLimits ?? settings.loginLimits;
    const app = createApp({
      store,
      config,
      accounts,
      accountsFile: settings.accountsSource,
      keys: settings.keys,
      ...(loginLimits && { loginLimits }),
      ...(options.clock && { clock: options.clock }),
      ...(options.logError && { logError: options.logError }),
      log: options.log ?? logError,
    });
    const accessLog =
      config.logFormat === 'off'
        ? undefined
        : new AccessLog(config.logFormat, options.accessLog ?? ((chunk) => process.stdout.write(chunk)), options.clock);
    const tls = config.tlsCert === '' ? undefined : readCertificate(config);
    const listening = (opened.listening = await listenFor(app, config, accessLog, tls, options));
    const announced = (opened.announced = await store.shared
      ?.announce({ host: hostname(), pid: process.pid, url: listening.url })
      .catch((error: unknown) => lostAtStart(config, 'announcing this instance', error)));
    const { schema } = opened;
    stop = stopper({
      config,
      store,
      settings,
      declarations,
      schema,
      app,
      listening,
      announced,
      accessLog,
      releaseLock,
    });
    const reloadAccounts = async () => settings.accountsSource.refresh();
    const reloadCertificate =
      tls === undefined ? undefined : () => listening.replaceCertificate(readCertificate(config));
    const fromEnv = typeof admin === 'string' && settings.adminPasswordAt === undefined ? admin.length : undefined;
    return {
      url: listening.url,
      server: listening.server,
      app,
      store,
      adminPasswordFile: settings.adminPasswordAt,
      adminPasswordFromEnv: fromEnv,
      stop,
      hurry: () => listening.hurry(),
      reloadAccounts,
      reloadCertificate,
    };
  } catch (error) {
    await closeOpened(opened);
    releaseLock();
    // Nothing new is left behind: no directory, secret, password or journal of a start that did not serve.
    prepared?.discard();
    const problem =
      error instanceof ServerCommandError || dataDir === undefined ? undefined : systemFileProblem(error, dataDir);
    throw problem === undefined ? error : new ServerCommandError(`cannot write the data directory: ${problem}`);
  }
}

/** What a start has opened so far, closed again when a later step fails. */
interface Opened {
  store?: Store;
  declarations?: DeclarationsWatcher | undefined;
  schema?: SchemaWatcher | undefined;
  settings?: Settings;
  listening?: Listening;
  announced?: { close(): Promise<void> } | undefined;
}

async function closeOpened(opened: Opened): Promise<void> {
  opened.settings?.accountsSource.close();
  opened.declarations?.close();
  opened.schema?.close();
  await opened.listening?.close();
  await opened.announced?.close();
  await opened.store?.close();
}

/**
 * The declared fields of a store in a data directory (its file), declared
 * now and watched for changes; none for a shared store, which keeps its own.
 */
function watchDeclarations(
  store: Store,
  dataDir: string | undefined,
  log: (line: string) => void,
): DeclarationsWatcher | undefined {
  if (store.declareFields === undefined || dataDir === undefined) return undefined;
  return new DeclarationsWatcher(dataDir, (fields) => store.declareFields!(fields), log);
}

/** The schema of a store in a data directory (its file), set now and watched for changes; none for a shared store. */
function watchSchema(
  store: Store,
  dataDir: string | undefined,
  log: (line: string) => void,
): SchemaWatcher | undefined {
  if (store.setUserSchema === undefined || dataDir === undefined) return undefined;
  return new SchemaWatcher(dataDir, (schema, checkUsers) => store.setUserSchema!(schema, checkUsers), log);
}

/** The data directory, made if new, and its lock: none for a shared PostgreSQL store. */
function lockDataDir(config: Config, options: StartOptions, logError: (message: string) => void) {
  const prepared =
    isPostgresStore(config.store) && options.store === undefined ? undefined : prepareDataDir(config.data);
  const dataDir = prepared?.path;
  try {
    const releaseLock = dataDir === undefined ? () => {} : acquireLock(dataDir, logError);
    return { prepared, dataDir, releaseLock };
  } catch (error) {
    prepared?.discard();
    throw error;
  }
}

function listenFor(
  app: App,
  config: Config,
  accessLog: AccessLog | undefined,
  tls: { cert: Buffer; key: Buffer } | undefined,
  options: StartOptions,
): Promise<Listening> {
  return listen(app, {
    host: config.host,
    port: config.port,
    maxBody: config.maxBody,
    accessLog,
    maxConnectionsPerClient: config.trustProxy ? 0 : config.maxConnectionsPerClient,
    ...(config.maxConnections > 0 && { maxConnections: config.maxConnections }),
    ...(tls && { tls }),
    ...(options.timeouts && { timeouts: options.timeouts }),
  });
}

/**
 * Starts the sweep of expired records and returns the graceful stop: it
 * runs once however often it is called, and ends with the lock released.
 */
function stopper(running: {
  config: Config;
  store: Store;
  settings: Settings;
  declarations: DeclarationsWatcher | undefined;
  schema: SchemaWatcher | undefined;
  app: App;
  listening: Listening;
  announced: { close(): Promise<void> } | undefined;
  accessLog: AccessLog | undefined;
  releaseLock: () => void;
}): () => Promise<void> {
  const { config, store, settings, declarations, schema, app, listening, announced, accessLog, releaseLock } = running;
  const sweeper = setInterval(() => sweepOnce(store), SWEEP_INTERVAL_MS);
  sweeper.unref();
  let stopped: Promise<void> | undefined;
  return () =>
    (stopped ??= (async () => {
      clearInterval(sweeper);
      settings.accountsSource.close();
      declarations?.close();
      schema?.close();
      // On PostgreSQL a request waits at most --db-timeout for the database: past it, what still waits is stuck, and is
      // cut.
      const cut = store.shared === undefined ? undefined : setTimeout(() => listening.hurry(), config.dbTimeout * 1000);
      // A following feed of changes never ends by itself: it ends now, and its reader resumes elsewhere.
      app.feeds.endAll();
      await listening.close();
      clearTimeout(cut);
      await announced?.close();
      accessLog?.flush();
      await store.close();
      releaseLock();
    })());
}

/**
 * --tls-cert and --tls-key, read and checked as a pair (a key that does not
 * match its certificate is refused here, not at the first handshake).
 */
function readCertificate(config: Config): { cert: Buffer; key: Buffer } {
  const read = (path: string, what: string) => {
    try {
      return readFileSync(path);
    } catch (error) {
      throw new ServerCommandError(`the TLS ${what}: ${fileProblem('read', path, error)}`);
    }
  };
  const pair = { cert: read(config.tlsCert, 'certificate'), key: read(config.tlsKey, 'key') };
  try {
    createSecureContext(pair);
  } catch {
    throw new ServerCommandError(
      `the TLS certificate ${config.tlsCert} and key ${config.tlsKey} do not make a pair a server can use: check that both are PEM and that the key is the certificate's`,
    );
  }
  return pair;
}

/**
 * The access log's sink: stdout, until writing to it fails (a reader that
 * went away: EPIPE). Then one note on stderr and no more lines, instead of
 * an unhandled 'error' that would stop the server.
 */
function stdoutSink(io: CommandIo): (chunk: string) => void {
  let failed = false;
  io.stdout.on('error', (error: Error) => {
    if (failed) return;
    failed = true;
    io.stderr.write(`users-server: cannot write to stdout (${error.message}); the access log is off\n`);
  });
  return (chunk) => {
    if (!failed) io.stdout.write(chunk);
  };
}

interface Signals {
  /** Resolves at the first SIGINT or SIGTERM (or stopNow). */
  readonly signalled: Promise<void>;
  /** Aborted at the first SIGINT or SIGTERM: what the start waits for gives up. */
  readonly stopAsked: AbortSignal;
  stopNow(): void;
  /** What a second SIGINT or SIGTERM does, and what SIGHUP does. */
  onAgain: () => void;
  onHangUp: () => void;
  unwatch(): void;
}

/**
 * Signals, watched before anything is announced and until the stop is
 * over, so no signal ever kills the process with the lock held: the first
 * SIGINT or SIGTERM stops gracefully, a second one ends the drain at once
 * (connections cut, the store still flushed, the lock released), and
 * SIGHUP reads the accounts again.
 */
function watchSignals(source: SignalSource): Signals {
  let stopNow = () => {};
  let stopping = false;
  const stop = new AbortController();
  const signalled = new Promise<void>((resolve) => (stopNow = () => resolve()));
  const signals: Signals = {
    signalled,
    stopAsked: stop.signal,
    stopNow: () => stopNow(),
    onAgain: () => {},
    onHangUp: () => {},
    unwatch: () => {
      source.off('SIGINT', onStop);
      source.off('SIGTERM', onStop);
      source.off('SIGHUP', onHangUp);
    },
  };
  const onStop = () => {
    if (stopping) signals.onAgain();
    stopping = true;
    stop.abort();
    stopNow();
  };
  const onHangUp = () => signals.onHangUp();
  source.on('SIGINT', onStop);
  source.on('SIGTERM', onStop);
  source.on('SIGHUP', onHangUp);
  return signals;
}

/** Why a start failed: a listen refused, as a ServerCommandError for the operator; anything else as it is. */
function startFailure(error: unknown, config: Config): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const address = `${config.host}:${config.port}`;
  if (code === 'EADDRINUSE')
    return new ServerCommandError(
      `the address ${address} is already in use: stop what listens there, or give another --port`,
    );
  if (code === 'EACCES')
    return new ServerCommandError(
      `no permission to listen on ${address}: give a --port above 1023, or run with the right to bind it`,
    );
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND')
    return new ServerCommandError(`cannot listen on ${config.host}: no such local address`);
  return error;
}

/** SIGHUP: the accounts read again, and the TLS certificate and key when serving HTTPS; each outcome said on stderr. */
function reload(running: RunningServer, io: CommandIo): void {
  running.reloadAccounts().then(
    () => io.stderr.write('users-server: SIGHUP: accounts read again\n'),
    (error: unknown) =>
      io.stderr.write(`users-server: SIGHUP: cannot read the accounts: ${(error as Error).message}\n`),
  );
  if (running.reloadCertificate === undefined) return;
  try {
    running.reloadCertificate();
    io.stderr.write('users-server: SIGHUP: TLS certificate and key read again; new connections use them\n');
  } catch (error) {
    io.stderr.write(`users-server: SIGHUP: ${(error as Error).message}; the previous certificate stays in use\n`);
  }
}

/**
 * `users-server [flags]`: serve until SIGINT or SIGTERM. Exit 0 after a
 * graceful stop, 1 when the journal failed to write; throws a
 * ServerCommandError (exit 1) when it cannot start (data directory, lock,
 * port, a damaged journal), a ServerUsageError (exit 2) for a bad flag or
 * value.
 */
export async function serve(argv: readonly string[], io: CommandIo): Promise<number> {
  let parsed;
  try {
    parsed = parseConfig(argv, io.env);
  } catch (error) {
    if (!(error instanceof ServerUsageError)) throw error;
    throw new ServerUsageError(`${error.message} (see users-server --help)`);
  }
  if (parsed.help || parsed.version) {
    io.stdout.write((parsed.help ? usage() : packageVersion(import.meta.url)) + '\n');
    return finishOutput(io, SERVER_EXIT.ok);
  }
  // Signals are watched first, so a stop asked for as soon as "listening on"
  // appears is still a graceful one. A journal that cannot sync stops the
  // server like a signal, but exits 1.
  const signals = watchSignals(io.signals ?? process);
  let fatal = false;
  const onFatal = () => {
    fatal = true;
    signals.stopNow();
  };
  let running: RunningServer;
  try {
    running = await startServer(parsed.config, {
      env: io.env,
      onFatal,
      logError: (message) => io.stderr.write(message + '\n'),
      accessLog: stdoutSink(io),
      signal: signals.stopAsked,
    });
  } catch (error) {
    signals.unwatch();
    // Stopped while it started (Ctrl-C while it waited for the database): a stop, not a failure.
    if (signals.stopAsked.aborted) {
      io.stderr.write('users-server: stopped before it served anything\n');
      return SERVER_EXIT.ok;
    }
    // A setting that cannot work (the PostgreSQL driver missing) is a ServerUsageError: exit 2.
    throw startFailure(error, parsed.config);
  }
  for (const line of startLines(parsed.config, running)) io.stderr.write(`users-server: ${line}\n`);
  const exposed = openToOthers(parsed.config);
  if (exposed !== undefined) io.stderr.write(`users-server: warning: ${exposed}\n`);
  const short = shortAdminPassword(running);
  if (short !== undefined) io.stderr.write(`users-server: warning: ${short}\n`);
  io.stdout.write(`listening on ${running.url}\n`);
  signals.onHangUp = () => reload(running, io);
  await signals.signalled;
  signals.onAgain = () => {
    io.stderr.write('users-server: second signal: closing the open connections now; the store is still flushed\n');
    running.hurry();
  };
  await running.stop();
  signals.unwatch();
  return fatal ? SERVER_EXIT.failed : SERVER_EXIT.ok;
}

/**
 * One periodic sweep. A sweep the store refuses (a full disk) is dropped,
 * also one refused at once, before a promise is made: the next one retries.
 */
export function sweepOnce(store: Pick<Store, 'sweep'>): void {
  void Promise.resolve()
    .then(() => store.sweep(Date.now()))
    .catch(() => {});
}
