/**
 * Finding users on 1,000,000 (issue "find users by any field", "How
 * fast"), side by side in one run, never asserted:
 *
 * - lookup: an indexed unique lookup (`filter=email eq "..."`) against GET
 *   /users/{id} of the same server, in requests a second (goal: at least
 *   0.85 of it), on the journal and on PostgreSQL: the median of the ratios
 *   of six rounds, each a window of both, with their range, and the server's
 *   CPU time a request of each;
 * - scan: a condition on an undeclared path answered in full (every page),
 *   in users examined a second (goal: 2 million): the median of three scans
 *   after the first, which is given apart (the compilers settle during it);
 *   and the p99 of GETs by id from a fifth client while four run such scans
 *   (goal: under 20 ms);
 * - memory: start-up (to the first answer), peak RSS and RSS after 3 s of
 *   GETs (once a unique field's holders are filled) with and without
 *   two declared indexes (goals: at most 80 bytes a user an index beyond
 *   the keys themselves, which are measured apart, start-up at most 1.3x):
 *   the first start, which builds the indexes, apart from the later ones,
 *   which read what the stop before kept (store/journal/index-cache.ts).
 *
 * The users are `{"name":"Grace Hopper 4821","email":"user4821@example.com","age":N,"id":N}`,
 * written as a journal (bench/store-bench.ts buildJournalDir's way), and
 * copied into a throwaway PostgreSQL (`users-server copy`) for `--store postgres`.
 * Indexes are declared with `users-server index add`.
 *
 * Run: npm run build && node --import tsx bench/find-bench.ts [--users 1000000] [--part lookup|scan|memory ...]
 * [--store journal|postgres ...] [--seconds 12] [--rounds 6]
 */
