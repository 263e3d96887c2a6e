import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { EXIT } from '../cli/main.js';
import { put, send, tempDir } from './helpers.js';
import { lines, startCliServer } from './cli-helpers.js';

// get, put, delete, list, export, reserve, create, new, mv against the real server.

test('get prints each user exactly as the server sent it, one per line', async (t) => {
  const cli = await startCliServer(t);
  // Field order, unicode and nesting as the client gave them.
  await put(cli.server.url, '/users/alice', { z: 1, name: 'Ålice 🙂', a: { b: [1, 'x'] } });
  const raw = (await send(cli.server.url, 'GET', '/users/alice')).text;
  const result = await cli.run(['get', 'alice']);
  assert.deepEqual(result, { code: EXIT.ok, stdout: raw + '\n', stderr: '' });
  assert.equal((await cli.run(['--json', 'get', '1'])).stdout, raw + '\n');
});

test("get of an unknown user exits 3 with the server's detail as the one stderr line", async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['get', 'nobody']);
  assert.deepEqual(result, { code: EXIT.notFound, stdout: '', stderr: 'usersctl: nobody: No such user.\n' });
});

test("get with several refs continues after a failure and exits with the first failure's code", async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/alice', { name: 'Alice' });
  await put(cli.server.url, '/users/bob', { name: 'Bob' });
  const result = await cli.run(['get', 'alice', 'ghost', 'bob', '999']);
  assert.equal(result.code, EXIT.notFound);
  assert.deepEqual(
    lines(result.stdout).map((l) => JSON.parse(l).name),
    ['Alice', 'Bob'],
  );
  assert.deepEqual(lines(result.stderr), ['usersctl: ghost: No such user.', 'usersctl: 999: No such user.']);
});

test('get - reads refs from stdin, one a line, blank lines skipped', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/alice', { name: 'Alice' });
  await put(cli.server.url, '/users/bob', { name: 'Bob' });
  const result = await cli.run(['get', '-'], { stdin: 'bob\n\n1\r\n' });
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.deepEqual(
    lines(result.stdout).map((l) => JSON.parse(l).name),
    ['Bob', 'Alice'],
  );
});

test('get --etag prints the ETag that put --if-match accepts', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/alice', { name: 'Alice' });
  const etag = (await cli.run(['get', '--etag', 'alice'])).stdout.trim();
  assert.equal(etag, (await send(cli.server.url, 'GET', '/users/alice')).headers.etag);
  const ok = await cli.run(['put', 'alice', '--name', 'Alicia', '--if-match', etag]);
  assert.equal(ok.code, EXIT.ok, ok.stderr);
  // The ETag changed with the write: the old one no longer matches (412 → exit 5).
  const stale = await cli.run(['put', 'alice', '--name', 'Ally', '--if-match', etag]);
  assert.equal(stale.code, EXIT.conflict);
  assert.deepEqual(lines(stale.stderr), ['usersctl: If-Match does not match the current ETag.']);
  assert.equal(JSON.parse((await send(cli.server.url, 'GET', '/users/alice')).text).name, 'Alicia');
});

test('put --name creates through an alias, then replaces, printing the representation', async (t) => {
  const cli = await startCliServer(t);
  const created = await cli.run(['put', 'alice', '--name', 'Alice']);
  assert.deepEqual(created, { code: EXIT.ok, stdout: '{"name":"Alice","id":1}\n', stderr: '' });
  const replaced = await cli.run(['put', '1', '--name', 'Alicia']);
  assert.equal(replaced.stdout, '{"name":"Alicia","id":1}\n');
});

