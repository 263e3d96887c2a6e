/**
 * usersctl set, patch and edit, put --no-create, put's word on a terminal,
 * and "did you mean" for an alias that names nobody; against the real
 * server, in process.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EXIT } from '../cli/main.js';
import { editDistance } from '../cli/alias-suggestions.js';
import { assignmentsPatch } from '../cli/field-assignments.js';
import { CliUsageError } from '../cli/exit-codes.js';
import { put, send } from './helpers.js';
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
