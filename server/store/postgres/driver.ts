/**
 * The PostgreSQL driver, `postgres` (porsager): an optional peer dependency,
 * loaded with a dynamic import only when a PostgreSQL store is configured,
 * so the server keeps running on Node alone otherwise. This is the one file
 * of the server that names a package (test/zero-deps.test.ts allows it).
 */
import { connect as netConnect, type Socket } from 'node:net';
import type postgresDriver from 'postgres';
import { StoreUnavailableError, ServerUsageError } from '../../errors.js';

export type Sql = postgresDriver.Sql;
export type TransactionSql = postgresDriver.TransactionSql;
export type ReservedSql = postgresDriver.ReservedSql;

export interface ConnectOptions {
  /** Connections in the pool (`--db-pool`). */
  max?: number;
  /** Seconds a statement may run, and a connection may take to open (`--db-timeout`). */
  timeoutSeconds?: number;
  /** Seconds an unused connection stays open (60). */
  idleSeconds?: number;
  /** Queries after which the pool is replaced by a fresh one (RECYCLE_AFTER; tests set fewer). */
  recycleAfter?: number;
  /** Milliseconds before a replaced pool begins to end (RETIRE_DELAY_MS; tests set 0). */
  retireDelayMs?: number;
  /**
   * Commands only: a connection that waits this long for the database's
   * answer with nothing coming (a network gone silent) is closed, and what
   * it waited for fails. Not for the server, whose writes wait for their
   * outcome (docs/scaling.md) and whose reads have their own deadline.
   */
  silenceSeconds?: number;
}

/**
 * Queries after which the pool is replaced by one whose queues start empty:
 * the driver's (3.4.9) connection queues gain a slot per query while they
 * never empty, and each query searches one from its start (`remove` in
 * https://github.com/porsager/postgres/blob/v3.4.9/src/queue.js), so a busy
 * pool slows down the longer it runs (https://github.com/porsager/postgres/issues/747).
 */
export const RECYCLE_AFTER = 10_000;

/**
 * Seconds a replaced pool has at least to finish what it had begun: the
 * driver's end lets running queries and open transactions finish, closing
 * each connection as it falls idle, and closes whatever is left after
 * this, or after twice the statement timeout if that is longer (a query
 * may wait that long for one of the old pool's connections, then run).
 */
const RETIRE_SECONDS = 10;

/**
 * Milliseconds before a replaced pool is ended. The driver hands a query
 * to its pool a few promise turns after it was made, and refuses it once
 * the pool is ending: a query made on the old pool just before the
 * replacement must reach it first.
 */
const RETIRE_DELAY_MS = 1000;

export const DEFAULT_DB_POOL = 10;
export const DEFAULT_DB_TIMEOUT_SECONDS = 5;

/**
 * Seconds before a connection that closed with an error opens again, by
 * the count of such closes since the pool last connected (all of its
 * connections together). The driver's own delay grows as 3^n / 100 up to
 * 20 s: a restart of the database under load makes ten or more closes,
 * and with it requests would wait 2 to 6 s after the database accepts again.
 * Doubling from 10 ms and kept under RECONNECT_MAX_SECONDS, a pool is
 * back within that of the database, at the cost of a few refused
 * connection attempts a second while it is away.
 */
export function reconnectDelay(closes: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.01 * 2 ** closes, RECONNECT_MAX_SECONDS);
}

const RECONNECT_MAX_SECONDS = 0.25;

/**
 * Seconds a connection may take to open (less when --db-timeout is less).
 * A connection the driver opens while the database restarts can hang
 * until this limit (every restart under load leaves some), and the
 * requests queued on it with it: with --db-timeout's 5 s they would wait
 * 5 s after the database is back. A connection that really takes longer than
 * this to open (a database far away) is tried again at once.
 */
export const CONNECT_TIMEOUT_SECONDS = 0.9;

