/**
 * `npm run bench` (issue 5): users-server against a reference server.
 *
 * The reference (bench/reference-server.mjs) is a minimal node:http server
 * with a switch router and a Map: the practical upper bound for Node on this
 * machine. Its `--floor` mode answers a constant body: the floor.
 *
 * Each round starts a fresh users-server (default journal store, fresh data
 * directory, 10,000 users through POST /users/new, 1,000 more through
 * aliases, a session from POST /login) and a fresh reference server (10,000
 * users through PUT), both pinned to core 0; autocannon runs in this process,
 * pinned to core 1. Then, scenario by scenario, users-server is loaded and
 * then the reference (A B), so every ratio compares runs made side by side;
 * over the rounds that is A B A B. Every response status is checked against
 * what the scenario expects.
 *
 * Run: npm run bench [-- --rounds 3 --seconds 10 --scenario get-id ...]
 * (bench/README.md describes the flags and each scenario).
 */
import { DEFAULT_CONCURRENCY } from '../cli/import.js';
import { spawn } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { finished } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { HEADER_BYTES } from '../server/store/journal/codec.js';
import { journalName, snapshotName } from '../server/store/journal/recovery.js';
import {
  ADMIN_PASSWORD,
  benchStartup,
  buildJournalDir,
  buildSnapshotDir,
  fmt,
  median,
  pinning,
  pinSelf,
  LOAD_FLAGS,
  preloadUsers,
  putReplacing,
  requestPool,
  REFERENCE_SCRIPT,
  ROOT,
  runLoad,
  spawnServer,
  table,
  typicalName,
  waitForQuiet,
  type LoadRequest,
  type LoadResult,
  type ServerProcess,
  type StartupFigures,
} from './store-bench.js';

const USERSCTL = join(ROOT, 'bin', 'usersctl.js');
const JSON_HEADERS = { 'content-type': 'application/json' };
/** Users created on both servers before the scenarios (ids 1..PRELOAD). */
const PRELOAD = 10_000;
/** Users created on users-server through PUT /users/bench-r-<n>, for GET by alias. */
const ALIASES = 1_000;
/** Users whose ETag is fetched for the If-None-Match scenario. */
const ETAG_SAMPLE = 1_000;
/** Targets shared by every scenario: p99 at most this many times the reference's. */
const P99_TARGET = 1.5;
const START_TARGET_MS = 1500;
const RSS_TARGET_MIB = 350;
const IMPORT_TARGET_S = 30;

// ---------------------------------------------------------------- scenarios

/** What users-server knows after a round's set-up, for building requests. */
interface UsersFixture {
  users: number;
  aliases: number;
  etags: string[];
  cookie: string;
  /** Next n of /users/bench-a-<n>: every PUT creating through an alias uses a new one. */
  nextAlias: number;
}

/** What the reference server holds: ids 1..users, and the next id a creating PUT uses. */
interface ReferenceFixture {
  users: number;
  nextId: number;
}

type ReferenceKind = 'get' | 'put-replace' | 'put-create';

/** The reference server's closest request to each users-server scenario. */
const REFERENCES: Record<
  ReferenceKind,
  { label: string; expect: number[]; requests: (f: ReferenceFixture) => LoadRequest[] }
> = {
  get: {
    label: 'GET /users/{id}',
    expect: [200],
    requests: (f) => requestPool(() => ({ method: 'GET', path: `/users/${randomId(f.users)}` })),
  },
  'put-replace': { label: 'PUT /users/{id} replace', expect: [200], requests: (f) => putReplacing(f.users) },
  'put-create': {
    label: 'PUT /users/{new id} create',
    expect: [201],
    requests: (f) => [
      {
        method: 'PUT',
        headers: JSON_HEADERS,
        setupRequest: (req) => ({ ...req, path: `/users/${f.nextId++}`, body: nameBody() }),
      },
    ],
  },
};

interface Scenario {
  name: string;
  title: string;
  reference: ReferenceKind;
  /** Least acceptable ratio of req/s to the reference's; undefined: no target. */
  target: number | undefined;
  /** The statuses users-server must answer; anything else counts as an error. */
  expect: number[];
  requests: (f: UsersFixture) => LoadRequest[];
  /** Measured on a second users-server started with `--log-format off` (set up alike). */
  logOff?: true;
}

