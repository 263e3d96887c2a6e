/**
 * Storage figures of issue 3 (docs/performance.md, section "Storage"):
 *
 *  a. durable PUT throughput and latency of the journal store against the
 *     memory store: the real server as a child process on one core, fresh
 *     data directory, 10,000 users preloaded, 50 connections doing PUTs that
 *     replace existing users; rounds alternate A B A B;
 *  b. start-up with 1,000,000 users, from a journal and from a compacted
 *     snapshot: time from spawn to the first answered GET /healthz, peak RSS
 *     (VmHWM), and the bytes each user takes on disk.
 *
 * Run: node --import tsx bench/store-bench.ts [--rounds 3] [--seconds 10] [--users 1000000]
 * (needs dist/: `npm run build`). `--help` lists the other flags.
 *
 * The helpers (spawnServer, runLoad, preloadUsers, ...) are exported so the
 * `npm run bench` harness of issue 5 can reuse them; importing this module
 * runs nothing.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { request } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { encodeHeader, encodeMutations, encodeRecord, FileKind, HEADER_BYTES } from '../server/store/journal/codec.js';
import { createJournalSync } from '../server/store/journal/journal.js';
import { journalName, recover, snapshotName } from '../server/store/journal/recovery.js';
import { captureImage, writeSnapshot } from '../server/store/journal/snapshot.js';
import type { LoadRequest } from '../test/socket-load.js';

export type { LoadRequest };

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** The minimal node:http server users-server is measured against. */
export const REFERENCE_SCRIPT = join(ROOT, 'bench', 'reference-server.mjs');
const SERVER_BIN = join(ROOT, 'bin', 'users-server.js');
export const ADMIN_PASSWORD = 'bench-admin-password';

// ---------------------------------------------------------------- autocannon

/** The part of autocannon's programmatic API used here (it ships no types). */
interface AutocannonOptions {
  url: string;
  connections: number;
  duration?: number;
  amount?: number;
  pipelining?: number;
  timeout?: number;
  requests: LoadRequest[];
}

interface Histogram {
  average: number;
  p50: number;
  p99: number;
  max: number;
}

interface AutocannonResult {
  requests: Histogram & { total: number };
  latency: Histogram;
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
}

interface AutocannonInstance extends PromiseLike<AutocannonResult> {
  on(
    event: 'response',
    listener: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void,
  ): this;
}

const autocannon = createRequire(import.meta.url)('autocannon') as (options: AutocannonOptions) => AutocannonInstance;

// ------------------------------------------------------------- CPU affinity

export const hasTaskset = spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0;
const cores = Number(spawnSync('nproc', [], { encoding: 'utf8' }).stdout.trim()) || 1;
/** Server on core 0, load generator on core 1: only when there are two cores to split. */
export const pinning = hasTaskset && cores >= 2;

/** Pins this process (every thread, and the threads it starts later) to `core`. */
export function pinSelf(core: number): boolean {
  if (!pinning) return false;
  return spawnSync('taskset', ['-a', '-cp', String(core), String(process.pid)], { stdio: 'ignore' }).status === 0;
}

// ------------------------------------------------------------------ servers

export interface ServerProcess {
  child: ChildProcess;
  pid: number;
  url: string;
  /** performance.now() at spawn and when "listening on" was read. */
  spawnedAt: number;
  listeningAt: number;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
  /** SIGTERM, then the exit code (SIGKILL after 15 s). */
  stop(): Promise<number | null>;
}

export interface SpawnOptions {
  /** Node flags before the script, e.g. ['--cpu-prof', '--cpu-prof-dir=/tmp/prof']. */
  nodeFlags?: string[];
  /** Core to pin to with taskset (when available); undefined: no pinning. */
  core?: number | undefined;
  env?: NodeJS.ProcessEnv;
  /** Command line to run instead of bin/users-server.js (e.g. a reference server). */
  script?: string;
  /** A command that runs node, put in front of it: ['valgrind', '--tool=callgrind', ...]. */
  wrapper?: string[];
  /**
   * Send the server's stdout (its access log) to this file instead of a pipe
   * to this process. Under load the log is about 100 bytes a request: read
   * through a pipe, it takes CPU from the load generator, on its core, in
   * users-server's runs only.
   */
  stdoutFile?: string;
}

