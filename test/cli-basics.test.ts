import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { EXIT } from '../cli/main.js';
import { ADMIN_PASSWORD, tempDir } from './helpers.js';
import { closedPortUrl, lines, startCliServer, startStub, sendJsonText, usersctl } from './cli-helpers.js';

// The command line itself: help, version, usage errors, globals and their
// precedence, stdout/stderr discipline, -v tracing, colour.

const PACKAGE_VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

test('--help prints usage, every exit code 0..8 and examples on stdout, and exits 0', async () => {
  const result = await usersctl(['--help']);
  assert.equal(result.code, EXIT.ok);
  assert.equal(result.stderr, '');
  assert.match(result.stdout, /^Usage: usersctl/);
  for (let code = 0; code <= 8; code++)
    assert.match(result.stdout, new RegExp(`^  ${code}  \\S`, 'm'), `exit code ${code} listed`);
  assert.match(result.stdout, /^Examples:$/m);
  for (const command of [
    'login',
    'logout',
    'status',
    'get',
    'put',
    'delete',
    'list',
    'export',
    'reserve',
    'create',
    'new',
    'mv',
    'import',
  ]) {
    assert.match(result.stdout, new RegExp(`^  ${command}\\b`, 'm'), `${command} listed`);
  }
});

test('help for a command names its options and shows an example', async () => {
  const result = await usersctl(['import', '--help']);
  assert.equal(result.code, EXIT.ok);
  assert.match(result.stdout, /--alias-field/);
  assert.match(result.stdout, /--uuid-namespace/);
  assert.match(result.stdout, /Examples?:/);
});

test("`help <command>` prints that command's help on stdout and exits 0", async () => {
  const result = await usersctl(['help', 'put']);
  assert.equal(result.code, EXIT.ok);
  assert.equal(result.stderr, '');
  assert.match(result.stdout, /^Usage: usersctl put \[options\] <ref>/);
});

test('`help <command>` exits 0 in a process whose exit code is already set, and leaves that code as it was', async () => {
  const before = process.exitCode;
  process.exitCode = 1;
  try {
    const result = await usersctl(['help', 'put']);
    assert.equal(result.code, EXIT.ok);
    assert.equal(process.exitCode, 1);
  } finally {
    process.exitCode = before;
  }
});

test('--version prints the package.json version and exits 0', async () => {
  const result = await usersctl(['--version']);
  assert.deepEqual(result, { code: EXIT.ok, stdout: `${PACKAGE_VERSION}\n`, stderr: '' });
});

const usageCases: Array<{ name: string; args: string[]; message: RegExp }> = [
  { name: 'no command at all', args: [], message: /missing command/ },
  { name: 'only global options', args: ['-q', '--retries', '2'], message: /missing command/ },
  {
    name: 'an unknown command',
    args: ['frobnicate'],
    message: /^usersctl: unknown command 'frobnicate'; see usersctl --help\n$/,
  },
  {
    name: 'an unknown command close to one',
    args: ['getx', '1'],
    message: /^usersctl: unknown command 'getx' \(did you mean get\?\); see usersctl --help\n$/,
  },
  {
    name: 'an unknown option',
    args: ['get', 'x', '--bogus'],
    message: /^usersctl: unknown option '--bogus'; see usersctl get --help\n$/,
  },
  {
    name: 'an unknown option of a subcommand',
    args: ['tokens', 'create', '--bogus'],
    message: /unknown option '--bogus'; see usersctl tokens create --help\n$/,
  },
  {
    name: 'a missing argument',
    args: ['get'],
    message: /^usersctl: missing required argument 'ref'; see usersctl get --help\n$/,
  },
  {
    name: 'a negative --retries',
    args: ['--retries', '-1', 'status'],
    message: /^usersctl: --retries must be an integer from 0 to 100 \(not '-1'\); see usersctl --help\n$/,
  },
  {
    name: 'a zero --timeout',
    args: ['--timeout', '0', 'status'],
    message:
      /^usersctl: --timeout must be a number of seconds above 0, at most 86400 \(not '0'\); see usersctl --help\n$/,
  },
  {
    name: 'a --limit above 1000',
    args: ['list', '--limit', '1001'],
    message: /^usersctl: --limit must be an integer from 1 to 1000 \(not '1001'\); see usersctl list --help\n$/,
  },
  {
    name: 'an unknown --mode',
    args: ['create', '--name', 'x', '--mode', 'sequence'],
    message: /^usersctl: --mode must be one of uuid, reserve \(not 'sequence'\); see usersctl create --help\n$/,
  },
  { name: 'a --url that is not a URL', args: ['--url', 'not a url', 'status'], message: /--url: not a URL/ },
  { name: 'a --url that is not http', args: ['--url', 'ftp://example.com', 'status'], message: /only http and https/ },
  {
    name: 'a --url with a user and password',
    args: ['--url', 'http://admin:secret@127.0.0.1:8080', 'status'],
    message:
      /^usersctl: --url: leave the user and password out of it \(http:\/\/127\.0\.0\.1:8080\); log in with usersctl login, or use --token\n$/,
  },
  { name: 'put without --name or -f', args: ['put', 'alice'], message: /--name NAME or -f FILE/ },
  { name: 'a malformed ref', args: ['get', 'a/b'], message: /is not a user id or alias/ },
  {
    name: 'mv to an id that is not a positive integer',
    args: ['mv', 'alice', '0'],
    message: /new id must be a positive integer/,
  },
];

