/**
 * Every login is logged (docs/operations.md "Logins"): one line with the
 * time, the client address, the account name and the outcome, on stderr, in
 * a format the fail2ban filter of the docs matches.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ADMIN_PASSWORD, basic, send, startTestServer, tempDir } from './helpers.js';
import { runTool, spawnServer } from './processes.js';

const LINE = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z users-server: login (ok|failed) client=(\S+) account=("(?:[^"\\]|\\.)*") outcome=([a-z-]+)$/;
const OPERATIONS = fileURLToPath(new URL('../docs/operations.md', import.meta.url));

function login(url: string, user: string, password: string) {
  return send(url, 'POST', '/login', { headers: { authorization: basic(user, password) } });
}

test('every login is logged with its client, account and outcome: ok, wrong-password, unknown-account, rate-limited, no-credentials; a name with quotes or control characters cannot forge a line', async (t) => {
  const lines: string[] = [];
  const server = await startTestServer(t, { loginPage: true }, { log: (line) => lines.push(line) });
  const url = server.url;
  assert.equal((await login(url, 'admin', ADMIN_PASSWORD)).status, 200);
  assert.equal((await login(url, 'admin', 'wrong')).status, 401);
  assert.equal((await login(url, 'ghost', 'wrong')).status, 401);
  assert.equal((await login(url, 'evil" outcome=ok\nforged', 'x')).status, 401);
  assert.equal((await send(url, 'POST', '/login')).status, 401);
  for (let i = 0; i < 10; i++) await login(url, 'victim', 'guess');
  assert.equal((await login(url, 'victim', 'guess')).status, 429);
  const parsed = lines.map((line) => {
    const m = LINE.exec(line);
    assert.ok(m !== null, `not a login line: ${JSON.stringify(line)}`);
    return [m[1], m[2], JSON.parse(m[3]!), m[4]];
  });
  assert.deepEqual(parsed.slice(0, 5), [
    ['ok', '127.0.0.1', 'admin', 'ok'],
    ['failed', '127.0.0.1', 'admin', 'wrong-password'],
    ['failed', '127.0.0.1', 'ghost', 'unknown-account'],
    ['failed', '127.0.0.1', 'evil" outcome=ok\nforged', 'unknown-account'],
    ['failed', '127.0.0.1', '', 'no-credentials'],
  ]);
  assert.deepEqual(parsed.at(-1), ['failed', '127.0.0.1', 'victim', 'rate-limited']);
  assert.equal(lines.length, 16, 'one line per attempt');
  assert.ok(lines.every((line) => !line.includes('\n')), 'no line holds a line break');
});

test('node bin/users-server.js writes login lines to stderr, and the fail2ban filter of docs/operations.md matches the failed ones (not the successful) and finds the client address (python3 re, the engine fail2ban uses)', async (t) => {
  if (spawnSync('python3', ['--version']).status !== 0) return t.skip('python3 not found');
  const server = await spawnServer(t, ['--port', '0', '--data', tempDir(t)]);
  assert.equal((await login(server.url, 'admin', ADMIN_PASSWORD)).status, 200);
  assert.equal((await login(server.url, 'admin', 'wrong')).status, 401);
  assert.equal((await login(server.url, 'nobody', 'wrong')).status, 401);
  await server.waitForLine(/account="nobody" outcome=unknown-account$/, 'stderr');
  const logged = server.stderr().split('\n').filter((l) => l.includes(' users-server: login '));
  assert.equal(logged.length, 3, server.stderr());
  const doc = readFileSync(OPERATIONS, 'utf8');
  const failregex = /^failregex = (.+)$/m.exec(doc)?.[1];
  assert.ok(failregex !== undefined, 'docs/operations.md has a failregex');
  // fail2ban turns <HOST> into a named group and matches each line after its date; python3 does the same here.
  const script = `
import re, sys
pattern = re.compile(sys.argv[1].replace('<HOST>', r'(?P<host>\\S+)'))
for line in sys.stdin.read().splitlines():
    m = pattern.search(line)
    print(m.group('host') if m else '-')
`;
  const run = await runTool(t, 'python3', ['-c', script, failregex], { input: logged.join('\n') + '\n' });
  assert.equal(run.code, 0, run.stderr);
  assert.deepEqual(run.stdout.trim().split('\n'), ['-', '127.0.0.1', '127.0.0.1']);
  server.kill('SIGTERM');
  await server.exited;
});
