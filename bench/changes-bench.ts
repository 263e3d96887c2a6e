/**
 * The feed of changes (GET /changes), measured beside the writes that make
 * the changes:
 *
 * - latency: PUTs at a steady rate (--rate, default 1,000 a second) on a
 *   journal server while a watcher follows on the same server, and on
 *   PostgreSQL with the watcher on another instance than the writer: how
 *   long after each PUT's answer its change reaches the watcher;
 * - idle watchers: 1,000 following feeds held open against one server
 *   (from a process of their own, bench/feed-watchers.mjs),
 *   the server's RSS with and without them, and GET and PUT req/s with and
 *   without them side by side;
 * - catch-up: a journal of 1,000,000 changes (written directly, as
 *   bench/store-bench.ts does for start-up) read with since=0: lines a second.
 *
 * Nothing is asserted; the figures are printed. Run: npm run build && node --import tsx bench/changes-bench.ts
 * [--part latency|idle|catchup] [--rate 1000] [--seconds 10] [--watchers 1000] [--changes 1000000]
 */
import { spawn } from 'node:child_process';
import { request, Agent } from 'node:http';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { postgresSkipReason, testDatabase } from '../test/postgres.js';
import { track } from '../test/children.js';
import { socketLoad } from '../test/socket-load.js';
import {
  buildJournalDir,
  cpuSeconds,
  LOAD_FLAGS,
  median,
  peakRss,
  percentile,
  preloadUsers,
  putReplacing,
  requestPool,
  spawnServer,
  type LoadRequest,
  type ServerProcess,
} from './store-bench.js';

