/**
 * Instructions per request: each server runs under valgrind's callgrind,
 * which counts the instructions its process executes (every thread, user
 * space only: the kernel's share, the socket writes above all, is not in
 * it). A count does not depend on what else the machine is doing, so two
 * servers compare to within a few percent however noisy the machine is,
 * where their req/s ratio moves by 0.1 to 0.2 between runs. The servers
 * are those of bench/reference-ceiling.ts: the reference plain, with
 * `--contract` and with `--contract --log`, and users-server with its
 * access log off and on.
 *
 * Each server: start under callgrind, 1,000 users, the load unmeasured
 * (warm-up: the JIT compilers settle), counters zeroed, the load again,
 * counters dumped. The figure is the dump's instructions over the
 * requests answered, the least of the rounds: the compilers' threads count
 * too, and a function compiled again, or a major garbage collection, that
 * lands in one round's window only adds to it.
 *
 * `--top N` also names where the instructions go: the N functions with
 * the most instructions of their own per request, JavaScript included
 * (node writes where it compiled each function, --perf-basic-prof, and the
 * dump's instruction addresses are looked up there).
 *
 * `--load patch` (users-server only: the references take no PATCH) is
 * compared with the PUT of the same server: a PATCH reads the user and
 * merges the patch before the same write. `--load missing` is a GET of ids
 * no user has: every answer a 404, a refusal instead of a user.
 *
 * `--schema` (users-server only, with `--load put` and or `--load patch`)
 * measures the PUT against a schema of the users' fields of 10 properties
 * (formats, lengths, an enum, a nested object: SCHEMA below, set with
 * `users-server schema set` once the server runs), over the same PUT with
 * no schema; both PUT a user that has every one of those properties, so
 * each is checked. Its PATCH of one field, with the schema, is compared
 * with that PUT with the schema: every user is first given those
 * properties, so each PATCH checks a whole user.
 *
 * `--load find-unique` and `--load sort-page` (users-server only) are
 * measured on a server whose users have an email, declared unique (and
 * case-insensitive) with `users-server index add` once the server runs:
 * `find-unique` is `filter=email eq "..."` of a user at random, held to
 * GET by id of the same server; `sort-page` the first page of 100 of
 * `sort=email`, held to the first page of 100 by id (`GET /users?limit=100`)
 * of the same server. Each server measures both loads in turn.
 *
 * `--save DIR` keeps each dump (and perf map) there, for callgrind_annotate.
 *
 * Run: npm run build && node --import tsx bench/instructions.ts [--requests 5000] [--warmup 20000]
 * [--load get|missing|put|patch|find-unique|sort-page] [--server ID] [--rounds 2] [--top N] [--schema] [--save DIR]
 * (--load and --server repeatable; server ids: reference, contract,
 * contract-log, users-log-off, users)
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  CEILING_SETUPS,
  preloadUsers,
  typicalName,
  LOAD_FLAGS,
  JSON_HEADERS,
  POOL_SIZE,
  preloadSetup,
  patchReplacing,
  putReplacing,
  requestPool,
  REFERENCE_SCRIPT,
  ROOT,
  runLoad,
  spawnServer,
  table,
  type CeilingSetup,
  type LoadRequest,
  type ServerProcess,
} from './store-bench.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '5000' },
    warmup: { type: 'string', default: '20000' },
    load: { type: 'string', multiple: true },
    server: { type: 'string', multiple: true },
    rounds: { type: 'string', default: '2' },
    top: { type: 'string', default: '0' },
    schema: { type: 'boolean', default: false },
    save: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
const REQUESTS = Number(values.requests);
const WARMUP = Number(values.warmup);
const ROUNDS = Number(values.rounds);
const TOP = Number(values.top);
type Load = 'get' | 'missing' | 'put' | 'patch' | FindLoad;
type FindLoad = keyof typeof FIND_LOADS;
/** What each find load is held to on the same server, and its goal (issue "find users by any field"). */
const FIND_LOADS = {
  'find-unique': { baseline: 'get', goal: 1.25, title: 'filter=email eq "..." (unique) over GET /users/{id}' },
  'sort-page': { baseline: 'list', goal: 2, title: 'sort=email, first page of 100, over GET /users?limit=100' },
} as const;
/** A measured load: a load of --load, or the baseline of a find load. */
type Measured = Load | 'list';
const LOADS = (values.load ?? (values.schema === true ? ['put'] : ['get', 'put'])) as Load[];
const USERS = 1000;
const CONNECTIONS = 20;
const WITH_SCHEMA = values.schema === true;
/** A durable PUT with the schema over the same PUT without (issue "a schema for the users' fields"). */
const SCHEMA_GOAL = 1.1;
/** A PATCH over the PUT of the same server (issue "change one field safely"). */
const PATCH_GOAL = 1.15;
if (values.help === true) usage(0);

