/**
 * The PostgreSQL store against the journal (issue 18, "Speed and docs"):
 * the same GET-by-id and replacing-PUT loads against one users-server on
 * the journal, one on PostgreSQL, and three on one PostgreSQL database
 * together, on this machine; the ratios are to the journal instance.
 *
 * The database is a throwaway cluster started here (test/postgres.ts, with
 * fsync on: a PUT is acknowledged after its commit is on disk, as the
 * journal's is after its fdatasync). Nothing is pinned: the load
 * generator in this process, the servers and the database share the
 * machine's cores, so the loads come from the lean test/socket-load.ts
 * (`--generator autocannon` for autocannon's).
 *
 * With `--auth session` or `--auth token` the servers require a session
 * for every /users request (`--require-session all`), and each request of
 * the loads carries the admin's session cookie or an API token.
 *
 * Run: node --import tsx bench/postgres-bench.ts [--rounds 3] [--seconds 10] [--connections 48]
 * [--load get|put|reserve|create ...] [--auth none|session|token] [--generator sockets|autocannon]
 * (after `npm run build`; needs PostgreSQL's server binaries).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { postgresSkipReason, testDatabase } from '../test/postgres.js';
import { socketLoad } from '../test/socket-load.js';
import {
  ADMIN_PASSWORD,
  cpuSeconds,
  fmt,
  JSON_HEADERS,
  LOAD_FLAGS,
  machineBusySeconds,
  median,
  preloadUsers,
  putReplacing,
  requestPool,
  runLoad,
  typicalName,
  spawnServer,
  type LoadRequest,
  type ServerProcess,
} from './store-bench.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '48' },
    'db-pool': { type: 'string', default: '10' },
    load: { type: 'string', multiple: true },
    auth: { type: 'string', default: 'none' },
    generator: { type: 'string', default: 'sockets' },
  },
});
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const USERS = 10_000;
const AUTH = values.auth!;
if (!['none', 'session', 'token'].includes(AUTH)) throw new Error('--auth is none, session or token');
const GENERATOR = values.generator!;
if (!['sockets', 'autocannon'].includes(GENERATOR)) throw new Error('--generator is sockets or autocannon');

type Setup = { name: string; instances: number; store: 'journal' | 'postgres' };
const SETUPS: Setup[] = [
  { name: 'journal, 1 instance', instances: 1, store: 'journal' },
  { name: 'PostgreSQL, 1 instance', instances: 1, store: 'postgres' },
  { name: 'PostgreSQL, 3 instances', instances: 3, store: 'postgres' },
];
const ALL_LOADS: { name: string; key: string; requests: (headers: LoadHeaders) => LoadRequest[] }[] = [
  {
    name: 'GET by id',
    key: 'get',
    requests: (headers) =>
      requestPool(() => ({ method: 'GET', path: `/users/${1 + Math.floor(Math.random() * USERS)}`, headers })),
  },
  {
    name: 'durable PUT replace',
    key: 'put',
    requests: (headers) => putReplacing(USERS).map((r) => ({ ...r, headers: { ...r.headers, ...headers } })),
  },
  {
    name: 'POST reservation',
    key: 'reserve',
    requests: (headers) => [{ method: 'POST', path: '/reservations', headers }],
  },
  {
    name: 'POST create',
    key: 'create',
    requests: (headers) =>
      requestPool(() => ({
        method: 'POST',
        path: '/users/new',
        headers: { ...JSON_HEADERS, ...headers },
        body: JSON.stringify({ name: typicalName(Math.floor(Math.random() * 1e6)) }),
      })),
  },
];
/** Without --load: the loads of the issue's targets, GET and PUT. */
const LOADS = ALL_LOADS.filter((l) =>
  values.load === undefined ? ['get', 'put'].includes(l.key) : values.load.includes(l.key),
);

type LoadHeaders = Record<string, string>;