/**
 * Server flags for a load: the load generator's connections all come from
 * one address, and the per-host limit (--max-connections-per-client,
 * default 32) would close those past it.
 */
export const LOAD_FLAGS = ['--max-connections-per-client', '0'];

/**
 * Spawns a server that prints `listening on http://...` on stdout (port 0)
 * and resolves once it has. Rejects when it exits first.
 */
export function spawnServer(args: string[], options: SpawnOptions = {}): Promise<ServerProcess> {
  const nodeArgs = [...(options.nodeFlags ?? []), options.script ?? SERVER_BIN, ...args];
  const pinned = options.core !== undefined && pinning;
  const line = [
    ...(pinned ? ['taskset', '-c', String(options.core)] : []),
    ...(options.wrapper ?? []),
    process.execPath,
    ...nodeArgs,
  ];
  const [command, ...argv] = line as [string, ...string[]];
  const spawnedAt = performance.now();
  const outFd = options.stdoutFile === undefined ? undefined : openSync(options.stdoutFile, 'w');
  const child = spawn(command, argv, {
    cwd: ROOT,
    // The loads measure the resource, not who may use it: /users is open unless a bench passes --require-session (a
    // flag beats the variable).
    env: { ...process.env, USERS_ADMIN_PASSWORD: ADMIN_PASSWORD, USERS_REQUIRE_SESSION: 'none', ...options.env },
    stdio: ['ignore', outFd ?? 'pipe', 'pipe'],
  });
  if (outFd !== undefined) closeSync(outFd);
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return new Promise((resolveStart, rejectStart) => {
    let out = '';
    let poll: NodeJS.Timeout | undefined;
    const started = (url: string) => {
      const listeningAt = performance.now();
      resolveStart({
        child,
        pid: child.pid!,
        url,
        spawnedAt,
        listeningAt,
        stderr: () => err,
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
          const code = await exited;
          clearTimeout(timer);
          return code;
        },
      });
    };
    const listening = (text: string) => /listening on (http:\/\/\S+)/.exec(text)?.[1];
    if (options.stdoutFile !== undefined) {
      const file = options.stdoutFile;
      poll = setInterval(() => {
        const url = listening(readFileSync(file, 'utf8').slice(0, 4096));
        if (url === undefined) return;
        clearInterval(poll);
        started(url);
      }, 10);
    } else {
      const onData = (chunk: string) => {
        out += chunk;
        const url = listening(out);
        if (url === undefined) return;
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        started(url);
      };
      child.stdout!.setEncoding('utf8').on('data', onData);
    }
    void exited.then((code) => {
      clearInterval(poll);
      rejectStart(new Error(`server exited with ${code} before listening: ${err.trim()}`));
    });
  });
}

/** One HTTP request with a fresh connection; resolves with the status once the body is read. */
export function fetchStatus(url: string, method = 'GET', body?: string): Promise<number> {
  return new Promise((done, fail) => {
    const req = request(
      url,
      {
        method,
        agent: false,
        headers:
          body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on('end', () => done(res.statusCode!));
      },
    );
    req.on('error', fail);
    req.end(body);
  });
}

/** Peak resident set size of a process, in bytes (VmHWM). */
export function peakRss(pid: number): number {
  return statusBytes(pid, 'VmHWM');
}

/** The resident set of a process now, in bytes (NaN where /proc has none). */
export function residentRss(pid: number): number {
  return statusBytes(pid, 'VmRSS');
}

function statusBytes(pid: number, field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : NaN;
}

/** CPU seconds a process has used so far, all its threads (utime + stime). */
export function cpuSeconds(pid: number, withReapedChildren = false): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 14 and 15 of proc(5), and 16 and 17 for the children it has waited for; the slice starts at field 3.
  const own = Number(fields[11]) + Number(fields[12]);
  return (withReapedChildren ? own + Number(fields[13]) + Number(fields[14]) : own) / 100;
}

/** Busy CPU seconds of the whole machine so far (every core; /proc/stat). */
export function machineBusySeconds(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return (user! + nice! + system! + irq! + softirq! + steal!) / 100;
}

/**
 * Waits until the rest of the machine is idle (other processes use less than
 * `threshold` of a core over one second), for at most `maxSeconds`. Returns
 * the share of a core they used in the last second: a shared machine makes
 * figures unreliable, so the tables show it.
 */