if (
  !LOADS.every((load) => ['get', 'missing', 'put', 'patch'].includes(load) || isFindLoad(load)) ||
  !(REQUESTS > 0) ||
  !(WARMUP >= 0) ||
  !(ROUNDS > 0) ||
  !(TOP >= 0) ||
  (WITH_SCHEMA && !LOADS.every((load) => load === 'put' || load === 'patch'))
)
  usage();
for (const tool of ['valgrind', 'callgrind_control']) {
  if (spawnSync(tool, ['--version']).error !== undefined) {
    console.log(`skipped: ${tool} is not installed (Debian package valgrind)`);
    process.exit(0);
  }
}

const SETUPS = CEILING_SETUPS.filter(
  (setup) => (values.server === undefined || values.server.includes(setup.id)) && !(WITH_SCHEMA && setup.reference),
);
if (SETUPS.length === 0) usage();

/** The usage line, and with --help what the figures are: on stdout and exit 0 for --help, else on stderr and exit 2. */
function usage(code = 2): never {
  const line =
    'usage: node --import tsx bench/instructions.ts [--requests N] [--warmup N] [--load get|missing|put|patch|find-unique|sort-page ...] [--server reference|contract|contract-log|users-log-off|users ...] [--rounds N] [--top N] [--schema] [--save DIR]';
  if (code !== 0) {
    console.error(line);
    process.exit(code);
  }
  console.log(`${line}

Instructions per request of each server under callgrind (npm run build first),
the least of --rounds rounds, after --warmup unmeasured requests.
  --load get|missing|put|patch
                        GET by id, GET of an id no user has (every answer a
                        404), PUT replace, PATCH one field (users-server only;
                        compared with its PUT when both are measured)
  --load find-unique    filter=email eq "..." of a user at random (email declared
                        unique), over GET by id of the same server (goal ${FIND_LOADS['find-unique'].goal.toFixed(2)}x)
  --load sort-page      the first page of 100 of sort=email (declared), over the
                        first page of 100 by id of the same server (goal ${FIND_LOADS['sort-page'].goal.toFixed(2)}x)
  --schema              users-server only: a PUT (--load put) of a user of 10
                        properties with a schema of those properties set
                        (formats, lengths, an enum, a nested object), over the
                        same PUT with no schema (goal ${SCHEMA_GOAL.toFixed(2)}x); a PATCH
                        (--load patch) of one field of such a user with the
                        schema, over that PUT (goal ${PATCH_GOAL.toFixed(2)}x)
  --top N               the N functions with the most instructions of their own
  --save DIR            keep each callgrind dump (and perf map) in DIR`);
  process.exit(0);
}

/**
 * The schema of `--schema`: 10 properties, with formats, lengths, a
 * pattern, an enum, bounds and a nested object, none of them required but
 * the name, so that the preload's users (a name only) fit it.
 */
const SCHEMA = {
  type: 'object',
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 200 },
    email: { type: 'string', format: 'email', maxLength: 254 },
    homepage: { type: 'string', format: 'uri', maxLength: 2000 },
    born: { type: 'string', format: 'date' },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    role: { enum: ['admin', 'editor', 'viewer', 'guest'] },
    nick: { type: 'string', pattern: '^[a-z][a-z0-9_]{1,30}$' },
    tags: { type: 'array', items: { type: 'string', maxLength: 20 }, maxItems: 10 },
    active: { type: 'boolean' },
    address: {
      type: 'object',
      required: ['city'],
      properties: {
        street: { type: 'string', maxLength: 200 },
        city: { type: 'string', minLength: 1, maxLength: 100 },
        zip: { type: 'string', pattern: '^[0-9]{4,5}$' },
      },
      additionalProperties: false,
    },
  },
};

/**
 * PUTs of users that have every property of SCHEMA, each body unique (a
 * write), as putReplacing's are; `paths`: where each goes in turn.
 */
