/**
 * A throwaway PostgreSQL for the tests: one cluster per test process
 * (`initdb` and `pg_ctl` from /usr/lib/postgresql/<version>/bin, a free
 * port, a temp folder; run as the `postgres` user when this process is
 * root), and a fresh database per test copied from a migrated template.
 * The cluster is stopped when the process exits, also when it is
 * interrupted (SIGINT, SIGTERM, SIGHUP). Where no server binaries
 * exist, `postgresSkipReason()` says why and the tests skip.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect as netConnect, createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { exitOnInterrupt, waitGone } from './children.js';
import { againIfDropped, connect, type Sql } from '../server/store/postgres/driver.js';
import { serverPort } from './processes.js';
import { migrate } from '../server/store/postgres/schema.js';

const TEMPLATE = 'users_template';
let counter = 0;

interface Cluster {
  dir: string;
  port: number;
  bin: string;
  /** postgres://... of the superuser, without a database. */
  base: string;
  /** A connection to the `postgres` database, for creating and dropping test databases. */
  admin: Sql;
}

let cluster: Cluster | undefined;
let starting: Promise<Cluster> | undefined;

/** The newest installed server's bin folder, or undefined. */
function serverBin(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length === 0 ? undefined : join(root, versions[0]!, 'bin');
}

/** Why PostgreSQL tests cannot run here, or undefined when they can. */
export function postgresSkipReason(): string | undefined {
  if (serverBin() === undefined)
    return 'no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)';
  if (process.getuid?.() === 0 && spawnSync('id', ['postgres']).status !== 0)
    return 'running as root, and there is no postgres user to run the cluster as';
  return undefined;
}

/** The command line that runs a server binary, as the postgres user when this process is root. */
function asOwner(bin: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
}

/**
 * The pid of the server binary `runAsOwner` runs now (initdb, pg_ctl start): the exit waits for it before stopping the
 * cluster.
 */
let runningPid: number | undefined;

/**
 * Runs a server binary to its end. Not synchronously: initdb takes a second
 * or more, and a pool of this process that opens a connection meanwhile
 * must get its answer within the driver's connect timeout.
 */
async function runAsOwner(bin: string, args: string[]): Promise<void> {
  const [command, argv] = asOwner(bin, args);
  const running = promisify(execFile)(command, argv);
  runningPid = running.child.pid;
  try {
    await running;
  } finally {
    runningPid = undefined;
  }
}

/** True when the server binaries come with pg_stat_statements (Debian's postgresql package does). */
function hasStatementStatistics(): boolean {
  return existsSync(join(serverBin()!, '..', 'lib', 'pg_stat_statements.so'));
}

/**
 * Server settings of the cluster; `durable` keeps PostgreSQL's own fsync
 * (benchmarks), else none. pg_stat_statements, where it is installed,
 * lets a test see how the database ran the store's statements.
 */
function serverOptions(dir: string, port: number, durable: boolean): string {
  const statistics = hasStatementStatistics() ? ' -c shared_preload_libraries=pg_stat_statements' : '';
  const common = `-c port=${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c max_connections=200${statistics}`;
  // Durability of the test cluster itself is not under test: no fsync. Its databases live a test each: no autovacuum.
  return durable
    ? common
    : `${common} -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c autovacuum=off`;
}

let durableCluster = false;