export async function waitForQuiet(maxSeconds: number, threshold = 0.1): Promise<number> {
  const deadline = performance.now() + maxSeconds * 1000;
  for (;;) {
    const before = machineBusySeconds();
    const self = process.cpuUsage();
    await new Promise((done) => setTimeout(done, 1000));
    const mine = process.cpuUsage(self);
    const other = machineBusySeconds() - before - (mine.user + mine.system) / 1e6;
    if (other < threshold || performance.now() >= deadline) return Math.max(0, other);
  }
}

// --------------------------------------------------------------------- load

export interface LoadResult {
  /** Mean requests per second over the run. */
  rps: number;
  requests: number;
  /** Latency percentiles in ms, from every response (not autocannon's whole-ms histogram). */
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  /** How many responses had each status code. */
  statuses: Record<number, number>;
  /** Share of a core the server and this process used during the run (0..1). */
  serverCpu: number;
  loadCpu: number;
  /** Share of a core used by every other process on the machine during the run: noise. */
  otherCpu: number;
}

export interface LoadOptions {
  url: string;
  connections: number;
  seconds?: number;
  amount?: number;
  requests: LoadRequest[];
  /** Server pid, to measure its CPU use. */
  pid?: number;
}

/** Runs autocannon against `url` and summarises the run. */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  const cpuBefore = process.cpuUsage();
  const serverBefore = options.pid === undefined ? 0 : cpuSeconds(options.pid);
  const machineBefore = machineBusySeconds();
  const started = performance.now();
  const instance = autocannon({
    url: options.url,
    connections: options.connections,
    ...(options.seconds !== undefined && { duration: options.seconds }),
    ...(options.amount !== undefined && { amount: options.amount }),
    timeout: 30,
    requests: options.requests,
  });
  instance.on('response', (_client, status, _bytes, responseTime) => {
    latencies.push(responseTime);
    statuses[status] = (statuses[status] ?? 0) + 1;
  });
  const result = await instance;
  const wall = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const serverCpu = options.pid === undefined ? 0 : (cpuSeconds(options.pid) - serverBefore) / wall;
  const loadCpu = (cpu.user + cpu.system) / 1e6 / wall;
  const machineCpu = (machineBusySeconds() - machineBefore) / wall;
  latencies.sort((a, b) => a - b);
  return {
    rps: result.requests.total / result.duration,
    requests: result.requests.total,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    statuses,
    serverCpu,
    loadCpu,
    otherCpu: options.pid === undefined ? NaN : Math.max(0, machineCpu - serverCpu - loadCpu),
  };
}

export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const FIRST = [
  'Ada',
  'Grace',
  'Alan',
  'Edsger',
  'Barbara',
  'Donald',
  'Margaret',
  'Ken',
  'Frances',
  'John',
  'Radia',
  'Niklaus',
];
const LAST = [
  'Lovelace',
  'Hopper',
  'Turing',
  'Dijkstra',
  'Liskov',
  'Knuth',
  'Hamilton',
  'Thompson',
  'Allen',
  'McCarthy',
  'Perlman',
  'Wirth',
];

/** A typical user name: "Grace Hopper 4821" (12 to 22 characters). */
export function typicalName(n: number): string {
  return `${FIRST[n % FIRST.length]} ${LAST[Math.floor(n / FIRST.length) % LAST.length]} ${n % 10_000}`;
}

export const JSON_HEADERS = { 'content-type': 'application/json' };

/**
 * Creates users 1..count through POST /users/new (ids are issued in turn), user n `userOf(n)`, and checks they are
 * there.
 */
export async function preloadUsers(
  url: string,
  count: number,
  connections: number,
  userOf: (n: number) => object = (n) => ({ name: typicalName(n) }),
): Promise<void> {
  let n = 0;
  const result = await runLoad({
    url,
    connections,
    amount: count,
    requests: [
      {
        method: 'POST',
        path: '/users/new',
        headers: JSON_HEADERS,
        setupRequest: (req) => ({ ...req, body: JSON.stringify(userOf(++n)) }),
      },
    ],
  });
  if (result.non2xx > 0 || result.errors > 0 || result.requests !== count) {
    throw new Error(`preload: ${result.requests} requests, ${result.non2xx} non-2xx, ${result.errors} errors`);
  }
  await checkPreloaded(url, count);
}

