/**
 * usersctl and API tokens (docs/cli.md "Tokens"): `tokens create|list|revoke`,
 * and `--token` / USERSCTL_TOKEN instead of the cookie jar.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { EXIT } from '../cli/main.js';
import { lines, shellWithUsersctl, startCliServer } from './cli-helpers.js';
import { ADMIN_PASSWORD, startTestServer } from './helpers.js';
import { runTool } from './processes.js';

const TOKEN_LINE = /^ust_[0-9a-f]{16}\.[A-Za-z0-9_-]{43}\n$/;

test('usersctl tokens create prints the token alone on stdout and a note on stderr; list shows it without the secret; with USERSCTL_TOKEN or --token the commands work without a jar, and none is written', async (t) => {
  const cli = await startCliServer(t, { requireSession: 'writes' });
  await cli.login();
  const made = await cli.run(['tokens', 'create', 'deploy', '--role', 'admin', '--expires', '90d']);
  assert.equal(made.code, EXIT.ok, made.stderr);
  assert.match(made.stdout, TOKEN_LINE);
  assert.match(
    made.stderr,
    /^usersctl: made API token "deploy" \(admin, expires \d{4}-\d\d-\d\dT[\d:.]+Z, id [0-9a-f]{16}\); it is shown only now/,
  );
  const token = made.stdout.trim();
  const listed = await cli.run(['tokens', 'list', '-o', 'table']);
  assert.deepEqual(
    lines(listed.stdout).map((l) => l.split(/ +/).slice(1, 3)),
    [
      ['NAME', 'ROLE'],
      ['deploy', 'admin'],
    ],
  );
  assert.ok(!listed.stdout.includes(token.slice(21)));
  const json = await cli.run(['--json', 'tokens', 'list']);
  assert.deepEqual(Object.keys(JSON.parse(json.stdout)), [
    'id',
    'name',
    'role',
    'actsAs',
    'createdBy',
    'createdWith',
    'createdAt',
    'expiresAt',
    'expired',
  ]);

  // A fresh environment: no jar at all.
  const noJar = { ...cli.env, XDG_STATE_HOME: `${cli.env.HOME}/elsewhere` };
  const viaEnv = await cli.run(['put', 'alice', '--name', 'Alice'], { env: { ...noJar, USERSCTL_TOKEN: token } });
  assert.equal(viaEnv.code, EXIT.ok, viaEnv.stderr);
  const viaFlag = await cli.run(['--token', token, 'get', 'alice'], { env: noJar });
  assert.equal(JSON.parse(viaFlag.stdout).name, 'Alice');
  assert.equal(
    (await cli.run(['status'], { env: { ...noJar, USERSCTL_TOKEN: `${token}\n` } })).stdout,
    'OK\n',
    'a trailing newline (a token read with $(cat)) is trimmed',
  );
  assert.equal(existsSync(`${cli.env.HOME}/elsewhere`), false, 'no jar was written');
});

for (const mode of ['all', 'writes', 'none'] as const)
  test(`--require-session ${mode}: a reader token reads but its write exits 4 with the server's sentence; a revoked token exits 4 saying it is unknown; --json gives the invalid-token record`, async (t) => {
    const cli = await startCliServer(t, { requireSession: mode });
    await cli.login();
    assert.equal((await cli.run(['put', 'bob', '--name', 'Bob'])).code, EXIT.ok);
    const token = (await cli.run(['tokens', 'create', 'reader-one'])).stdout.trim();
    const env = { USERSCTL_TOKEN: token };
    assert.equal((await cli.run(['get', 'bob'], { env })).code, EXIT.ok);
    const write = await cli.run(['put', 'bob', '--name', 'Robert'], { env });
    assert.equal(write.code, EXIT.unauthorized);
    assert.deepEqual(lines(write.stderr), [
      'usersctl: The API token "reader-one" has role reader, which may only read.',
    ]);
    const revoked = await cli.run(['tokens', 'revoke', 'reader-one']);
    assert.equal(revoked.code, EXIT.ok, revoked.stderr);
    assert.match(revoked.stderr, /^usersctl: revoked API token "reader-one" \([0-9a-f]{16}\)\n$/);
    const after = await cli.run(['get', 'bob'], { env });
    assert.equal(after.code, EXIT.unauthorized);
    assert.deepEqual(lines(after.stderr), [
      'usersctl: The API token is not known to this server: it was revoked, or never issued here. Create a new one with: usersctl tokens create NAME',
    ]);
    const record = JSON.parse((await cli.run(['--json', 'get', 'bob'], { env })).stderr);
    assert.equal(record.status, 401);
    assert.equal(record.type, 'tag:users-server,2026:problem/invalid-token');
    assert.equal(record.exit, EXIT.unauthorized);
  });

test('usersctl tokens revoke takes ids and names, and - for stdin; an unknown name is reported (exit 3) and the rest still revoked', async (t) => {
  const cli = await startCliServer(t);
  await cli.login();
  for (const name of ['a', 'b', 'c']) assert.equal((await cli.run(['tokens', 'create', name])).code, EXIT.ok);
  const ids = (await cli.run(['--json', 'tokens', 'list'])).stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l).id as string);
  const result = await cli.run(['tokens', 'revoke', ids[0]!, 'nope', '-'], { stdin: 'b\n' });
  assert.equal(result.code, EXIT.notFound);
  assert.deepEqual(lines(result.stderr), [
    `usersctl: revoked API token ${ids[0]}`,
    'usersctl: nope: no API token is named "nope" (usersctl tokens list shows them)',
    `usersctl: revoked API token "b" (${ids[1]})`,
  ]);
  assert.deepEqual(
    (await cli.run(['--json', 'tokens', 'list'])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).name),
    ['c'],
  );
});

test('usage errors exit 2 before any request: a bad name, a bad --expires, a token with a space; a token without an admin session exits 4', async (t) => {
  const cli = await startCliServer(t);
  assert.equal((await cli.run(['tokens', 'create', 'has space'])).code, EXIT.usage);
  const expires = await cli.run(['tokens', 'create', 'x', '--expires', '90 days']);
  assert.equal(expires.code, EXIT.usage);
  assert.match(expires.stderr, /--expires: give a lifetime such as 90d/);
  const spaced = await cli.run(['--token', 'ust_a b', 'status']);
  assert.equal(spaced.code, EXIT.usage);
  assert.match(spaced.stderr, /^usersctl: --token: an API token is one word/);
  const noSession = await cli.run(['tokens', 'create', 'x']);
  assert.equal(noSession.code, EXIT.unauthorized);
  assert.match(noSession.stderr, /Log in first/);
});

test('-v traces the Authorization field masked: the token never reaches stderr', async (t) => {
  const cli = await startCliServer(t);
  await cli.login();
  const token = (await cli.run(['tokens', 'create', 'traced'])).stdout.trim();
  const traced = await cli.run(['-v', '--token', token, 'status']);
  assert.match(traced.stderr, /^> authorization: Bearer \*\*\*$/m);
  assert.ok(!traced.stderr.includes(token.slice(21)));
});

test('node bin/usersctl.js in a shell: export USERSCTL_TOKEN=$(usersctl tokens create ...), then a script runs with no cookie jar', async (t) => {
  if ((await runTool(t, 'sh', ['-c', 'command -v bash'])).code !== 0) return t.skip('bash not found');
  const server = await startTestServer(t, { requireSession: 'all' });
  const { env } = shellWithUsersctl(t, server.url);
  const script = [
    'set -euo pipefail',
    'printf "%s\\n" "$PASSWORD" | usersctl login --password-stdin',
    'export USERSCTL_TOKEN=$(usersctl tokens create nightly --role admin --expires 1d)',
    'usersctl logout',
    'rm -f "$XDG_STATE_HOME/usersctl/cookies.txt"',
    'usersctl put carol --name Carol >/dev/null',
    'usersctl get carol | jq -r .name',
    'test ! -e "$XDG_STATE_HOME/usersctl/cookies.txt"',
  ].join('\n');
  const run = await runTool(t, 'bash', ['-c', script], { env: { ...env, PASSWORD: ADMIN_PASSWORD } });
  assert.equal(run.code, 0, run.stderr);
  assert.equal(run.stdout, 'Carol\n');
});

test('usersctl tokens revoke says which tokens made with the revoked one went with it; a token made with a token asked to outlive it exits 5 naming the --expires it may ask', async (t) => {
  const cli = await startCliServer(t, { requireSession: 'all' });
  await cli.login();
  const parent = (await cli.run(['tokens', 'create', 'parent', '--role', 'admin', '--expires', '1h'])).stdout.trim();
  const env = { USERSCTL_TOKEN: parent };
  const child = await cli.run(['tokens', 'create', 'child', '--role', 'admin'], { env });
  assert.equal(child.code, EXIT.ok, child.stderr);
  assert.equal(
    (await cli.run(['tokens', 'create', 'grandchild'], { env: { USERSCTL_TOKEN: child.stdout.trim() } })).code,
    EXIT.ok,
  );
  const longer = await cli.run(['tokens', 'create', 'longer', '--expires', '2h'], { env });
  assert.equal(longer.code, EXIT.conflict);
  assert.match(longer.stderr, /cannot outlive it: expiresIn at most \d+ \(usersctl tokens create --expires \d+s\)/);
  assert.equal((await cli.run(['tokens', 'create', 'unrelated'])).code, EXIT.ok);
  const revoked = await cli.run(['tokens', 'revoke', 'parent']);
  assert.equal(revoked.code, EXIT.ok, revoked.stderr);
  assert.match(
    revoked.stderr,
    /^usersctl: revoked API token "parent" \([0-9a-f]{16}\), and the 2 tokens made with it \(child, grandchild\)\n$/,
  );
  assert.deepEqual(
    lines((await cli.run(['tokens', 'list'])).stdout).map((l) => JSON.parse(l).name),
    ['unrelated'],
  );
});