async function startCluster(): Promise<Cluster> {
  const bin = serverBin()!;
  const dir = mkdtempSync(join(tmpdir(), 'users-pg-'));
  if (process.getuid?.() === 0) {
    const ids = execFileSync('id', ['-u', 'postgres']).toString().trim();
    const gid = execFileSync('id', ['-g', 'postgres']).toString().trim();
    chownSync(dir, Number(ids), Number(gid));
  }
  chmodSync(dir, 0o700);
  const data = join(dir, 'data');
  // Set before initdb: an interrupt that comes while the cluster starts
  // still stops it, once the binary that runs then (initdb, pg_ctl) is done.
  process.once('exit', () => {
    if (runningPid !== undefined) waitGone([runningPid]);
    const postmaster = postmasterPid(data);
    try {
      execFileSync(...asOwner(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', 'stop']), { stdio: 'pipe' });
    } catch {
      // Already stopped, or never started.
    }
    // pg_ctl returns once the pid file is gone, which the server removes just before it exits.
    if (postmaster !== undefined) waitGone([postmaster]);
    rmSync(dir, { recursive: true, force: true });
  });
  exitOnInterrupt();
  await runAsOwner(join(bin, 'initdb'), [
    '-D',
    data,
    '-U',
    'postgres',
    '--auth=trust',
    '-E',
    'UTF8',
    '--locale=C',
    '--no-sync',
  ]);
  const port = await startOnFreePort(bin, dir);
  const base = `postgres://postgres@127.0.0.1:${port}`;
  // Idle connections close within a second, so they never keep a finished test process alive.
  const admin = await connect(`${base}/postgres`, { max: 2, idleSeconds: 1 });
  await admin.unsafe(`create database ${TEMPLATE}`);
  // The template gets the schema once; every test's database is a copy.
  const sql = await connect(`${base}/${TEMPLATE}`, { max: 1 });
  await migrate(sql, () => {});
  await sql.end();
  return { dir, port, bin, base, admin };
}

/**
 * Starts the cluster's server on a port of `serverPort`, and on another if
 * it could not start (another test process took that one in the meantime).
 */
async function startOnFreePort(bin: string, dir: string): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const port = await serverPort();
    try {
      await runAsOwner(join(bin, 'pg_ctl'), [
        '-D',
        join(dir, 'data'),
        '-o',
        serverOptions(dir, port, durableCluster),
        '-l',
        join(dir, 'log'),
        '-w',
        'start',
      ]);
      return port;
    } catch (error) {
      const log = readLog(dir);
      if (attempt === 3 || !/could not bind|Address already in use/.test(log))
        throw new Error(`PostgreSQL did not start on port ${port}: ${String(error)}\n${log}`);
    }
  }
}

function readLog(dir: string): string {
  try {
    return readFileSync(join(dir, 'log'), 'utf8');
  } catch {
    return '';
  }
}

/** The process's cluster, started on first use. */
export async function postgresCluster(): Promise<Cluster> {
  if (cluster !== undefined) return cluster;
  starting ??= startCluster();
  cluster = await starting;
  return cluster;
}

/**
 * Databases of tests that have ended, dropped when the next one is made (their servers are closed by then, so dropping
 * one cuts no connection of a server still stopping).
 */
const finished: string[] = [];

/** A fresh, migrated database for this test, dropped once it has ended; its URL. */
export async function testDatabase(
  t: TestContext | undefined,
  options: { migrated?: boolean; durable?: boolean } = {},
): Promise<string> {
  // The first call decides for the process: a benchmark wants PostgreSQL's fsync.
  if (options.durable === true && cluster === undefined) durableCluster = true;
  const c = await postgresCluster();
  // Dropped beside this test, not before it: nothing uses them any more.
  for (const old of finished.splice(0)) {
    c.admin.unsafe(`drop database if exists ${old} with (force)`).catch(() => {
      // The cluster was stopped by a test: it goes at exit anyway.
    });
  }
  const name = `users_test_${process.pid}_${++counter}`;
  const template = options.migrated === false ? 'template0' : TEMPLATE;
  // file_copy: the quickest copy of a small template (about 15 ms here).
  await againIfDropped(() => c.admin.unsafe(`create database ${name} template ${template} strategy file_copy`), 2);
  t?.after(() => void finished.push(name));
  return `${c.base}/${name}`;
}

/**
 * The statements run on the database of `url` that PostgreSQL compiled
 * with its JIT, with the milliseconds it spent compiling each; undefined
 * where pg_stat_statements is not installed.
 */
export async function jitCompiledStatements(url: string): Promise<{ query: string; ms: number }[] | undefined> {
  if (!hasStatementStatistics()) return undefined;
  const sql = await connect(url, { max: 1 });
  try {
    await sql`create extension if not exists pg_stat_statements`;
    const rows = await sql`
      select query, jit_generation_time + jit_inlining_time + jit_optimization_time + jit_emission_time as ms
      from pg_stat_statements where jit_functions > 0 and dbid = (select oid from pg_database where datname = current_database())`;
    return rows.map((r) => ({ query: r.query as string, ms: Math.round(Number(r.ms)) }));
  } finally {
    await sql.end();
  }
}