/**
 * Users 1..count are there and user count + 1 is not: three requests of a client of its own, which closes each
 * connection.
 */
async function checkPreloaded(url: string, count: number): Promise<void> {
  const [first, last, past] = await Promise.all([
    fetchStatus(`${url}/users/1`),
    fetchStatus(`${url}/users/${count}`),
    fetchStatus(`${url}/users/${count + 1}`),
  ]);
  if (first !== 200 || last !== 200 || past !== 404)
    throw new Error(`preload: GET /users/1, /${count}, /${count + 1} answered ${first}, ${last}, ${past}`);
}

/** One server of bench/reference-ceiling.ts and bench/instructions.ts. */
export interface CeilingSetup {
  /** Short name for a command line (`--server`). */
  id: string;
  name: string;
  /** bench/reference-server.mjs, else users-server. */
  reference: boolean;
  args: string[];
}

/**
 * The reference plain, with the contract's headers, with them and an access
 * log, and users-server with its log off and on: what the contract costs a
 * server that does nothing else, beside users-server.
 */
export const CEILING_SETUPS: readonly CeilingSetup[] = [
  { id: 'reference', name: 'reference', reference: true, args: [] },
  { id: 'contract', name: 'reference --contract', reference: true, args: ['--contract'] },
  { id: 'contract-log', name: 'reference --contract --log', reference: true, args: ['--contract', '--log'] },
  { id: 'users-log-off', name: 'users-server --log-format off', reference: false, args: ['--log-format', 'off'] },
  { id: 'users', name: 'users-server (access log on)', reference: false, args: [] },
];

/**
 * Users 1..count on either server: users-server through POST /users/new, the
 * reference through PUT /users/{id}; both are then asked the same three
 * requests of checkPreloaded. (Requests unlike the load's change what V8
 * compiles next, so both servers see the same ones.)
 */
export async function preloadSetup(
  url: string,
  setup: CeilingSetup,
  count: number,
  connections: number,
): Promise<void> {
  if (!setup.reference) return preloadUsers(url, count, connections);
  let n = 0;
  const requests: LoadRequest[] = [
    {
      method: 'PUT',
      headers: JSON_HEADERS,
      setupRequest: (req) => ({ ...req, path: `/users/${++n}`, body: JSON.stringify({ name: typicalName(n) }) }),
    },
  ];
  const loaded = await runLoad({ url, connections, amount: count, requests });
  if (loaded.non2xx > 0 || loaded.errors > 0)
    throw new Error(`preloading ${setup.name}: ${loaded.non2xx} non-2xx, ${loaded.errors} errors`);
  await checkPreloaded(url, count);
}

/**
 * PUT /users/{random existing id} with a {name} no request sent before: each
 * one changes its user. (A fixed pool cannot: its connections send the same
 * request one after another, and users-server writes nothing for a PUT of
 * what a user already holds, where the reference writes.) Built per request
 * (`setupRequest`) from precomputed paths and names, a counter making each
 * name new.
 */
export function putReplacing(users: number): LoadRequest[] {
  const paths = Array.from({ length: POOL_SIZE }, () => `/users/${1 + Math.floor(Math.random() * users)}`);
  const names = Array.from(
    { length: POOL_SIZE },
    (_, i) => `{"name":"${typicalName(Math.floor(Math.random() * 1e6) + i)} `,
  );
  let n = 0;
  return [
    {
      method: 'PUT',
      headers: JSON_HEADERS,
      setupRequest: (req) => ({ ...req, path: paths[n % POOL_SIZE]!, body: `${names[n++ % POOL_SIZE]!}${n}"}` }),
    },
  ];
}

/**
 * PATCHes that change one field of random users among `users`, each body
 * unique so that every one is a write (the PATCH counterpart of
 * `putReplacing`).
 */
export function patchReplacing(users: number): LoadRequest[] {
  const paths = Array.from({ length: POOL_SIZE }, () => `/users/${1 + Math.floor(Math.random() * users)}`);
  let n = 0;
  return [
    {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      setupRequest: (req) => ({ ...req, path: paths[n % POOL_SIZE]!, body: `{"seen":${n++}}` }),
    },
  ];
}

