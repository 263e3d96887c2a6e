/**
 * usersctl set, patch and edit, put --no-create, put's word on a terminal,
 * and "did you mean" for an alias that names nobody; against the real
 * server, in process.
 */
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { EXIT } from '../cli/main.js';
import { editDistance } from '../cli/alias-suggestions.js';
import { assignmentsPatch } from '../cli/field-assignments.js';
import { CliUsageError } from '../cli/exit-codes.js';
import { put, send, tempDir } from './helpers.js';
import { lines, sendProblem, startCliServer, startStub, usersctl } from './cli-helpers.js';

const ASSIGNMENTS: [string[], string[], unknown][] = [
  [['name=Alice'], [], { name: 'Alice' }],
  [['age:=30', 'admin:=true', 'tags:=["a","b"]'], [], { age: 30, admin: true, tags: ['a', 'b'] }],
  [['address.city=Oslo', 'address.zip=0150'], [], { address: { city: 'Oslo', zip: '0150' } }],
  [['note=a=b', 'empty='], ['nickname'], { note: 'a=b', empty: '', nickname: null }],
  [['x:=null'], [], { x: null }],
  [['n:="7"'], ['a.b'], { n: '7', a: { b: null } }],
];

for (const [assignments, unset, patch] of ASSIGNMENTS) {
  test(`set ${[...assignments, ...unset.map((u) => `--unset ${u}`)].join(' ')} is the merge patch ${JSON.stringify(patch)}`, () => {
    assert.deepEqual(assignmentsPatch(assignments, unset), patch);
  });
}

const REFUSED: [string[], string[], RegExp][] = [
  [[], [], /at least one FIELD=VALUE/],
  [['name'], [], /is not FIELD=VALUE or FIELD:=JSON/],
  [['=x'], [], /is not FIELD=VALUE/],
  [['age:=thirty'], [], /age:= takes JSON, and "thirty" is not .*quote a string as age=TEXT/],
  [['a b=1'], [], /"a b" is not a field path/],
  [['a..b=1'], [], /is not a field path/],
  [['a=1', 'a.b=2'], [], /overlaps an earlier field/],
  [['a=1', 'a=2'], [], /sets a field already given/],
  [['a=1'], ['a'], /sets a field already given/],
];

for (const [assignments, unset, message] of REFUSED) {
  test(`set refuses ${JSON.stringify([...assignments, ...unset])} as a usage error that says what is wrong`, () => {
    assert.throws(
      () => assignmentsPatch(assignments, unset),
      (error: unknown) => error instanceof CliUsageError && message.test(error.message),
    );
  });
}

test('the edit distance of two aliases: insertions, deletions and substitutions, cut off past the bound', () => {
  assert.equal(editDistance('alice', 'alice', 2), 0);
  assert.equal(editDistance('alcie', 'alice', 2), 2);
  assert.equal(editDistance('alic', 'alice', 2), 1);
  assert.equal(editDistance('bob', 'alice', 2), 3);
  assert.equal(editDistance('a', 'abcdef', 2), 3);
});

test('get, delete and put --no-create of an alias that names nobody suggest up to three aliases within two edits, nearest first', async (t) => {
  const cli = await startCliServer(t);
  for (const alias of ['alice', 'alicia', 'alina', 'bob', 'malice'])
    await put(cli.server.url, `/users/${alias}`, { name: alias });
  const got = await cli.run(['get', 'alcie']);
  assert.equal(got.code, EXIT.notFound);
  assert.deepEqual(lines(got.stderr), ['usersctl: alcie: No such user; did you mean alice or alicia?']);
  const deleted = await cli.run(['delete', 'alica']);
  assert.equal(deleted.code, EXIT.notFound);
  assert.deepEqual(lines(deleted.stderr), ['usersctl: alica: No such user; did you mean alice or alicia or alina?']);
  const replaced = await cli.run(['put', 'bobb', '--no-create', '--name', 'B']);
  assert.equal(replaced.code, EXIT.notFound, replaced.stderr);
  assert.match(replaced.stderr, /did you mean bob\?/);
  assert.equal((await send(cli.server.url, 'GET', '/users/bobb')).status, 404, 'nothing was created');
  // Nothing near: the plain line.
  assert.deepEqual(lines((await cli.run(['get', 'zzzzzz'])).stderr), ['usersctl: zzzzzz: No such user.']);
  // An id is no alias: no suggestion.
  assert.deepEqual(lines((await cli.run(['get', '999'])).stderr), ['usersctl: 999: No such user.']);
});