/** In run order: the reads first, so they all see the state the set-up made. */
const SCENARIOS: Scenario[] = [
  {
    name: 'get-id',
    title: 'GET by id',
    reference: 'get',
    target: 0.9,
    expect: [200],
    requests: (f) => requestPool(() => ({ method: 'GET', path: `/users/${randomId(f.users)}` })),
  },
  {
    name: 'get-id-log-off',
    title: 'GET by id, log off',
    reference: 'get',
    target: 0.95,
    expect: [200],
    requests: (f) => requestPool(() => ({ method: 'GET', path: `/users/${randomId(f.users)}` })),
    logOff: true,
  },
  {
    name: 'get-alias',
    title: 'GET by alias',
    reference: 'get',
    target: 0.9,
    expect: [200],
    requests: (f) => requestPool(() => ({ method: 'GET', path: `/users/bench-r-${randomId(f.aliases)}` })),
  },
  {
    name: 'get-304',
    title: 'GET If-None-Match (304)',
    reference: 'get',
    target: undefined,
    expect: [304],
    requests: (f) =>
      requestPool(() => {
        const i = Math.floor(Math.random() * f.etags.length);
        return { method: 'GET', path: `/users/${etagId(i, f.users)}`, headers: { 'if-none-match': f.etags[i]! } };
      }),
  },
  {
    name: 'root-session',
    title: 'GET / with session',
    reference: 'get',
    target: 0.9,
    expect: [200],
    requests: (f) => [{ method: 'GET', path: '/', headers: { cookie: f.cookie } }],
  },
  {
    name: 'root-none',
    title: 'GET / without session (401)',
    reference: 'get',
    target: undefined,
    expect: [401],
    requests: () => [{ method: 'GET', path: '/' }],
  },
  {
    name: 'put-replace',
    title: 'durable PUT replace',
    reference: 'put-replace',
    target: 0.9,
    expect: [200],
    requests: (f) => putReplacing(f.users),
  },
  {
    name: 'put-alias-create',
    title: 'PUT create via alias',
    reference: 'put-create',
    target: undefined,
    expect: [201],
    requests: (f) => [
      {
        method: 'PUT',
        headers: JSON_HEADERS,
        setupRequest: (req) => ({ ...req, path: `/users/bench-a-${f.nextAlias++}`, body: nameBody() }),
      },
    ],
  },
  {
    name: 'reservations',
    title: 'POST /reservations',
    reference: 'put-create',
    target: undefined,
    expect: [201],
    requests: () => [{ method: 'POST', path: '/reservations' }],
  },
];

function randomId(count: number): number {
  return 1 + Math.floor(Math.random() * count);
}

/** The ids whose ETags are sampled: spread evenly over 1..users. */
function etagId(i: number, users: number): number {
  return 1 + i * Math.floor(users / ETAG_SAMPLE);
}

function nameBody(): string {
  return `{"name":${JSON.stringify(typicalName(Math.floor(Math.random() * 1e6)))}}`;
}

// -------------------------------------------------------------- set-up

