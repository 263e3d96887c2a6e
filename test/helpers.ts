import { EventEmitter, once } from 'node:events';
import { PassThrough, Readable } from 'node:stream';
import { exitOnInterrupt } from './children.js';
import { main } from '../server/main.js';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { problemType, PROBLEM_CONTENT_TYPE } from '../shared/problems.js';
import { ServerUsageError } from '../server/errors.js';
import { isPostgresStore } from '../server/ops/config.js';
import { updateAdminIdentity } from '../server/ops/data-dir.js';
import { parseConfig, type Config } from '../server/ops/config.js';
import { startServer, type RunningServer, type StartOptions } from '../server/commands/serve.js';
import {
  newAccountId,
  serializeAccount,
  writeAccountsFile,
  type AccountRecord,
} from '../server/security/accounts-file.js';
import { hashPassword, type Role, type ScryptFunction } from '../server/security/credentials.js';

export const ADMIN_PASSWORD = 'test-admin-password';

// Temp folders (data directories among them) go to a RAM file system when
// the machine has one: an fsync there costs nothing, and no test simulates
// a power cut, which is all a disk would add. Children inherit TMPDIR.
// TMPDIR set by the caller wins.
if (process.env.TMPDIR === undefined && existsSync('/dev/shm')) process.env.TMPDIR = '/dev/shm';

// A machine may name a CA bundle for every node process to load
// (NODE_EXTRA_CA_CERTS, often the system's whole bundle): each node child
// then parses some 140 certificates before its first line, about 70 ms of
// CPU, several hundred times per run. The tests' servers are on loopback
// and trust their own test CA explicitly, so children start without it.
delete process.env.NODE_EXTRA_CA_CERTS;

export interface TestServer {
  url: string;
  dataDir: string;
  running: RunningServer;
  /** Logs in as admin and returns the Cookie header value to send. */
  login(user?: string, password?: string): Promise<string>;
  /** Resolves when the server next re-reads a changed accounts file (its poll, or a login). */
  nextAccountsReload(): Promise<void>;
  /** The built-in admin's account id (what its sessions carry), as the server keeps it. */
  adminAccountId(): Promise<string>;
}

/**
 * Temp directories not yet removed: whatever a test leaves is removed when the process exits, also when it is
 * interrupted.
 */
const tempDirs = new Set<string>();
process.once('exit', () => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});
exitOnInterrupt();

interface TestAccount {
  name: string;
  role: Role;
  password: string;
}

export interface TestStartOptions extends StartOptions {
  /** Accounts besides admin, written to <data>/accounts (cheap hashes) before the start. */
  accounts?: readonly TestAccount[];
}

/** Writes `accounts` as the accounts command would, with the cheapest hashes. */
async function writeTestAccounts(
  dataDir: string,
  accounts: readonly TestAccount[],
  scrypt?: ScryptFunction,
): Promise<void> {
  const records: AccountRecord[] = [];
  for (const a of accounts) {
    const password = await hashPassword(a.password, { cost: 1, ...(scrypt && { scrypt }) });
    records.push({ name: a.name, role: a.role, id: newAccountId(), created: new Date(0).toISOString(), password });
  }
  writeAccountsFile(dataDir, records);
}

/** The same into a PostgreSQL database, where a server on it reads its accounts. */
async function writeDatabaseAccounts(
  url: string,
  accounts: readonly TestAccount[],
  scrypt?: ScryptFunction,
): Promise<void> {
  const { connect } = await import('../server/store/postgres/driver.js');
  const { PostgresSettings } = await import('../server/store/postgres/shared-settings.js');
  const sql = await connect(url, { max: 1 });
  try {
    const lines: [string, string][] = [];
    for (const a of accounts) {
      const password = await hashPassword(a.password, { cost: 1, ...(scrypt && { scrypt }) });
      lines.push([
        a.name,
        serializeAccount({
          name: a.name,
          role: a.role,
          id: newAccountId(),
          created: new Date(0).toISOString(),
          password,
        }),
      ]);
    }
    await new PostgresSettings(sql).updateAccountRecords((records) => {
      for (const [name, line] of lines) records.set(name, line);
    });
  } finally {
    await sql.end();
  }
}