test("put -f FILE sends the file as the body; -f - reads stdin; --name overrides the file's name", async (t) => {
  const cli = await startCliServer(t);
  const file = join(tempDir(t, 'usersctl-files-'), 'user.json');
  writeFileSync(file, '{"name":"Carol","email":"carol@example.com"}');
  assert.equal(
    (await cli.run(['put', 'carol', '-f', file])).stdout,
    '{"name":"Carol","email":"carol@example.com","id":1}\n',
  );
  const fromStdin = await cli.run(['put', 'dave', '-f', '-'], { stdin: '{"name":"Dave"}' });
  assert.equal(fromStdin.stdout, '{"name":"Dave","id":2}\n');
  const both = await cli.run(['put', 'carol', '-f', file, '--name', 'Caroline']);
  assert.equal(both.stdout, '{"name":"Caroline","email":"carol@example.com","id":1}\n');
});

test('put -f with a file that does not exist is a usage error (exit 2)', async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['put', 'x', '-f', join(tempDir(t), 'missing.json')]);
  assert.equal(result.code, EXIT.usage);
  assert.match(result.stderr, /^usersctl: .*missing\.json does not exist; check the path\n$/);
});

test("a user the server refuses (422) exits 5 with the server's detail", async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['put', 'x', '-f', '-'], { stdin: '{"name":""}' });
  assert.equal(result.code, EXIT.conflict);
  assert.deepEqual(lines(result.stderr), ['usersctl: name must have 1 to 200 characters (field "name").']);
});

test('put --create-only refuses to replace an existing user (412, exit 5)', async (t) => {
  const cli = await startCliServer(t);
  assert.equal((await cli.run(['put', 'alice', '--name', 'Alice', '--create-only'])).code, EXIT.ok);
  const again = await cli.run(['put', 'alice', '--name', 'Other', '--create-only']);
  assert.equal(again.code, EXIT.conflict);
  assert.match(again.stderr, /If-None-Match matches/);
});

test('put to an id that was never issued exits 3; to an id whose user was deleted exits 5 (410)', async (t) => {
  const cli = await startCliServer(t);
  assert.equal((await cli.run(['put', '42', '--name', 'X'])).code, EXIT.notFound);
  await cli.run(['put', 'alice', '--name', 'Alice']);
  assert.equal((await cli.run(['delete', 'alice'])).code, EXIT.ok);
  const gone = await cli.run(['put', '1', '--name', 'Back']);
  assert.equal(gone.code, EXIT.conflict);
  assert.match(gone.stderr, /was issued/);
});

test('delete removes the user and prints it as it was (a copy of what is gone); a second delete exits 3', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/alice', { name: 'Alice', note: 'kept' });
  assert.deepEqual(await cli.run(['delete', 'alice']), {
    code: EXIT.ok,
    stdout: '{"name":"Alice","note":"kept","id":1}\n',
    stderr: '',
  });
  assert.equal((await send(cli.server.url, 'GET', '/users/1')).status, 404);
  assert.equal((await cli.run(['delete', 'alice'])).code, EXIT.notFound);
});

test('delete --if-match with a stale ETag exits 5 and deletes nothing', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/alice', { name: 'Alice' });
  const result = await cli.run(['delete', 'alice', '--if-match', '"stale"']);
  assert.equal(result.code, EXIT.conflict);
  assert.equal((await send(cli.server.url, 'GET', '/users/alice')).status, 200);
});

test('list follows next to the end and prints every user as NDJSON, byte for byte; export the same users as records with their aliases', async (t) => {
  const cli = await startCliServer(t);
  for (let i = 0; i < 7; i++)
    await put(cli.server.url, `/users/u${i}`, { name: `User ${i}`, n: i, tags: ['a', { deep: true }] });
  const all = JSON.parse((await send(cli.server.url, 'GET', '/users?limit=1000')).text) as { items: unknown[] };
  const expected = all.items.map((u) => JSON.stringify(u) + '\n').join('');
  for (const limit of ['1', '3', '7', '1000']) {
    const result = await cli.run(['list', '--limit', limit]);
    assert.equal(result.code, EXIT.ok);
    assert.equal(result.stdout, expected, `--limit ${limit}`);
  }
  const aliases = new Map(all.items.map((u, i) => [(u as { id: number }).id, `u${i}`]));
  const records = all.items
    .map(
      (u) =>
        `{"id":${(u as { id: number }).id},"alias":"${aliases.get((u as { id: number }).id)}","user":${JSON.stringify(u)}}\n`,
    )
    .join('');
  assert.equal(
    (await cli.run(['export'])).stdout,
    '{"usersctl":"export","version":2}\n' + records + '{"usersctl":"end","users":7}\n',
    'export: a header, then id, alias and representation a user, then the end record',
  );
});

