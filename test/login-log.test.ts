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
import { quoteLogText } from '../server/ops/log-text.js';
import { ADMIN_PASSWORD, basic, send, startTestServer, tempDir } from './helpers.js';
import { runTool, spawnServer } from './processes.js';

const LINE =
  /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z users-server: login (ok|failed) client=(\S+) account=("(?:[^"\\]|\\.)*") outcome=([a-z-]+)$/;
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
  assert.ok(
    lines.every((line) => !line.includes('\n')),
    'no line holds a line break',
  );
});

test('node bin/users-server.js writes login lines to stderr, and the fail2ban filter of docs/operations.md matches the failed ones (not the successful) and finds the client address (python3 re, the engine fail2ban uses)', async (t) => {
  if (spawnSync('python3', ['--version']).status !== 0) return t.skip('python3 not found');
  const server = await spawnServer(t, ['--port', '0', '--data', tempDir(t)]);
  assert.equal((await login(server.url, 'admin', ADMIN_PASSWORD)).status, 200);
  assert.equal((await login(server.url, 'admin', 'wrong')).status, 401);
  assert.equal((await login(server.url, 'nobody', 'wrong')).status, 401);
  await server.waitForLine(/account="nobody" outcome=unknown-account$/, 'stderr');
  const logged = server
    .stderr()
    .split('\n')
    .filter((l) => l.includes(' users-server: login '));
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

test('a login line cuts an account name past 64 characters to its first 64 and "...", for refused attempts too, and escapes control, bidirectional and format characters', async (t) => {
  const lines: string[] = [];
  const server = await startTestServer(t, {}, { log: (line) => lines.push(line) });
  const long = 'x'.repeat(10_000);
  for (let i = 0; i < 11; i++) await login(server.url, long, 'guess');
  const sneaky = 'admin\u202E\u2066\u200F\u0085\u009B\u0007\u2028\uFEFF\u200B';
  assert.equal((await login(server.url, sneaky, 'x')).status, 401);
  assert.equal(lines.length, 12);
  const accounts = lines.map((line) => {
    const m = LINE.exec(line);
    assert.ok(m !== null, `not a login line: ${JSON.stringify(line.slice(0, 200))}`);
    return m[3]!;
  });
  assert.equal(accounts[0], `"${'x'.repeat(64)}..."`);
  assert.match(lines[10]!, /outcome=rate-limited$/);
  assert.equal(accounts[10], accounts[0], 'a refused attempt is cut the same way');
  assert.ok(
    lines.every((line) => line.length < 200),
    'every line stays short',
  );
  assert.equal(accounts[11], '"admin\\u202E\\u2066\\u200F\\u0085\\u009B\\u0007\\u2028\\uFEFF\\u200B"');
  assert.ok(
    lines.every((line) => /^[\x20-\x7e]*$/.test(line)),
    'nothing but printable ASCII in the lines of these names',
  );
});

const QUOTED: [string, string, string][] = [
  ['plain', 'alice', '"alice"'],
  ['letters of other scripts stay as they are', 'Zoë-Łukasz', '"Zoë-Łukasz"'],
  ['quote and backslash', 'a"b\\c', '"a\\"b\\\\c"'],
  ['a lone surrogate', 'a\uD800b', '"a\\uD800b"'],
  ['a format character past U+FFFF (a tag) as its two UTF-16 units', 'a\u{E0001}', '"a\\uDB40\\uDC01"'],
  ['64 characters are kept whole', 'y'.repeat(64), `"${'y'.repeat(64)}"`],
  ['the 65th starts the cut, a surrogate pair is not split', '😀'.repeat(65), `"${'😀'.repeat(64)}..."`],
];
for (const [name, text, quoted] of QUOTED) {
  test(`quoteLogText: ${name}`, () => {
    assert.equal(quoteLogText(text), quoted);
    if (!quoted.endsWith('..."')) assert.equal(JSON.parse(quoted), text, 'JSON.parse gives the text back');
  });
}