/** Requests in a pool, each connection cycling through it. */
export const POOL_SIZE = 1000;

/**
 * A pool of POOL_SIZE fixed requests drawn from `make`. autocannon builds a
 * fixed request's bytes once, but rebuilds a `setupRequest` one on every
 * send: on one core that cost capped the load generator near 15,000-20,000
 * req/s and pressed every ratio toward 1. Reads use pools; only requests
 * that must be unique (creates, and replaces that must change their user)
 * use `setupRequest`.
 */
export function requestPool(make: () => LoadRequest): LoadRequest[] {
  return Array.from({ length: POOL_SIZE }, make);
}

// ------------------------------------------------------- a. PUT throughput

export interface PutFigures {
  store: string;
  rounds: LoadResult[];
  compactions: number;
  /** Rounds kept although other processes were busy (no retries left). */
  noisy: number;
}

export interface PutBenchOptions {
  stores: string[];
  rounds: number;
  seconds: number;
  warmup: number;
  users: number;
  connections: number;
  nodeFlags: string[];
  /** Seconds to wait for the rest of the machine to go idle before each round. */
  quietWait: number;
  /** A round during which other processes used more than this share of a core is repeated... */
  maxOther: number;
  /** ...at most this many times. */
  retries: number;
  log: (line: string) => void;
}

/**
 * Rounds alternate between the stores (A B A B ...), each on a fresh server
 * and data directory. A round during which other processes used more than
 * `maxOther` of a core is repeated, up to `retries` times.
 */
export async function benchPut(options: PutBenchOptions): Promise<PutFigures[]> {
  const figures = options.stores.map((store) => ({ store, rounds: [] as LoadResult[], compactions: 0, noisy: 0 }));
  for (let round = 1; round <= options.rounds; round++) {
    for (const entry of figures) {
      for (let attempt = 0; ; attempt++) {
        const { result, compactions } = await putRound(entry.store, options);
        const noisy = result.otherCpu > options.maxOther;
        options.log(
          `  round ${round} ${entry.store.padEnd(8)} ${fmt(result.rps, 0).padStart(7)} req/s  p50 ${fmt(result.p50, 2)} ms  p99 ${fmt(result.p99, 2)} ms  ` +
            `cpu: server ${pct(result.serverCpu)}, load ${pct(result.loadCpu)}, other ${pct(result.otherCpu)}` +
            (noisy ? (attempt < options.retries ? '  (noisy: repeating)' : '  (noisy: kept, no retries left)') : ''),
        );
        if (noisy && attempt < options.retries) continue;
        entry.rounds.push(result);
        entry.compactions += compactions;
        if (noisy) entry.noisy++;
        break;
      }
    }
  }
  return figures;
}

/** One measured round on a fresh server: preload, wait for quiet, warm up, measure. */
async function putRound(store: string, options: PutBenchOptions): Promise<{ result: LoadResult; compactions: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'users-bench-'));
  const server = await spawnServer(['--port', '0', '--data', dir, '--store', store, ...LOAD_FLAGS], {
    core: 0,
    nodeFlags: options.nodeFlags,
  });
  try {
    await preloadUsers(server.url, options.users, options.connections);
    await waitForQuiet(options.quietWait);
    if (options.warmup > 0)
      await runLoad({
        url: server.url,
        connections: options.connections,
        seconds: options.warmup,
        requests: putReplacing(options.users),
      });
    const result = await runLoad({
      url: server.url,
      connections: options.connections,
      seconds: options.seconds,
      requests: putReplacing(options.users),
      pid: server.pid,
    });
    if (result.non2xx > 0 || result.errors > 0)
      throw new Error(`${store}: ${result.non2xx} non-2xx responses, ${result.errors} errors`);
    return { result, compactions: (server.stderr().match(/compacted a /g) ?? []).length };
  } finally {
    const code = await server.stop();
    if (code !== 0) options.log(`  warning: the ${store} server exited with ${code}: ${server.stderr().trim()}`);
    rmSync(dir, { recursive: true, force: true });
  }
}

// ----------------------------------------------------------- b. start-up

/**
 * A data directory holding `users` typical users in journal-00000001, one
 * record per user, exactly as POST /users/new commits them.
 */
