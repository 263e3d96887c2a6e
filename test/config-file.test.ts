/**
 * Settings from a file (`--config FILE`, JSON named like the flags), the
 * effective settings (`users-server config --show`), and the signing
 * secrets from a file (`--secret-file`), rotation included.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseConfig } from '../server/ops/config.js';
import { ADMIN_PASSWORD, basic, cookiePair, runUsersServer, send, tempDir } from './helpers.js';
import { spawnServer } from './processes.js';

const SECRET_A = 'secret-a-'.padEnd(40, 'a');
const SECRET_B = 'secret-b-'.padEnd(40, 'b');

function file(t: import('node:test').TestContext, name: string, content: string): string {
  const path = join(tempDir(t), name);
  writeFileSync(path, content, { mode: 0o600 });
  return path;
}

test('--config FILE: its settings apply; a variable beats the file and a flag beats both; the default fills the rest', (t) => {
  const path = file(
    t,
    'users.json',
    JSON.stringify({
      port: 9000,
      host: '127.0.0.2',
      'require-session': 'writes',
      'allow-id-change': true,
      'max-body': '2048',
    }),
  );
  const { config } = parseConfig(['--config', path, '--host', '127.0.0.3'], { USERS_PORT: '9100' });
  assert.equal(config.port, 9100, 'the variable beats the file');
  assert.equal(config.host, '127.0.0.3', 'the flag beats the file');
  assert.equal(config.requireSession, 'writes');
  assert.equal(config.allowIdChange, true);
  assert.equal(config.maxBody, 2048);
  assert.equal(config.sessionTtl, 43200, 'the default');
  assert.equal(parseConfig([], { USERS_CONFIG: path }).config.port, 9000, 'USERS_CONFIG names the file too');
});

test('--config FILE refuses an unknown key by name, a value of the wrong type, a value out of range (naming the file and key), a file that is not JSON or not there', async (t) => {
  const cases: [string, RegExp][] = [
    [JSON.stringify({ prot: 8080 }), /unknown setting "prot" \(the settings are named like the flags, without --\)/],
    [JSON.stringify({ 'allow-id-change': 'yes' }), /"allow-id-change" must be true or false/],
    [JSON.stringify({ port: 70000 }), /users\.json: "port" must be an integer from 0 to 65535/],
    [JSON.stringify({ config: 'other.json' }), /unknown setting "config"/],
    ['[1, 2]', /the settings must be a JSON object/],
    ['{ port: 1 }', /not JSON/],
  ];
  for (const [content, message] of cases) {
    const run = await runUsersServer(['--config', file(t, 'users.json', content)]);
    assert.equal(run.code, 2, content);
    assert.match(run.stderr, message, content);
  }
  const missing = await runUsersServer(['--config', join(tempDir(t), 'none.json')]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /--config: \S*none\.json does not exist; check the path/);
});

test('users-server config --show prints every effective setting with where it came from; signing secrets and database passwords are ***', async (t) => {
  const path = file(t, 'users.json', JSON.stringify({ 'require-session': 'all', secret: SECRET_A }));
  const run = await runUsersServer(
    ['config', '--show', '--config', path, '--store', 'postgres://app:hunter2@db/users'],
    { env: { USERS_PORT: '9100' } },
  );
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /^port = 9100 {3}\(USERS_PORT\)$/m);
  assert.match(
    run.stdout,
    new RegExp(
      `^require-session = all {3}\\(${path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: "require-session"\\)$`,
      'm',
    ),
  );
  assert.match(run.stdout, /^store = postgres:\/\/app:\*\*\*@db\/users {3}\(--store\)$/m);
  assert.match(run.stdout, /^secret = \*\*\* /m);
  assert.match(run.stdout, /^host = 127\.0\.0\.1 {3}\(default\)$/m);
  assert.ok(!run.stdout.includes(SECRET_A) && !run.stdout.includes('hunter2'), 'no secret shown');
  const bad = await runUsersServer(['config', '--show', '--port', 'x']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--port must be an integer/);
});

test('node bin/users-server.js --secret-file: sessions are signed with its first secret; rotating (new first line, old second, restart) keeps old cookies valid and re-signs them; dropping the old line ends them', async (t) => {
  const secrets = file(t, 'secrets', `# signing secrets, the first signs\n${SECRET_A}\n`);
  const data = tempDir(t);
  const start = () => spawnServer(t, ['--port', '0', '--data', data, '--secret-file', secrets]);
  let server = await start();
  const login = await send(server.url, 'POST', '/login', {
    headers: { authorization: basic('admin', ADMIN_PASSWORD) },
  });
  const cookie = cookiePair(login.headers['set-cookie']);
  server.kill('SIGTERM');
  await server.exited;

  writeFileSync(secrets, `${SECRET_B}\n${SECRET_A}\n`);
  server = await start();
  const root = await send(server.url, 'GET', '/', { headers: { cookie } });
  assert.equal(root.status, 200, 'a cookie signed by the older secret still verifies');
  const resigned = cookiePair(root.headers['set-cookie']);
  assert.notEqual(resigned, cookie, 'and is re-issued, signed with the new first secret');
  server.kill('SIGTERM');
  await server.exited;

  writeFileSync(secrets, `${SECRET_B}\n`);
  server = await start();
  assert.equal(
    (await send(server.url, 'GET', '/', { headers: { cookie } })).status,
    401,
    'the old secret is gone: its cookies end',
  );
  assert.equal(
    (await send(server.url, 'GET', '/', { headers: { cookie: resigned } })).status,
    200,
    'the re-signed one lives on',
  );
  server.kill('SIGTERM');
  await server.exited;
});

test('--secret-file refuses a missing file, an empty one, a short secret, and --secret beside it (exit 2)', async (t) => {
  const cases: [string[], RegExp][] = [
    [['--secret-file', join(tempDir(t), 'none')], /--secret-file: \S*none does not exist; check the path/],
    [['--secret-file', tempDir(t)], /--secret-file: \S+ is a folder, not a file; give the path of a file/],
    [['--secret-file', file(t, 'empty', '# nothing\n\n')], /no secret in it/],
    [['--secret-file', file(t, 'short', 'too-short\n')], /each secret needs at least 32 bytes/],
    [['--secret-file', file(t, 'ok', `${SECRET_A}\n`), '--secret', SECRET_B], /--secret or --secret-file, not both/],
  ];
  for (const [args, message] of cases) {
    const run = await runUsersServer([...args, '--port', '0']);
    assert.equal(run.code, 2, args.join(' '));
    assert.match(run.stderr, message);
  }
});
