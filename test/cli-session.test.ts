import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { EXIT } from '../cli/main.js';
import { ADMIN_PASSWORD, startTestServer, tempDir } from './helpers.js';
import { fakeTty, lines, startCliServer, usersctl } from './cli-helpers.js';

// login, logout, status, and the jar on every command.

const SECRET_A = 'a'.repeat(32);
const SECRET_B = 'b'.repeat(32);

function tokenIn(jarPath: string): string | undefined {
  return /\tUSER_TOKEN\t(\S+)/.exec(readFileSync(jarPath, 'utf8'))?.[1];
}

test('status without a session prints "not authorized" on stderr and exits 4', async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['status']);
  assert.deepEqual(result, { code: EXIT.unauthorized, stdout: '', stderr: 'usersctl: not authorized\n' });
});

test('login --password-stdin saves the session in the jar (mode 0600) and status then prints OK, exit 0', async (t) => {
  const cli = await startCliServer(t);
  const login = await cli.run(['login', '--password-stdin'], { stdin: `${ADMIN_PASSWORD}\nsecond line ignored\n` });
  assert.equal(login.code, EXIT.ok, login.stderr);
  assert.equal(login.stdout, '');
  assert.equal(statSync(cli.jarPath).mode & 0o777, 0o600);
  assert.match(readFileSync(cli.jarPath, 'utf8'), /^#HttpOnly_127\.0\.0\.1\tFALSE\t\/\tFALSE\t\d+\tUSER_TOKEN\t\S+$/m);
  const status = await cli.run(['status']);
  assert.deepEqual(status, { code: EXIT.ok, stdout: 'OK\n', stderr: '' });
});

test('login whose jar cannot be written (a path under /proc, where mkdir never succeeds) exits 1 at once with one line, and does not say it logged in', async (t) => {
  if (!existsSync('/proc/self')) return t.skip('no /proc on this system');
  const cli = await startCliServer(t);
  const login = await cli.run(['--cookie-jar', '/proc/self/usersctl/cookies.txt', 'login', '--password-stdin'], {
    stdin: `${ADMIN_PASSWORD}\n`,
  });
  assert.equal(login.code, EXIT.unexpected, login.stderr);
  assert.equal(login.stdout, '');
  assert.match(
    login.stderr,
    /^usersctl: the cookie jar: [^\n]*\/proc\/self\/usersctl\/cookies\.txt[^\n]*--cookie-jar\)\n$/,
  );
});

test('login into a --cookie-jar that names some other file keeps that file as it was beside the jar, and says where', async (t) => {
  const cli = await startCliServer(t);
  const original = 'export PATH=/usr/local/bin:/usr/bin\nalias ll="ls -l"\n';
  mkdirSync(dirname(cli.jarPath), { recursive: true });
  writeFileSync(cli.jarPath, original);
  const login = await cli.run(['login', '--password-stdin'], { stdin: `${ADMIN_PASSWORD}\n` });
  assert.equal(login.code, EXIT.ok, login.stderr);
  const kept = /is kept in (\S+)\n/.exec(login.stderr)?.[1];
  assert.ok(kept !== undefined, login.stderr);
  assert.equal(readFileSync(kept, 'utf8'), original);
  assert.match(login.stderr, /the file as it was, with the 2 lines that are not cookies, is kept in /);
  assert.match(readFileSync(cli.jarPath, 'utf8'), /\tUSER_TOKEN\t/);
  assert.deepEqual(await cli.run(['status']), { code: EXIT.ok, stdout: 'OK\n', stderr: '' });
});

test("status --json prints the server's JSON body unchanged", async (t) => {
  const cli = await startCliServer(t);
  await cli.login();
  const status = await cli.run(['--json', 'status']);
  assert.equal(status.stdout, '"OK"\n');
});

test("login with a wrong password exits 4 with the server's detail and writes no session", async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['login', '--password-stdin'], { stdin: 'wrong\n' });
  assert.equal(result.code, EXIT.unauthorized);
  assert.deepEqual(lines(result.stderr), ['usersctl: The user name or password is wrong.']);
  assert.equal((await cli.run(['status'])).code, EXIT.unauthorized);
});

test('login --user names the account sent in the Basic credentials', async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['login', '--user', 'nobody', '--password-stdin'], { stdin: ADMIN_PASSWORD });
  assert.equal(result.code, EXIT.unauthorized);
  const admin = await cli.run(['login', '--user', 'admin', '--password-stdin'], { stdin: ADMIN_PASSWORD });
  assert.equal(admin.code, EXIT.ok);
});

test('login without --password-stdin when stdin is not a terminal is a usage error (exit 2)', async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['login'], { stdin: ADMIN_PASSWORD, stdinTTY: false });
  assert.equal(result.code, EXIT.usage);
  assert.match(result.stderr, /^usersctl: .*--password-stdin/);
  assert.equal(lines(result.stderr).length, 1);
});

test('login --password-stdin with an empty stdin is a usage error (exit 2)', async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['login', '--password-stdin']);
  assert.equal(result.code, EXIT.usage);
  assert.match(result.stderr, /stdin is empty/);
});

test('login on a terminal prompts on stderr in raw mode, without echoing the password', async (t) => {
  const cli = await startCliServer(t);
  const tty = fakeTty();
  const running = cli.run(['login'], { stdin: tty });
  // Typed with a mistake corrected by backspace, then Enter.
  setImmediate(() => tty.write(`${ADMIN_PASSWORD}x\u007f\r`));
  const result = await running;
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.match(result.stderr, /^Password for admin: \n/);
  assert.ok(!result.stderr.includes(ADMIN_PASSWORD), 'the password was echoed');
  assert.deepEqual(tty.rawModes, [true, false]);
  assert.equal((await cli.run(['status'])).stdout, 'OK\n');
});