export function buildJournalDir(dir: string, users: number): void {
  const fd = openSync(join(dir, journalName(1)), 'w', 0o600);
  try {
    const parts: Buffer[] = [encodeHeader(FileKind.Journal, 1)];
    let bytes = HEADER_BYTES;
    for (let id = 1; id <= users; id++) {
      const json = JSON.stringify({ name: typicalName(id), id });
      const record = encodeRecord(encodeMutations([{ op: 'put', id, json }]));
      parts.push(record);
      bytes += record.length;
      if (bytes >= 8 * 1024 * 1024 || id === users) {
        writeSync(fd, Buffer.concat(parts, bytes));
        parts.length = 0;
        bytes = 0;
      }
    }
  } finally {
    closeSync(fd);
  }
}

/**
 * The same state after compaction: recovers `journalDir` and writes it with
 * the compaction code (captureImage + writeSnapshot) as snapshot-00000002,
 * next to an empty journal-00000002.
 */
export async function buildSnapshotDir(journalDir: string, dir: string): Promise<void> {
  const { state } = recover(journalDir);
  const path = join(dir, snapshotName(2));
  await writeSnapshot(captureImage(state, Date.now()), 2, `${path}.tmp`, path);
  closeSync(createJournalSync(dir, 2));
}

export interface StartupFigures {
  variant: string;
  /** Bytes of the journal and snapshot files. */
  fileBytes: number;
  /** ms from spawn to the first answered GET /healthz, per start. */
  times: number[];
  /** ms from spawn to "listening on", per start. */
  listening: number[];
  /** Peak RSS per start, bytes. */
  rss: number[];
}

/** Starts a server on `dir` `rounds` times; times spawn to the first answered GET /healthz. */
export async function benchStartup(
  variant: string,
  dir: string,
  rounds: number,
  nodeFlags: string[],
  quietWait: number,
  log: (line: string) => void,
): Promise<StartupFigures> {
  const fileBytes = readdirSync(dir)
    .filter((name) => /^(journal|snapshot)-\d{8}$/.test(name))
    .reduce((sum, name) => sum + statSync(join(dir, name)).size, 0);
  const figures: StartupFigures = { variant, fileBytes, times: [], listening: [], rss: [] };
  for (let round = 1; round <= rounds; round++) {
    const other = await waitForQuiet(quietWait);
    const server = await spawnServer(['--port', '0', '--data', dir, ...LOAD_FLAGS], { core: 0, nodeFlags });
    try {
      const status = await fetchStatus(`${server.url}/healthz`);
      const answered = performance.now();
      if (status !== 200) throw new Error(`GET /healthz answered ${status}`);
      // Let anything deferred past the first request (timers, GC) show in the peak.
      await new Promise((done) => setTimeout(done, 500));
      figures.times.push(answered - server.spawnedAt);
      figures.listening.push(server.listeningAt - server.spawnedAt);
      figures.rss.push(peakRss(server.pid));
      log(
        `  start ${round} ${variant.padEnd(8)} ${fmt(answered - server.spawnedAt, 0)} ms to /healthz  peak RSS ${mib(figures.rss.at(-1)!)} MiB  (other processes before: ${pct(other)} cpu)`,
      );
    } finally {
      const code = await server.stop();
      if (code !== 0) log(`  warning: the server exited with ${code}: ${server.stderr().trim()}`);
    }
  }
  return figures;
}

// ------------------------------------------------------------------ output