function putSchemaUsers(
  users: number,
  paths = Array.from({ length: POOL_SIZE }, () => `/users/${1 + Math.floor(Math.random() * users)}`),
): LoadRequest[] {
  const bodies = Array.from({ length: POOL_SIZE }, (_, i) => {
    const user = {
      email: `user${i}@example.org`,
      homepage: `https://example.org/~user${i}`,
      born: '1990-04-12',
      age: 20 + (i % 60),
      role: SCHEMA.properties.role.enum[i % 4],
      nick: `user_${i}`,
      tags: ['staff', `team${i % 7}`],
      active: i % 2 === 0,
      address: { street: `${i} Main Street`, city: 'Oslo', zip: '0150' },
    };
    // The name goes last, so that each request makes it unique by appending to it.
    return `${JSON.stringify(user).slice(0, -1)},"name":"User ${i} `;
  });
  let n = 0;
  return [
    {
      method: 'PUT',
      headers: JSON_HEADERS,
      setupRequest: (req) => ({ ...req, path: paths[n % paths.length]!, body: `${bodies[n++ % POOL_SIZE]!}${n}"}` }),
    },
  ];
}

/** Gives each of users 1..`users` every property of SCHEMA, as one PUT each. */
async function fillSchemaUsers(url: string, users: number): Promise<void> {
  const paths = Array.from({ length: users }, (_, i) => `/users/${i + 1}`);
  const r = await runLoad({ url, connections: 1, amount: users, requests: putSchemaUsers(users, paths) });
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`filling the users: ${r.non2xx} non-2xx, ${r.errors} errors`);
}

