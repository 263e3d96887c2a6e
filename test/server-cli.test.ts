/**
 * The entry point over real sockets (API.md "Server command line",
 * "Sessions" and the decisions on the admin password, the secret and the
 * data-directory lock): `node bin/users-server.js` as a child process for
 * what is about the process (its exit, signals, its pid in the lock, its
 * output streams), its `main` in this process for what it says and makes
 * at start (`serveInProcess`). bin/ imports dist/: run `npm run build` first.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect, createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  ADMIN_PASSWORD,
  buildIfStale,
  runUsersServer,
  startUsersServer,
  basic,
  cookiePair,
  readReply,
  send,
  tempDir,
  type Reply,
} from './helpers.js';
import { runCommand } from '../server/commands/command-io.js';
import { DataError, ServerCommandError, ServerUsageError } from '../server/errors.js';
import { isAlive, lockOwnerPid } from '../server/ops/data-dir.js';
import {
  cleanEnv,
  runTool,
  SERVER_BIN,
  spawnChild,
  spawnUsersServer,
  type Child,
  beyondDataLine,
} from './processes.js';
import { postgresSkipReason, testDatabase } from './postgres.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TEST_OPTIONS = {};
const LISTENING_LINE = /^listening on (http:\/\/127\.0\.0\.1:(\d+))$/;

/** Every flag of API.md's "Server command line" synopsis, plus --max-reservations (API.md "Reservations"). */
const API_FLAGS = [
  '--host',
  '--port',
  '--data',
  '--reservation-ttl',
  '--session-ttl',
  '--allow-id-change',
  '--require-session',
  '--require-if-match',
  '--max-body',
  '--rate-limit',
  '--rate-burst',
  '--cookie-secure',
  '--secret',
  '--max-reservations',
];

// ---------------------------------------------------------------- helpers

/** The start's line on who may use the server, by default. */
const ACCESS_ALL =
  'access: /users, /changes and /metrics need a session or an API token (--require-session all); /, /login, /healthz, /readyz and /openapi.json are open';

/**
 * `node bin/users-server.js ARGS` (test/processes.ts); the admin password
 * is set unless `adminPassword` is false.
 */
function spawnServer(
  t: TestContext,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  options: { adminPassword?: boolean } = {},
): Child {
  return spawnUsersServer(t, args, {
    env: { ...(options.adminPassword === false && { USERS_ADMIN_PASSWORD: undefined }), ...env },
  });
}

/** The same, `users-server ARGS` run in this process (helpers.ts), resolved once it listens. */
function serveInProcess(
  t: TestContext,
  args: string[],
  env: NodeJS.ProcessEnv = {},
  options: { adminPassword?: boolean } = {},
) {
  return startUsersServer(t, args, {
    env: { ...(options.adminPassword === false && { USERS_ADMIN_PASSWORD: undefined }), ...env },
  });
}

/** A server child, or one in this process: what the tests below read of it. */
type Server = Pick<Child, 'waitForLine' | 'stdout' | 'stderr' | 'exited'> & { kill(signal: 'SIGTERM'): void };

/** Waits for the `listening on ...` line and returns its URL and port; fails if the server ends first. */
async function waitListening(child: Pick<Child, 'waitForLine'>): Promise<{ url: string; port: number }> {
  const m = await child.waitForLine(/^listening on (http:\/\/\S+)$/);
  const line = LISTENING_LINE.exec(m[0]);
  assert.ok(line !== null, `unexpected listening line: ${JSON.stringify(m[0])}`);
  return { url: line[1]!, port: Number(line[2]) };
}

function waitExit(child: Pick<Child, 'exited'>): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return child.exited;
}

/** Stops a running server with SIGTERM and asserts the graceful exit code 0. */
async function stopGracefully(child: Server): Promise<void> {
  child.kill('SIGTERM');
  const { code, signal } = await waitExit(child);
  assert.equal(signal, null, `killed by ${signal}`);
  assert.equal(code, 0, `exit code ${code}; stderr=${child.stderr()}`);
}

function lines(text: string): string[] {
  return text.split('\n').filter((l) => l !== '');
}

/**
 * A start-up failure: the exit code, nothing on stdout, and exactly one `users-server: ...` line on stderr, no stack
 * trace.
 */
function assertOneLineFailure(
  result: { code: number | null; signal: NodeJS.Signals | null },
  child: Pick<Child, 'stdout' | 'stderr'>,
  code: number,
): string {
  const err = child.stderr();
  assert.equal(result.signal, null);
  assert.equal(result.code, code, `exit code ${result.code}; stderr=${err}`);
  assert.equal(child.stdout(), '', 'nothing on stdout');
  const errLines = lines(err);
  assert.ok(errLines.length > 0, 'nothing on stderr');
  assert.match(errLines[0]!, /^users-server: \S/, `stderr: ${err}`);
  assert.ok(!/^\s+at /m.test(err) && !/Error:/.test(err), `stack trace on stderr: ${err}`);
  assert.equal(errLines.length, 1, `expected exactly one stderr line, got ${errLines.length}: ${JSON.stringify(err)}`);
  return errLines[0]!;
}

