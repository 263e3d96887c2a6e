import { readFileSync } from 'node:fs';
import { CommandError, UsageError } from '../errors.js';
import { createApp, type App } from '../http/app.js';
import { listen, type Listening, type TIMEOUTS } from '../http/server.js';
import { AccessLog, type LogSink } from '../ops/access-log.js';
import { parseConfig, usage, type Config } from '../ops/config.js';
import { acquireLock, ensureDataDir, loadOrCreateAdminPassword, loadOrCreateSecret } from '../ops/data-dir.js';
import { AccountsFileWatcher } from '../security/accounts-file.js';
import { Accounts, hashPassword, type ScryptFunction } from '../security/credentials.js';
import type { JournalIo } from '../store/journal/journal.js';
import { openStore } from '../store/open-store.js';
import type { Store } from '../store/store.js';
import type { CommandIo } from './command-io.js';

const SWEEP_INTERVAL_MS = 60_000;

export interface RunningServer {
  readonly url: string;
  readonly server: Listening['server'];
  readonly app: App;
  readonly store: Store;
  /** Where a generated admin password was written, when it was generated on this start. */
  readonly adminPasswordFile: string | undefined;
  /** Graceful stop: refuse new connections, let in-flight requests finish, flush the store. */
  stop(): Promise<void>;
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
  /** Tests only: a store of their own (one whose writes fail, say) instead of the one `--store` names. */
  store?: Store;
  /** Tests only: the password hash function (one that counts its calls, say). */
  scrypt?: ScryptFunction;
}

/**
 * Boots a server: the data directory and its lock, the signing keys, the
 * accounts, the store, the app, and the listening socket. Everything it
 * opened is released again if a later step fails.
 */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const env = options.env ?? process.env;
  const logError = options.logError ?? ((message: string) => process.stderr.write(message + '\n'));
  const dataDir = ensureDataDir(config.data);
  const releaseLock = acquireLock(dataDir);
  const opened: { store?: Store; accountsFile?: AccountsFileWatcher } = {};
  try {
    const keys = (config.secrets.length > 0 ? config.secrets : [loadOrCreateSecret(dataDir)]).map((s) => Buffer.from(s, 'utf8'));
    const admin = loadOrCreateAdminPassword(dataDir, env.USERS_ADMIN_PASSWORD);
    const hashing = { cost: config.passwordCost, ...(options.scrypt && { scrypt: options.scrypt }) };
    const accounts = new Accounts(hashing);
    // scrypt runs on the thread pool while the journal replays on this thread.
    const adminHash = hashPassword(admin.password, hashing);
    adminHash.catch(() => {});
    const accountsFile = (opened.accountsFile = new AccountsFileWatcher(dataDir, accounts, logError, options.onAccountsReload));
    let stop: () => Promise<void> = async () => {};
    const onFatal = (error: Error) => {
      logError(`users-server: ${error.message}; stopping: a failed sync cannot be retried safely`);
      if (options.onFatal) options.onFatal(error);
      else void stop();
    };
    const store = (opened.store = options.store ?? (await openStore(config.store, dataDir, {
      compactionFloor: config.compactionFloor,
      log: logError,
      onFatal,
      postgres: { max: config.dbPool, timeoutSeconds: config.dbTimeout },
      ...(options.clock && { now: options.clock }),
      ...(options.journalIo && { io: options.journalIo }),
    })));
    accounts.add('admin', 'admin', await adminHash);
    const app = createApp({ store, config, accounts, accountsFile, keys, ...(options.clock && { clock: options.clock }), ...(options.logError && { logError: options.logError }) });
    const accessLog = config.logFormat === 'off' ? undefined : new AccessLog(config.logFormat, options.accessLog ?? ((chunk) => process.stdout.write(chunk)), options.clock);
    const listening = await listen(app, { host: config.host, port: config.port, maxBody: config.maxBody, accessLog, ...(options.timeouts && { timeouts: options.timeouts }) });
    const sweeper = setInterval(() => void store.sweep(Date.now()), SWEEP_INTERVAL_MS);
    sweeper.unref();
    let stopped: Promise<void> | undefined;
    stop = () =>
      (stopped ??= (async () => {
        clearInterval(sweeper);
        accountsFile.close();
        await listening.close();
        accessLog?.flush();
        await store.close();
        releaseLock();
      })());
    return { url: listening.url, server: listening.server, app, store, adminPasswordFile: admin.created ? admin.path : undefined, stop };
  } catch (error) {
    opened.accountsFile?.close();
    await opened.store?.close();
    releaseLock();
    throw error;
  }
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

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** Signals that stop the server gracefully, watched before anything is announced. */
function watchSignals(): { signalled: Promise<void>; stopNow: () => void; unwatch: () => void } {
  let stopNow = () => {};
  const signalled = new Promise<void>((resolve) => (stopNow = () => resolve()));
  const onSignal = () => stopNow();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signalled,
    stopNow,
    unwatch: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/** Why a start failed, as one line for the operator; undefined for a bug. */
function startFailure(error: unknown, config: Config): string | undefined {
  if (error instanceof CommandError) return error.message;
  const code = (error as NodeJS.ErrnoException).code;
  const address = `${config.host}:${config.port}`;
  if (code === 'EADDRINUSE') return `the address ${address} is already in use`;
  if (code === 'EACCES') return `no permission to listen on ${address}`;
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') return `cannot listen on ${config.host}: no such local address`;
  return undefined;
}

/**
 * `users-server [flags]`: serve until SIGINT or SIGTERM. Exit codes: 0 after
 * a graceful stop, 1 when it cannot start (data directory, lock, port, a
 * damaged journal) or when the journal failed to write, 2 for a bad flag or
 * value.
 */
export async function serve(argv: readonly string[], io: CommandIo): Promise<number> {
  let parsed;
  try {
    parsed = parseConfig(argv, io.env);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr.write(`users-server: ${error.message} (see --help)\n`);
    return 2;
  }
  if (parsed.help || parsed.version) {
    io.stdout.write((parsed.help ? usage() : version()) + '\n');
    return 0;
  }
  // Signals are watched first, so a stop asked for as soon as "listening on"
  // appears is still a graceful one. A journal that cannot sync stops the
  // server like a signal, but exits 1.
  const signals = watchSignals();
  let fatal = false;
  const onFatal = () => {
    fatal = true;
    signals.stopNow();
  };
  let running: RunningServer;
  try {
    running = await startServer(parsed.config, { env: io.env, onFatal, logError: (message) => io.stderr.write(message + '\n'), accessLog: stdoutSink(io) });
  } catch (error) {
    signals.unwatch();
    const message = startFailure(error, parsed.config);
    if (message === undefined) throw error;
    io.stderr.write(`users-server: ${message}\n`);
    return 1;
  }
  if (running.adminPasswordFile !== undefined) {
    io.stderr.write(`users-server: generated a password for the account "admin" in ${running.adminPasswordFile}\n`);
  }
  io.stdout.write(`listening on ${running.url}\n`);
  await signals.signalled;
  signals.unwatch();
  await running.stop();
  return fatal ? 1 : 0;
}
