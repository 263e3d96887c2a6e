import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { EXIT } from '../cli/main.js';
import { ADMIN_PASSWORD, buildIfStale, put, send, startTestServer, tempDir } from './helpers.js';
import { closedPortUrl, lines, startStub } from './cli-helpers.js';
import { CLI_BIN, runTool, spawnUsersctl } from './processes.js';

// The real executable as a child process: the exit code reaches the shell,
// stderr holds one line and no stack trace, pipes behave.

// USERSCTL_TEST_BIN runs these tests against another build of the executable.
const BIN = process.env.USERSCTL_TEST_BIN ?? CLI_BIN;

interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command line in a child process (async: the test server lives in this process). */
async function spawnText(
  t: TestContext,
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  stdin = '',
): Promise<ChildResult> {
  return runTool(t, command, args, { input: stdin, env: { PATH: process.env.PATH, ...env } });
}

function usersctl(t: TestContext, args: readonly string[], env: NodeJS.ProcessEnv, stdin = ''): Promise<ChildResult> {
  if (process.env.USERSCTL_TEST_BIN === undefined) {
    const stale = buildIfStale();
    if (stale !== undefined) throw new Error(stale);
  }
  return spawnText(t, process.execPath, [BIN, ...args], env, stdin);
}

async function setup(t: TestContext) {
  const server = await startTestServer(t);
  const home = tempDir(t, 'usersctl-home-');
  return { server, env: { HOME: home, XDG_STATE_HOME: join(home, 'state'), USERSCTL_URL: server.url } };
}

test('the executable prints --help with the exit codes and exits 0', async (t) => {
  const result = await usersctl(t, ['--help'], {});
  assert.equal(result.code, 0);
  assert.match(result.stdout, /Exit codes:/);
  assert.match(result.stdout, /^ {2}8 {2}import: some lines failed, or the export read was cut short$/m);
});

test("the executable's exit code reaches the shell: 0 for a found user, 3 for a missing one, with one stderr line and no stack", async (t) => {
  const { env } = await setup(t);
  const created = await usersctl(t, ['put', 'alice', '--name', 'Alice'], env);
  assert.deepEqual(created, { code: 0, stdout: '{"name":"Alice","id":1}\n', stderr: '' });
  const missing = await usersctl(t, ['get', 'bob'], env);
  assert.equal(missing.code, EXIT.notFound);
  assert.deepEqual(lines(missing.stderr), ['usersctl: bob: No such user.']);
});

test('the executable logs in from a pipe and keeps the session for the next process', async (t) => {
  const { env } = await setup(t);
  assert.equal((await usersctl(t, ['-q', 'login', '--password-stdin'], env, ADMIN_PASSWORD + '\n')).code, 0);
  const status = await usersctl(t, ['status'], env);
  assert.deepEqual(status, { code: 0, stdout: 'OK\n', stderr: '' });
  const unreachable = await usersctl(t, ['--url', 'http://127.0.0.1:9', '--retries', '0', 'status'], env);
  assert.equal(unreachable.code, EXIT.network);
  assert.equal(lines(unreachable.stderr).length, 1);
});

test('the executable imports a file, exits 8 for a bad line; list into a reader that closes the pipe stops, says so in one line and exits 141', async (t) => {
  const { env } = await setup(t);
  const file = join(tempDir(t, 'usersctl-files-'), 'users.ndjson');
  const padding = 'x'.repeat(150);
  const input =
    Array.from({ length: 3000 }, (_, n) => JSON.stringify({ name: `User ${n}`, padding })).join('\n') +
    '\n{"name":""}\n';
  writeFileSync(file, input);
  const imported = await usersctl(t, ['import', '-f', file, '--concurrency', '32'], env);
  assert.equal(imported.code, EXIT.partialImport, imported.stderr);
  assert.equal(lines(imported.stdout).length, 3001);
  assert.deepEqual(lines(imported.stderr), ['usersctl: 1 of 3001 lines failed; their results on stdout say why']);

  // About 600 KB of NDJSON into `head -n 1`: usersctl meets EPIPE, stops, and says it stopped early.
  const piped = await spawnText(
    t,
    'bash',
    ['-c', 'set -o pipefail; "$0" "$1" list --limit 1000 | head -n 1', process.execPath, BIN],
    env,
  );
  assert.equal(piped.code, 141, piped.stderr);
  assert.deepEqual(lines(piped.stderr), [
    'usersctl: stopped early (output closed): what was written before is complete',
  ]);
  assert.equal(JSON.parse(piped.stdout).id, 1);
});