function fileMode(path: string): number {
  return statSync(path).mode & 0o777;
}

async function assertHealthy(url: string): Promise<void> {
  const res = await send(url, 'GET', '/healthz');
  assert.equal(res.status, 200);
  assert.deepEqual(res.json(), { status: 'ok' });
}

async function login(url: string, password: string): Promise<Reply> {
  return send(url, 'POST', '/login', { headers: { authorization: basic('admin', password) } });
}

// ---------------------------------------------------------------- start

test(
  'Server command line: --port 0 --data DIR prints "listening on http://127.0.0.1:<real port>" as its first stdout line, /healthz answers there, and the access log line of that request follows',
  TEST_OPTIONS,
  async (t) => {
    const data = tempDir(t);
    const child = spawnServer(t, ['--port', '0', '--data', data]);
    const { url, port } = await waitListening(child);
    assert.ok(port > 0 && port < 65536, `port ${port}`);
    await assertHealthy(url);
    assert.equal(String(lockOwnerPid(data)), String(child.pid), 'the lock in --data holds the server pid');
    await stopGracefully(child);
    const [first, ...rest] = child.stdout().split('\n');
    assert.equal(first, `listening on http://127.0.0.1:${port}`);
    assert.equal(rest.length, 2, `one access log line, then the end: ${JSON.stringify(rest)}`);
    assert.match(rest[0]!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z GET \/healthz 200 [\d.]+ms \d+B req=\S+$/);
    assert.equal(rest[1], '');
  },
);

test(
  'Server command line: USERS_PORT=0 and USERS_DATA configure the server like --port and --data',
  TEST_OPTIONS,
  async (t) => {
    const data = tempDir(t);
    const child = await serveInProcess(t, [], { USERS_PORT: '0', USERS_DATA: data });
    const { url, port } = await waitListening(child);
    assert.notEqual(port, 8080);
    await assertHealthy(url);
    assert.equal(String(lockOwnerPid(data)), String(child.pid), 'USERS_DATA is the data directory');
    assert.ok(existsSync(join(data, 'secret')), 'the secret is made in USERS_DATA');
    await stopGracefully(child);
  },
);

test('Server command line: --data beats USERS_DATA', TEST_OPTIONS, async (t) => {
  const flagData = tempDir(t);
  const envData = join(tempDir(t), 'from-env');
  const child = await serveInProcess(t, ['--port', '0', '--data', flagData], { USERS_DATA: envData });
  await waitListening(child);
  assert.notEqual(lockOwnerPid(flagData), undefined, 'the lock is in --data');
  assert.ok(!existsSync(envData), 'USERS_DATA was not used');
  await stopGracefully(child);
});

// ---------------------------------------------------------------- bad flags

const badStarts: { name: string; args: string[]; env?: NodeJS.ProcessEnv }[] = [
  { name: 'an unknown flag --nope', args: ['--nope'] },
  { name: '--port 70000', args: ['--port', '70000'] },
  { name: '--port x', args: ['--port', 'x'] },
  { name: '--require-session maybe', args: ['--require-session', 'maybe'] },
  { name: '--max-body -1', args: ['--max-body=-1'] },
  { name: 'a secret shorter than 32 bytes', args: ['--secret', 'short'] },
  { name: 'USERS_PORT=x', args: [], env: { USERS_PORT: 'x' } },
  { name: 'USERS_ALLOW_ID_CHANGE=perhaps', args: [], env: { USERS_ALLOW_ID_CHANGE: 'perhaps' } },
];
for (const c of badStarts) {
  test(
    `Server command line: ${c.name} exits 2 with one stderr line "users-server: ...", no stack trace, and creates no data directory`,
    TEST_OPTIONS,
    async (t) => {
      const data = join(tempDir(t), 'never');
      // --port 0 unless the case is about the port, so a start that wrongly succeeds cannot collide on 8080.
      const port = c.args.some((a) => a.startsWith('--port')) || c.env?.USERS_PORT !== undefined ? [] : ['--port', '0'];
      const run = await runUsersServer(['--data', data, ...port, ...c.args], {
        env: { USERS_ADMIN_PASSWORD: ADMIN_PASSWORD, ...c.env },
      });
      assert.ok(!existsSync(data), 'the data directory was created');
      assertOneLineFailure({ code: run.code, signal: null }, { stdout: () => run.stdout, stderr: () => run.stderr }, 2);
    },
  );
}