import { execFileSync } from 'node:child_process';
import { closeSync, cpSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { encodeHeader, encodeMutations, encodeRecord, FileKind, HEADER_BYTES } from '../server/store/journal/codec.js';
import { journalName } from '../server/store/journal/recovery.js';
import { postgresSkipReason, testDatabase } from '../test/postgres.js';
import { socketLoad } from '../test/socket-load.js';
import {
  cpuSeconds,
  fmt,
  LOAD_FLAGS,
  median,
  peakRss,
  residentRss,
  percentile,
  requestPool,
  ROOT,
  spawnServer,
  table,
  typicalName,
  type ServerProcess,
} from './store-bench.js';

const { values } = parseArgs({
  options: {
    users: { type: 'string', default: '1000000' },
    part: { type: 'string', multiple: true },
    store: { type: 'string', multiple: true },
    seconds: { type: 'string', default: '12' },
    rounds: { type: 'string', default: '6' },
  },
});
const USERS = Number(values.users);
const SECONDS = Number(values.seconds);
/** Rounds of the lookup's comparison, each a window of GET by id and one of the lookup. */
const ROUNDS = Number(values.rounds);
const PARTS = values.part ?? ['lookup', 'scan', 'memory'];
const STORES = values.store ?? ['journal', 'postgres'];
const SERVER_BIN = join(ROOT, 'bin', 'users-server.js');
const CONNECTIONS = 16;

/** A data directory of `users` users with an email and an age, one journal record each. */
function buildUsersDir(users: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'users-find-bench-'));
  const fd = openSync(join(dir, journalName(1)), 'w', 0o600);
  try {
    const parts: Buffer[] = [encodeHeader(FileKind.Journal, 1)];
    let bytes = HEADER_BYTES;
    for (let id = 1; id <= users; id++) {
      const json = JSON.stringify({ name: typicalName(id), email: emailOf(id), age: id % 90, id });
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
  return dir;
}

function emailOf(id: number): string {
  return `user${id}@example.com`;
}

/** `users-server ARGS...`, failing loudly. */
function usersServer(args: string[]): void {
  execFileSync(process.execPath, [SERVER_BIN, ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
}

/** `--data DIR` or `--store URL` for a server and the index commands. */
type Target = { kind: 'journal'; args: string[] } | { kind: 'postgres'; args: string[] };

async function targetFor(store: string, dir: string): Promise<Target> {
  if (store === 'journal') return { kind: 'journal', args: ['--data', dir] };
  const url = await testDatabase(undefined, { durable: true, migrated: false });
  usersServer(['copy', '--from', dir, '--to', url]);
  return { kind: 'postgres', args: ['--store', url] };
}

function declare(target: Target, path: string, flags: string[]): void {
  usersServer(['index', 'add', path, ...flags, ...target.args]);
}

async function start(target: Target): Promise<ServerProcess> {
  return spawnServer(['--port', '0', '--require-session', 'none', ...LOAD_FLAGS, ...target.args]);
}

function byIdRequests() {
  return requestPool(() => ({ path: `/users/${1 + Math.floor(Math.random() * USERS)}` }));
}

function byEmailRequests() {
  return requestPool(() => {
    const filter = `email eq "${emailOf(1 + Math.floor(Math.random() * USERS))}"`;
    return { path: `/users?filter=${encodeURIComponent(filter)}` };
  });
}

/** A window of load: its rate, and the requests answered and the server's CPU seconds in it. */
interface LoadWindow {
  rps: number;
  requests: number;
  cpu: number;
}

/**
 * Requests a second of GET by id and of the indexed lookup in ROUNDS
 * rounds, each a window of both back to back (which comes first
 * alternates): the ratio is the median of the rounds' ratios, the windows of
 * a round sharing the machine's load of the moment, and their range is given.
 * Beside it, the server process's CPU time a request over all windows
 * (PostgreSQL's own is not in it), which other work on the machine moves less.
 */
async function lookup(target: Target): Promise<string[]> {
  declare(target, 'email', ['--unique', '--case-insensitive']);
  const server = await start(target);
  try {
    const byId: LoadWindow[] = [];
    const byEmail: LoadWindow[] = [];
    const seconds = SECONDS / ROUNDS;
    const load = async (requests: ReturnType<typeof requestPool>): Promise<LoadWindow> => {
      const before = cpuSeconds(server.pid);
      const answered = await socketLoad({ url: server.url, connections: CONNECTIONS, seconds, requests });
      if (answered.non2xx > 0) throw new Error(`the load answered ${answered.non2xx} non-2xx`);
      return { rps: answered.rps, requests: answered.requests, cpu: cpuSeconds(server.pid) - before };
    };
    for (let round = 0; round < ROUNDS; round++) {
      if (round % 2 === 0) {
        byId.push(await load(byIdRequests()));
        byEmail.push(await load(byEmailRequests()));
      } else {
        byEmail.push(await load(byEmailRequests()));
        byId.push(await load(byIdRequests()));
      }
    }
    const ratios = byId.map((id, round) => byEmail[round]!.rps / id.rps);
    const range = `${Math.min(...ratios).toFixed(2)} to ${Math.max(...ratios).toFixed(2)}`;
    const ratio = `${median(ratios).toFixed(2)} (rounds ${range}; goal >= 0.85)`;
    const rate = (windows: LoadWindow[]) => fmt(median(windows.map((w) => w.rps)), 0);
    const cpu = `${fmt(microsEach(byId), 0)} / ${fmt(microsEach(byEmail), 0)} µs`;
    return [target.kind, rate(byId), rate(byEmail), ratio, cpu];
  } finally {
    await server.stop();
  }
}

/** The server's CPU time a request over `windows`, in microseconds. */
function microsEach(windows: readonly LoadWindow[]): number {
  const sum = (of: (w: LoadWindow) => number) => windows.reduce((total, w) => total + of(w), 0);
  return (sum((w) => w.cpu) / sum((w) => w.requests)) * 1e6;
}

/** How long `run` takes, in seconds. */
async function secondsOf(run: () => Promise<unknown>): Promise<number> {
  const began = performance.now();
  await run();
  return (performance.now() - began) / 1000;
}

/** Follows `next` from `path` to the end; the number of pages. */
async function followAll(url: string, path: string): Promise<number> {
  let next: string | null = path;
  let pages = 0;
  while (next !== null) {
    const answer = await fetch(`${url}${next}`);
    if (answer.status !== 200) throw new Error(`${next} answered ${answer.status}`);
    next = ((await answer.json()) as { next: string | null }).next;
    pages++;
  }
  return pages;
}

/** A scan of an undeclared path in full; then four scanners and the p99 of a fifth client's GETs. */
async function scan(target: Target): Promise<string[]> {
  const server = await start(target);
  const path = `/users?filter=${encodeURIComponent('name ew "7"')}&limit=1000`;
  try {
    const rates: number[] = [];
    for (let round = 0; round < 4; round++) rates.push(USERS / (await secondsOf(() => followAll(server.url, path))));
    let scanning = true;
    const scanners = [1, 2, 3, 4].map(async () => {
      while (scanning) await followAll(server.url, path);
    });
    const latencies: number[] = [];
    const until = performance.now() + SECONDS * 1000;
    while (performance.now() < until) {
      const sent = performance.now();
      const answer = await fetch(`${server.url}/users/${1 + Math.floor(Math.random() * USERS)}`);
      await answer.arrayBuffer();
      latencies.push(performance.now() - sent);
    }
    scanning = false;
    await Promise.all(scanners);
    latencies.sort((a, b) => a - b);
    const p99 = percentile(latencies, 0.99);
    // The first scan after start also waits for the compilers to settle on the scan's functions.
    const [first, ...settled] = rates.map((rate) => rate / 1e6);
    return [target.kind, fmt(median(settled), 2), fmt(first!, 2), `${fmt(p99, 1)} ms (goal < 20)`];
  } finally {
    await server.stop();
  }
}

/**
 * Start-up to the first answer, peak RSS and RSS once settled, with no
 * index and with two: the first start (which builds the indexes) apart
 * from the three after it (which read the cache the one before kept).
 */
async function memory(dir: string): Promise<string[][]> {
  const rows: string[][] = [];
  const figures: { first: number; ms: number; peak: number; settled: number }[] = [];
  for (const indexes of [0, 2]) {
    const copy = mkdtempSync(join(tmpdir(), 'users-find-memory-'));
    cpSync(dir, copy, { recursive: true });
    const target: Target = { kind: 'journal', args: ['--data', copy] };
    if (indexes > 0) {
      declare(target, 'email', ['--unique']);
      declare(target, 'age', []);
    }
    const times: number[] = [];
    const peaks: number[] = [];
    const settled: number[] = [];
    for (let round = 0; round < 4; round++) {
      const server = await start(target);
      const answered = await fetch(`${server.url}/healthz`);
      times.push(performance.now() - server.spawnedAt);
      if (answered.status !== 200) throw new Error(`/healthz answered ${answered.status}`);
      // Once a unique field's holders, filled after the start, are: seconds of GETs, the same with no index.
      await socketLoad({ url: server.url, connections: 4, seconds: 3, requests: byIdRequests() });
      peaks.push(peakRss(server.pid));
      settled.push(residentRss(server.pid));
      await server.stop();
    }
    rmSync(copy, { recursive: true, force: true });
    const later = (list: number[]) => median(list.slice(1));
    figures.push({ first: times[0]!, ms: later(times), peak: later(peaks), settled: later(settled) });
    const mib = (bytes: number) => fmt(bytes / 2 ** 20, 1);
    rows.push([`${indexes} declared`, fmt(times[0]!, 0), fmt(later(times), 0), mib(later(peaks)), mib(later(settled))]);
  }
  const [none, two] = figures as [(typeof figures)[number], (typeof figures)[number]];
  const keys = keyBytesPerUser();
  // Each index's share beyond the keys themselves, the goal's measure.
  const perIndex = (bytes: number) => `${fmt((bytes / USERS - keys) / 2, 0)} B`;
  rows.push([
    'two indexes over none',
    `${(two.first / none.first).toFixed(2)}x`,
    `${(two.ms / none.ms).toFixed(2)}x (goal <= 1.3x)`,
    `${perIndex(two.peak - none.peak)} a user an index`,
    `${perIndex(two.settled - none.settled)} (goal <= 80)`,
  ]);
  rows.push(['(the keys themselves, apart)', '', '', `${fmt(keys, 0)} B a user`, '']);
  return rows;
}

/**
 * The heap the index keys themselves take a user (the email's, made per
 * user as emailOf spells it; the age's, shared small-number keys): the same
 * keys (as an index keeps them) made in a process of their own into arrays
 * made before, the heap read before and after.
 */
function keyBytesPerUser(): number {
  const script = `
    import { sortKeyOf } from ${JSON.stringify(join(ROOT, 'dist/server/users/index-key.js'))};
    const n = ${USERS};
    const emails = new Array(n).fill('');
    const ages = new Array(n).fill('');
    globalThis.gc();
    const before = process.memoryUsage().heapUsed;
    for (let id = 1; id <= n; id++) {
      emails[id - 1] = sortKeyOf({ email: 'user' + id + '@example.com' }, ['email'], false);
      ages[id - 1] = sortKeyOf({ age: id % 90 }, ['age'], false);
    }
    globalThis.gc();
    console.log((process.memoryUsage().heapUsed - before) / n);
    // Read after the heap, so that the arrays are still held when it is.
    if (emails.length + ages.length !== 2 * n) process.exit(1);
  `;
  const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  return Number(out.trim());
}

console.error(`building ${fmt(USERS, 0)} users...`);
const dir = buildUsersDir(USERS);
try {
  const stores = STORES.filter((store) => {
    const skip = store === 'postgres' ? postgresSkipReason() : undefined;
    if (skip !== undefined) console.log(`postgres skipped: ${skip}`);
    return skip === undefined;
  });
  if (PARTS.includes('lookup')) {
    const rows = [];
    for (const store of stores) {
      const copy = mkdtempSync(join(tmpdir(), 'users-find-lookup-'));
      cpSync(dir, copy, { recursive: true });
      rows.push(await lookup(await targetFor(store, copy)));
      rmSync(copy, { recursive: true, force: true });
    }
    console.log(`\nIndexed unique lookup against GET by id, ${fmt(USERS, 0)} users, ${CONNECTIONS} connections:\n`);
    console.log(
      table(
        ['store', 'GET /users/{id} req/s', 'filter=email eq req/s', 'lookup / GET', 'server CPU a GET / a lookup'],
        rows,
      ),
    );
  }
  if (PARTS.includes('scan')) {
    const rows = [];
    for (const store of stores) rows.push(await scan(await targetFor(store, dir)));
    console.log(`\nA filter no index serves, answered in full, and GETs beside four such scans:\n`);
    console.log(
      table(['store', 'million users examined a second', 'the first scan after start', 'GET p99 beside 4 scans'], rows),
    );
  }
  if (PARTS.includes('memory')) {
    console.log(`\nStart-up and memory on the journal, ${fmt(USERS, 0)} users:\n`);
    console.log(
      table(
        ['indexes', 'first start ms', 'later starts ms (median of 3)', 'peak RSS MiB', 'RSS after 3 s of GETs, MiB'],
        await memory(dir),
      ),
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