/** One setup's servers, loaded with the same users, and the headers the loads' requests carry. */
async function start(setup: Setup, dir: string): Promise<{ servers: ServerProcess[]; headers: LoadHeaders }> {
  const store = setup.store === 'journal' ? 'journal' : await testDatabase(undefined, { durable: true });
  const serve = (i: number, requireSession: string) =>
    spawnServer(
      [
        '--port',
        '0',
        '--data',
        join(dir, `data-${i}`),
        '--store',
        store,
        '--log-format',
        'off',
        '--require-session',
        requireSession,
        '--max-reservations',
        '100000000',
        ...LOAD_FLAGS,
        ...(setup.store === 'postgres' ? ['--db-pool', values['db-pool']] : []),
      ],
      { stdoutFile: join(dir, `out-${i}-${requireSession}`) },
    );
  // The users are made before sessions are required: by a server of their own when they will be.
  const loader = await serve(0, 'none');
  await preloadUsers(loader.url, USERS, 32);
  if (AUTH === 'none')
    return { servers: [loader, ...(await startMore(setup.instances - 1, (i) => serve(i + 1, 'none')))], headers: {} };
  await loader.stop();
  const servers = await startMore(setup.instances, (i) => serve(i, 'all'));
  return { servers, headers: await credentials(servers[0]!.url) };
}

async function startMore(count: number, serve: (i: number) => Promise<ServerProcess>): Promise<ServerProcess[]> {
  const servers: ServerProcess[] = [];
  for (let i = 0; i < count; i++) servers.push(await serve(i));
  return servers;
}