for (const c of usageCases) {
  test(`a usage error (${c.name}) exits 2 with exactly one line on stderr and nothing on stdout`, async (t) => {
    const home = tempDir(t, 'usersctl-home-');
    // A dead URL: a usage error must be found before any request is made.
    const result = await usersctl(c.args, {
      env: { HOME: home, XDG_STATE_HOME: home, USERSCTL_URL: await closedPortUrl() },
    });
    assert.equal(result.code, EXIT.usage, result.stderr);
    assert.equal(result.stdout, '');
    assert.equal(lines(result.stderr).length, 1, result.stderr);
    assert.match(result.stderr, /^usersctl: /);
    assert.match(result.stderr, c.message);
  });
}

test('--url beats USERSCTL_URL, which beats the default http://127.0.0.1:8080', async (t) => {
  const cli = await startCliServer(t);
  const dead = await closedPortUrl();
  const flag = await cli.run(['--url', cli.server.url, 'status'], { env: { USERSCTL_URL: dead } });
  assert.equal(flag.code, EXIT.unauthorized, flag.stderr); // reached the server: not a network error
  const env = await cli.run(['--retries', '0', 'status'], { env: { USERSCTL_URL: dead } });
  assert.equal(env.code, EXIT.network, env.stderr);
  assert.match(env.stderr, new RegExp(dead.replace(/[.:/]/g, '\\$&')));
  const home = tempDir(t, 'usersctl-home-');
  const fallback = await usersctl(['-v', '--retries', '0', '--timeout', '1', 'status'], {
    env: { HOME: home, XDG_STATE_HOME: home },
  });
  assert.match(fallback.stderr, /^> host: 127\.0\.0\.1:8080$/m);
});

test('--cookie-jar beats USERSCTL_COOKIE_JAR, which beats $XDG_STATE_HOME/usersctl/cookies.txt', async (t) => {
  const cli = await startCliServer(t);
  const dir = tempDir(t, 'usersctl-jars-');
  const flagJar = join(dir, 'flag.txt');
  const envJar = join(dir, 'env.txt');
  const login = (args: string[], env: NodeJS.ProcessEnv) =>
    cli.run([...args, 'login', '--password-stdin'], { stdin: ADMIN_PASSWORD, env });

  assert.equal((await login(['--cookie-jar', flagJar], { USERSCTL_COOKIE_JAR: envJar })).code, EXIT.ok);
  assert.ok(existsSync(flagJar) && !existsSync(envJar) && !existsSync(cli.jarPath));

  assert.equal((await login([], { USERSCTL_COOKIE_JAR: envJar })).code, EXIT.ok);
  assert.ok(existsSync(envJar) && !existsSync(cli.jarPath));

  assert.equal((await login([], {})).code, EXIT.ok);
  assert.ok(existsSync(cli.jarPath));
  assert.match(readFileSync(cli.jarPath, 'utf8'), /\tUSER_TOKEN\t/);
});

test('stdout carries only data: a write prints the user on stdout and nothing on stderr', async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['put', 'alice', '--name', 'Alice']);
  assert.equal(result.code, EXIT.ok);
  assert.equal(result.stderr, '');
  assert.deepEqual(JSON.parse(result.stdout), { name: 'Alice', id: 1 });
});

test('-q silences messages on stderr but not the error line', async (t) => {
  const cli = await startCliServer(t);
  const loud = await cli.run(['login', '--password-stdin'], { stdin: ADMIN_PASSWORD });
  assert.match(loud.stderr, /logged in as admin/);
  const quiet = await cli.run(['-q', 'login', '--password-stdin'], { stdin: ADMIN_PASSWORD });
  assert.equal(quiet.code, EXIT.ok);
  assert.equal(quiet.stderr, '');
  const failing = await cli.run(['-q', 'get', 'nobody']);
  assert.equal(failing.code, EXIT.notFound);
  assert.equal(failing.stderr, 'usersctl: nobody: No such user.\n');
});