/** The install command named when the driver is missing. */
export const DRIVER_INSTALL = 'npm install postgres';

/**
 * A pool of connections to `url` (undefined: the standard PG* variables).
 * No connection is opened until the first query.
 */
export async function connect(url: string | undefined, options: ConnectOptions = {}): Promise<Sql> {
  let driver: typeof postgresDriver;
  try {
    driver = (await import('postgres')).default;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      throw new ServerUsageError(
        `the PostgreSQL store needs its driver, which is not installed: run \`${DRIVER_INSTALL}\` next to users-server`,
      );
    }
    throw error;
  }
  const timeout = options.timeoutSeconds ?? DEFAULT_DB_TIMEOUT_SECONDS;
  const { target, transactionPooling } = poolingOf(url);
  const reserves = new Reserves();
  const settings = {
    max: options.max ?? DEFAULT_DB_POOL,
    connect_timeout: Math.min(timeout, CONNECT_TIMEOUT_SECONDS),
    idle_timeout: options.idleSeconds ?? 60,
    backoff: reconnectDelay,
    onnotice: () => {},
    onclose: reserves.connectionClosed,
    socket: openSocket(options.silenceSeconds),
    // Named statements live in one session: behind transaction pooling, the next transaction may run
    // in another, so every statement is parsed where it runs (unnamed statements).
    prepare: !transactionPooling,
    connection: transactionPooling ? { application_name: APPLICATION_NAME } : sessionSettings(timeout),
  };
  const open = () => (target === undefined ? driver(settings) : driver(target, settings));
  heedArrayTypesFailures();
  const prologue = transactionPooling ? transactionSettings(timeout) : undefined;
  const retireSeconds = Math.max(RETIRE_SECONDS, 2 * timeout);
  const every = options.recycleAfter ?? RECYCLE_AFTER;
  const retireDelayMs = options.retireDelayMs ?? RETIRE_DELAY_MS;
  return recycling(open, { every, retireDelayMs, retireSeconds }, reserves, prologue);
}

/**
 * A command's `silenceSeconds`: its statements end within the database's statement timeout, and their answers a second
 * later.
 */
export const COMMAND_SILENCE_SECONDS = DEFAULT_DB_TIMEOUT_SECONDS + 1;

const APPLICATION_NAME = 'users-server';

/**
 * Settings sent when a connection opens, for its whole session. Generic
 * plans: PostgreSQL planned the GETs' statement anew at every run
 * otherwise (its ids are an array a custom plan can see), at twice the CPU.
 */
function sessionSettings(timeoutSeconds: number): Record<string, string | number> {
  const ms = timeoutSeconds * 1000;
  return {
    application_name: APPLICATION_NAME,
    plan_cache_mode: 'force_generic_plan',
    statement_timeout: ms,
    lock_timeout: ms,
  };
}

/**
 * The statement that gives one transaction the timeouts that
 * `sessionSettings` gives a session, for a pool whose sessions are shared
 * (transaction pooling): a pooler refuses, or drops, settings sent when a
 * connection opens, since the next client of the database's session would
 * inherit them.
 */
function transactionSettings(timeoutSeconds: number): string {
  const ms = String(Math.round(timeoutSeconds * 1000));
  return `select set_config('statement_timeout', '${ms}', true), set_config('lock_timeout', '${ms}', true)`;
}

/** The query parameter of a store URL that names the pooling of a pooler in front of the database. */
export const POOL_MODE_PARAMETER = 'pool_mode';

/**
 * What a store URL says of the pooler in front of the database: with
 * `?pool_mode=transaction` (pgbouncer's own name for its mode), each
 * transaction may run in another database session, so nothing may rely on
 * a session (`session`, or no parameter: a database, or a pooler that
 * keeps one session per client). The URL is returned without the
 * parameter, which the driver would otherwise send as a setting.
 */