test('Ctrl-C at the password prompt cancels the login without a request', async (t) => {
  const cli = await startCliServer(t);
  const tty = fakeTty();
  const running = cli.run(['login'], { stdin: tty });
  setImmediate(() => tty.write('abc\u0003'));
  const result = await running;
  assert.equal(result.code, EXIT.unexpected);
  assert.match(result.stderr, /usersctl: login cancelled\n$/);
  assert.deepEqual(tty.rawModes, [true, false]);
});

test('logout revokes the session and empties the jar: status then exits 4', async (t) => {
  const cli = await startCliServer(t);
  await cli.login();
  const saved = tokenIn(cli.jarPath);
  assert.ok(saved !== undefined);
  const logout = await cli.run(['logout']);
  assert.equal(logout.code, EXIT.ok, logout.stderr);
  assert.equal(tokenIn(cli.jarPath), undefined);
  assert.equal((await cli.run(['status'])).code, EXIT.unauthorized);
});

test("writes need the jar's session when the server requires one: 401 exits 4, after login they pass", async (t) => {
  const cli = await startCliServer(t, { requireSession: 'writes' });
  const before = await cli.run(['put', 'alice', '--name', 'Alice']);
  assert.equal(before.code, EXIT.unauthorized);
  assert.deepEqual(lines(before.stderr), [
    'usersctl: Log in first: POST /login with Basic credentials (usersctl login), or send an API token: Authorization: Bearer ust_... (usersctl --token).',
  ]);
  await cli.login();
  const after = await cli.run(['put', 'alice', '--name', 'Alice']);
  assert.equal(after.code, EXIT.ok, after.stderr);
});

test('any command stores a re-issued session cookie in the jar (key rotation)', async (t) => {
  // Log in where SECRET_A signs; then talk to a server where SECRET_B signs
  // and SECRET_A only verifies: it re-issues the session, and the jar keeps it.
  // One data directory, started again with each list of secrets: it keeps the admin's identity.
  const data = tempDir(t);
  const old = await startCliServer(t, { data, store: 'memory', secrets: [SECRET_A] });
  await old.login();
  const before = tokenIn(old.jarPath)!;
  await old.server.running.stop();
  const rotated = await startTestServer(t, { data, store: 'memory', secrets: [SECRET_B, SECRET_A] });
  const status = await old.run(['--url', rotated.url, 'status']);
  assert.equal(status.stdout, 'OK\n');
  const after = tokenIn(old.jarPath)!;
  assert.notEqual(after, before);
  // The re-issued cookie verifies where only SECRET_B is known.
  await rotated.running.stop();
  const onlyB = await startTestServer(t, { data, store: 'memory', secrets: [SECRET_B] });
  assert.equal((await old.run(['--url', onlyB.url, 'status'])).stdout, 'OK\n');
});

test('a command whose answer sets no cookie leaves the jar file untouched', async (t) => {
  const cli = await startCliServer(t);
  await cli.login();
  const before = statSync(cli.jarPath);
  const text = readFileSync(cli.jarPath, 'utf8');
  assert.equal((await cli.run(['put', 'alice', '--name', 'Alice'])).code, EXIT.ok);
  assert.equal(readFileSync(cli.jarPath, 'utf8'), text);
  assert.equal(statSync(cli.jarPath).ino, before.ino, 'the jar was rewritten');
});

test("logging in to a second server on the same host (another port) says on stderr that it replaced the first server's session in the jar, naming both and --cookie-jar; a login again to the same server, or one jar a server, says nothing", async (t) => {
  const first = await startTestServer(t);
  const second = await startTestServer(t);
  const home = tempDir(t, 'usersctl-home-');
  const env = { HOME: home, XDG_STATE_HOME: join(home, 'state') };
  const run = (args: string[], input?: string) => usersctl(args, { env, stdin: input });
  const login = (url: string, ...more: string[]) =>
    run(['--url', url, ...more, 'login', '--password-stdin'], `${ADMIN_PASSWORD}\n`);
  const jar = join(home, 'state', 'usersctl', 'cookies.txt');
  assert.deepEqual(lines((await login(first.url)).stderr), [`usersctl: logged in as admin; the session is in ${jar}`]);
  assert.deepEqual(
    lines((await login(first.url)).stderr),
    [`usersctl: logged in as admin; the session is in ${jar}`],
    'the same server again',
  );
  const replaced = await login(second.url);
  assert.equal(replaced.code, EXIT.ok, replaced.stderr);
  assert.deepEqual(lines(replaced.stderr), [
    `usersctl: warning: ${second.url} replaced the cookie USER_TOKEN that ${first.url} had set in ${jar}: cookies do not tell ports apart (RFC 6265 section 8.5), so a jar holds one session a host; give each server its own --cookie-jar FILE`,
    `usersctl: logged in as admin; the session is in ${jar}`,
  ]);
  assert.equal(
    (await run(['--url', first.url, 'status'])).code,
    EXIT.unauthorized,
    "the first server's session is gone",
  );
  for (const server of [first, second]) {
    const own = await login(server.url, '--cookie-jar', join(home, `${new URL(server.url).port}.cookies`));
    assert.deepEqual([own.code, lines(own.stderr).length], [EXIT.ok, 1], own.stderr);
  }
  for (const server of [first, second])
    assert.equal(
      (await run(['--url', server.url, '--cookie-jar', join(home, `${new URL(server.url).port}.cookies`), 'status']))
        .stdout,
      'OK\n',
    );
});