const usageSentences: Array<{ args: string[]; line: string }> = [
  { args: ['--nope'], line: "users-server: unknown option '--nope' (see users-server --help)" },
  { args: ['--port'], line: 'users-server: --port needs a value (see users-server --help)' },
  {
    args: ['--port', '-1'],
    line: 'users-server: --port needs a value; for one that starts with "-", write --port=VALUE (see users-server --help)',
  },
  {
    args: ['bakup'],
    line: "users-server: unknown command 'bakup': the commands are accounts, backup, config, copy, index, migrate, repair, schema (see users-server --help)",
  },
  { args: ['backup', '--nope'], line: "users-server backup: unknown option '--nope' (see users-server backup --help)" },
  { args: ['backup', '--to'], line: 'users-server backup: --to needs a value (see users-server backup --help)' },
  {
    args: ['copy', '--from', 'data'],
    line: 'users-server copy: copy needs --from and --to (see users-server copy --help)',
  },
  {
    args: ['migrate', '--nope'],
    line: "users-server migrate: unknown option '--nope' (see users-server migrate --help)",
  },
  { args: ['repair', '--nope'], line: "users-server repair: unknown option '--nope' (see users-server repair --help)" },
  {
    args: ['accounts', 'add', '--nope'],
    line: "users-server accounts: unknown option '--nope' (see users-server accounts --help)",
  },
];
for (const c of usageSentences) {
  test(
    `Server command line: users-server ${c.args.join(' ')} is a usage error in one sentence that names the help to read`,
    TEST_OPTIONS,
    async () => {
      const run = await runUsersServer(c.args);
      assert.equal(run.code, 2, run.stderr);
      assert.equal(run.stderr, `${c.line}\n`);
      assert.equal(run.stdout, '');
    },
  );
}

const failures: Array<{ name: string; error: unknown; command: string | undefined; code: number; line: string }> = [
  {
    name: 'a ServerUsageError of a command',
    error: new ServerUsageError('copy needs --from and --to'),
    command: 'copy',
    code: 2,
    line: 'users-server copy: copy needs --from and --to',
  },
  {
    name: 'a ServerCommandError of the server',
    error: new ServerCommandError('the address is in use'),
    command: undefined,
    code: 1,
    line: 'users-server: the address is in use',
  },
  {
    name: 'a DataError, a kind of ServerCommandError',
    error: new DataError('accounts: not valid JSON'),
    command: 'accounts',
    code: 1,
    line: 'users-server accounts: accounts: not valid JSON',
  },
  {
    name: 'an error no command raises on purpose',
    error: Object.assign(new Error('boom\n    at somewhere (file.js:1:1)'), { code: 'EBOOM' }),
    command: 'backup',
    code: 1,
    line: 'users-server backup: unexpected error: boom (EBOOM)',
  },
];
for (const c of failures) {
  test(`Server command line: ${c.name} is one line on stderr, "users-server COMMAND: ...", and exit ${c.code}, never a stack`, async () => {
    let stderr = '';
    const code = await runCommand(
      c.command,
      () => {
        throw c.error;
      },
      { stderr: Object.assign(new PassThrough(), { write: (chunk: string) => ((stderr += chunk), true) }) },
    );
    assert.deepEqual([code, stderr], [c.code, `${c.line}\n`]);
  });
}

test(
  'Server command line: repair, backup, accounts and copy --from, given a file, a missing path or a folder no server made, exit 1 with one sentence naming the flag, and change nothing',
  TEST_OPTIONS,
  async (t) => {
    const root = tempDir(t);
    const file = join(root, 'notes.txt');
    writeFileSync(file, 'keep me\n');
    const empty = join(root, 'empty');
    mkdirSync(empty);
    const commands: Array<[string[], string, string]> = [
      [['repair', '--data'], 'users-server repair: ', '--data'],
      [['backup', '--to', join(root, 'backup'), '--data'], 'users-server backup: ', '--data'],
      [['accounts', 'list', '--data'], 'users-server accounts: ', '--data'],
      [['copy', '--to', 'postgres://nobody@127.0.0.1:1/none', '--from'], 'users-server copy: ', '--from'],
    ];
    for (const [args, prefix, flag] of commands) {
      const cases: Array<[string, string]> = [
        [file, `${file} is a file, not a folder: give the server's data directory with ${flag}`],
        [
          join(root, 'missing'),
          `${join(root, 'missing')} does not exist: give the server's data directory with ${flag}, or start users-server once with --data ${join(root, 'missing')} to make it`,
        ],
        [
          empty,
          `${empty} is not a users-server data directory (no journal, secret or accounts in it): give the server's data directory with ${flag}, or start users-server once with --data ${empty} to make it`,
        ],
      ];
      for (const [path, sentence] of cases) {
        const run = await runUsersServer([...args, path]);
        assert.equal(run.code, 1, `${args.join(' ')} ${path}: ${run.stderr}`);
        assert.equal(run.stderr, `${prefix}${sentence}\n`);
      }
    }
    assert.deepEqual(readdirSync(root).sort(), ['empty', 'notes.txt']);
    assert.deepEqual(readdirSync(empty), []);
    assert.equal(readFileSync(file, 'utf8'), 'keep me\n');
  },
);