export function poolingOf(url: string | undefined): { target: string | undefined; transactionPooling: boolean } {
  if (url === undefined) return { target: url, transactionPooling: false };
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { target: url, transactionPooling: false };
  }
  const mode = parsed.searchParams.get(POOL_MODE_PARAMETER);
  if (mode === null) return { target: url, transactionPooling: false };
  if (mode !== 'transaction' && mode !== 'session') {
    throw new ServerUsageError(
      `${POOL_MODE_PARAMETER}=${mode} in the store URL: users-server runs behind a pooler in transaction or session mode (${POOL_MODE_PARAMETER}=transaction or ${POOL_MODE_PARAMETER}=session), not statement mode, which refuses transactions`,
    );
  }
  parsed.searchParams.delete(POOL_MODE_PARAMETER);
  return { target: parsed.toString(), transactionPooling: mode === 'transaction' };
}

/**
 * A pool that is replaced by a fresh one (`open`) after `every` calls:
 * later queries and transactions go to the new pool, and the old one is
 * ended once a moment has passed (`retireDelayMs`) and every connection
 * reserved of it is back, which lets what it had begun finish
 * (`retireSeconds` in all; a connection lost while reserved is never
 * released, and its pool is then closed at once after `retireSeconds`).
 * Everything else (`begin`, helpers) goes to the pool in use, `reserve`
 * through `reserves`; `end` ends the retiring pools too.
 */
function recycling(
  open: () => Sql,
  { every, retireDelayMs, retireSeconds }: { every: number; retireDelayMs: number; retireSeconds: number },
  reserves: Reserves,
  prologue: string | undefined,
): Sql {
  let current = open();
  let calls = 0;
  const retiring = new Map<Sql, NodeJS.Timeout>();
  const retire = (pool: Sql, options: { timeout?: number }) => {
    clearTimeout(retiring.get(pool));
    retiring.delete(pool);
    reserves.forget(pool);
    return pool.end(options);
  };
  const renew = () => {
    const old = current;
    current = open();
    calls = 0;
    // Nothing waits on a retired pool's end: one that fails (its database gone meanwhile) is no one's failure.
    const later = (options: { timeout: number }) => void retire(old, options).catch(() => {});
    const whenReturned = () => {
      const endBy = Date.now() + retireSeconds * 1000;
      const deadline = setTimeout(() => later({ timeout: 0 }), retireSeconds * 1000).unref();
      retiring.set(old, deadline);
      const inTime = () => retiring.get(old) === deadline && later({ timeout: Math.max(0, endBy - Date.now()) / 1000 });
      void reserves.returned(old).then(inTime);
    };
    retiring.set(old, setTimeout(whenReturned, retireDelayMs).unref());
  };
  const end = async (options: { timeout?: number } = {}) => {
    await Promise.all([current, ...retiring.keys()].map((pool) => retire(pool, options)));
  };
  return new Proxy(current, {
    apply(_target, thisArg, args) {
      if (++calls > every) renew();
      return Reflect.apply(current, thisArg, args);
    },
    get(_target, property) {
      if (property === 'end') return end;
      if (property === REPLACE) return renew;
      if ((property === 'begin' || property === 'reserve') && ++calls > every) renew();
      if (property === 'reserve') return () => reserves.reserve(() => current);
      if (property === PROLOGUE) return prologue;
      if (property === 'begin' && prologue !== undefined) return beginWith(current, prologue);
      return Reflect.get(current, property);
    },
  });
}

/** The recycling pool's own replacement, for `replacePool`. */
const REPLACE = Symbol('users-server.replace-pool');

/** The recycling pool's statement for the start of every transaction, for `transactionPrologue`. */
const PROLOGUE = Symbol('users-server.transaction-prologue');

/**
 * The statement to run first in every transaction on `pool` (a pool of
 * `connect` behind transaction pooling: the timeouts), or undefined.
 */
export function transactionPrologue(pool: Sql): string | undefined {
  return (pool as unknown as { [PROLOGUE]?: string })[PROLOGUE];
}