export function fmt(n: number, digits: number): string {
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function pct(share: number): string {
  return `${Math.round(share * 100)}%`;
}

function mib(bytes: number): string {
  return fmt(bytes / 1024 / 1024, 0);
}

/** A plain text table: columns padded, numbers right-aligned. */
export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

function verdict(ok: boolean): string {
  return ok ? 'met' : 'MISSED';
}

// -------------------------------------------------------------------- main

/** Rebuilds dist/ when a server source file is newer than it: the child processes run dist/. */
function ensureBuilt(log: (line: string) => void): void {
  const built = join(ROOT, 'dist', 'server', 'main.js');
  const newest = (dir: string): number =>
    readdirSync(dir, { withFileTypes: true }).reduce(
      (max, e) => Math.max(max, e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs),
      0,
    );
  if (
    existsSync(built) &&
    statSync(built).mtimeMs >= Math.max(newest(join(ROOT, 'server')), newest(join(ROOT, 'shared')))
  )
    return;
  log('dist/ is older than server/: npm run build');
  const build = spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' });
  if (build.status !== 0) throw new Error('npm run build failed');
}

const USAGE = `usage: node --import tsx bench/store-bench.ts [flags]
  --rounds N       rounds per store (A B A B) and starts per variant   (3)
  --seconds S      measured seconds per PUT round                       (10)
  --warmup S       unmeasured PUT seconds before each round             (2)
  --users N        users in the start-up data set                       (1000000)
  --preload N      users created before the PUT rounds                  (10000)
  --connections N  concurrent connections                               (50)
  --part P         put, startup or all                                  (all)
  --node-flags=F   extra node flags for the server (note the =), e.g. --node-flags="--cpu-prof --cpu-prof-dir=/tmp/prof"
  --quiet-wait S   wait up to S seconds for other processes to go idle before each round (60)
  --max-other X    repeat a round when other processes used more than X of a core (0.25)
  --retries N      ... at most N times per round                        (4)
  --keep           keep the start-up data directories (printed)`;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      seconds: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      users: { type: 'string', default: '1000000' },
      preload: { type: 'string', default: '10000' },
      connections: { type: 'string', default: '50' },
      part: { type: 'string', default: 'all' },
      'node-flags': { type: 'string', default: '' },
      'quiet-wait': { type: 'string', default: '60' },
      'max-other': { type: 'string', default: '0.25' },
      retries: { type: 'string', default: '4' },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const count = (name: keyof typeof values, min: number): number => {
    const n = Number(values[name]);
    if (!Number.isSafeInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}`);
    return n;
  };
  const rounds = count('rounds', 1);
  const seconds = count('seconds', 1);
  const warmup = count('warmup', 0);
  const users = count('users', 1);
  const preload = count('preload', 1);
  const connections = count('connections', 1);
  const quietWait = count('quiet-wait', 0);
  const retries = count('retries', 0);
  const maxOther = Number(values['max-other']);
  if (!(maxOther >= 0)) throw new Error('--max-other must be a number >= 0');
  const part = values.part!;
  if (!['put', 'startup', 'all'].includes(part)) throw new Error('--part must be put, startup or all');
  const nodeFlags = values['node-flags']!.split(' ').filter((f) => f !== '');
  const log = (line: string) => console.log(line);

  ensureBuilt(log);
  const pinned = pinSelf(1);
  log(
    `users-server storage figures, ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${cores} cores`,
  );
  log(
    pinned
      ? 'server pinned to core 0 (taskset -c 0), load generator to core 1'
      : 'no pinning (taskset missing or a single core): figures are noisier',
  );

  const report: string[] = [];
  if (part === 'put' || part === 'all') {
    log(
      `\na. PUT replacing existing users: ${connections} connections, ${preload} users, ${seconds} s per round (+${warmup} s warm-up), ${rounds} rounds A B A B`,
    );
    const [journal, memory] = await benchPut({
      stores: ['journal', 'memory'],
      rounds,
      seconds,
      warmup,
      users: preload,
      connections,
      nodeFlags,
      quietWait,
      maxOther,
      retries,
      log,
    });
    const row = (f: PutFigures) => [
      f.store,
      fmt(median(f.rounds.map((r) => r.rps)), 0),
      fmt(median(f.rounds.map((r) => r.p50)), 2),
      fmt(median(f.rounds.map((r) => r.p99)), 2),
      pct(median(f.rounds.map((r) => r.serverCpu))),
      fmt(median(f.rounds.map((r) => (r.serverCpu / r.rps) * 1e6)), 0),
      pct(median(f.rounds.map((r) => r.otherCpu))),
      f.rounds.map((r) => fmt(r.rps, 0)).join(' / '),
    ];
    // Ratios of the rounds run side by side (A_i / B_i): they cancel a slow
    // drift in the machine's speed that the ratio of medians does not.
    const pairs = (value: (r: LoadResult) => number) =>
      journal!.rounds.map((r, i) => value(r) / value(memory!.rounds[i]!));
    const throughput = median(journal!.rounds.map((r) => r.rps)) / median(memory!.rounds.map((r) => r.rps));
    const p99 = median(journal!.rounds.map((r) => r.p99)) / median(memory!.rounds.map((r) => r.p99));
    const p50 = median(journal!.rounds.map((r) => r.p50)) / median(memory!.rounds.map((r) => r.p50));
    report.push(
      `PUT replacing existing users (${connections} connections, ${preload} users, ${rounds} x ${seconds} s, medians)`,
      table(
        ['store', 'req/s', 'p50 ms', 'p99 ms', 'server cpu', 'cpu us/req', 'other', 'req/s per round'],
        [row(journal!), row(memory!)],
      ),
      `journal compactions during the measured rounds: ${journal!.compactions}; rounds kept although the machine was busy: ${journal!.noisy + memory!.noisy}`,
      `durable/memory: throughput ${fmt(throughput, 2)} (target >= 0.90: ${verdict(throughput >= 0.9)}), ` +
        `p50 ${fmt(p50, 2)}x, p99 ${fmt(p99, 2)}x (target <= 2x: ${verdict(p99 <= 2)})`,
      `per round (journal_i / memory_i): throughput ${pairs((r) => r.rps)
        .map((x) => fmt(x, 2))
        .join(' / ')}, p99 ${pairs((r) => r.p99)
        .map((x) => fmt(x, 2))
        .join(' / ')}`,
      '',
    );
  }

  if (part === 'startup' || part === 'all') {
    log(`\nb. start-up with ${fmt(users, 0)} users`);
    const journalDir = mkdtempSync(join(tmpdir(), 'users-bench-journal-'));
    const snapshotDir = mkdtempSync(join(tmpdir(), 'users-bench-snapshot-'));
    try {
      let t = performance.now();
      buildJournalDir(journalDir, users);
      log(`  built ${journalDir} in ${fmt(performance.now() - t, 0)} ms`);
      t = performance.now();
      await buildSnapshotDir(journalDir, snapshotDir);
      log(`  built ${snapshotDir} in ${fmt(performance.now() - t, 0)} ms`);
      const results = [
        await benchStartup('journal', journalDir, rounds, nodeFlags, quietWait, log),
        await benchStartup('snapshot', snapshotDir, rounds, nodeFlags, quietWait, log),
      ];
      const journalBytes = statSync(join(journalDir, journalName(1))).size;
      const snapshotBytes = statSync(join(snapshotDir, snapshotName(2))).size;
      const rows = results.map((f) => [
        f.variant,
        fmt(f.fileBytes / 1024 / 1024, 1),
        fmt(f.fileBytes / users, 1),
        fmt(median(f.listening), 0),
        fmt(median(f.times), 0),
        fmt(Math.max(...f.rss) / 1024 / 1024, 0),
        f.times.map((ms) => fmt(ms, 0)).join(' / '),
      ]);
      const time = Math.max(...results.map((f) => median(f.times)));
      const rss = Math.max(...results.flatMap((f) => f.rss)) / 1024 / 1024;
      report.push(
        `Start-up with ${fmt(users, 0)} users (${rounds} starts each; time from spawn, median; peak RSS = VmHWM, max)`,
        table(['data', 'files MiB', 'bytes/user', 'listening ms', '/healthz ms', 'peak RSS MiB', 'ms per start'], rows),
        `journal bytes per user before compaction: ${fmt((journalBytes - HEADER_BYTES) / users, 1)}; snapshot bytes per user after: ${fmt((snapshotBytes - HEADER_BYTES) / users, 1)}`,
        `targets${users === 1_000_000 ? '' : ' (set for 1,000,000 users)'}: start-up < 1500 ms: ${verdict(time < 1500)} (slowest median ${fmt(time, 0)} ms); peak RSS < 350 MiB: ${verdict(rss < 350)} (max ${fmt(rss, 0)} MiB)`,
        '',
      );
    } finally {
      if (values.keep) log(`  kept ${journalDir} and ${snapshotDir}`);
      else {
        rmSync(journalDir, { recursive: true, force: true });
        rmSync(snapshotDir, { recursive: true, force: true });
      }
    }
  }
  log('\n' + report.join('\n'));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((error: unknown) => {
    console.error(`bench/store-bench: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  });
}