test(
  'Server command line (bin): output that cannot be written (/dev/full) is one line and exit 1, not a stack trace; a reader that leaves early (| head) is no error',
  TEST_OPTIONS,
  async (t) => {
    if (!existsSync('/dev/full')) return t.skip('no /dev/full on this system');
    const prefixes: Array<[string[], string]> = [
      [['--help'], 'users-server: '],
      [['--version'], 'users-server: '],
      [['man'], 'users-server man: '],
      [['config', '--show'], 'users-server config: '],
    ];
    for (const [args, prefix] of prefixes) {
      const run = await runTool(t, 'bash', ['-c', '"$0" "$@" > /dev/full', process.execPath, SERVER_BIN, ...args]);
      assert.deepEqual(
        [run.code, run.stderr],
        [
          1,
          `${prefix}cannot write the output: no space left on the device; the command ran, but what it printed is lost\n`,
        ],
        args.join(' '),
      );
    }
    const piped = await runTool(t, 'bash', [
      '-c',
      'set -o pipefail; "$0" "$1" man | head -n 1',
      process.execPath,
      SERVER_BIN,
    ]);
    assert.deepEqual([piped.code, piped.stderr], [0, '']);
    assert.match(piped.stdout, /^\.TH USERS-SERVER 1 /);
  },
);

test(
  'Server command line (bin): a server whose stderr cannot be written (/dev/full, a full log disk) keeps serving and keeps its writes',
  TEST_OPTIONS,
  async (t) => {
    if (!existsSync('/dev/full')) return t.skip('no /dev/full on this system');
    const stale = buildIfStale();
    if (stale !== undefined) throw new Error(stale);
    const data = join(tempDir(t), 'data');
    const env = {
      ...cleanEnv(),
      USERS_ADMIN_PASSWORD: ADMIN_PASSWORD,
      USERS_PASSWORD_COST: '1',
      USERS_REQUIRE_SESSION: 'none',
    };
    // exec: the shell becomes the server, so the harness's signals reach it.
    const child = spawnChild(
      t,
      'bash',
      ['-c', 'exec "$0" "$@" 2>/dev/full', process.execPath, SERVER_BIN, '--port', '0', '--data', data],
      { env },
    );
    const url = (await child.waitForLine(/^listening on (http:\/\/\S+)$/))[1]!;
    assert.equal((await send(url, 'PUT', '/users/ann', { json: { name: 'Ann' } })).status, 201);
    assert.equal((await send(url, 'GET', '/users/ann')).status, 200);
    assert.equal((await send(url, 'GET', '/healthz')).status, 200);
    child.kill('SIGTERM');
    assert.equal((await child.exited).code, 0, child.stderr());
  },
);

test(
  'Server command line (bin): USERS_PORT=abc names the variable, not --port, in its one stderr line',
  TEST_OPTIONS,
  async (t) => {
    const child = spawnServer(t, ['--data', join(tempDir(t), 'never')], { USERS_PORT: 'abc' });
    const line = assertOneLineFailure(await waitExit(child), child, 2);
    assert.match(line, /^users-server: USERS_PORT must be an integer from 0 to 65535, not "abc"/);
  },
);

test(
  'Server command line (bin): an unknown flag exits the process with code 2 and one stderr line',
  TEST_OPTIONS,
  async (t) => {
    const data = join(tempDir(t), 'never');
    const child = spawnServer(t, ['--data', data, '--nope']);
    assertOneLineFailure(await waitExit(child), child, 2);
    assert.ok(!existsSync(data), 'the data directory was created');
  },
);

test('Server command line: --help exits 0 and lists every flag the server accepts', TEST_OPTIONS, async () => {
  const run = await runUsersServer(['--help']);
  assert.equal(run.code, 0);
  assert.equal(run.stderr, '');
  const help = run.stdout;
  for (const flag of [...API_FLAGS, '--help', '--version']) {
    assert.match(help, new RegExp(`(^|[\\s,])${flag}(?![\\w-])`), `--help does not list ${flag}`);
  }
});

test(
  'Server command line: --help lists every flag, also the environment variable of each (USERS_ plus the flag name)',
  TEST_OPTIONS,
  async () => {
    const run = await runUsersServer(['--help']);
    assert.equal(run.code, 0);
    for (const flag of API_FLAGS) {
      const env = 'USERS_' + flag.slice(2).toUpperCase().replaceAll('-', '_');
      assert.ok(run.stdout.includes(env), `--help does not name ${env}`);
    }
  },
);

test('Server command line (bin): --version prints the package.json version and exits 0', TEST_OPTIONS, async (t) => {
  const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const child = spawnServer(t, ['--version']);
  const { code, signal } = await waitExit(child);
  assert.equal(signal, null);
  assert.equal(code, 0);
  assert.equal(child.stdout(), `${version}\n`);
  assert.equal(beyondDataLine(child.stderr()), '');
});

// ---------------------------------------------------------------- graceful stop

/**
 * Starts a PUT with `Expect: 100-continue`; once the server's 100 Continue
 * shows the request is under way, calls `between` (sending a signal), then
 * sends the body and returns the reply.
 */