/** The driver's `begin` on `pool`, with `prologue` run first in each transaction. */
function beginWith(pool: Sql, prologue: string): Sql['begin'] {
  return ((...args: unknown[]) => {
    const run = args.pop() as (tx: TransactionSql) => unknown;
    return (pool.begin as (...a: unknown[]) => unknown)(...args, async (tx: TransactionSql) => {
      await tx.unsafe(prologue);
      return run(tx);
    });
  }) as Sql['begin'];
}

/**
 * Replaces the pool of `connect` with a fresh one at once (the old one is
 * retired as after RECYCLE_AFTER queries): for a pool whose connections no
 * longer answer (`withDeadline`).
 */
export function replacePool(pool: Sql): void {
  (pool as unknown as { [REPLACE]?: () => void })[REPLACE]?.();
}

/**
 * `running`, or a failure with code DEADLINE_MISSED once `ms` have passed:
 * a read whose connection went silent (a network that drops packets
 * without closing the connection, or one of the driver's own stalls after
 * the database ended many sessions at once) would otherwise wait for ever,
 * since neither the database's statement timeout nor the driver's connect
 * timeout can end it. `missed` is called then (the caller replaces the
 * pool). Reads only: a write told it failed must not commit later.
 */
export function withDeadline<T>(running: Promise<T>, ms: number, missed: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      missed();
      reject(new DeadlineMissedError(`no answer from the database in ${ms} ms`));
    }, ms);
  });
  return Promise.race([running, deadline]).finally(() => clearTimeout(timer));
}

/** The code of `withDeadline`'s and `watchSilence`'s failure. */
const DEADLINE_MISSED = 'DEADLINE_MISSED';

/**
 * The database left a question unanswered past a deadline (`withDeadline`,
 * `watchSilence`). It carries a code as the driver's and the socket's
 * failures do, so `isUnavailable` tells it by its code like theirs.
 */
class DeadlineMissedError extends Error {
  override readonly name = 'DeadlineMissedError';
  readonly code = DEADLINE_MISSED;
}

/**
 * The pool's reserves, each asked again when a connection of the pool
 * closes while it waits. The driver (3.4.9) hands a reserve waiting in its
 * queue to the reconnection of a connection that closed, and the
 * reconnection drops it, so that the reserve never settles
 * (porsager/postgres#1195): a reserve waiting for a busy pool when the
 * database ends a session, or the reserve that opened a connection cut
 * while it fetched the array types. The first connection to come is used;
 * one that comes after it is released at once.
 */
class Reserves {
  /** The ask of each reserve that has not settled. */
  private readonly waiting = new Set<() => void>();
  private askingAgain = false;
  /** Per pool, the reserves asked of it and not yet released or failed, and who waits for none to be left. */
  private readonly lent = new Map<Sql, { count: number; returned: (() => void)[] }>();

  /**
   * Resolves once every connection reserved of `pool` is released: the
   * driver (3.4.9) never closes one released after its pool began to end,
   * and that end then waits for its whole timeout.
   */
  returned(pool: Sql): Promise<void> {
    const loans = this.lent.get(pool);
    if (loans === undefined) return Promise.resolve();
    return new Promise((resolve) => loans.returned.push(resolve));
  }

  /** Stops counting `pool`'s reserves: it is ending, and a connection lost while reserved is never released. */
  forget(pool: Sql): void {
    this.lent.delete(pool);
  }

  /** Counts a reserve asked of `pool`; returns what gives it back, once however often it is called. */
  private lend(pool: Sql): () => void {
    const loans = this.lent.get(pool) ?? { count: 0, returned: [] };
    loans.count += 1;
    this.lent.set(pool, loans);
    let out = true;
    return () => {
      if (!out) return;
      out = false;
      this.giveBack(pool);
    };
  }