test('suggestions are left out when the caller may not list users (the listing answers 403): the 404 line stays as it is', async (t) => {
  const stub = await startStub(t, (req, res) =>
    req.url?.startsWith('/users?') === true
      ? sendProblem(res, 403, 'Forbidden.')
      : sendProblem(res, 404, 'No such user.'),
  );
  const result = await usersctl(['--url', stub.url, 'get', 'alcie'], { env: {} });
  assert.equal(result.code, EXIT.notFound);
  assert.deepEqual(lines(result.stderr), ['usersctl: alcie: No such user.']);
  assert.deepEqual(
    stub.requests.map((r) => r.url),
    ['/users/alcie', '/users?limit=1000&aliases=true'],
  );
});

test('put --no-create replaces an existing user and refuses to create one (exit 3); put says on a terminal whether it created or replaced', async (t) => {
  const cli = await startCliServer(t);
  const created = await cli.run(['put', 'carol', '--name', 'Carol'], { stderrTTY: true });
  assert.equal(created.code, EXIT.ok, created.stderr);
  assert.match(created.stderr, /^usersctl: created user 1 \(carol\)\n$/);
  const replaced = await cli.run(['put', 'carol', '--no-create', '--name', 'Caroline'], { stderrTTY: true });
  assert.equal(replaced.code, EXIT.ok, replaced.stderr);
  assert.equal(JSON.parse(replaced.stdout).name, 'Caroline');
  assert.match(replaced.stderr, /^usersctl: replaced user 1 \(carol\)\n$/);
  // Not a terminal: stdout only, as scripts read it.
  assert.equal((await cli.run(['put', '1', '--name', 'C'])).stderr, '');
  const refused = await cli.run(['put', 'dave', '--no-create', '--name', 'Dave']);
  assert.equal(refused.code, EXIT.notFound, refused.stderr);
  assert.deepEqual(lines(refused.stderr), ['usersctl: dave: No such user (put --no-create creates none).']);
  assert.equal((await send(cli.server.url, 'GET', '/users/dave')).status, 404);
  assert.equal((await cli.run(['put', 'x', '--no-create', '--create-only', '--name', 'X'])).code, EXIT.usage);
});

test('set changes the fields given and keeps the others: strings, JSON values, nested paths, --unset', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/bob', {
    name: 'Bob',
    email: 'b@x',
    nick: 'bb',
    address: { city: 'Oslo', zip: '1' },
  });
  const result = await cli.run([
    'set',
    'bob',
    'email=bob@example.com',
    'age:=42',
    'address.city=Bergen',
    '--unset',
    'nick',
  ]);
  assert.equal(result.code, EXIT.ok, result.stderr);
  const expected = { name: 'Bob', email: 'bob@example.com', address: { city: 'Bergen', zip: '1' }, id: 1, age: 42 };
  assert.deepEqual(JSON.parse(result.stdout), expected);
  assert.deepEqual(JSON.parse((await send(cli.server.url, 'GET', '/users/bob')).text), expected);
});

test('set of an alias that names nobody creates nothing, exits 3 and suggests the near alias; a stale --if-match exits 5', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/alice', { name: 'Alice' });
  const typo = await cli.run(['set', 'alcie', 'name=Alice L.']);
  assert.equal(typo.code, EXIT.notFound);
  assert.deepEqual(lines(typo.stderr), [
    'usersctl: alcie: No such user; a PATCH changes a user, it never creates one; did you mean alice?',
  ]);
  assert.equal((await send(cli.server.url, 'GET', '/users/alcie')).status, 404);
  const stale = await cli.run(['set', 'alice', 'x=1', '--if-match', '"old"']);
  assert.equal(stale.code, EXIT.conflict, stale.stderr);
  const invalid = await cli.run(['set', 'alice', '--unset', 'name']);
  assert.equal(invalid.code, EXIT.conflict, 'a 422 exits as every refused change does');
  assert.match(invalid.stderr, /name is required/);
});

test('patch -f applies a merge patch from a file or stdin; a file that is not JSON is a usage error naming the place', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/cy', { name: 'Cy', nick: 'c' });
  const result = await cli.run(['patch', 'cy', '-f', '-'], { stdin: '{"nick":null,"role":"ops"}' });
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), { name: 'Cy', id: 1, role: 'ops' });
  const bad = await cli.run(['patch', 'cy', '-f', '-'], { stdin: '{"nick":' });
  assert.equal(bad.code, EXIT.usage);
  assert.match(bad.stderr, /^usersctl: stdin is not JSON at line 1/);
});