function slowPut(url: string, path: string, body: string, between: () => void): Promise<Reply> {
  const bytes = Buffer.from(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      url + path,
      {
        method: 'PUT',
        agent: false,
        // Asks to keep the connection: the server's answer while it stops must not.
        headers: {
          'content-type': 'application/json',
          'content-length': String(bytes.length),
          expect: '100-continue',
          connection: 'keep-alive',
        },
      },
      (res) => readReply(res, resolve, reject),
    );
    req.on('error', reject);
    req.on('continue', () => {
      between();
      req.end(bytes);
    });
    req.flushHeaders();
  });
}

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  test(
    `Server command line: ${signal} stops the server gracefully: a PUT in flight completes with 201 and the exit code is 0`,
    TEST_OPTIONS,
    async (t) => {
      const child = spawnServer(t, ['--port', '0', '--data', tempDir(t)]);
      const { url } = await waitListening(child);
      const reply = await slowPut(
        url,
        '/users/alice',
        JSON.stringify({ name: 'Alice', note: 'sent in two parts' }),
        () => child.process.kill(signal),
      );
      assert.equal(reply.status, 201, `status ${reply.status}: ${reply.text}`);
      assert.equal(reply.headers.location, '/users/1');
      // Answered while the server stops: the connection is not kept for another request.
      assert.equal(reply.headers.connection, 'close');
      assert.deepEqual(reply.json(), { name: 'Alice', note: 'sent in two parts', id: 1 });
      const result = await waitExit(child);
      assert.equal(result.signal, null, `killed by ${result.signal}`);
      assert.equal(result.code, 0, `exit code ${result.code}; stderr=${child.stderr()}`);
      // "listening on", then the access log line of the PUT, written before the exit.
      const out = lines(child.stdout());
      assert.equal(out.length, 2, `stdout: ${child.stdout()}`);
      assert.match(out[1]!, / PUT \/users\/alice 201 /);
      assert.equal(beyondDataLine(child.stderr()), '', 'nothing on stderr after a graceful stop');
    },
  );

  test(
    `Server command line: ${signal} sent as soon as "listening on" is printed still stops gracefully (exit 0) and releases the lock for the next server`,
    TEST_OPTIONS,
    async (t) => {
      const data = tempDir(t);
      const first = spawnServer(t, ['--port', '0', '--data', data]);
      await waitListening(first);
      // The listening line is the readiness signal a supervisor waits for: the
      // signal handlers must already be in place when it is printed.
      first.process.kill(signal);
      const result = await waitExit(first);
      assert.equal(
        result.signal,
        null,
        `killed by ${result.signal}: the signal arrived before the handlers were installed`,
      );
      assert.equal(result.code, 0);
      assert.equal(lockOwnerPid(data), undefined, 'the lock file is left behind');
      const second = spawnServer(t, ['--port', '0', '--data', data]);
      await assertHealthy((await waitListening(second)).url);
      await stopGracefully(second);
    },
  );
}

/**
 * Resolves once the server at `port` refuses connections (it has begun to stop): each try waits on its socket's event.
 */
async function untilRefused(port: number): Promise<void> {
  for (;;) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', () => resolve(true));
    });
    if (refused) return;
  }
}

for (const [first, second] of [
  ['SIGTERM', 'SIGTERM'],
  ['SIGINT', 'SIGINT'],
  ['SIGTERM', 'SIGINT'],
] as const) {
  test(
    `Server command line: ${second} during the drain after ${first} closes the open connections at once, yet flushes the store and releases the lock (exit 0)`,
    TEST_OPTIONS,
    async (t) => {
      const data = tempDir(t);
      const child = spawnServer(t, ['--port', '0', '--data', data]);
      const { url, port } = await waitListening(child);
      assert.equal((await send(url, 'PUT', '/users/alice', { json: { name: 'Alice' } })).status, 201);
      // A request whose body never comes holds the drain open.
      const stuck = connect(port, '127.0.0.1');
      await new Promise((resolve) => stuck.once('connect', resolve));
      const cut = new Promise((resolve) => stuck.once('close', resolve));
      stuck.on('error', () => {});
      stuck.write(
        'PUT /users/bob HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":',
      );
      child.process.kill(first);
      await untilRefused(port);
      child.process.kill(second);
      const result = await waitExit(child);
      assert.equal(result.signal, null, `killed by ${result.signal}`);
      assert.equal(result.code, 0, `stderr=${child.stderr()}`);
      await cut;
      assert.match(child.stderr(), /second signal: closing the open connections now/);
      assert.equal(lockOwnerPid(data), undefined, 'the lock is released');
      const again = spawnServer(t, ['--port', '0', '--data', data]);
      const restarted = await waitListening(again);
      assert.equal(
        (await send(restarted.url, 'GET', '/users/alice')).json().name,
        'Alice',
        'the acknowledged write is there',
      );
      assert.equal(beyondDataLine(again.stderr()), '', 'no stale lock to take over');
      await stopGracefully(again);
    },
  );
}

test(
  'Server command line: SIGHUP reads the accounts again, says so on stderr, and the server keeps serving',
  TEST_OPTIONS,
  async (t) => {
    const child = spawnServer(t, ['--port', '0', '--data', tempDir(t)]);
    const { url } = await waitListening(child);
    child.process.kill('SIGHUP');
    await child.waitForLine(/^users-server: SIGHUP: accounts read again$/, 'stderr');
    assert.equal((await send(url, 'GET', '/healthz')).status, 200);
    await stopGracefully(child);
  },
);

// ---------------------------------------------------------------- data directory