test('list of an empty server prints nothing and exits 0', async (t) => {
  const cli = await startCliServer(t);
  assert.deepEqual(await cli.run(['list']), { code: EXIT.ok, stdout: '', stderr: '' });
});

test('reserve prints "<id>TAB<expiresAt>"; with --json the server\'s JSON', async (t) => {
  const cli = await startCliServer(t);
  const plain = await cli.run(['reserve']);
  assert.equal(plain.code, EXIT.ok);
  assert.match(plain.stdout, /^1\t\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\n$/);
  const json = await cli.run(['--json', 'reserve']);
  const body = JSON.parse(json.stdout) as { id: number; expiresAt: string };
  assert.equal(body.id, 2);
  // The reserved id takes a PUT (201).
  assert.equal((await cli.run(['put', '2', '--name', 'Reserved'])).stdout, '{"name":"Reserved","id":2}\n');
});

test('create --mode uuid PUTs under a fresh UUID alias, reachable by that alias', async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['-v', 'create', '--name', 'Erin']);
  assert.equal(result.code, EXIT.ok);
  assert.equal(result.stdout, '{"name":"Erin","id":1}\n');
  const alias = /^> PUT \/users\/([0-9a-f-]{36}) HTTP\/1\.1$/m.exec(result.stderr)?.[1];
  assert.ok(alias !== undefined, result.stderr);
  assert.equal(JSON.parse((await send(cli.server.url, 'GET', `/users/${alias}`)).text).id, 1);
});

test('create --mode reserve reserves an id with an Idempotency-Key, then PUTs under it', async (t) => {
  const cli = await startCliServer(t);
  await cli.run(['reserve']); // id 1 is taken by a reservation
  const result = await cli.run(['-v', 'create', '--name', 'Frank', '--mode', 'reserve']);
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.equal(result.stdout, '{"name":"Frank","id":2}\n');
  assert.match(result.stderr, /^> POST \/reservations HTTP\/1\.1\n(> .*\n)*> idempotency-key: [0-9a-f-]{36}$/m);
  assert.match(result.stderr, /^> PUT \/users\/2 HTTP\/1\.1$/m);
});

test('new POSTs /users/new with an automatic Idempotency-Key and prints the created user', async (t) => {
  const cli = await startCliServer(t);
  const result = await cli.run(['-v', 'new', '--name', 'Grace']);
  assert.equal(result.code, EXIT.ok);
  assert.equal(result.stdout, '{"name":"Grace","id":1}\n');
  assert.match(result.stderr, /^> idempotency-key: [0-9a-f-]{36}$/m);
});

test("mv without --allow-id-change on the server exits 5 with the server's detail and moves nothing", async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/alice', { name: 'Alice' });
  const result = await cli.run(['mv', 'alice', '500']);
  assert.equal(result.code, EXIT.conflict);
  assert.deepEqual(lines(result.stderr), [
    'usersctl: The body says id 500 but this user is 1; ids are assigned by the server. To move a user to a new id, start users-server with --allow-id-change.',
  ]);
  assert.equal((await send(cli.server.url, 'GET', '/users/1')).status, 200);
});