test('bin: usersctl --help piped into head -1 exits 0 with nothing on stderr (a closed pipe is not an error)', async (t) => {
  const script = `"${process.execPath}" "${BIN}" --help | head -1; echo "exit=\${PIPESTATUS[0]}"`;
  const result = await spawnText(t, 'bash', ['--norc', '--noprofile', '-c', script], {});
  assert.equal(result.stderr, '');
  assert.match(result.stdout, /^Usage: usersctl .*\nexit=0\n$/);
});

test('bin: import into a reader that closes the pipe stops sending, says "imported N, failed M, not sent K" (N + M + K = the input\'s lines) and exits 141', async (t) => {
  const { env } = await setup(t);
  const file = join(tempDir(t, 'usersctl-files-'), 'users.ndjson');
  writeFileSync(
    file,
    Array.from({ length: 3000 }, (_, n) => JSON.stringify({ name: `User ${n}`, pad: 'p'.repeat(100) })).join('\n') +
      '\n',
  );
  const piped = await spawnText(
    t,
    'bash',
    ['-c', 'set -o pipefail; "$0" "$1" import -f "$2" | head -n 1', process.execPath, BIN, file],
    env,
  );
  assert.equal(piped.code, 141, piped.stderr);
  const summary = /^usersctl: interrupted \(output closed\): imported (\d+), failed (\d+), not sent (\d+)$/.exec(
    lines(piped.stderr).join('\n'),
  );
  assert.ok(summary !== null, piped.stderr);
  assert.equal(Number(summary[1]) + Number(summary[2]) + Number(summary[3]), 3000);
  assert.ok(Number(summary[3]) > 0, 'some lines were not sent');
});

test('bin: output to a full device (/dev/full) stops each command (help and completion too) with one sentence that names the cause, exit 1, no stack trace; import says what it did, and watch resumes before what it could not print', async (t) => {
  if (!existsSync('/dev/full')) return t.skip('no /dev/full on this system');
  const { server, env } = await setup(t);
  for (const name of ['Ann', 'Bob']) await put(server.url, `/users/${name.toLowerCase()}`, { name });
  const file = join(tempDir(t, 'usersctl-files-'), 'users.ndjson');
  writeFileSync(file, '{"name":"Cy"}\n{"name":"Di"}\n\n');
  const full = (args: string[]) =>
    spawnText(t, 'bash', ['-c', '"$0" "$@" > /dev/full', process.execPath, BIN, ...args], env);
  const cut =
    'usersctl: stopped early (output failed: no space left on the device): the output may end in a cut line; run the command again once it can be written\n';
  for (const args of [['export'], ['list'], ['get', 'ann', 'bob']]) {
    const run = await full(args);
    assert.deepEqual([run.code, run.stderr], [1, cut], args.join(' '));
  }
  const watched = await full(['watch', '--from-start', '--no-follow']);
  assert.deepEqual(
    [watched.code, watched.stderr],
    [
      1,
      'usersctl: stopped (output failed: no space left on the device); the last cursor is 0: resume with usersctl watch --since 0\n',
    ],
  );
  for (const args of [['--help'], ['--version'], ['completion', 'bash']]) {
    const run = await full(args);
    assert.deepEqual(
      [run.code, run.stderr],
      [
        1,
        'usersctl: cannot write the output: no space left on the device; run the command again once it can be written\n',
      ],
      args.join(' '),
    );
  }
  const imported = await full(['import', '-f', file]);
  assert.deepEqual(
    [imported.code, imported.stderr],
    [1, 'usersctl: interrupted (output failed: no space left on the device): imported 2, failed 0, not sent 0\n'],
  );
  assert.equal(
    (await send(server.url, 'GET', '/users')).json().items.length,
    4,
    'the import was made, only its results were not printed',
  );
});

