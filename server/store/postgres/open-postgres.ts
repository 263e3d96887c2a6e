import { ServerCommandError, StoreUnavailableError } from '../../errors.js';
import {
  connect,
  DEFAULT_DB_POOL,
  describeFailure,
  needsPoolMode,
  DEFAULT_DB_TIMEOUT_SECONDS,
  isUnavailable,
  redactUrl,
  replacePool,
  withDeadline,
  type ConnectOptions,
  type Sql,
} from './driver.js';
import { PostgresStore } from './postgres-store.js';
import { checkNotNewer, migrate, schemaVersion, SCHEMA_VERSION } from './schema.js';

export interface PostgresOptions extends ConnectOptions {
  /** Seconds to keep trying to reach the database at start before giving up. */
  startWaitSeconds?: number;
  /** Aborted: stop waiting for the database now (a stop asked for during the start). */
  signal?: AbortSignal;
  /** How long a change stays in the feed of changes, in ms. */
  changesRetentionMs?: number;
  /** Users a filter with no sort and no count examines per request (scan-users.ts). */
  findBudget?: number;
  log: (message: string) => void;
}

export const DEFAULT_START_WAIT_SECONDS = 30;

/** What the commands (accounts, copy, migrate) give as `silenceSeconds`. */
export { COMMAND_SILENCE_SECONDS } from './driver.js';

/** How a connection string reads in messages: redacted, or the PG* variables. */
export function describeDatabase(url: string | undefined): string {
  return url === undefined ? 'the database of the PG* environment variables' : redactUrl(url);
}

/**
 * Connects (retrying for a bounded time while the database cannot be
 * reached, with one log line per attempt), makes sure the schema is this
 * users-server's (creating it in an empty database, upgrading an older
 * one, refusing a newer one) and returns the store.
 */
export async function openPostgresStore(url: string | undefined, options: PostgresOptions): Promise<PostgresStore> {
  const sql = await connect(url, options);
  try {
    const version = await waitForDatabase(sql, url, options);
    checkNotNewer(version);
    if (version < SCHEMA_VERSION) await upgrade(sql, url, version, options.log);
    const store = new PostgresStore(
      sql,
      options.max ?? DEFAULT_DB_POOL,
      options.timeoutSeconds ?? DEFAULT_DB_TIMEOUT_SECONDS,
      options.changesRetentionMs,
      { log: options.log, database: describeDatabase(url) },
      options.findBudget,
    );
    try {
      await firstFieldsRead(store, url, options);
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  } catch (error) {
    await sql.end({ timeout: 1 });
    throw error;
  }
}

/** When the start stops waiting for the database (--db-start-wait), in ms since the epoch. */
function startDeadline(options: PostgresOptions): number {
  return Date.now() + (options.startWaitSeconds ?? DEFAULT_START_WAIT_SECONDS) * 1000;
}

/** The pause before a start's next attempt: a second more each time, at most 5 s. */
function retryPauseMs(attempt: number): number {
  return Math.min(1000 * attempt, 5000);
}

/**
 * The declared fields, read again while the database is too busy to
 * answer within --db-timeout (a statement timeout on a loaded machine),
 * until the start wait ends: a start is not refused for one slow moment.
 */
async function firstFieldsRead(store: PostgresStore, url: string | undefined, options: PostgresOptions): Promise<void> {
  const deadline = startDeadline(options);
  for (let attempt = 1; ; attempt++) {
    try {
      return await store.refreshFields();
    } catch (error) {
      if (!(error instanceof StoreUnavailableError) || Date.now() >= deadline || options.signal?.aborted) throw error;
      options.log(`users-server: reading the declared fields of ${describeDatabase(url)} again (${error.message})`);
      await pause(retryPauseMs(attempt), options.signal);
    }
  }
}

/** The schema version, once the database answers; a ServerCommandError after the start wait. */
async function waitForDatabase(sql: Sql, url: string | undefined, options: PostgresOptions): Promise<number> {
  const deadline = startDeadline(options);
  const stopped = () => options.signal?.aborted === true;
  // An attempt that meets a silent connection (the network drops everything) ends like a refused one, on a fresh pool.
  const answerMs = ((options.timeoutSeconds ?? DEFAULT_DB_TIMEOUT_SECONDS) + 1) * 1000;
  for (let attempt = 1; ; attempt++) {
    try {
      return await untilAborted(
        withDeadline(schemaVersion(sql), answerMs, () => replacePool(sql)),
        options.signal,
      );
    } catch (error) {
      if (stopped()) throw new ServerCommandError(`stopped while waiting for ${describeDatabase(url)}`);
      const code = (error as { code?: string }).code ?? 'error';
      if (!isUnavailable(error) || needsPoolMode(error))
        throw new ServerCommandError(`cannot use ${describeDatabase(url)}: ${describeFailure(error)}`);
      if (Date.now() >= deadline) throw unreachable(url, code, options.startWaitSeconds ?? DEFAULT_START_WAIT_SECONDS);
      options.log(`users-server: waiting for ${describeDatabase(url)} (${code}), attempt ${attempt}`);
      await pause(retryPauseMs(attempt), options.signal);
      if (stopped()) throw new ServerCommandError(`stopped while waiting for ${describeDatabase(url)}`);
    }
  }
}

/** The database did not answer (a connection refused, a host not found), after waiting `seconds`: what to check. */
export function unreachable(url: string | undefined, code: string, seconds: number): ServerCommandError {
  const waited = seconds > 0 ? ` in ${seconds} s of waiting (--db-start-wait)` : '';
  return new ServerCommandError(
    `cannot reach ${describeDatabase(url)} (${code})${waited}: check that PostgreSQL runs there and that the URL (or PGHOST and PGPORT) names it`,
  );
}

/** `running`, or a rejection as soon as `signal` is aborted (a stop asked for during the start). */
function untilAborted<T>(running: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return running;
  let listener: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    listener = () => reject(new Error('stopped'));
    if (signal.aborted) listener();
    else signal.addEventListener('abort', listener, { once: true });
  });
  return Promise.race([running, aborted]).finally(() => signal.removeEventListener('abort', listener!));
}

/** Waits `ms`, or less once `signal` is aborted. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

async function upgrade(
  sql: Sql,
  url: string | undefined,
  version: number,
  log: (message: string) => void,
): Promise<void> {
  try {
    await migrate(sql, log);
  } catch (error) {
    // 42501 insufficient_privilege: the service may not change the schema.
    if ((error as { code?: string }).code !== '42501') throw error;
    throw new ServerCommandError(
      `${describeDatabase(url)} has schema version ${version}, this users-server needs ${SCHEMA_VERSION}, and it may not change the schema: run \`users-server migrate --store URL\` as a user who may`,
    );
  }
}