/** A fresh mkdtemp directory, removed after the test (or, without one, when the process exits). */
export function tempDir(t: TestContext | undefined, prefix = 'users-server-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.add(dir);
  t?.after(() => {
    rmSync(dir, { recursive: true, force: true });
    tempDirs.delete(dir);
  });
  return dir;
}

/**
 * The harness's embedded defaults: the memory store and the cheapest
 * password hashing. A test about durability asks for `store: 'journal'`
 * (or names its `data` directory), one about passwords for a real
 * `passwordCost`. Every test client comes from 127.0.0.1, and some open
 * hundreds of connections at once: the per-client connection limit is off
 * unless a test is about it (its tests set it). Most tests are about the
 * resource, not about who may use it: /users is open (`--require-session
 * none`) unless a test is about access (it sets `requireSession`); the
 * binaries' stories run with the product's default, `all`.
 */
export const TEST_DEFAULTS: Partial<Config> = {
  host: '127.0.0.1',
  port: 0,
  store: 'memory',
  passwordCost: 1,
  logFormat: 'off',
  maxConnectionsPerClient: 0,
  requireSession: 'none',
  // A queue of concurrent creates on the id counter's lock can pass the shipped 5 s on a loaded
  // machine; a statement's time is not what most tests check, and those about it set their own.
  dbTimeout: 60,
};

/**
 * What the product ships with where TEST_DEFAULTS differ on purpose: for the stories of the README and the docs, run as
 * a new user meets them.
 */
export const AS_SHIPPED: Partial<Config> = { requireSession: parseConfig([], {}).config.requireSession };

/**
 * The store of a test that does not ask for one: the memory store, or with
 * USERS_TEST_STORE=postgres a fresh database of the test cluster, so the
 * whole suite runs on PostgreSQL too.
 */
async function defaultStore(t: TestContext): Promise<string> {
  const kind = process.env.USERS_TEST_STORE ?? 'memory';
  if (kind === 'memory') return 'memory';
  if (kind !== 'postgres') throw new Error(`USERS_TEST_STORE must be memory or postgres, not ${kind}`);
  const { testDatabase } = await import('./postgres.js');
  return testDatabase(t);
}

/**
 * Starts the server in this process on 127.0.0.1, port 0, with a fresh data
 * directory, and stops it after the test. `overrides` replace the defaults
 * (the access log would write into the test runner's stdout: off unless a
 * test asks for it).
 */
export async function startTestServer(
  t: TestContext,
  overrides: Partial<Config> = {},
  options: TestStartOptions = {},
): Promise<TestServer> {
  const dataDir = overrides.data ?? tempDir(t);
  const { config } = parseConfig([], {});
  // A test that names its data directory is about what is in it: the journal.
  const store = overrides.store ?? (overrides.data !== undefined ? 'journal' : await defaultStore(t));
  if (options.accounts !== undefined) {
    if (isPostgresStore(store)) await writeDatabaseAccounts(store, options.accounts, options.scrypt);
    else await writeTestAccounts(dataDir, options.accounts, options.scrypt);
  }
  const reloads = new EventEmitter();
  const running = await startServer(
    { ...config, ...TEST_DEFAULTS, store, data: dataDir, ...overrides },
    {
      env: { USERS_ADMIN_PASSWORD: ADMIN_PASSWORD },
      logError: () => {},
      log: () => {},
      onAccountsReload: () => reloads.emit('reload'),
      ...options,
    },
  );
  t.after(() => running.stop());
  const url = running.url;
  return {
    url,
    dataDir,
    running,
    nextAccountsReload: () => once(reloads, 'reload').then(() => {}),
    async adminAccountId() {
      const keep = (kept: string | undefined) => kept ?? '';
      const record =
        running.store.shared === undefined
          ? updateAdminIdentity(dataDir, keep)
          : await running.store.shared.updateAdminIdentity(keep);
      return (JSON.parse(record) as { id: string }).id;
    },
    async login(user = 'admin', password = ADMIN_PASSWORD) {
      const res = await send(url, 'POST', '/login', { headers: { authorization: basic(user, password) } });
      if (res.status !== 200) throw new Error(`login failed: ${res.status} ${res.text}`);
      return cookiePair(res.headers['set-cookie']);
    },
  };
}