test(
  'Sessions: the first start without USERS_ADMIN_PASSWORD writes <data>/admin-password (mode 0600), prints its path on stderr (on every start until it is changed), and that password logs in; accounts passwd admin changes it',
  TEST_OPTIONS,
  async (t) => {
    const data = tempDir(t);
    const file = join(data, 'admin-password');
    const asShipped = { USERS_REQUIRE_SESSION: undefined };
    const child = await serveInProcess(t, ['--port', '0', '--data', data], asShipped, { adminPassword: false });
    const { url } = await waitListening(child);
    assert.ok(existsSync(file), 'no admin-password file');
    assert.equal(fileMode(file), 0o600, `mode ${fileMode(file).toString(8)}`);
    const errLines = lines(beyondDataLine(child.stderr()));
    assert.equal(errLines.length, 1, `stderr: ${child.stderr()}`);
    assert.match(errLines[0]!, /^users-server: /);
    assert.ok(errLines[0]!.includes(file), `stderr does not name ${file}: ${errLines[0]}`);
    const password = readFileSync(file, 'utf8').trim();
    assert.ok(password.length >= 16, `a weak generated password: ${password.length} characters`);

    const ok = await login(url, password);
    assert.equal(ok.status, 200, ok.text);
    assert.match(String(ok.headers['set-cookie']), /^USER_TOKEN=/);
    const root = await send(url, 'GET', '/', { headers: { cookie: cookiePair(ok.headers['set-cookie']) } });
    assert.equal(root.status, 200);
    const wrong = await login(url, password + 'x');
    assert.equal(wrong.status, 401, 'a wrong password also logs in');
    await stopGracefully(child);

    // The second start keeps the password and says again where it is: it is still the generated one.
    const again = await serveInProcess(t, ['--port', '0', '--data', data], asShipped, { adminPassword: false });
    const second = await waitListening(again);
    assert.equal(readFileSync(file, 'utf8').trim(), password);
    assert.equal(
      again.stderr(),
      `users-server: data in ${data} (journal)\nusers-server: ${ACCESS_ALL}\nusers-server: first login: usersctl --url ${second.url} login --password-stdin < ${file} (then change it: users-server accounts passwd admin --data ${data})\n`,
    );
    const session = cookiePair((await login(second.url, password)).headers['set-cookie']);
    await stopGracefully(again);

    // accounts passwd admin: the file is gone, the next start is silent, the new password logs in, the old one and its
    // sessions do not.
    const changed = await runUsersServer(['accounts', 'passwd', 'admin', '--data', data], {
      stdin: 'the admin password, chosen\n',
    });
    assert.equal(changed.code, 0, changed.stderr);
    assert.equal(
      changed.stdout,
      `changed the password of "admin"; running servers take it within a second, its sessions end, and ${file} is removed\n`,
    );
    assert.ok(!existsSync(file), 'the generated password is still on disk');
    const third = await serveInProcess(t, ['--port', '0', '--data', data], {}, { adminPassword: false });
    const restarted = await waitListening(third);
    assert.equal(beyondDataLine(third.stderr()), '', 'no announcement once the password was changed');
    assert.ok(!existsSync(file), 'a start made a new generated password');
    assert.equal((await login(restarted.url, 'the admin password, chosen')).status, 200);
    assert.equal((await login(restarted.url, password)).status, 401);
    assert.equal(
      (await send(restarted.url, 'GET', '/', { headers: { cookie: session } })).status,
      401,
      'the sessions of the old password ended',
    );
    await stopGracefully(third);
  },
);

test(
  'users-server says at start who may use it; on an address other than loopback with reads or writes open it warns that anyone who can reach it can read (and change) every user, and names the flag that closes it; by default, or on loopback, it does not',
  TEST_OPTIONS,
  async (t) => {
    const cases = [
      {
        args: ['--host', '0.0.0.0', '--require-session', 'none'],
        access:
          /^users-server: access: \/users, \/changes and \/metrics are open to anyone who can reach the server, to read and to write \(--require-session none\)$/m,
        warning:
          'users-server: warning: listening on 0.0.0.0, not only on this machine, with --require-session none: anyone who can reach it can read and change every user. --require-session all closes that\n',
      },
      {
        args: ['--host', '0.0.0.0', '--require-session', 'writes'],
        access:
          /^users-server: access: reads of \/users, \/changes and \/metrics are open to anyone who can reach the server; writes need a session or an API token \(--require-session writes\)$/m,
        warning:
          'users-server: warning: listening on 0.0.0.0, not only on this machine, with --require-session writes: anyone who can reach it can read every user and the feed of changes. --require-session all closes that\n',
      },
      {
        args: ['--host', '0.0.0.0'],
        env: { USERS_REQUIRE_SESSION: undefined },
        access: new RegExp(`^users-server: ${ACCESS_ALL.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`, 'm'),
        warning: '',
      },
      {
        args: ['--host', '127.0.0.1', '--require-session', 'none'],
        access: /^users-server: access: .*--require-session none\)$/m,
        warning: '',
      },
    ];
    for (const c of cases) {
      const child = await serveInProcess(t, ['--port', '0', '--data', tempDir(t), ...c.args], c.env);
      await child.waitForLine(/^listening on /);
      assert.match(child.stderr(), c.access, c.args.join(' '));
      assert.equal(beyondDataLine(child.stderr()), c.warning, c.args.join(' '));
      await stopGracefully(child);
    }
  },
);