  private giveBack(pool: Sql): void {
    const loans = this.lent.get(pool);
    if (loans === undefined || --loans.count > 0) return;
    this.lent.delete(pool);
    for (const resolve of loans.returned) resolve();
  }

  /** The driver's `onclose`: the waiting reserves are asked again once the driver has passed one on (a turn later). */
  readonly connectionClosed = (): void => {
    if (this.askingAgain || this.waiting.size === 0) return;
    this.askingAgain = true;
    setImmediate(() => {
      this.askingAgain = false;
      for (const ask of [...this.waiting]) ask();
    });
  };

  /**
   * A connection of `pool()` (the pool in use at each ask), reserved: the driver's `reserve`, asked again after a
   * close. A failure of any ask fails it.
   */
  reserve(pool: () => Sql): Promise<ReservedSql> {
    return new Promise((resolve, reject) => {
      let settled = false;
      /** What gives back each ask's reserve: an ask the driver dropped never settles, and goes back with this. */
      const loans: (() => void)[] = [];
      const settle = (kept?: () => void) => {
        settled = true;
        this.waiting.delete(ask);
        for (const back of loans) if (back !== kept) back();
      };
      const ask = () => {
        const from = pool();
        const back = this.lend(from);
        loans.push(back);
        from.reserve().then(
          (connection) => {
            const lent = givenBackOnRelease(connection, back);
            if (settled) return lent.release();
            settle(back);
            resolve(lent);
          },
          (error: unknown) => {
            back();
            if (settled) return;
            settle();
            reject(error);
          },
        );
      };
      this.waiting.add(ask);
      ask();
    });
  }
}

/** `connection`, whose release also gives back its loan. */
function givenBackOnRelease(connection: ReservedSql, back: () => void): ReservedSql {
  const release = connection.release.bind(connection);
  connection.release = () => {
    release();
    back();
  };
  return connection;
}

/** The driver's own query for the array types: `from pg_catalog.pg_type a ... where a.typcategory = 'A'`. */
const ARRAY_TYPES_QUERY = /from pg_catalog\.pg_type a\b[\s\S]*\btypcategory = 'A'/;

let arrayTypesHeeded = false;

/**
 * The driver (3.4.9) runs a query of its own on every new connection, for
 * the array types, and leaves its promise unhandled: a connection cut while
 * that query runs (the database stopped, a backend terminated, the network
 * dropped) rejects it with nobody listening, and Node ends the process.
 * Nothing is lost then: the connection is gone, and the driver opens
 * another for whatever waited on it. So that rejection, and only it, is
 * heard here, once per process; any other unhandled rejection is thrown
 * again and ends the process as it would without this listener.
 * (`fetch_types: false` would avoid the query, but then the driver never
 * hands out a connection that `reserve()` had to open.)
 */
function heedArrayTypesFailures(): void {
  if (arrayTypesHeeded) return;
  arrayTypesHeeded = true;
  process.on('unhandledRejection', (reason) => {
    if (!isArrayTypesFailure(reason)) throw reason;
  });
}

/**
 * True for a failure of the driver's array-types query because its connection is gone or the database is unavailable.
 */
function isArrayTypesFailure(reason: unknown): boolean {
  const query = (reason as { query?: unknown } | null)?.query;
  return typeof query === 'string' && ARRAY_TYPES_QUERY.test(query) && isUnavailable(reason);
}

/** Where the driver says a connection goes: its hosts and ports in turn, or a Unix socket. */
interface SocketTarget {
  host: string[];
  port: number[];
  path?: string | false;
}

/**
 * The driver's sockets, opened here so that TCP ones have Nagle's algorithm
 * off (the driver leaves it on): a query and its reply are small writes, and
 * with it on a transaction's later statements wait for the delayed ACK of the
 * earlier ones, tens of milliseconds each. The socket is returned connecting;
 * its writes wait for the connection, its errors reach the driver as its own
 * sockets' do. Several hosts are tried in turn, as the driver does.
 */