test('bin: SIGINT while a request waits to be tried again stops the command at once, exit 130, naming the failure and the stop', async (t) => {
  const { env } = await setup(t);
  const dir = tempDir(t, 'usersctl-files-');
  const trace = join(dir, 'trace.txt');
  // -v traces each retry: the shell sends SIGINT once the second one is announced (its wait is 100 to 200 ms, then
  // more).
  const script =
    '"$0" "$1" --url "$2" --retries 8 -v get 1 2> "$3" & p=$!; until grep -q "retry 2 of 8" "$3"; do :; done; kill -INT $p; wait $p';
  const run = await spawnText(t, 'bash', ['-c', script, process.execPath, BIN, await closedPortUrl(), trace], env);
  assert.equal(run.code, 130, readFileSync(trace, 'utf8'));
  const last = lines(readFileSync(trace, 'utf8')).at(-1);
  assert.match(
    last ?? '',
    /^usersctl: cannot connect to http:\/\/127\.0\.0\.1:\d+: connection refused; stopped \(SIGINT\) instead of trying again$/,
  );
  assert.ok(!readFileSync(trace, 'utf8').includes('retry 3 of 8'), 'no retry after the stop');
});

test('bin: SIGINT during import stops sending, waits for the requests in flight, leaves a results file complete up to there, prints the summary and exits 130', async (t) => {
  const { env } = await setup(t);
  const dir = tempDir(t, 'usersctl-files-');
  const file = join(dir, 'users.ndjson');
  writeFileSync(file, Array.from({ length: 3000 }, (_, n) => JSON.stringify({ name: `User ${n}` })).join('\n') + '\n');
  const results = join(dir, 'results.ndjson');
  // The shell starts the import with its output in a file, waits for the first result, then sends SIGINT.
  const script =
    '"$0" "$1" import --concurrency 1 -f "$2" > "$3" & p=$!; while [ ! -s "$3" ]; do :; done; kill -INT $p; wait $p';
  const run = await spawnText(t, 'bash', ['-c', script, process.execPath, BIN, file, results], env);
  assert.equal(run.code, 130, run.stderr);
  const summary = /^usersctl: interrupted \(SIGINT\): imported (\d+), failed (\d+), not sent (\d+)$/.exec(
    lines(run.stderr).join('\n'),
  );
  assert.ok(summary !== null, run.stderr);
  const imported = Number(summary[1]);
  assert.equal(imported + Number(summary[2]) + Number(summary[3]), 3000);
  const written = lines(readFileSync(results, 'utf8'));
  assert.equal(written.length, imported + Number(summary[2]), 'one result per line sent, none missing');
  assert.deepEqual(
    written.map((l) => JSON.parse(l).line),
    Array.from({ length: written.length }, (_, i) => i + 1),
  );
});

test('bin: a second SIGINT during import exits 130 at once, and one line on stderr still says how far it got: the results printed, through which line, and how many lines are without one', async (t) => {
  // The first three PUTs are answered; the rest are held, so the import stays waiting for them after the first SIGINT.
  const stub = await startStub(t, (_req, res, n) => {
    if (n >= 3) return;
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ name: `User ${n}`, id: n + 1 }));
  });
  const file = join(tempDir(t, 'usersctl-files-'), 'users.ndjson');
  writeFileSync(file, Array.from({ length: 100 }, (_, n) => JSON.stringify({ name: `User ${n}` })).join('\n') + '\n');
  const importing = spawnUsersctl(t, ['--url', stub.url, 'import', '--concurrency', '4', file], {
    env: { PATH: process.env.PATH, HOME: tempDir(t) },
  });
  await importing.waitForLine(/^\{"line":3,/);
  // Signals sent back to back can merge into one: the second that arrives is the one that counts.
  let exited = false;
  void importing.exited.then(() => (exited = true));
  while (!exited) {
    importing.kill('SIGINT');
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal((await importing.exited).code, 130);
  assert.equal(lines(importing.stdout()).length, 3);
  const said =
    /^usersctl: stopped at once \(SIGINT again\): results printed through line 3 \(3 lines\); (\d+) lines? more without a printed result \(those sent may have been imported\); the rest not sent: the same import run again finishes it\n$/.exec(
      importing.stderr(),
    );
  assert.ok(said !== null, importing.stderr());
  assert.equal(said[1], '4', 'the four requests in flight');
});