test(
  'Sessions: with USERS_ADMIN_PASSWORD no admin-password file is written and that password logs in',
  TEST_OPTIONS,
  async (t) => {
    const data = tempDir(t);
    const child = await serveInProcess(t, ['--port', '0', '--data', data]);
    const { url } = await waitListening(child);
    assert.ok(!existsSync(join(data, 'admin-password')));
    assert.equal(beyondDataLine(child.stderr()), '');
    assert.equal((await login(url, ADMIN_PASSWORD)).status, 200);
    await stopGracefully(child);
  },
);

test(
  'Sessions: without --secret, <data>/secret is made with mode 0600 and a session cookie survives a restart',
  TEST_OPTIONS,
  async (t) => {
    const data = tempDir(t);
    const first = await serveInProcess(t, ['--port', '0', '--data', data]);
    const a = await waitListening(first);
    const secretFile = join(data, 'secret');
    assert.equal(fileMode(secretFile), 0o600, `mode ${fileMode(secretFile).toString(8)}`);
    const secret = readFileSync(secretFile, 'utf8');
    const ok = await login(a.url, ADMIN_PASSWORD);
    assert.equal(ok.status, 200, ok.text);
    const cookie = cookiePair(ok.headers['set-cookie']);
    assert.equal((await send(a.url, 'GET', '/', { headers: { cookie } })).status, 200);
    await stopGracefully(first);

    const second = await serveInProcess(t, ['--port', '0', '--data', data]);
    const b = await waitListening(second);
    assert.equal(readFileSync(secretFile, 'utf8'), secret, 'the secret changed on restart');
    const root = await send(b.url, 'GET', '/', { headers: { cookie } });
    assert.equal(root.status, 200, `GET / after restart: ${root.status} ${root.text}`);
    assert.equal(root.text, '"OK"');
    // And a forged cookie still fails, so the 200 above is not a server that lets everyone in.
    const forged = await send(b.url, 'GET', '/', {
      headers: { cookie: cookie.slice(0, -2) + (cookie.endsWith('AA') ? 'BB' : 'AA') },
    });
    assert.equal(forged.status, 401);
    await stopGracefully(second);
  },
);

test('Sessions: with --secret no <data>/secret is written', TEST_OPTIONS, async (t) => {
  const data = tempDir(t);
  const child = await serveInProcess(t, ['--port', '0', '--data', data, '--secret', 's'.repeat(32)]);
  await waitListening(child);
  assert.ok(!existsSync(join(data, 'secret')));
  await stopGracefully(child);
});

// ---------------------------------------------------------------- lock

test(
  "Server command line: a second server on the same data directory exits 1 with one line naming the first one's pid, and the first keeps running",
  TEST_OPTIONS,
  async (t) => {
    const data = tempDir(t);
    const first = spawnServer(t, ['--port', '0', '--data', data]);
    const { url } = await waitListening(first);
    const second = spawnServer(t, ['--port', '0', '--data', data]);
    const result = await waitExit(second);
    const line = assertOneLineFailure(result, second, 1);
    assert.match(line, new RegExp(`\\b${first.pid}\\b`), `the message does not name pid ${first.pid}: ${line}`);
    assert.ok(line.includes(data) || /data dir/i.test(line), `the message does not name the data directory: ${line}`);
    assert.equal(first.process.exitCode, null, 'the first server stopped');
    await assertHealthy(url);
    assert.equal(String(lockOwnerPid(data)), String(first.pid), 'the refused server touched the lock');
    await stopGracefully(first);
  },
);

async function deadPid(t: TestContext): Promise<number> {
  const child = spawnChild(t, process.execPath, ['-e', '']);
  await child.exited;
  return child.pid;
}

const staleLocks: { name: string; pid: (t: TestContext) => Promise<number> }[] = [
  { name: 'a process that was spawned and has exited', pid: deadPid },
  { name: '999999', pid: async () => 999999 },
];
for (const c of staleLocks) {
  test(
    `Server command line: a stale lock holding the pid of ${c.name} does not block start and is taken over`,
    TEST_OPTIONS,
    async (t) => {
      const pid = await c.pid(t);
      if (isAlive(pid)) {
        t.skip(`pid ${pid} is alive on this machine`);
        return;
      }
      const data = tempDir(t);
      writeFileSync(join(data, 'lock'), `${pid}\n`);
      const child = spawnServer(t, ['--port', '0', '--data', data]);
      const { url } = await waitListening(child);
      await assertHealthy(url);
      assert.equal(String(lockOwnerPid(data)), String(child.pid));
      await stopGracefully(child);
    },
  );
}