test('-v prints the exchange on stderr with Authorization, Cookie and Set-Cookie values masked', async (t) => {
  const cli = await startCliServer(t);
  const login = await cli.run(['-v', 'login', '--password-stdin'], { stdin: ADMIN_PASSWORD });
  assert.equal(login.code, EXIT.ok);
  assert.match(login.stderr, /^> POST \/login HTTP\/1\.1$/m);
  assert.match(login.stderr, /^> authorization: Basic \*\*\*$/m);
  assert.match(login.stderr, /^< HTTP\/1\.1 200 OK$/m);
  assert.match(login.stderr, /^< set-cookie: USER_TOKEN=\*\*\*; Path=\/; HttpOnly; SameSite=Lax; Max-Age=\d+$/m);
  const token = /\tUSER_TOKEN\t(\S+)/.exec(readFileSync(cli.jarPath, 'utf8'))![1]!;
  const basic = Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
  for (const secret of [token, basic, ADMIN_PASSWORD])
    assert.ok(!login.stderr.includes(secret), 'a secret leaked into the trace');

  const status = await cli.run(['-v', 'status']);
  assert.equal(status.stdout, 'OK\n');
  assert.match(status.stderr, /^> cookie: USER_TOKEN=\*\*\*$/m);
  assert.ok(!status.stderr.includes(token));
});

test('colour on stderr only when it is a terminal and NO_COLOR is unset', async (t) => {
  const cli = await startCliServer(t);
  const tty = await cli.run(['get', 'nobody'], { stderrTTY: true });
  assert.equal(tty.code, EXIT.notFound);
  assert.match(tty.stderr, /\x1b\[/);
  const noColor = await cli.run(['get', 'nobody'], { stderrTTY: true, env: { NO_COLOR: '1' } });
  assert.equal(noColor.stderr, 'usersctl: nobody: No such user.\n');
  const pipe = await cli.run(['get', 'nobody']);
  assert.equal(pipe.stderr, 'usersctl: nobody: No such user.\n');
});

test('an answer the command cannot understand exits 1 (unexpected) with one line and no stack trace', async (t) => {
  const stub = await startStub(t, (_req, res) => sendJsonText(res, 200, '{"not":"a page"}'));
  const home = tempDir(t, 'usersctl-home-');
  const result = await usersctl(['--url', stub.url, 'list'], { env: { HOME: home, XDG_STATE_HOME: home } });
  assert.equal(result.code, EXIT.unexpected);
  assert.deepEqual(lines(result.stderr), [
    'usersctl: unexpected answer from the server: a page of users without "items" and "next"; check that --url is the address of users-server',
  ]);
  assert.ok(!/\n\s+at /.test(result.stderr));
});

test('a cookie jar that cannot be read exits 1 with one line naming the problem', async (t) => {
  const cli = await startCliServer(t);
  const dir = tempDir(t, 'usersctl-jars-');
  // A directory where the jar file should be: reading it fails with EISDIR.
  const result = await cli.run(['--cookie-jar', dir, 'status']);
  assert.equal(result.code, EXIT.unexpected);
  assert.equal(lines(result.stderr).length, 1, result.stderr);
  assert.match(
    result.stderr,
    /^usersctl: the cookie jar: .* is a folder, not a file; give the path of a file \(or give another with --cookie-jar\)$/m,
  );
});

test('malformed lines in the cookie jar are skipped with a warning on stderr', async (t) => {
  const cli = await startCliServer(t);
  await cli.login();
  const { appendFileSync } = await import('node:fs');
  appendFileSync(cli.jarPath, 'this line is not a cookie\n');
  const result = await cli.run(['status']);
  assert.equal(result.code, EXIT.ok);
  assert.equal(result.stdout, 'OK\n');
  assert.match(result.stderr, /^usersctl: warning: cookie jar .*cookies\.txt: line \d+/m);
});

test('a cookie jar that is not a cookie file at all names three skipped lines and counts the rest in one line', async (t) => {
  const cli = await startCliServer(t);
  await cli.login();
  const { appendFileSync } = await import('node:fs');
  appendFileSync(cli.jarPath, Array.from({ length: 40 }, (_, i) => `not a cookie ${i}`).join('\n') + '\n');
  const result = await cli.run(['status']);
  assert.equal(result.code, EXIT.ok, result.stderr);
  const warnings = lines(result.stderr);
  assert.equal(warnings.length, 4, result.stderr);
  assert.match(
    warnings[2]!,
    /^usersctl: warning: cookie jar .*cookies\.txt: line \d+: expected 7 tab-separated fields, found 1$/,
  );
  assert.match(
    warnings[3]!,
    /^usersctl: warning: cookie jar .*cookies\.txt: 37 more lines skipped; is it the cookie file you meant to give\?$/,
  );
});
