import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, test } from 'node:test';
import { EXIT } from '../cli/main.js';
import { ADMIN_PASSWORD, startTestServer, tempDir } from './helpers.js';
import { lines } from './cli-helpers.js';

// The real executable as a child process: the exit code reaches the shell,
// stderr holds one line and no stack trace, pipes behave.

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// USERSCTL_TEST_BIN runs these tests against another build of the executable.
const BIN = process.env.USERSCTL_TEST_BIN ?? join(ROOT, 'bin', 'usersctl.js');
const BUILT = join(ROOT, 'dist', 'cli', 'main.js');

let skipReason: string | undefined;

before(() => {
  if (readFileSync(BIN, 'utf8').includes('not yet implemented')) skipReason = `${BIN} is still the placeholder`;
  else if (process.env.USERSCTL_TEST_BIN === undefined && !existsSync(BUILT)) skipReason = 'dist/cli/main.js is missing: run npm run build';
});

function skipped(t: import('node:test').TestContext): boolean {
  if (skipReason === undefined) return false;
  t.diagnostic(`skipped: ${skipReason}`);
  t.skip(skipReason);
  return true;
}

interface ChildResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command line in a child process (async: the test server lives in this process). */
function spawnText(command: string, args: readonly string[], env: NodeJS.ProcessEnv, stdin = ''): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { PATH: process.env.PATH, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

function usersctl(args: readonly string[], env: NodeJS.ProcessEnv, stdin = ''): Promise<ChildResult> {
  return spawnText(process.execPath, [BIN, ...args], env, stdin);
}

async function setup(t: import('node:test').TestContext) {
  const server = await startTestServer(t);
  const home = tempDir(t, 'usersctl-home-');
  return { server, env: { HOME: home, XDG_STATE_HOME: join(home, 'state'), USERSCTL_URL: server.url } };
}

test('the executable prints --help with the exit codes and exits 0', async (t) => {
  if (skipped(t)) return;
  const result = await usersctl(['--help'], {});
  assert.equal(result.code, 0);
  assert.match(result.stdout, /Exit codes:/);
  assert.match(result.stdout, /^  8  import: some lines failed$/m);
});

test('the executable\'s exit code reaches the shell: 0 for a found user, 3 for a missing one, with one stderr line and no stack', async (t) => {
  if (skipped(t)) return;
  const { env } = await setup(t);
  const created = await usersctl(['put', 'alice', '--name', 'Alice'], env);
  assert.deepEqual(created, { code: 0, stdout: '{"name":"Alice","id":1}\n', stderr: '' });
  const missing = await usersctl(['get', 'bob'], env);
  assert.equal(missing.code, EXIT.notFound);
  assert.deepEqual(lines(missing.stderr), ['usersctl: No such user.']);
});

test('the executable logs in from a pipe and keeps the session for the next process', async (t) => {
  if (skipped(t)) return;
  const { env } = await setup(t);
  assert.equal((await usersctl(['-q', 'login', '--password-stdin'], env, ADMIN_PASSWORD + '\n')).code, 0);
  const status = await usersctl(['status'], env);
  assert.deepEqual(status, { code: 0, stdout: 'OK\n', stderr: '' });
  const unreachable = await usersctl(['--url', 'http://127.0.0.1:9', '--retries', '0', 'status'], env);
  assert.equal(unreachable.code, EXIT.network);
  assert.equal(lines(unreachable.stderr).length, 1);
});

test('the executable imports a file, exits 8 for a bad line, and stops quietly when its reader closes the pipe', async (t) => {
  if (skipped(t)) return;
  const { env } = await setup(t);
  const file = join(tempDir(t, 'usersctl-files-'), 'users.ndjson');
  const padding = 'x'.repeat(150);
  const input = Array.from({ length: 3000 }, (_, n) => JSON.stringify({ name: `User ${n}`, padding })).join('\n') + '\n{"name":""}\n';
  writeFileSync(file, input);
  const imported = await usersctl(['import', '-f', file, '--concurrency', '32'], env);
  assert.equal(imported.code, EXIT.partialImport, imported.stderr);
  assert.equal(lines(imported.stdout).length, 3001);
  assert.deepEqual(lines(imported.stderr), ['usersctl: 1 of 3001 lines failed; their results on stdout say why']);

  // About 600 KB of NDJSON into `head -n 1`: usersctl meets EPIPE and must exit 0 without a word.
  const piped = await spawnText('bash', ['-c', 'set -o pipefail; "$0" "$1" list --limit 1000 | head -n 1', process.execPath, BIN], env);
  assert.equal(piped.code, 0, piped.stderr);
  assert.equal(piped.stderr, '');
  assert.equal(JSON.parse(piped.stdout).id, 1);
});

test('bin: usersctl --help piped into head -1 exits 0 with nothing on stderr (a closed pipe is not an error)', async (t) => {
  if (skipped(t)) return;
  const script = `"${process.execPath}" "${BIN}" --help | head -1; echo "exit=\${PIPESTATUS[0]}"`;
  const result = await spawnText('bash', ['--norc', '--noprofile', '-c', script], {});
  assert.equal(result.stderr, '');
  assert.match(result.stdout, /^Usage: usersctl .*\nexit=0\n$/);
});