/** Sets SCHEMA on the data directory `data` of the running server: the command waits for the server to apply it. */
function setSchema(dir: string, data: string): void {
  const file = join(dir, 'bench.schema.json');
  writeFileSync(file, JSON.stringify(SCHEMA));
  execFileSync(process.execPath, [join(ROOT, 'bin', 'users-server.js'), 'schema', 'set', file, '--data', data], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

function isFindLoad(load: string): load is FindLoad {
  return Object.hasOwn(FIND_LOADS, load);
}

/** The users of a server for the find loads: a name and an email. */
function userWithEmail(n: number): object {
  return { name: typicalName(n), email: `user${n}@example.com` };
}

/**
 * Declares `email` unique and case-insensitive on the data directory `data` of the running server, which builds its
 * index.
 */
function declareEmail(data: string): void {
  execFileSync(
    process.execPath,
    [join(ROOT, 'bin', 'users-server.js'), 'index', 'add', 'email', '--unique', '--case-insensitive', '--data', data],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

function requestsOf(load: Measured): LoadRequest[] {
  if (load === 'put') return WITH_SCHEMA ? putSchemaUsers(USERS) : putReplacing(USERS);
  if (load === 'patch') return patchReplacing(USERS);
  if (load === 'missing')
    return requestPool(() => ({ method: 'GET', path: `/users/${USERS + 1 + Math.floor(Math.random() * USERS)}` }));
  if (load === 'list') return [{ method: 'GET', path: '/users?limit=100' }];
  if (load === 'sort-page') return [{ method: 'GET', path: '/users?sort=email&limit=100' }];
  if (load === 'find-unique')
    return requestPool(() => {
      const filter = `email eq "user${1 + Math.floor(Math.random() * USERS)}@example.com"`;
      return { method: 'GET', path: `/users?filter=${encodeURIComponent(filter)}` };
    });
  return requestPool(() => ({ method: 'GET', path: `/users/${1 + Math.floor(Math.random() * USERS)}` }));
}

/**
 * Instructions per request of one server under each of `loads`, measured
 * one after the other once all are warmed up; `schema`: with SCHEMA set.
 * A find load's server has users with an email, declared.
 */
async function count(setup: CeilingSetup, loads: readonly Measured[], schema = false): Promise<number[]> {
  const dir = mkdtempSync(join(tmpdir(), 'users-instructions-'));
  const out = join(dir, 'callgrind.out');
  const args = setup.reference
    ? ['--port', '0', ...setup.args]
    : ['--port', '0', '--data', join(dir, 'data'), ...LOAD_FLAGS, ...setup.args];
  // --smc-check: V8 writes and rewrites the machine code it runs.
  const wrapper = [
    'valgrind',
    '--tool=callgrind',
    '--smc-check=all-non-file',
    `--callgrind-out-file=${out}`,
    ...(TOP > 0 ? ['--dump-instr=yes', '--dump-line=no'] : []),
  ];
  const nodeFlags = TOP > 0 ? ['--perf-basic-prof-only-functions'] : [];
  const server = await spawnServer(args, {
    wrapper,
    nodeFlags,
    stdoutFile: join(dir, 'stdout'),
    ...(setup.reference && { script: REFERENCE_SCRIPT }),
  });
  try {
    if (schema) setSchema(dir, join(dir, 'data'));
    const find = loads.some(isFindLoad);
    if (find) declareEmail(join(dir, 'data'));
    await (find ? preloadUsers(server.url, USERS, 8, userWithEmail) : preloadSetup(server.url, setup, USERS, 8));
    if (schema && loads.includes('patch')) await fillSchemaUsers(server.url, USERS);
    const pools = loads.map(requestsOf);
    for (const requests of pools)
      if (WARMUP > 0) await runLoad({ url: server.url, connections: CONNECTIONS, amount: WARMUP, requests });
    const perRequest: number[] = [];
    for (const [i, load] of loads.entries()) {
      const name = `${setup.id}-${load}${schema ? '-schema' : ''}`;
      perRequest.push(
        await measure(
          server,
          dir,
          pools[i]!,
          name,
          `${setup.name}, ${load}${schema ? ' with the schema' : ''}`,
          load === 'missing',
        ),
      );
    }
    return perRequest;
  } finally {
    // Killed, not stop(): a graceful exit would write a final dump nobody
    // reads, which takes seconds under valgrind.
    server.child.kill('SIGKILL');
    await new Promise((done) =>
      server.child.exitCode === null && server.child.signalCode === null
        ? server.child.once('exit', done)
        : done(undefined),
    );
    rmSync(dir, { recursive: true, force: true });
    if (TOP > 0) rmSync(`/tmp/perf-${server.pid}.map`, { force: true });
  }
}

/**
 * Instructions per request of one run of `requests` on `server` (under
 * callgrind, its dumps in `dir`): counters zeroed, the run, a dump. `name`
 * names the dump kept in --save, `title` the --top table.
 */
async function measure(
  server: ServerProcess,
  dir: string,
  requests: LoadRequest[],
  name: string,
  title: string,
  missing = false,
) {
  const before = new Set(readdirSync(dir));
  execFileSync('callgrind_control', ['--zero', String(server.pid)], { stdio: 'ignore' });
  const r = await runLoad({ url: server.url, connections: CONNECTIONS, amount: REQUESTS, requests });
  execFileSync('callgrind_control', ['--dump', String(server.pid)], { stdio: 'ignore' });
  const expected = missing ? '404' : '2xx';
  const unexpected = missing ? r.requests - (r.statuses[404] ?? 0) : r.non2xx;
  if (unexpected > 0 || r.errors > 0)
    throw new Error(`${title}: ${unexpected} answers not ${expected}, ${r.errors} errors`);
  const dump = readdirSync(dir).find((file) => file.startsWith('callgrind.out.') && !before.has(file));
  const text = dump === undefined ? '' : readFileSync(join(dir, dump), 'utf8');
  const summary = /^summary: (\d+)$/m.exec(text);
  if (!summary) throw new Error(`${title}: callgrind wrote no dump`);
  if (values.save !== undefined) {
    mkdirSync(values.save, { recursive: true });
    copyFileSync(join(dir, dump!), join(values.save, `${name}.callgrind`));
    if (TOP > 0) copyFileSync(`/tmp/perf-${server.pid}.map`, join(values.save, `${name}.perf-map`));
  }
  if (TOP > 0) printTop(title, text, `/tmp/perf-${server.pid}.map`, r.requests);
  return Number(summary[1]) / r.requests;
}

/**
 * The TOP functions by instructions of their own per request, from a dump
 * written with --dump-instr=yes --dump-line=no: each cost line starts with
 * an instruction address (absolute, or +/- the one before, or * for the
 * same); the line after `calls=` is a call's inclusive cost, not the
 * function's own. Code callgrind cannot name (V8 compiled it) is named
 * from node's perf map.
 */
function printTop(title: string, dump: string, perfMap: string, requests: number): void {
  const jit = perfMapOf(perfMap);
  const own = new Map<string, number>();
  const add = (name: string, cost: number) => own.set(name, (own.get(name) ?? 0) + cost);
  const names = new Map<string, string>();
  let fn = '';
  let address = 0;
  let skipNext = false;
  for (const line of dump.split('\n')) {
    // Names are compressed: `(id) name` where a function is first named (in fn= or cfn=), `(id)` after.
    const named = /^c?fn=\((\d+)\)(?: (.*))?$/.exec(line);
    if (named !== null) {
      if (named[2] !== undefined) names.set(named[1]!, named[2]);
      if (line.startsWith('fn=')) fn = names.get(named[1]!) ?? named[1]!;
      continue;
    }
    if (line.startsWith('calls=')) {
      skipNext = true;
      continue;
    }
    const cost = /^(0x[0-9a-f]+|[+-]\d+|\*) (\d+)$/.exec(line);
    if (cost === null) continue;
    const position = cost[1]!;
    address = position.startsWith('0x')
      ? parseInt(position, 16)
      : position === '*'
        ? address
        : address + Number(position);
    if (skipNext) {
      skipNext = false;
      continue;
    }
    add(fn.startsWith('0x') ? (jitName(jit, address) ?? 'JIT code not in the perf map') : fn, Number(cost[2]));
  }
  const rows = [...own].sort((a, b) => b[1] - a[1]).slice(0, TOP);
  console.log(`\n${title}: the ${TOP} functions with the most instructions of their own, per request\n`);
  console.log(
    table(
      ['function', 'instructions'],
      rows.map(([name, cost]) => [name.slice(0, 100), Math.round(cost / requests).toLocaleString('en-US')]),
    ),
  );
}

/** node's perf map (`start size name` in hex), sorted by start. */
function perfMapOf(file: string): { start: number; end: number; name: string }[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const entries = text.split('\n').flatMap((line) => {
    const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
    return match === null
      ? []
      : [{ start: parseInt(match[1]!, 16), end: parseInt(match[1]!, 16) + parseInt(match[2]!, 16), name: match[3]! }];
  });
  return entries.sort((a, b) => a.start - b.start);
}

/** The name of the compiled function holding `address` (the last one compiled there wins). */
function jitName(map: { start: number; end: number; name: string }[], address: number): string | undefined {
  let low = 0;
  let high = map.length - 1;
  let found: { start: number; end: number; name: string } | undefined;
  while (low <= high) {
    const mid = (low + high) >> 1;
    if (map[mid]!.start <= address) {
      found = map[mid];
      low = mid + 1;
    } else high = mid - 1;
  }
  return found !== undefined && address < found.end ? found.name : undefined;
}

const figures = new Map<string, number[]>();
for (let round = 1; round <= ROUNDS; round++) {
  for (const load of LOADS) {
    for (const setup of SETUPS) {
      if ((load === 'patch' || isFindLoad(load)) && setup.reference) continue;
      const measured: Measured[] = isFindLoad(load) ? [FIND_LOADS[load].baseline, load] : [load];
      // With --schema a PATCH is measured with the schema only: its figure is over the PUT with it.
      for (const schema of WITH_SCHEMA ? (load === 'patch' ? [true] : [false, true]) : [false]) {
        const counts = await count(setup, measured, schema);
        for (const [i, one] of measured.entries()) {
          const key = `${setup.name}|${load}${schema ? '|schema' : ''}${one === load ? '' : '|baseline'}`;
          figures.set(key, [...(figures.get(key) ?? []), counts[i]!]);
          console.error(
            `round ${round} ${setup.name.padEnd(30)} ${one}${schema ? ' with the schema' : ''}: ${Math.round(counts[i]!).toLocaleString('en-US')} instructions per request`,
          );
        }
      }
    }
  }
}

/** users-server's setups and the contract reference each is held to, with the goals docs/performance.md gives. */
const HELD_TO: Record<string, string> = {
  users: 'reference --contract --log',
  'users-log-off': 'reference --contract',
};
const GOAL: Partial<Record<Load, number>> = { get: 1.03, put: 1.1 };
const TITLES: Record<Exclude<Load, FindLoad>, string> = {
  get: 'GET by id',
  missing: 'GET of an id no user has (404)',
  put: 'PUT replace',
  patch: 'PATCH one field',
};
if (WITH_SCHEMA) printSchemaFigures();
for (const load of WITH_SCHEMA ? [] : LOADS) {
  if (load === 'patch') {
    printPatchFigures();
    continue;
  }
  if (isFindLoad(load)) {
    printFindFigures(load);
    continue;
  }
  const least = (name: string) => {
    const counts = figures.get(`${name}|${load}`);
    return counts === undefined ? undefined : Math.min(...counts);
  };
  const plain = least('reference');
  const goal = GOAL[load];
  const rows = SETUPS.map((setup) => {
    const perRequest = least(setup.name)!;
    const held = HELD_TO[setup.id] === undefined ? undefined : least(HELD_TO[setup.id]!);
    return [
      setup.name,
      Math.round(perRequest).toLocaleString('en-US'),
      plain === undefined ? '-' : (plain / perRequest).toFixed(3),
      held === undefined
        ? '-'
        : `${(perRequest / held).toFixed(3)}x${goal === undefined ? '' : ` (goal ${goal.toFixed(2)}x)`}`,
    ];
  });
  console.log(
    `\n${TITLES[load]}, ${REQUESTS} requests per server after ${WARMUP} unmeasured, the least of ${ROUNDS} round(s):\n`,
  );
  console.log(
    table(['server', 'instructions per request', 'plain reference / server', 'over its contract reference'], rows),
  );
}

/** PATCH per server, over its own PUT when that was measured too (--load put --load patch). */
function printPatchFigures(): void {
  const least = (key: string) => {
    const counts = figures.get(key);
    return counts === undefined ? undefined : Math.min(...counts);
  };
  const rows = SETUPS.filter((setup) => !setup.reference).map((setup) => {
    const patch = least(`${setup.name}|patch`)!;
    const put = least(`${setup.name}|put`);
    const ratio = put === undefined ? '-' : `${(patch / put).toFixed(3)}x (goal ${PATCH_GOAL.toFixed(2)}x)`;
    return [setup.name, Math.round(patch).toLocaleString('en-US'), ratio];
  });
  console.log(
    `\nPATCH one field, ${REQUESTS} requests per server after ${WARMUP} unmeasured, the least of ${ROUNDS} round(s):\n`,
  );
  console.log(table(['server', 'instructions per request', 'over its own PUT'], rows));
}

/** PUT with the schema per server, over the same PUT without one; PATCH with the schema, over that PUT. */
function printSchemaFigures(): void {
  const least = (key: string) => {
    const counts = figures.get(key);
    return counts === undefined ? undefined : Math.min(...counts);
  };
  const shown = (count: number | undefined) => (count === undefined ? '-' : Math.round(count).toLocaleString('en-US'));
  const over = (a: number | undefined, b: number | undefined, goal: number) =>
    a === undefined || b === undefined ? '-' : `${(a / b).toFixed(3)}x (goal ${goal.toFixed(2)}x)`;
  const rows = SETUPS.map((setup) => {
    const without = least(`${setup.name}|put`);
    const withSchema = least(`${setup.name}|put|schema`);
    const patch = least(`${setup.name}|patch|schema`);
    return [
      setup.name,
      shown(without),
      shown(withSchema),
      over(withSchema, without, SCHEMA_GOAL),
      shown(patch),
      over(patch, withSchema, PATCH_GOAL),
    ];
  });
  console.log(
    `\nA user of 10 properties, ${REQUESTS} requests per server after ${WARMUP} unmeasured, the least of ${ROUNDS} round(s):\n`,
  );
  console.log(
    table(
      [
        'server',
        'PUT, no schema',
        'PUT, a schema of 10 properties',
        'with over without',
        'PATCH of one field, the schema',
        'PATCH over PUT',
      ],
      rows,
    ),
  );
}

/** A find load per server, over its baseline measured on the same server. */
function printFindFigures(load: FindLoad): void {
  const least = (key: string) => Math.min(...figures.get(key)!);
  const { goal, title } = FIND_LOADS[load];
  const rows = SETUPS.filter((setup) => !setup.reference).map((setup) =>
    ratioRow(setup.name, least(`${setup.name}|${load}|baseline`), least(`${setup.name}|${load}`), goal),
  );
  console.log(
    `\n${title}, ${REQUESTS} requests per server after ${WARMUP} unmeasured, the least of ${ROUNDS} round(s):\n`,
  );
  console.log(
    table(['server', FIND_LOADS[load].baseline === 'get' ? 'GET by id' : 'page of 100 by id', load, 'over'], rows),
  );
}

/** A server's two figures, and the second over the first against its goal. */
function ratioRow(name: string, under: number, over: number, goal: number): string[] {
  const round = (n: number) => Math.round(n).toLocaleString('en-US');
  return [name, round(under), round(over), `${(over / under).toFixed(3)}x (goal ${goal.toFixed(2)}x)`];
}