/** The admin's session cookie (`--auth session`), or an admin API token made with it (`--auth token`). */
async function credentials(url: string): Promise<LoadHeaders> {
  const login = await fetch(`${url}/login`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` },
  });
  const cookie = login.headers.get('set-cookie')?.split(';')[0];
  if (login.status !== 200 || cookie === undefined) throw new Error(`POST /login answered ${login.status}`);
  if (AUTH === 'session') return { cookie };
  const made = await fetch(`${url}/tokens`, {
    method: 'POST',
    headers: { cookie, origin: url, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench', role: 'admin' }),
  });
  const body = (await made.json()) as { token?: string };
  if (made.status !== 201 || body.token === undefined) throw new Error(`POST /tokens answered ${made.status}`);
  return { authorization: `Bearer ${body.token}` };
}

/**
 * CPU seconds used so far by each PostgreSQL process (postmaster, backends,
 * writers); the postmaster's include the backends that have ended, which it
 * has waited for (an instance replaces its pool's connections now and then).
 */
function databaseCpu(): Map<number, number> {
  const used = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres')
        used.set(Number(entry), cpuSeconds(Number(entry), true));
    } catch {
      // The process ended while the list was read.
    }
  }
  return used;
}

/** CPU seconds the database used between two readings; a process new since the first counts whole. */
function databaseCpuSince(before: Map<number, number>): number {
  let total = 0;
  for (const [pid, seconds] of databaseCpu()) total += seconds - (before.get(pid) ?? 0);
  return total;
}

interface Figures {
  rps: number;
  /** CPU microseconds per request in the users-server processes, and in PostgreSQL's. */
  serverUs: number;
  databaseUs: number;
  /** CPU microseconds per request in this process, the load generator. */
  loadUs: number;
  /** The share of all the machine's cores busy during the load (load generator and everything else included). */
  machineBusy: number;
}

/** Every server loaded at once, the connections split among them; the req/s summed. */
async function load(servers: ServerProcess[], requests: () => LoadRequest[], seconds: number): Promise<Figures> {
  const each = Math.max(1, Math.floor(CONNECTIONS / servers.length));
  const serversBefore = servers.reduce((sum, s) => sum + cpuSeconds(s.pid), 0);
  const databaseBefore = databaseCpu();
  const machineBefore = machineBusySeconds();
  const loadBefore = process.cpuUsage();
  const generate = GENERATOR === 'sockets' ? socketLoad : runLoad;
  const results = await Promise.all(
    servers.map((s) => generate({ url: s.url, connections: each, seconds, requests: requests() })),
  );
  const serverCpu = servers.reduce((sum, s) => sum + cpuSeconds(s.pid), 0) - serversBefore;
  const databaseCpuUsed = databaseCpuSince(databaseBefore);
  const loadUsed = process.cpuUsage(loadBefore);
  const machineBusy = (machineBusySeconds() - machineBefore) / (seconds * availableParallelism());
  for (const r of results)
    if (r.errors > 0 || r.non2xx > 0) throw new Error(`${r.errors} errors, ${r.non2xx} non-2xx answers`);
  if (results.length > 1 && seconds === SECONDS)
    console.error(`  each instance: ${results.map((r) => fmt(r.rps, 0)).join(', ')} req/s`);
  const rps = results.reduce((sum, r) => sum + r.rps, 0);
  const requestsDone = rps * seconds;
  return {
    rps,
    serverUs: (serverCpu / requestsDone) * 1e6,
    databaseUs: (databaseCpuUsed / requestsDone) * 1e6,
    loadUs: (loadUsed.user + loadUsed.system) / requestsDone,
    machineBusy,
  };
}

async function main(): Promise<void> {
  const skip = postgresSkipReason();
  if (skip !== undefined) throw new Error(skip);
  // Nothing is pinned: the servers, the database and the load generator share both cores. (Pinning
  // this process would pin every child started from it, the database and the servers, to its core.)
  // Per setup and load, one entry per round.
  const figures = new Map<string, Figures[]>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const setup of SETUPS) {
      const dir = mkdtempSync(join(tmpdir(), 'users-pg-bench-'));
      const { servers, headers } = await start(setup, dir);
      try {
        for (const l of LOADS) {
          const requests = () => l.requests(headers);
          await load(servers, requests, 1);
          const f = await load(servers, requests, SECONDS);
          figures.set(`${setup.name}|${l.name}`, [...(figures.get(`${setup.name}|${l.name}`) ?? []), f]);
          console.error(
            `round ${round}: ${setup.name}, ${l.name}: ${fmt(f.rps, 0)} req/s, CPU per request ${fmt(f.serverUs, 0)} us in users-server, ${fmt(f.databaseUs, 0)} us in PostgreSQL, ${fmt(f.loadUs, 0)} us in the load generator, machine ${Math.round(f.machineBusy * 100)}% busy`,
          );
        }
      } finally {
        for (const s of servers) await s.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  const auth =
    AUTH === 'none' ? '' : `, every request with ${AUTH === 'session' ? 'a session cookie' : 'an API token'}`;
  console.log(
    `PostgreSQL against the journal, ${ROUNDS} rounds x ${SECONDS} s, ${CONNECTIONS} connections (split among the instances)${auth};`,
  );
  console.log("ratio: the median of each round's ratio to the journal in the same round; the rest are medians");
  for (const l of LOADS) {
    const base = figures.get(`${SETUPS[0]!.name}|${l.name}`)!;
    for (const setup of SETUPS) {
      const rounds = figures.get(`${setup.name}|${l.name}`)!;
      const ratio = median(rounds.map((f, i) => f.rps / base[i]!.rps));
      const cpu = `CPU/request ${fmt(median(rounds.map((f) => f.serverUs)), 0).padStart(5)} us server + ${fmt(median(rounds.map((f) => f.databaseUs)), 0).padStart(5)} us PostgreSQL`;
      console.log(
        `${l.name.padEnd(20)} ${setup.name.padEnd(24)} ${fmt(median(rounds.map((f) => f.rps)), 0).padStart(8)} req/s  ${ratio.toFixed(2)} of the journal  ${cpu}`,
      );
    }
  }
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(`bench/postgres-bench: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