/** A running process that is not a users-server, and its start time as /proc shows it. */
async function otherProcess(t: TestContext): Promise<{ pid: number; started: string; boot: string }> {
  const child = spawnChild(t, process.execPath, ['-e', 'setInterval(() => {}, 1 << 30); console.log("up")']);
  await child.waitForLine(/^up$/);
  const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
  return {
    pid: child.pid,
    started: stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!,
    boot: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(),
  };
}

const reusedLocks: {
  name: string;
  owner: (o: { pid: number; started: string; boot: string }) => string;
  why: RegExp;
}[] = [
  {
    name: 'whose pid now belongs to another process (another start time)',
    owner: (o) => `${o.pid} 1 ${o.boot}`,
    why: new RegExp('now belongs to another process'),
  },
  {
    name: 'taken before the system last started',
    owner: (o) => `${o.pid} ${o.started} 00000000-0000-0000-0000-000000000000`,
    why: /before the system last started/,
  },
];
for (const c of reusedLocks) {
  test(
    `Server command line: a lock ${c.name} is taken over, with a line on stderr saying why`,
    TEST_OPTIONS,
    async (t) => {
      if (!existsSync('/proc/self/stat')) return t.skip('no /proc on this system');
      const other = await otherProcess(t);
      const data = tempDir(t);
      symlinkSync(c.owner(other), join(data, 'lock'));
      const child = spawnServer(t, ['--port', '0', '--data', data]);
      const { url } = await waitListening(child);
      await assertHealthy(url);
      assert.match(child.stderr(), new RegExp(`^users-server: took over the lock of \\S+: .*${c.why.source}`, 'm'));
      assert.equal(lockOwnerPid(data), child.pid);
      await stopGracefully(child);
    },
  );
}

test(
  'Server command line: a lock naming a running process with its own start time is respected: exit 1, the lock untouched',
  TEST_OPTIONS,
  async (t) => {
    if (!existsSync('/proc/self/stat')) return t.skip('no /proc on this system');
    const other = await otherProcess(t);
    const data = tempDir(t);
    symlinkSync(`${other.pid} ${other.started} ${other.boot}`, join(data, 'lock'));
    const child = spawnServer(t, ['--port', '0', '--data', data]);
    const line = assertOneLineFailure(await waitExit(child), child, 1);
    assert.match(line, new RegExp(`another users-server \\(pid ${other.pid}\\)`));
    assert.equal(lockOwnerPid(data), other.pid);
  },
);

test(
  'Server command line: a port in use exits 1 with one stderr line, and leaves no lock behind',
  TEST_OPTIONS,
  async (t) => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
    const port = (blocker.address() as AddressInfo).port;
    const data = tempDir(t);
    const child = spawnServer(t, ['--port', String(port), '--data', data]);
    const result = await waitExit(child);
    const line = assertOneLineFailure(result, child, 1);
    assert.ok(line.includes(String(port)), `the message does not name port ${port}: ${line}`);
    assert.equal(lockOwnerPid(data), undefined, 'a failed start left its lock');
  },
);

test(
  'Server command line: copy from or into a data directory a running server holds exits 1 with one sentence that says to stop it, naming no flag copy does not have',
  { ...TEST_OPTIONS, skip: postgresSkipReason() },
  async (t) => {
    const data = tempDir(t);
    const server = spawnServer(t, ['--port', '0', '--data', data]);
    await waitListening(server);
    const database = await testDatabase(t);
    for (const args of [
      ['--from', data, '--to', database],
      ['--from', database, '--to', data, '--replace'],
    ]) {
      const run = await runUsersServer(['copy', ...args]);
      assert.equal(run.code, 1, run.stderr);
      assert.match(
        run.stderr,
        new RegExp(
          `^users-server copy: another users-server \\(pid ${server.process.pid}\\) is using the data directory ${data}: stop it first, then copy again\\n$`,
        ),
        args.join(' '),
      );
    }
    await stopGracefully(server);
  },
);

test(
  "node bin/users-server.js warns at start when USERS_ADMIN_PASSWORD is shorter than an account's password may be; on a wildcard address its first-login line names a URL this machine reaches (127.0.0.1)",
  TEST_OPTIONS,
  async (t) => {
    const short = spawnServer(t, ['--port', '0', '--data', tempDir(t)], { USERS_ADMIN_PASSWORD: 'abc' });
    await waitListening(short);
    assert.equal(
      beyondDataLine(short.stderr()),
      "users-server: warning: USERS_ADMIN_PASSWORD has 3 characters, fewer than the 12 an account's password needs: give a longer one, or set one with users-server accounts passwd admin\n",
    );
    await stopGracefully(short);
    const data = tempDir(t);
    const wildcard = spawnServer(
      t,
      ['--port', '0', '--host', '0.0.0.0', '--data', data, '--require-session', 'all'],
      {},
      { adminPassword: false },
    );
    const port = (await wildcard.waitForLine(/^listening on http:\/\/0\.0\.0\.0:(\d+)$/))[1]!;
    assert.match(
      wildcard.stderr(),
      new RegExp(
        `^users-server: first login: usersctl --url http://127\\.0\\.0\\.1:${port} login --password-stdin < `,
        'm',
      ),
    );
    await stopGracefully(wildcard);
  },
);