/** An editor for `usersctl edit`: a node script run on the file, as $EDITOR runs one. */
function scriptEditor(t: TestContext, body: string): string {
  const dir = tempDir(t, 'usersctl-editor-');
  const script = join(dir, 'editor.mjs');
  writeFileSync(
    script,
    `import { existsSync, readFileSync, writeFileSync } from 'node:fs';\nconst file = process.argv[2];\nconst runs = '${join(dir, 'runs')}';\nconst run = existsSync(runs) ? Number(readFileSync(runs, 'utf8')) : 0;\nwriteFileSync(runs, String(run + 1));\n${body}\n`,
  );
  return `${process.execPath} ${script}`;
}

test('edit opens the user in $EDITOR and saves the edited file with If-Match', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/bob', { name: 'Bob', email: 'b@x' });
  const editor = scriptEditor(
    t,
    `const u = JSON.parse(readFileSync(file, 'utf8')); u.email = 'bob@example.com'; writeFileSync(file, JSON.stringify(u, null, 2));`,
  );
  const result = await cli.run(['edit', 'bob'], { env: { EDITOR: editor } });
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.deepEqual(JSON.parse(result.stdout), { name: 'Bob', email: 'bob@example.com', id: 1 });
  assert.equal(JSON.parse((await send(cli.server.url, 'GET', '/users/bob')).text).email, 'bob@example.com');
});

test('edit with an unchanged file changes nothing and says so; $VISUAL comes before $EDITOR', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/bob', { name: 'Bob' });
  const before = (await send(cli.server.url, 'GET', '/users/bob')).headers.etag;
  const result = await cli.run(['edit', 'bob'], { env: { VISUAL: scriptEditor(t, ''), EDITOR: '/bin/false' } });
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.deepEqual(lines(result.stderr), ['usersctl: bob: no change, nothing saved']);
  assert.equal(result.stdout, '');
  assert.equal((await send(cli.server.url, 'GET', '/users/bob')).headers.etag, before);
});

test("edit when someone changed the user meanwhile: says what changed, opens the editor again on the new version with the change kept, and saves it; nobody's change is lost", async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/bob', { name: 'Bob', email: 'b@x', age: 30 });
  const editor = scriptEditor(
    t,
    `if (run === 0) {
  const u = JSON.parse(readFileSync(file, 'utf8')); u.email = 'bob@example.com'; writeFileSync(file, JSON.stringify(u));
  await fetch('${cli.server.url}/users/bob', { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"age":31}' });
} else if (!readFileSync(file, 'utf8').includes('bob@example.com')) process.exit(9);`,
  );
  const result = await cli.run(['edit', 'bob'], { env: { EDITOR: editor } });
  assert.equal(result.code, EXIT.ok, result.stderr);
  assert.match(result.stderr, /bob was changed meanwhile \(changed: age\): your change is put on the new version/);
  const saved = { name: 'Bob', email: 'bob@example.com', age: 31, id: 1 };
  assert.deepEqual(JSON.parse(result.stdout), saved);
  assert.deepEqual(JSON.parse((await send(cli.server.url, 'GET', '/users/bob')).text), saved);
});

test('edit with a file that is no longer JSON saves nothing, exits 2 and keeps the text in a file it names; an editor that fails saves nothing', async (t) => {
  const cli = await startCliServer(t);
  await put(cli.server.url, '/users/bob', { name: 'Bob' });
  const before = (await send(cli.server.url, 'GET', '/users/bob')).text;
  const broken = await cli.run(['edit', 'bob'], {
    env: { EDITOR: scriptEditor(t, `writeFileSync(file, '{"name": "Bob",');`) },
  });
  assert.equal(broken.code, EXIT.usage);
  const kept = /your text is kept in (\S+)$/m.exec(broken.stderr)?.[1];
  assert.ok(kept !== undefined, broken.stderr);
  assert.equal(readFileSync(kept, 'utf8'), '{"name": "Bob",');
  rmSync(dirname(kept), { recursive: true, force: true });
  const failing = await cli.run(['edit', 'bob'], { env: { EDITOR: 'exit 3;' } });
  assert.equal(failing.code, EXIT.usage);
  assert.match(failing.stderr, /the editor exit 3; exited 3; nothing was saved/);
  assert.equal((await send(cli.server.url, 'GET', '/users/bob')).text, before);
});