/**
 * Runs `body` on a tmpfs of `size` (mount's size=, "4m") mounted for it
 * (root only), unmounted after it whatever happens; skips the test with the
 * reason when it cannot mount: a real full disk.
 */
export async function onSmallDisk(t: TestContext, size: string, body: (disk: string) => Promise<void>): Promise<void> {
  if (process.getuid?.() !== 0) return t.skip('mounting a tmpfs needs root');
  const disk = join(tempDir(t), 'disk');
  mkdirSync(disk);
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', disk]);
  if (mounted.status !== 0) return t.skip(`mount -t tmpfs failed: ${mounted.stderr.toString().trim()}`);
  try {
    await body(disk);
  } finally {
    spawnSync('umount', ['-l', disk]);
  }
}

export function basic(user: string, password: string): string {
  return 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
}

/** "USER_TOKEN=value" from a Set-Cookie field. */
export function cookiePair(setCookie: string | string[] | undefined): string {
  const first = Array.isArray(setCookie) ? setCookie[0] : setCookie;
  if (first === undefined) throw new Error('no Set-Cookie');
  return first.split(';')[0]!;
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  /**
   * The body parsed as JSON, as `any`: a test reads its fields directly (`reply.json().id`), and its assertions check
   * them.
   */
  json(): any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

interface SendOptions {
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
  /** Shorthand: JSON-serialize and send as application/json. */
  json?: unknown;
  /** The address the request comes from (another loopback address is another client; see `canUseSecondLoopback`). */
  localAddress?: string;
}

/** One HTTP request over a real socket (no keep-alive); the whole body is read. */
export function send(base: string, method: string, path: string, options: SendOptions = {}): Promise<Reply> {
  const headers: Record<string, string | string[]> = { ...options.headers };
  let body = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] ??= 'application/json';
  }
  return new Promise((resolve, reject) => {
    // The path goes out verbatim: a WHATWG URL would resolve `%2e%2e` and friends before sending.
    const { hostname, port } = new URL(base);
    const from = options.localAddress === undefined ? {} : { localAddress: options.localAddress };
    // A URL brackets an IPv6 address; a socket is given it bare.
    const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
    const req = httpRequest({ host, port, path, method, headers, agent: false, ...from }, (res) =>
      readReply(res, resolve, reject),
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Whether this machine routes 127.0.0.2 to the loopback (Linux does; macOS only with an alias). */
export function canUseSecondLoopback(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port), localAddress: '127.0.0.2' });
    socket.on('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/** Reads a whole response into a Reply. */
export function readReply(res: IncomingMessage, resolve: (reply: Reply) => void, reject: (error: Error) => void): void {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => {
    const text = Buffer.concat(chunks).toString('utf8');
    resolve({ status: res.statusCode!, headers: res.headers, text, json: () => JSON.parse(text) });
  });
  res.on('error', reject);
}

/** Shorthand for a PUT of a JSON body. */
export function put(base: string, path: string, json: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  return send(base, 'PUT', path, { json, headers });
}

/**
 * Writes raw bytes to the server and returns everything it answers, once it
 * closes the connection (send `Connection: close`, or bytes it refuses).
 */
export function rawExchange(base: string, bytes: string | Buffer): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    const finish = () => {
      socket.destroy();
      resolve(Buffer.concat(chunks).toString('latin1'));
    };
    socket.on('connect', () => socket.write(bytes));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('end', finish);
    socket.on('close', finish);
    socket.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' ? finish() : reject(error)));
  });
}

/**
 * Asserts an application/problem+json answer of `status` whose type is the
 * catalog entry `code`, and returns the parsed document.
 */