const { values } = parseArgs({
  options: {
    part: { type: 'string', default: 'all' },
    rate: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '10' },
    watchers: { type: 'string', default: '1000' },
    changes: { type: 'string', default: '1000000' },
    rounds: { type: 'string', default: '3' },
  },
});
const SECONDS = Number(values.seconds);
const dir = mkdtempSync(join(tmpdir(), 'users-changes-bench-'));
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** A following feed from `url`: calls `onLine` with each change line as it arrives; resolves once its headers came. */
function follow(url: string, onLine: (line: string) => void): Promise<() => void> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/changes?follow=1`, { agent: false }, (res) => {
      let partial = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop()!;
        for (const line of lines) if (line !== '') onLine(line);
      });
      resolve(() => req.destroy());
    });
    req.on('error', reject);
    req.end();
  });
}

function putUser(url: string, path: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${path}`,
      { method: 'PUT', agent, headers: { 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * PUTs at `rate` a second for SECONDS through `writer`, each with a number `n`; how long after each answer `watcher`
 * saw its change, ms.
 */
async function latencies(writer: string, watcher: string, rate: number): Promise<number[]> {
  const answered = new Map<number, number>();
  const seen = new Map<number, number>();
  const stop = await follow(watcher, (line) => {
    const n = (JSON.parse(line) as { user?: { n?: number } }).user?.n;
    if (n !== undefined) seen.set(n, performance.now());
  });
  const total = rate * SECONDS;
  const started = performance.now();
  const writes: Promise<void>[] = [];
  for (let n = 0; n < total; n++) {
    const due = started + (n * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    writes.push(
      putUser(writer, `/users/${1 + (n % 1000)}`, JSON.stringify({ name: `User ${n}`, n })).then(
        () => void answered.set(n, performance.now()),
      ),
    );
  }
  await Promise.all(writes);
  const deadline = performance.now() + 5000;
  while (seen.size < total && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  stop();
  const delays = [...answered].map(([n, at]) => (seen.get(n) ?? Infinity) - at);
  return delays.sort((a, b) => a - b);
}

function report(name: string, delays: number[]): void {
  const missing = delays.filter((d) => d === Infinity).length;
  console.log(
    `${name}: ${delays.length} PUTs, change seen after the answer: median ${percentile(delays, 0.5).toFixed(2)} ms, p99 ${percentile(delays, 0.99).toFixed(2)} ms, max ${delays.filter(Number.isFinite).at(-1)?.toFixed(2)} ms${missing > 0 ? `, ${missing} never seen` : ''}`,
  );
}

async function latencyPart(): Promise<void> {
  const rate = Number(values.rate);
  const journal = await spawnServer([
    '--port',
    '0',
    '--data',
    join(dir, 'latency'),
    '--log-format',
    'off',
    ...LOAD_FLAGS,
  ]);
  try {
    await preloadUsers(journal.url, 1000, 16);
    report(`journal, watcher on the same server, ${rate} PUTs/s`, await latencies(journal.url, journal.url, rate));
  } finally {
    await journal.stop();
  }
  const skip = postgresSkipReason();
  if (skip !== undefined) return console.log(`PostgreSQL skipped: ${skip}`);
  const store = await testDatabase(undefined, { durable: true });
  const [a, b] = [
    await spawnServer([
      '--port',
      '0',
      '--data',
      join(dir, 'pg-a'),
      '--store',
      store,
      '--log-format',
      'off',
      ...LOAD_FLAGS,
    ]),
    await spawnServer([
      '--port',
      '0',
      '--data',
      join(dir, 'pg-b'),
      '--store',
      store,
      '--log-format',
      'off',
      ...LOAD_FLAGS,
    ]),
  ];
  try {
    await preloadUsers(a.url, 1000, 16);
    report(
      `PostgreSQL, PUTs on instance A, watcher on instance B, ${rate} PUTs/s`,
      await latencies(a.url, b.url, rate),
    );
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
}

/**
 * Req/s of `server` under `requests`, and the server's CPU per request in µs: `rounds` rounds of 3 s each, the medians.
 */
async function throughput(
  server: ServerProcess,
  rounds: number,
  requests: LoadRequest[],
): Promise<{ rps: number; us: number }> {
  const rps: number[] = [];
  const us: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const before = cpuSeconds(server.pid);
    const r = await socketLoad({ url: server.url, connections: 32, seconds: 3, requests });
    rps.push(r.rps);
    us.push(((cpuSeconds(server.pid) - before) / r.requests) * 1e6);
  }
  return { rps: median(rps), us: median(us) };
}

/**
 * `count` following watchers of `url` in a child process (bench/feed-watchers.mjs); resolves once all have their
 * answers.
 */
async function startWatchers(url: string, count: number): Promise<{ stop(): Promise<number> }> {
  const child = spawn(
    process.execPath,
    [fileURLToPath(new URL('feed-watchers.mjs', import.meta.url)), url, String(count)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  track(child);
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  await Promise.race([
    new Promise<void>((resolve) => child.stdout.on('data', () => output.includes('ready\n') && resolve())),
    exited.then((code) => Promise.reject(new Error(`the watchers exited (${code}) before they all followed`))),
  ]);
  return {
    async stop() {
      child.kill('SIGTERM');
      await exited;
      return Number(/received (\d+)/.exec(output)?.[1] ?? NaN);
    },
  };
}

/** users_server_change_lines_total of the server at `url`. */
async function linesSent(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^users_server_change_lines_total (\d+)/m.exec(text)?.[1] ?? NaN);
}

async function idlePart(): Promise<void> {
  const count = Number(values.watchers);
  const rounds = Number(values.rounds);
  const server = await spawnServer(['--port', '0', '--data', join(dir, 'idle'), '--log-format', 'off', ...LOAD_FLAGS]);
  try {
    await preloadUsers(server.url, 1000, 16);
    const gets = requestPool(() => ({ method: 'GET', path: `/users/${1 + Math.floor(Math.random() * 1000)}` }));
    const puts = putReplacing(1000);
    await throughput(server, 1, gets);
    const rssBefore = rssOf(server.pid);
    const getWithout = await throughput(server, rounds, gets);
    const putWithout = await throughput(server, rounds, puts);
    const watchers = await startWatchers(server.url, count);
    const rssWith = rssOf(server.pid);
    // GETs make no change: the watchers stay idle. Each PUT's change then goes to every watcher.
    const getWith = await throughput(server, rounds, gets);
    const linesBefore = await linesSent(server.url);
    const putWith = await throughput(server, rounds, puts);
    const lines = (await linesSent(server.url)) - linesBefore;
    const bytes = await watchers.stop();
    const row = (name: string, without: { rps: number; us: number }, withThem: { rps: number; us: number }) =>
      `  ${name}: ${Math.round(without.rps)} -> ${Math.round(withThem.rps)} req/s (${(withThem.rps / without.rps).toFixed(3)}), server CPU ${without.us.toFixed(1)} -> ${withThem.us.toFixed(1)} µs a request`;
    console.log(
      `${count} following watchers (in a process of their own): server RSS ${mb(rssBefore)} -> ${mb(rssWith)} MiB (+${mb(rssWith - rssBefore)}) while idle, peak ${mb(peakRss(server.pid))} MiB`,
    );
    console.log(row('GET (the watchers idle)', getWithout, getWith));
    console.log(
      row(
        `PUT (each change sent to every watcher: ${lines.toLocaleString('en-US')} lines, ${mb(bytes)} MiB)`,
        putWithout,
        putWith,
      ),
    );
  } finally {
    await server.stop();
  }
}

async function catchUpPart(): Promise<void> {
  const changes = Number(values.changes);
  const data = join(dir, 'catchup');
  mkdirSync(data);
  buildJournalDir(data, changes);
  const server = await spawnServer(['--port', '0', '--data', data, '--log-format', 'off', ...LOAD_FLAGS]);
  try {
    const started = performance.now();
    const lines = await new Promise<number>((resolve, reject) => {
      let count = 0;
      request(`${server.url}/changes?since=0`, { agent: false }, (res) => {
        res.on('data', (chunk: Buffer) => {
          for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) count++;
        });
        res.on('end', () => resolve(count));
      })
        .on('error', reject)
        .end();
    });
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `catch-up from since=0: ${lines.toLocaleString('en-US')} lines in ${seconds.toFixed(2)} s, ${Math.round(lines / seconds).toLocaleString('en-US')} lines a second`,
    );
  } finally {
    await server.stop();
  }
}

/** The resident memory of process `pid` now, in bytes. */
function rssOf(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
}
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

try {
  if (values.part === 'all' || values.part === 'latency') await latencyPart();
  if (values.part === 'all' || values.part === 'idle') await idlePart();
  if (values.part === 'all' || values.part === 'catchup') await catchUpPart();
} finally {
  agent.destroy();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