function openSocket(silenceSeconds: number | undefined): (target: SocketTarget) => Socket {
  let next = 0;
  const open = (target: SocketTarget): Socket => {
    if (typeof target.path === 'string' && target.path !== '') return netConnect({ path: target.path });
    const i = next++ % target.host.length;
    const host = target.host[i]!;
    const port = target.port[i] ?? target.port[0]!;
    // host and port as the driver's own sockets carry them (TLS server name, messages).
    return Object.assign(netConnect({ host, port, noDelay: true }), { host, port });
  };
  return silenceSeconds === undefined ? open : (target) => watchSilence(open(target), silenceSeconds * 1000);
}

/** The last message of every answer of the database: ReadyForQuery, 'Z', length 5, then the transaction status. */
const READY_FOR_QUERY = Buffer.from([0x5a, 0, 0, 0, 5]);

/** The request codes of SSLRequest and GSSENCRequest: what follows on the socket is encrypted. */
const ENCRYPTION_REQUESTS = new Set([80877103, 80877104]);

/**
 * Closes `socket` when the database leaves a request unanswered for `ms`:
 * the clock runs from what the driver writes until the answer's end
 * (ReadyForQuery), and starts again at each piece of the answer, so a long
 * answer that keeps coming is never cut; an idle connection has no clock.
 * A connection that asks for TLS is not watched: its answers cannot be
 * read here.
 */
function watchSilence(socket: Socket, ms: number): Socket {
  let timer: NodeJS.Timeout | undefined;
  let tail = Buffer.alloc(0);
  let watched = true;
  const arm = () => {
    clearTimeout(timer);
    if (watched)
      timer = setTimeout(
        () => socket.destroy(new DeadlineMissedError(`no answer from the database in ${ms / 1000} s`)),
        ms,
      );
  };
  const write = socket.write;
  socket.write = function (this: Socket, ...args: Parameters<Socket['write']>) {
    const chunk = args[0];
    if (Buffer.isBuffer(chunk) && chunk.length === 8 && ENCRYPTION_REQUESTS.has(chunk.readInt32BE(4))) watched = false;
    arm();
    return write.apply(this, args);
  } as Socket['write'];
  socket.on('data', (chunk: Buffer) => {
    // The end of an answer can come split over two reads: the last six bytes seen are kept.
    tail = Buffer.concat([tail, chunk.subarray(-6)]).subarray(-6);
    if (tail.length === 6 && tail.subarray(0, 5).equals(READY_FOR_QUERY)) clearTimeout(timer);
    else arm();
  });
  socket.on('close', () => clearTimeout(timer));
  return socket;
}

/** `url` with its password replaced by `***`: what logs, messages and --help may show. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
  }
}

// SQLSTATE classes and driver codes that mean "not now" rather than "wrong":
// 08 connection exception, 53 insufficient resources, 57P01..03 shutdown
// or not accepting connections, 57014 statement timeout (query_canceled),
// 55P03 lock timeout.
const UNAVAILABLE_STATES = /^(08...|53...|57P0[1-3]|57014|55P03)$/;
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  DEADLINE_MISSED,
]);

/**
 * The driver's or the socket's code of a failure (a SQLSTATE, CONNECTION_CLOSED, ECONNRESET, ...); undefined for none.
 */
function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** True for a failure that a retry a moment later could fix: the database is out of reach or too busy. */
export function isUnavailable(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && (UNAVAILABLE_CODES.has(code) || UNAVAILABLE_STATES.test(code));
}

/** The SQLSTATEs a server sends as it ends a session: class 08, and 57P01..03 (shutdown, crash, not accepting). */
const SESSION_ENDED_STATES = /^(08...|57P0[1-3])$/;

/** The driver's and the socket's codes of an open connection that was dropped. */
const DROPPED_CODES = new Set(['CONNECTION_CLOSED', 'ECONNRESET', 'EPIPE']);