/** One request with the global fetch; the body is read. */
async function call(url: string, init: RequestInit = {}): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(url, init);
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** Fresh users-server: 10,000 users, 1,000 aliased users, the sample ETags and a session. */
async function prepareUsersServer(server: ServerProcess, connections: number): Promise<UsersFixture> {
  await preloadUsers(server.url, PRELOAD, connections);
  let n = 0;
  const aliased = await runLoad({
    url: server.url,
    connections,
    amount: ALIASES,
    requests: [
      {
        method: 'PUT',
        headers: JSON_HEADERS,
        setupRequest: (req) => ({
          ...req,
          path: `/users/bench-r-${++n}`,
          body: JSON.stringify({ name: typicalName(n) }),
        }),
      },
    ],
  });
  assertOnly(aliased, [201], 'creating the aliased users');
  const etags = await readEtags(server);
  const login = await call(`${server.url}/login`, {
    method: 'POST',
    headers: { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64') },
  });
  const setCookie = login.headers.get('set-cookie');
  if (login.status !== 200 || setCookie === null) throw new Error(`set-up: POST /login answered ${login.status}`);
  const cookie = setCookie.split(';')[0]!;
  const checks = [
    [await call(`${server.url}/`, { headers: { cookie } }), 200, 'GET / with the session'],
    [await call(`${server.url}/users/bench-r-${ALIASES}`), 200, `GET /users/bench-r-${ALIASES}`],
    [
      await call(`${server.url}/users/${etagId(0, PRELOAD)}`, { headers: { 'if-none-match': etags[0]! } }),
      304,
      'GET with If-None-Match',
    ],
  ] as const;
  for (const [reply, status, what] of checks)
    if (reply.status !== status) throw new Error(`set-up: ${what} answered ${reply.status}, not ${status}`);
  return { users: PRELOAD, aliases: ALIASES, etags, cookie, nextAlias: 1 };
}

/** The current ETags of the sampled users, for the If-None-Match scenario. */
async function readEtags(server: ServerProcess): Promise<string[]> {
  const etags: string[] = [];
  for (let i = 0; i < ETAG_SAMPLE; i++) {
    const reply = await call(`${server.url}/users/${etagId(i, PRELOAD)}`);
    const etag = reply.headers.get('etag');
    if (reply.status !== 200 || etag === null)
      throw new Error(`set-up: GET /users/${etagId(i, PRELOAD)} answered ${reply.status} without an ETag`);
    etags.push(etag);
  }
  return etags;
}

/** Fresh reference server: ids 1..10,000 through PUT. */
async function prepareReference(server: ServerProcess, connections: number): Promise<ReferenceFixture> {
  let n = 0;
  const loaded = await runLoad({
    url: server.url,
    connections,
    amount: PRELOAD,
    requests: [
      {
        method: 'PUT',
        headers: JSON_HEADERS,
        setupRequest: (req) => ({ ...req, path: `/users/${++n}`, body: JSON.stringify({ name: typicalName(n) }) }),
      },
    ],
  });
  assertOnly(loaded, [201], 'preloading the reference server');
  const [first, past] = await Promise.all([call(`${server.url}/users/1`), call(`${server.url}/users/${PRELOAD + 1}`)]);
  if (first.status !== 200 || past.status !== 404)
    throw new Error(`set-up: the reference server answered ${first.status}, ${past.status} for ids 1, ${PRELOAD + 1}`);
  return { users: PRELOAD, nextId: PRELOAD + 1 };
}

/** Responses with another status than `expect`, plus socket errors and timeouts. */
function unexpected(result: LoadResult, expect: number[]): { count: number; detail: string } {
  const wrong = Object.entries(result.statuses).filter(([status]) => !expect.includes(Number(status)));
  const count = wrong.reduce((sum, [, n]) => sum + n, 0) + result.errors;
  const parts = wrong.map(([status, n]) => `${n} x ${status}`);
  if (result.errors > 0) parts.push(`${result.errors} socket errors or timeouts`);
  return { count, detail: parts.join(', ') };
}

function assertOnly(result: LoadResult, expect: number[], what: string): void {
  const wrong = unexpected(result, expect);
  if (wrong.count > 0) throw new Error(`set-up: ${what}: ${wrong.detail}`);
}

// --------------------------------------------------------------- rounds

interface Measurement {
  rounds: LoadResult[];
  /** Responses with an unexpected status (warm-up included), socket errors and timeouts. */
  errors: number;
  errorDetail: string[];
}

interface ScenarioFigures {
  scenario: Scenario;
  users: Measurement;
  reference: Measurement;
}

interface Options {
  rounds: number;
  seconds: number;
  warmup: number;
  connections: number;
  quietWait: number;
  scenarios: Scenario[];
  log: (line: string) => void;
}

/** Warm-up, then the measured run; unexpected statuses of both are counted. */
async function measure(
  server: ServerProcess,
  requests: () => LoadRequest[],
  expect: number[],
  into: Measurement,
  options: Options,
): Promise<LoadResult> {
  await waitForQuiet(options.quietWait);
  const runs: LoadResult[] = [];
  if (options.warmup > 0)
    runs.push(
      await runLoad({
        url: server.url,
        connections: options.connections,
        seconds: options.warmup,
        requests: requests(),
      }),
    );
  const result = await runLoad({
    url: server.url,
    connections: options.connections,
    seconds: options.seconds,
    requests: requests(),
    pid: server.pid,
  });
  runs.push(result);
  for (const run of runs) {
    const wrong = unexpected(run, expect);
    into.errors += wrong.count;
    if (wrong.count > 0) into.errorDetail.push(wrong.detail);
  }
  into.rounds.push(result);
  return result;
}

function roundLine(round: number, who: string, label: string, r: LoadResult): string {
  return `  round ${round} ${label.padEnd(30)} ${who.padEnd(9)} ${fmt(r.rps, 0).padStart(7)} req/s  p50 ${fmt(r.p50, 2)} ms  p99 ${fmt(r.p99, 2)} ms  server cpu ${share(r.serverCpu)}, other ${share(r.otherCpu)}`;
}

/** Every round: fresh servers and set-up, then each scenario on users-server and on the reference (A B). */
async function benchScenarios(options: Options): Promise<{ figures: ScenarioFigures[]; floor: Measurement }> {
  const blank = (): Measurement => ({ rounds: [], errors: 0, errorDetail: [] });
  const figures = options.scenarios.map((scenario) => ({ scenario, users: blank(), reference: blank() }));
  const floor = blank();
  for (let round = 1; round <= options.rounds; round++) {
    const dir = mkdtempSync(join(tmpdir(), 'users-bench-'));
    const servers: ServerProcess[] = [];
    try {
      // The cap on live reservations is raised so POST /reservations never answers 503 here.
      // Every server's stdout goes to a file: the access log is not read by this process, which runs the load
      // generator.
      const users = await spawnServer(
        ['--port', '0', '--data', join(dir, 'data'), '--max-reservations', '100000000', ...LOAD_FLAGS],
        { core: 0, stdoutFile: join(dir, 'users.out') },
      );
      servers.push(users);
      const quiet = figures.some((f) => f.scenario.logOff)
        ? await spawnServer(
            [
              '--port',
              '0',
              '--data',
              join(dir, 'data-quiet'),
              '--max-reservations',
              '100000000',
              '--log-format',
              'off',
              ...LOAD_FLAGS,
            ],
            { core: 0, stdoutFile: join(dir, 'quiet.out') },
          )
        : undefined;
      if (quiet !== undefined) servers.push(quiet);
      const reference = await spawnServer(['--port', '0'], {
        core: 0,
        script: REFERENCE_SCRIPT,
        stdoutFile: join(dir, 'reference.out'),
      });
      servers.push(reference);
      const usersFixture = await prepareUsersServer(users, options.connections);
      const quietFixture = quiet === undefined ? undefined : await prepareUsersServer(quiet, options.connections);
      const serverOf = (scenario: Scenario) =>
        scenario.logOff && quiet !== undefined
          ? { server: quiet, fixture: quietFixture! }
          : { server: users, fixture: usersFixture };
      const referenceFixture = await prepareReference(reference, options.connections);
      options.log(`round ${round}: users-server ${users.url} (data ${dir}), reference ${reference.url}`);
      // Settle both servers first (JIT, the heap after the set-up): every
      // selected scenario once, unmeasured. Without it the first scenario of
      // a round measured about 10% low, whichever it was.
      if (options.warmup > 0) {
        for (const { scenario } of figures) {
          const { server, fixture } = serverOf(scenario);
          await runLoad({
            url: server.url,
            connections: options.connections,
            seconds: options.warmup,
            requests: scenario.requests(fixture),
          });
          await runLoad({
            url: reference.url,
            connections: options.connections,
            seconds: options.warmup,
            requests: REFERENCES[scenario.reference].requests(referenceFixture),
          });
        }
        // The writes have replaced users: read their ETags again.
        usersFixture.etags = await readEtags(users);
        if (quiet !== undefined) quietFixture!.etags = await readEtags(quiet);
      }
      for (const entry of figures) {
        const { scenario } = entry;
        const ref = REFERENCES[scenario.reference];
        const { server, fixture } = serverOf(scenario);
        const a = await measure(server, () => scenario.requests(fixture), scenario.expect, entry.users, options);
        options.log(roundLine(round, 'users', scenario.title, a));
        const b = await measure(reference, () => ref.requests(referenceFixture), ref.expect, entry.reference, options);
        options.log(roundLine(round, 'reference', ref.label, b));
      }
      const floorServer = await spawnServer(['--port', '0', '--floor'], {
        core: 0,
        script: REFERENCE_SCRIPT,
        stdoutFile: join(dir, 'floor.out'),
      });
      servers.push(floorServer);
      const f = await measure(floorServer, () => REFERENCES.get.requests(referenceFixture), [200], floor, options);
      options.log(roundLine(round, 'floor', 'GET /users/{id} (constant body)', f));
    } finally {
      for (const server of servers) {
        const code = await server.stop();
        if (code !== 0) options.log(`  warning: a server exited with ${code}: ${server.stderr().trim()}`);
      }
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return { figures, floor };
}

// --------------------------------------------------------- start-up, import

async function benchStartupFigures(
  users: number,
  rounds: number,
  quietWait: number,
  log: (line: string) => void,
): Promise<{ figures: StartupFigures[]; journalBytes: number; snapshotBytes: number }> {
  const journalDir = mkdtempSync(join(tmpdir(), 'users-bench-journal-'));
  const snapshotDir = mkdtempSync(join(tmpdir(), 'users-bench-snapshot-'));
  try {
    buildJournalDir(journalDir, users);
    await buildSnapshotDir(journalDir, snapshotDir);
    log(`start-up: ${fmt(users, 0)} users in ${journalDir} (journal) and ${snapshotDir} (snapshot)`);
    const figures = [
      await benchStartup('journal', journalDir, rounds, [], quietWait, log),
      await benchStartup('snapshot', snapshotDir, rounds, [], quietWait, log),
    ];
    return {
      figures,
      journalBytes: statSync(join(journalDir, journalName(1))).size,
      snapshotBytes: statSync(join(snapshotDir, snapshotName(2))).size,
    };
  } finally {
    rmSync(journalDir, { recursive: true, force: true });
    rmSync(snapshotDir, { recursive: true, force: true });
  }
}

interface ImportFigures {
  users: number;
  concurrency: number;
  seconds: number;
  ok: number;
  exitCode: number | null;
}

/** `usersctl import` of `users` NDJSON lines into a fresh journal server, at the given --concurrency. */
async function benchImport(
  users: number,
  concurrency: number,
  quietWait: number,
  log: (line: string) => void,
): Promise<ImportFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'users-bench-import-'));
  const file = join(dir, 'users.ndjson');
  const out = createWriteStream(file);
  for (let n = 1; n <= users; n++) {
    if (!out.write(`{"name":"User ${n}","email":"u${n}@example.com","n":${n}}\n`))
      await new Promise<void>((done) => out.once('drain', () => done()));
  }
  out.end();
  await finished(out);
  const data = join(dir, 'data');
  const server = await spawnServer(['--port', '0', '--data', data, ...LOAD_FLAGS], {
    core: 0,
    stdoutFile: join(dir, 'server.out'),
  });
  try {
    await waitForQuiet(quietWait);
    log(
      `import: ${fmt(users, 0)} lines (${fmt(statSync(file).size / 1024 / 1024, 1)} MiB) into ${server.url}, --concurrency ${concurrency}`,
    );
    const started = performance.now();
    // usersctl inherits this process's core (1); the server is on core 0.
    const child = spawn(
      process.execPath,
      [USERSCTL, '--url', server.url, '-q', 'import', '-f', file, '--concurrency', String(concurrency)],
      {
        cwd: ROOT,
        env: { ...process.env, USERSCTL_COOKIE_JAR: join(dir, 'cookies.txt') },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let ok = 0;
    let rest = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop()!;
      for (const line of lines) if (line.includes('"ok":true')) ok++;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    const exitCode = await new Promise<number | null>((done) => child.once('close', (code) => done(code)));
    const seconds = (performance.now() - started) / 1000;
    if (exitCode !== 0) log(`  usersctl import exited with ${exitCode}: ${err.trim()}`);
    log(`  ${fmt(seconds, 1)} s, ${fmt(ok, 0)} lines ok`);
    return { users, concurrency, seconds, ok, exitCode };
  } finally {
    const code = await server.stop();
    if (code !== 0) log(`  warning: the server exited with ${code}: ${server.stderr().trim()}`);
    rmSync(dir, { recursive: true, force: true });
  }
}

// ------------------------------------------------------------------ output

function share(x: number): string {
  return `${Math.round(x * 100)}%`;
}

function med(m: Measurement, value: (r: LoadResult) => number): number {
  return median(m.rounds.map(value));
}

interface Summary {
  name: string;
  title: string;
  reference: string;
  rps: number;
  p50: number;
  p99: number;
  referenceRps: number;
  referenceP50: number;
  referenceP99: number;
  ratio: number;
  p99Ratio: number;
  /** Server CPU per request, microseconds (median over the rounds). */
  cpuUs: number;
  referenceCpuUs: number;
  /** referenceCpuUs / cpuUs: like `ratio`, but blind to what limits the load generator. */
  cpuRatio: number;
  target: number | null;
  p99Target: number;
  errors: number;
  verdict: string;
}

/** The server's CPU time per answered request, in microseconds. */
function cpuPerRequest(r: LoadResult): number {
  return (r.serverCpu / r.rps) * 1e6;
}

function summarize(f: ScenarioFigures): Summary {
  const rps = med(f.users, (r) => r.rps);
  const referenceRps = med(f.reference, (r) => r.rps);
  const p99 = med(f.users, (r) => r.p99);
  const referenceP99 = med(f.reference, (r) => r.p99);
  const ratio = rps / referenceRps;
  const cpuUs = med(f.users, cpuPerRequest);
  const referenceCpuUs = med(f.reference, cpuPerRequest);
  const p99Ratio = p99 / referenceP99;
  const errors = f.users.errors + f.reference.errors;
  const missed = [
    ...(f.scenario.target !== undefined && !(ratio >= f.scenario.target) ? ['req/s'] : []),
    ...(!(p99Ratio <= P99_TARGET) ? ['p99'] : []),
  ];
  const verdict = errors > 0 ? 'ERRORS' : missed.length > 0 ? `MISSED ${missed.join('+')}` : 'met';
  return {
    name: f.scenario.name,
    title: f.scenario.title,
    reference: REFERENCES[f.scenario.reference].label,
    rps,
    p50: med(f.users, (r) => r.p50),
    p99,
    referenceRps,
    referenceP50: med(f.reference, (r) => r.p50),
    referenceP99,
    ratio,
    p99Ratio,
    cpuUs,
    referenceCpuUs,
    cpuRatio: referenceCpuUs / cpuUs,
    target: f.scenario.target ?? null,
    p99Target: P99_TARGET,
    errors,
    verdict,
  };
}

function scenarioTable(summaries: Summary[]): string {
  const rows = summaries.map((s) => [
    s.title,
    fmt(s.rps, 0),
    fmt(s.p50, 2),
    fmt(s.p99, 2),
    s.reference,
    fmt(s.referenceRps, 0),
    fmt(s.referenceP50, 2),
    fmt(s.referenceP99, 2),
    fmt(s.ratio, 2),
    fmt(s.p99Ratio, 2),
    `${fmt(s.cpuUs, 0)} / ${fmt(s.referenceCpuUs, 0)}`,
    fmt(s.cpuRatio, 2),
    s.target === null ? '-' : `>= ${fmt(s.target, 2)}`,
    s.verdict,
    String(s.errors),
  ]);
  return table(
    [
      'scenario',
      'users req/s',
      'p50 ms',
      'p99 ms',
      'reference',
      'ref req/s',
      'p50 ms',
      'p99 ms',
      'ratio req/s',
      'ratio p99',
      'cpu us/req',
      'ratio cpu',
      'target req/s',
      'met?',
      'errors',
    ],
    rows,
  );
}

const USAGE = `usage: npm run bench -- [flags]   (or: node --import tsx bench/run.ts [flags], after npm run build)
  --rounds N          rounds, each on fresh servers (A B per scenario)   (3)
  --seconds S         measured seconds per scenario and server           (10)
  --warmup S          unmeasured seconds before each measurement         (2)
  --connections N     concurrent connections                             (50)
  --scenario NAME     run only this scenario; repeatable                 (all)
                      ${SCENARIOS.map((s) => s.name).join(', ')}
  --quiet-wait S      wait up to S seconds for other processes to go idle before each measurement (5)
  --with-startup      also: start-up time and peak RSS with --startup-users users (1,000,000)
  --startup-users N   users in the start-up data set                     (1000000)
  --with-import       also: usersctl import of --import-users NDJSON lines (100,000) into a fresh journal server
  --import-users N    lines to import                                    (100000)
  --json              also print every figure as one line of JSON, last on stdout
Progress goes to stderr, the tables to stdout.`;

function parseOptions(argv: string[]) {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: 'string', default: '3' },
      seconds: { type: 'string', default: '10' },
      warmup: { type: 'string', default: '2' },
      connections: { type: 'string', default: '50' },
      scenario: { type: 'string', multiple: true, default: [] },
      'quiet-wait': { type: 'string', default: '5' },
      'with-startup': { type: 'boolean', default: false },
      'startup-users': { type: 'string', default: '1000000' },
      'with-import': { type: 'boolean', default: false },
      'import-users': { type: 'string', default: '100000' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  const count = (
    name: 'rounds' | 'seconds' | 'warmup' | 'connections' | 'quiet-wait' | 'startup-users' | 'import-users',
    min: number,
  ): number => {
    const n = Number(values[name]);
    if (!Number.isSafeInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}`);
    return n;
  };
  const names = values.scenario!;
  for (const name of names)
    if (!SCENARIOS.some((s) => s.name === name))
      throw new Error(`unknown --scenario ${name}; known: ${SCENARIOS.map((s) => s.name).join(', ')}`);
  return {
    help: values.help!,
    json: values.json!,
    withStartup: values['with-startup']!,
    withImport: values['with-import']!,
    startupUsers: count('startup-users', 1),
    importUsers: count('import-users', 1),
    rounds: count('rounds', 1),
    seconds: count('seconds', 1),
    warmup: count('warmup', 0),
    connections: count('connections', 1),
    quietWait: count('quiet-wait', 0),
    // Kept in run order whatever the order of the flags.
    scenarios: names.length === 0 ? SCENARIOS : SCENARIOS.filter((s) => names.includes(s.name)),
  };
}

async function main(argv: string[]): Promise<number> {
  const options = parseOptions(argv);
  if (options.help) {
    console.log(USAGE);
    return 0;
  }
  const log = (line: string) => console.error(line);
  const pinned = pinSelf(1);
  const heading = `users-server benchmark, ${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${cpus().length} cores, ${options.connections} connections, ${options.rounds} rounds x ${options.seconds} s (+${options.warmup} s warm-up)`;
  const pinningLine = pinned
    ? 'servers pinned to core 0 (taskset -c 0), autocannon to core 1'
    : `no pinning (${pinning ? 'taskset failed' : 'taskset missing or a single core'}): figures are noisier`;
  log(heading);
  log(pinningLine);
  const out: string[] = [heading, pinningLine, ''];
  const json: Record<string, unknown> = {
    date: new Date().toISOString(),
    node: process.version,
    pinned,
    connections: options.connections,
    rounds: options.rounds,
    seconds: options.seconds,
    warmup: options.warmup,
  };

  const { figures, floor } = await benchScenarios({ ...options, log });
  const summaries = figures.map(summarize);
  const floorRps = med(floor, (r) => r.rps);
  const referenceGet = summaries.find((s) => s.reference === REFERENCES.get.label);
  out.push(
    `Scenarios (medians over ${options.rounds} rounds; ratio = users-server / the reference named in the row, measured side by side; target p99 ratio <= ${P99_TARGET} in every row)`,
    scenarioTable(summaries),
    '',
    `floor (reference --floor: constant body, no routing), GET /users/{id}: ${fmt(floorRps, 0)} req/s, p50 ${fmt(
      med(floor, (r) => r.p50),
      2,
    )} ms, p99 ${fmt(
      med(floor, (r) => r.p99),
      2,
    )} ms` +
      (referenceGet
        ? `; reference GET = ${fmt(referenceGet.referenceRps / floorRps, 2)} of the floor, users-server ${referenceGet.title} = ${fmt(referenceGet.rps / floorRps, 2)}`
        : '') +
      (floor.errors > 0 ? `; ERRORS: ${floor.errors}` : ''),
  );
  for (const f of figures) {
    for (const [who, m] of [
      ['users-server', f.users],
      ['reference', f.reference],
    ] as const) {
      if (m.errors > 0)
        out.push(
          `${f.scenario.title}: ${who} answered ${m.errors} unexpected responses (expected ${who === 'users-server' ? f.scenario.expect : REFERENCES[f.scenario.reference].expect}): ${m.errorDetail.join('; ')}`,
        );
    }
  }
  const others = figures.flatMap((f) => [...f.users.rounds, ...f.reference.rounds]).map((r) => r.otherCpu);
  out.push(
    `other processes used a median ${share(median(others))} (max ${share(Math.max(...others))}) of a core during the measurements`,
    '',
  );
  json.scenarios = figures.map((f, i) => ({
    ...summaries[i],
    usersRounds: f.users.rounds,
    referenceRounds: f.reference.rounds,
  }));
  json.floor = {
    rps: floorRps,
    p50: med(floor, (r) => r.p50),
    p99: med(floor, (r) => r.p99),
    errors: floor.errors,
    rounds: floor.rounds,
  };

  if (options.withStartup) {
    const {
      figures: starts,
      journalBytes,
      snapshotBytes,
    } = await benchStartupFigures(options.startupUsers, options.rounds, options.quietWait, log);
    const time = Math.max(...starts.map((f) => median(f.times)));
    const rss = Math.max(...starts.flatMap((f) => f.rss)) / 1024 / 1024;
    out.push(
      `Start-up with ${fmt(options.startupUsers, 0)} users (${options.rounds} starts each; spawn to first answered GET /healthz, median; peak RSS = VmHWM, max)`,
      table(
        ['data', 'files MiB', 'to listening ms', 'to /healthz ms', 'peak RSS MiB', 'ms per start'],
        starts.map((f) => [
          f.variant,
          fmt(f.fileBytes / 1024 / 1024, 1),
          fmt(median(f.listening), 0),
          fmt(median(f.times), 0),
          fmt(Math.max(...f.rss) / 1024 / 1024, 0),
          f.times.map((ms) => fmt(ms, 0)).join(' / '),
        ]),
      ),
      `bytes per user: journal ${fmt((journalBytes - HEADER_BYTES) / options.startupUsers, 1)}, snapshot ${fmt((snapshotBytes - HEADER_BYTES) / options.startupUsers, 1)}`,
      `targets${options.startupUsers === 1_000_000 ? '' : ' (set for 1,000,000 users)'}: start-up < ${START_TARGET_MS} ms: ${time < START_TARGET_MS ? 'met' : 'MISSED'} (slowest median ${fmt(time, 0)} ms); ` +
        `peak RSS < ${RSS_TARGET_MIB} MiB: ${rss < RSS_TARGET_MIB ? 'met' : 'MISSED'} (max ${fmt(rss, 0)} MiB)`,
      '',
    );
    json.startup = { users: options.startupUsers, figures: starts, slowestMedianMs: time, maxRssMiB: rss };
  }

  let importFailed = false;
  if (options.withImport) {
    // The default --concurrency: the figure a user gets without tuning (README).
    const figures = await benchImport(options.importUsers, DEFAULT_CONCURRENCY, options.quietWait, log);
    importFailed = figures.exitCode !== 0 || figures.ok !== figures.users;
    out.push(
      `usersctl import of ${fmt(figures.users, 0)} users (--concurrency ${figures.concurrency}, fresh journal server on core 0, usersctl on core 1): ${fmt(figures.seconds, 1)} s, ` +
        `${fmt(figures.ok, 0)} lines ok, exit ${figures.exitCode}; target < ${IMPORT_TARGET_S} s${figures.users === 100_000 ? '' : ' (set for 100,000 users)'}: ` +
        (importFailed ? 'ERRORS' : figures.seconds < IMPORT_TARGET_S ? 'met' : 'MISSED'),
      '',
    );
    json.import = figures;
  }

  console.log(out.join('\n'));
  if (options.json) console.log(JSON.stringify(json));
  const failed = summaries.some((s) => s.errors > 0) || floor.errors > 0 || importFailed;
  if (failed) log('bench: some responses had an unexpected status (see above)');
  return failed ? 1 : 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (error: unknown) => {
      console.error(`bench: ${error instanceof Error ? error.message : String(error)}`);
      process.exitCode = 1;
    },
  );
}