test('mv moves a user to a new id; the alias follows and get of the old id follows the redirect', async (t) => {
  const cli = await startCliServer(t, { allowIdChange: true });
  await put(cli.server.url, '/users/alice', { name: 'Alice', email: 'a@example.com' });
  const result = await cli.run(['mv', 'alice', '500']);
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.equal(result.stdout, '{"name":"Alice","email":"a@example.com","id":500}\n');
  assert.equal((await cli.run(['get', 'alice'])).stdout, result.stdout);
  assert.equal((await cli.run(['get', '1'])).stdout, result.stdout);
  // An id already issued cannot be taken: 409, exit 5.
  const bob = JSON.parse((await put(cli.server.url, '/users/bob', { name: 'Bob' })).text) as { id: number };
  const taken = await cli.run(['mv', 'alice', String(bob.id)]);
  assert.equal(taken.code, EXIT.conflict);
  assert.match(taken.stderr, /already been issued/);
});

test("delete takes many refs and - for refs on stdin; a missing one is reported, the rest are deleted, and the exit code is the first failure's", async (t) => {
  const cli = await startCliServer(t);
  for (const name of ['a', 'b', 'c', 'd'])
    assert.equal((await cli.run(['put', name, '--name', name.toUpperCase()])).code, 0);
  const many = await cli.run(['delete', 'a', 'nobody', '2']);
  assert.equal(many.code, EXIT.notFound, many.stderr);
  assert.deepEqual(lines(many.stderr), ['usersctl: nobody: No such user.']);
  assert.deepEqual(lines(many.stdout), ['{"name":"A","id":1}', '{"name":"B","id":2}'], 'each user deleted, as it was');
  const fromStdin = await cli.run(['delete', '-'], { stdin: 'c\n\n4\n' });
  assert.deepEqual(fromStdin, { code: 0, stdout: '{"name":"C","id":3}\n{"name":"D","id":4}\n', stderr: '' });
  const left = await cli.run(['list']);
  assert.equal(left.stdout, '', `users left: ${left.stdout}`);
  const oneEtag = await cli.run(['delete', 'x', 'y', '--if-match', '"e"']);
  assert.equal(oneEtag.code, EXIT.usage);
});

test('a UTF-8 byte order mark at the start of a file or of stdin is not part of the input (import, put -f, get -)', async (t) => {
  const cli = await startCliServer(t);
  const bom = '\uFEFF';
  const file = join(tempDir(t), 'users.ndjson');
  writeFileSync(file, `${bom}{"name":"Ann","login":"ann"}\n{"name":"Bob","login":"bob"}\n`);
  const fromFile = await cli.run(['import', '--alias-field', 'login', '-f', file]);
  assert.equal(fromFile.code, 0, fromFile.stderr + fromFile.stdout);
  const fromStdin = await cli.run(['import', '--alias-field', 'login'], {
    stdin: `${bom}{"name":"Cy","login":"cy"}\n`,
  });
  assert.equal(fromStdin.code, 0, fromStdin.stderr + fromStdin.stdout);
  const put = await cli.run(['put', 'dee', '-f', '-'], { stdin: `${bom}{"name":"Dee"}` });
  assert.equal(put.code, 0, put.stderr);
  const got = await cli.run(['get', '-'], { stdin: `${bom}ann\ncy\ndee\n` });
  assert.equal(got.code, 0, got.stderr);
  assert.deepEqual(
    lines(got.stdout).map((l) => JSON.parse(l).name),
    ['Ann', 'Cy', 'Dee'],
  );
});

test('mv against a server without --allow-id-change exits 5 with one sentence that names the flag to use', async (t) => {
  const cli = await startCliServer(t);
  assert.equal((await cli.run(['put', 'alice', '--name', 'Alice'])).code, 0);
  const moved = await cli.run(['mv', 'alice', '500']);
  assert.equal(moved.code, EXIT.conflict);
  assert.deepEqual(lines(moved.stderr), [
    'usersctl: The body says id 500 but this user is 1; ids are assigned by the server. To move a user to a new id, start users-server with --allow-id-change.',
  ]);
});