/**
 * True when `error` means the connection itself is gone (the driver's
 * close codes, a socket error, or a server that ended the session: class
 * 08, 57P01..03). The driver has then taken the connection back into its
 * pool by itself; nothing more may be sent on it.
 */
export function isConnectionLost(error: unknown): boolean {
  const code = codeOf(error);
  return (
    code !== undefined &&
    (SESSION_ENDED_STATES.test(code) ||
      (UNAVAILABLE_CODES.has(code) && code !== 'CONNECT_TIMEOUT' && code !== DEADLINE_MISSED))
  );
}

/**
 * Runs `run` (a read, or what sends nothing before it fails) again while it
 * fails on a dropped connection, at most twice `poolSize` more times.
 * After the database ends its sessions (a restart, a failover,
 * `pg_terminate_backend`), the driver (3.4.9) still hands out each
 * connection until its close is read, and a statement given to it fails
 * with CONNECTION_CLOSED; it also keeps the error the server sent as it
 * ended the session and gives it again to the first statement of that
 * connection's next session. Neither statement ran, and each connection
 * fails at most these two times: without the retries, every connection of
 * the pool would fail one or two more requests after the database is
 * back. A connection that does not open within CONNECT_TIMEOUT_SECONDS is
 * tried again, since nothing was sent on it, while `waitSeconds` (the
 * pool's --db-timeout) leave room for one more opening: a moment of load,
 * or this process's event loop held past the timer, makes a healthy
 * database miss so short a limit, once or several times in a row. A
 * database that cannot be reached fails otherwise (refused at once, or
 * silent until `waitSeconds`).
 */
export async function againIfDropped<T>(
  run: () => Promise<T>,
  poolSize: number,
  waitSeconds = DEFAULT_DB_TIMEOUT_SECONDS,
): Promise<T> {
  const openBy = performance.now() + (waitSeconds - CONNECT_TIMEOUT_SECONDS) * 1000;
  for (let attempt = 0; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (codeOf(error) === 'CONNECT_TIMEOUT' && performance.now() < openBy) continue;
      if (!wasDropped(error) || attempt >= 2 * poolSize) throw error;
    }
  }
}

/**
 * True when `error` is an open connection dropped under a statement, which therefore did not run (not one that could
 * not be opened).
 */
function wasDropped(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && (SESSION_ENDED_STATES.test(code) || DROPPED_CODES.has(code));
}

/** SQLSTATEs of a transaction that lost a race and should run again: serialization, deadlock, unique violation. */
export function isRetryable(error: unknown): boolean {
  const code = codeOf(error);
  return code === '40001' || code === '40P01' || code === '23505';
}

/** pgbouncer's refusal of a setting sent when a connection opens: it keeps no session per client. */
const UNSUPPORTED_STARTUP = /unsupported startup parameter/;

/** True when `error` is a pooler's refusal that `?pool_mode=transaction` avoids. */
export function needsPoolMode(error: unknown): boolean {
  return UNSUPPORTED_STARTUP.test((error as Error | null)?.message ?? '');
}

/**
 * A database failure in one line for a command's message: its code and text, and what to change when a pooler refused
 * the connection.
 */
export function describeFailure(error: unknown): string {
  const line = `${codeOf(error) ?? ''} ${(error as Error).message}`.replace(/\s+/g, ' ').trim();
  return needsPoolMode(error)
    ? `${line}; behind pgbouncer in transaction pooling mode, add ?${POOL_MODE_PARAMETER}=transaction to the store URL (docs/scaling.md)`
    : line;
}

/** The error a request is answered with when the database failed it. */
export function unavailable(error: unknown): Error {
  if (!isUnavailable(error)) return error as Error;
  const code = (error as { code: string }).code;
  return new StoreUnavailableError(`The database did not answer (${code}); retry shortly.`, { cause: error });
}