/** The pid its postmaster.pid names, if the file is there. */
function postmasterPid(data: string): number | undefined {
  try {
    return Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
}

/** True while the cluster's server runs (its postmaster.pid names a live process). */
function isRunning(data: string): boolean {
  const pid = postmasterPid(data);
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Stops the cluster's server (a database outage) or starts it again, waiting until it accepts connections. */
export async function setPostgresRunning(running: boolean): Promise<void> {
  const c = await postgresCluster();
  const data = join(c.dir, 'data');
  const options = serverOptions(c.dir, c.port, durableCluster);
  const up =
    spawnSync(join(c.bin, 'pg_ctl'), ['-D', data, 'status'], { stdio: 'pipe' }).status === 0 || isRunning(data);
  if (running && !up) {
    await runAsOwner(join(c.bin, 'pg_ctl'), ['-D', data, '-o', options, '-l', join(c.dir, 'log'), '-w', 'start']);
    // A fresh pool: the old one's connections were cut by the stop, and one
    // may not have noticed yet (its next query would get 57P01).
    c.admin = await connect(`${c.base}/postgres`, { max: 2, idleSeconds: 1 });
  } else if (!running && up) {
    // Not `timeout: 0`: a connection still opening is let finish rather than
    // cut (cut, it fails the driver's own array-types query, which only the
    // listener of server/store/postgres/driver.ts then hears).
    await c.admin.end({ timeout: 5 }).catch(() => {});
    await runAsOwner(join(c.bin, 'pg_ctl'), ['-D', data, '-m', 'fast', '-w', 'stop']);
  }
}

/** `pg_ctl restart -m fast`, waiting until the server accepts connections again; how long it took, in ms. */
export async function restartPostgres(): Promise<number> {
  const c = await postgresCluster();
  const data = join(c.dir, 'data');
  await c.admin.end({ timeout: 5 }).catch(() => {});
  const started = performance.now();
  await runAsOwner(join(c.bin, 'pg_ctl'), [
    '-D',
    data,
    '-o',
    serverOptions(c.dir, c.port, durableCluster),
    '-l',
    join(c.dir, 'log'),
    '-m',
    'fast',
    '-w',
    'restart',
  ]);
  const took = performance.now() - started;
  c.admin = await connect(`${c.base}/postgres`, { max: 2, idleSeconds: 1 });
  return took;
}

/** A TCP relay to a database that a test can cut: every connection now, or the next whose client sends a given text. */
export interface CuttingRelay {
  /** `url` with the relay's port. */
  url: string;
  /** Closes every connection that passes through the relay now. */
  cutAll(): void;
  /**
   * Closes the next connection whose client sends `text` (in one write), before the database sees it; resolves once it
   * has.
   */
  cutOnce(text: string): Promise<void>;
  /**
   * From now on drops whatever the connections open now send either way, and closes none: a network that went silent.
   * New connections pass.
   */
  silence(): void;
  /**
   * Makes the next connection whose client sends `text` (in one write) silent from then on, before the database sees
   * it; resolves once it has.
   */
  silenceOnce(text: string): Promise<void>;
}

/** A relay to the database of `url` on a free port, closed after the test. */
export async function cuttingRelay(t: TestContext, url: string): Promise<CuttingRelay> {
  const target = new URL(url);
  const pairs = new Set<{ client: Socket; server: Socket; silent: boolean }>();
  let armed: { text: string; done: () => void; silent: boolean } | undefined;
  const relay = createServer((client) => {
    const server = netConnect({ host: target.hostname, port: Number(target.port) });
    const pair = { client, server, silent: false };
    pairs.add(pair);
    const close = () => {
      pairs.delete(pair);
      client.destroy();
      server.destroy();
    };
    client.on('data', (data) => {
      if (pair.silent) return;
      if (armed !== undefined && data.includes(armed.text)) {
        const { done, silent } = armed;
        armed = undefined;
        if (silent) pair.silent = true;
        else close();
        done();
      } else server.write(data);
    });
    server.on('data', (data) => pair.silent || client.write(data));
    for (const socket of [client, server]) socket.on('close', close).on('error', close);
  });
  const cutAll = () => {
    for (const { client, server } of pairs) {
      client.destroy();
      server.destroy();
    }
  };
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    cutAll();
    relay.close();
  });
  const relayed = new URL(url);
  relayed.hostname = '127.0.0.1';
  relayed.port = String((relay.address() as AddressInfo).port);
  return {
    url: relayed.toString(),
    cutAll,
    cutOnce: (text) => new Promise((done) => (armed = { text, done, silent: false })),
    silenceOnce: (text) => new Promise((done) => (armed = { text, done, silent: true })),
    silence: () => {
      for (const pair of pairs) pair.silent = true;
    },
  };
}