export function assertProblem(
  reply: { status: number; headers: Record<string, string | string[] | undefined>; text: string },
  status: number,
  code: string,
  where = '',
): Record<string, unknown> {
  const label = where === '' ? '' : `${where}: `;
  assert.equal(reply.status, status, `${label}expected ${status} ${code}, got ${reply.status}: ${reply.text}`);
  assert.equal(reply.headers['content-type'], PROBLEM_CONTENT_TYPE, `${label}Content-Type`);
  const doc = JSON.parse(reply.text) as Record<string, unknown>;
  assert.equal(doc.type, problemType({ code, status, title: '' }), `${label}type`);
  assert.equal(doc.status, status, `${label}status member`);
  assert.equal(typeof doc.title, 'string', `${label}title member`);
  assert.equal(typeof doc.detail, 'string', `${label}detail member`);
  return doc;
}

/** The body of GET /users?limit=1000, a compact picture of the whole state. */
export async function listText(server: { url: string }): Promise<string> {
  const list = await send(server.url, 'GET', '/users?limit=1000');
  assert.equal(list.status, 200);
  return list.text;
}

const REPO = fileURLToPath(new URL('..', import.meta.url));

/** Newest modification time of the sources under `dir`: TypeScript, and the console's HTML and CSS. */
function newestSource(dir: string): number {
  if (!existsSync(dir)) return 0;
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (/\.(?:ts|html|css)$/.test(entry.name)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * For tests that run the real `bin/` executables, which run dist/:
 * rebuilds dist/ when it is older than server/, cli/, shared/ or console/. Returns why the
 * test must skip when the build fails, else undefined.
 */
export function buildIfStale(): string | undefined {
  const outputs = [
    join(REPO, 'dist', 'users-server', 'main.js'),
    join(REPO, 'dist', 'usersctl', 'main.js'),
    join(REPO, 'dist', 'console', 'index.html'),
  ];
  const built = Math.min(...outputs.map((file) => (existsSync(file) ? statSync(file).mtimeMs : 0)));
  const stale = built < Math.max(...['server', 'shared', 'cli', 'console'].map((d) => newestSource(join(REPO, d))));
  if (!stale) return undefined;
  try {
    execFileSync('npm', ['run', 'build'], { cwd: REPO, stdio: 'pipe' });
    return undefined;
  } catch (error) {
    const e = error as { stdout?: Buffer; stderr?: Buffer; message: string };
    return `dist/ is older than the sources and \`npm run build\` failed: ${(e.stdout?.toString() ?? '') + (e.stderr?.toString() ?? '') || e.message}`.trim();
  }
}

interface CommandRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the users-server executable's `main` (server/main.ts) in this
 * process, as bin/users-server.js does, with `env` alone as its environment
 * (the password cost the cheapest unless `env` sets it), `stdin` as a pipe,
 * and its output collected. For commands that end by themselves: a start
 * that fails, --help, `accounts`, `repair`.
 */
export async function runUsersServer(
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; stdin?: string } = {},
): Promise<CommandRun> {
  let stdout = '';
  let stderr = '';
  const sink = (append: (s: string) => void) =>
    Object.assign(new PassThrough(), { write: (chunk: string) => (append(String(chunk)), true) });
  const code = await main(args, {
    stdout: sink((s) => (stdout += s)),
    stderr: sink((s) => (stderr += s)),
    stdin: Readable.from([Buffer.from(options.stdin ?? '')]),
    env: { USERS_PASSWORD_COST: '1', ...options.env },
  });
  return { code, stdout, stderr };
}

/** A `users-server` started by `startUsersServer`: what a test reads of a server child, and its signals. */
interface ServingCommand {
  url: string;
  port: number;
  /** This process's: the one that holds the data directory's lock. */
  pid: number;
  stdout(): string;
  stderr(): string;
  /** The first line of `stream` matching `pattern`, once written; rejects if the command ends first. */
  waitForLine(pattern: RegExp, stream?: 'stdout' | 'stderr'): Promise<RegExpExecArray>;
  /** What a signal to the process does: SIGTERM or SIGINT stops it, SIGHUP reads the accounts again. */
  kill(signal?: 'SIGTERM' | 'SIGINT' | 'SIGHUP'): void;
  /**
   * Resolves with the exit code once the command has ended (no signal ends it: the field is there to read like a
   * child's).
   */
  readonly exited: Promise<{ code: number; signal: null }>;
}

/**
 * Runs `users-server ARGS` (the executable's `main`) in this process until
 * `kill` stops it, or the test ends (SIGTERM); resolves once it prints
 * "listening on". Its environment is `env` alone, over the defaults of
 * `spawnUsersServer` (the test admin password, the cheapest hashing,
 * /users open); a variable set to undefined is left out. For the stories of
 * the command line that are not about the process itself (its exit status
 * as the shell sees it, real signals, its pid in a lock, kill -9): those
 * run `bin/users-server.js` (processes.ts). `args` name the data directory
 * or the store: the default ./data would be the repository's.
 */
export async function startUsersServer(
  t: TestContext,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv } = {},
): Promise<ServingCommand> {
  const env: NodeJS.ProcessEnv = {
    USERS_ADMIN_PASSWORD: ADMIN_PASSWORD,
    USERS_PASSWORD_COST: '1',
    USERS_REQUIRE_SESSION: 'none',
    ...options.env,
  };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  if (!args.some((a) => /^--(data|store)\b/.test(a)) && env.USERS_DATA === undefined && env.USERS_STORE === undefined)
    throw new Error("startUsersServer: give --data or --store (the default ./data is the working directory's)");
  const text = { stdout: '', stderr: '' };
  const written = new EventEmitter();
  const sink = (stream: 'stdout' | 'stderr') =>
    Object.assign(new PassThrough(), {
      write: (chunk: string) => {
        text[stream] += String(chunk);
        written.emit('write');
        return true;
      },
    });
  const signals = new EventEmitter();
  let ended = false;
  const exited = main(args, { stdout: sink('stdout'), stderr: sink('stderr'), env, signals }).then((code) => {
    ended = true;
    written.emit('write');
    return { code, signal: null };
  });
  const waitForLine = (pattern: RegExp, stream: 'stdout' | 'stderr' = 'stdout') =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        for (const line of text[stream].split('\n')) {
          const match = pattern.exec(line);
          if (match === null) continue;
          written.off('write', check);
          return resolve(match);
        }
        if (!ended) return;
        written.off('write', check);
        reject(new Error(`users-server ended before printing ${pattern}; stdout=${text.stdout} stderr=${text.stderr}`));
      };
      written.on('write', check);
      check();
    });
  t.after(async () => {
    if (!ended) signals.emit('SIGTERM');
    await exited;
  });
  const listening = await waitForLine(/^listening on (https?:\/\/\S+:(\d+))$/);
  return {
    url: listening[1]!,
    port: Number(listening[2]),
    pid: process.pid,
    stdout: () => text.stdout,
    stderr: () => text.stderr,
    waitForLine,
    kill: (signal = 'SIGTERM') => void signals.emit(signal),
    exited,
  };
}

/** The configuration parsed from `argv` and `env`. */
export function configOf(argv: string[], env: NodeJS.ProcessEnv = {}): Config {
  return parseConfig(argv, env).config;
}

/** Asserts that parsing throws a ServerUsageError whose message is one non-empty line matching `mentions`. */
export function assertUsageError(argv: string[], env: NodeJS.ProcessEnv, mentions: RegExp): void {
  assert.throws(
    () => parseConfig(argv, env),
    (error: unknown) => {
      assert.ok(error instanceof ServerUsageError, `expected a ServerUsageError, got ${String(error)}`);
      assert.notEqual(error.message.trim(), '', 'the message is empty');
      assert.ok(!/[\r\n]/.test(error.message), `the message is more than one line: ${JSON.stringify(error.message)}`);
      assert.match(error.message, mentions);
      return true;
    },
  );
}
