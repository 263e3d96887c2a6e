/**
 * Declared fields (API.md "Declared fields: indexes, uniqueness, case") as
 * an operator meets them, over real sockets: what a data directory
 * declares is kept in an index from the start, a unique field answers 409
 * unique-violation naming the field and the user that holds the value,
 * a case-insensitive one compares and sorts lowercased, and a restart
 * builds the indexes again; `users-server index` changes them on a running
 * server and on an idle data directory, refusing a unique field over values
 * two users hold, naming them, and changing nothing; backup carries them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { writeDeclarationsFile } from '../server/store/declarations-file.js';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { EXIT } from '../cli/main.js';
import { startCliServer } from './cli-helpers.js';
import { assertProblem, runUsersServer, send, startTestServer, tempDir, type TestServer } from './helpers.js';

const EMAIL = { path: 'email', unique: true, caseInsensitive: true };

async function create(server: TestServer, body: Record<string, unknown>) {
  return send(server.url, 'POST', '/users/new', { json: body });
}

async function namesFound(server: TestServer, query: Record<string, string>): Promise<string[]> {
  const reply = await send(server.url, 'GET', `/users?${new URLSearchParams(query)}`);
  assert.equal(reply.status, 200, reply.text);
  return (reply.json() as { items: { name: string }[] }).items.map((u) => u.name);
}

test('a data directory that declares email unique and case-insensitive: 409 for a taken email in any case, lowercased finds and sorts, and the same after a restart', async (t) => {
  const data = tempDir(t);
  writeDeclarationsFile(data, [EMAIL]);
  let server = await startTestServer(t, { data });
  for (const [name, email] of [
    ['Ann', 'Ann@Example.org'],
    ['bob', 'bob@example.org'],
    ['Cy', 'cy@EXAMPLE.org'],
  ])
    assert.equal((await create(server, { name, email })).status, 201);
  assert.equal((await create(server, { name: 'Nobody' })).status, 201, 'users without the member never conflict');
  assert.equal((await create(server, { name: 'Nobody again' })).status, 201);
  const check = async () => {
    const taken = await send(server.url, 'PUT', '/users/someone', {
      json: { name: 'Someone', email: 'ANN@example.ORG' },
    });
    const problem = assertProblem(taken, 409, 'unique-violation');
    assert.equal(problem.field, 'email');
    assert.equal(problem.conflictsWith, '/users/1');
    assert.match(String(problem.detail), /\/users\/1 already holds this value of email/);
    assert.deepEqual(await namesFound(server, { filter: 'email eq "ann@EXAMPLE.ORG"' }), ['Ann']);
    assert.deepEqual(await namesFound(server, { filter: 'email sw "C"' }), ['Cy']);
    assert.deepEqual(await namesFound(server, { sort: '-email', filter: 'email pr' }), ['Cy', 'bob', 'Ann']);
  };
  await check();
  await server.running.stop();
  server = await startTestServer(t, { data });
  await check();
  // Deleting a user frees its values.
  assert.equal((await send(server.url, 'DELETE', '/users/1')).status, 204);
  assert.equal((await create(server, { name: 'Ann 2', email: 'ann@example.org' })).status, 201);
});

/** Creates users of `names` with emails `name@example.org` in the cases given. */
async function createAll(server: TestServer, emails: readonly string[]): Promise<void> {
  for (const email of emails)
    assert.equal((await create(server, { name: email.split('@')[0], email })).status, 201, email);
}

test('index add on a running server with users: finds by the field within 2 s, lowercased where declared, and index list shows it', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  await createAll(server, ['Ann@Example.org', 'bob@example.org', 'CY@example.org']);
  const added = await runUsersServer(['index', 'add', 'email', '--case-insensitive', '--data', server.dataDir]);
  assert.deepEqual(added, {
    code: 0,
    stdout: `declared email (case-insensitive) in ${server.dataDir}\n`,
    stderr: '',
  });
  assert.deepEqual(await namesFound(server, { filter: 'email eq "cy@example.ORG"' }), ['CY']);
  assert.deepEqual(await namesFound(server, { sort: 'email', filter: 'email pr' }), ['Ann', 'bob', 'CY']);
  const again = await runUsersServer(['index', 'add', 'email', '--case-insensitive', '--data', server.dataDir]);
  assert.equal(again.stdout, `email (case-insensitive) is declared in ${server.dataDir} already: nothing changed\n`);
  await runUsersServer(['index', 'add', 'name', '--data', server.dataDir]);
  const listed = await runUsersServer(['index', 'list', '--data', server.dataDir]);
  assert.equal(listed.stdout, 'email  case-insensitive\nname\n');
  const json = await runUsersServer(['index', 'list', '--json', '--data', server.dataDir]);
  assert.deepEqual(JSON.parse(json.stdout), {
    items: [
      { path: 'email', unique: false, caseInsensitive: true },
      { path: 'name', unique: false, caseInsensitive: false },
    ],
  });
  // Removed, the field compares exactly again.
  assert.equal((await runUsersServer(['index', 'remove', 'email', '--data', server.dataDir])).code, 0);
  assert.deepEqual(await namesFound(server, { filter: 'email eq "cy@example.ORG"' }), []);
  const gone = await runUsersServer(['index', 'remove', 'email', '--data', server.dataDir]);
  assert.equal(gone.code, 1);
  assert.match(
    gone.stderr,
    /^users-server index: email is not declared in .* \(declared: name\); nothing was changed\n$/,
  );
});

test('a cursor of a sort made before a field became case-insensitive is refused after, and paging starts again', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  await createAll(server, ['b@x', 'A@x', 'c@x']);
  const first = await send(server.url, 'GET', `/users?${new URLSearchParams({ sort: 'email', limit: '1' })}`);
  const next = (first.json() as { next: string }).next;
  assert.equal(
    (await runUsersServer(['index', 'add', 'email', '--case-insensitive', '--data', server.dataDir])).code,
    0,
  );
  assertProblem(await send(server.url, 'GET', next), 400, 'invalid-cursor');
});

for (const running of [true, false])
  test(`index add --unique over emails two users hold is refused naming them and their users, and nothing changes (${running ? 'a running server' : 'no server running'})`, async (t) => {
    const server = await startTestServer(t, { store: 'journal' });
    await createAll(server, ['ann@x', 'ANN@x', 'bob@x', 'cy@x', 'Cy@x', 'dee@x']);
    await runUsersServer(['index', 'add', 'name', '--data', server.dataDir]);
    if (!running) await server.running.stop();
    const before = readFileSync(join(server.dataDir, 'indexes'), 'utf8');
    const refused = await runUsersServer([
      'index',
      'add',
      'email',
      '--unique',
      '--case-insensitive',
      '--data',
      server.dataDir,
    ]);
    assert.deepEqual(refused, {
      code: 1,
      stdout: '',
      stderr:
        'users-server index: email cannot be unique: 2 values are held by more than one user (lowercased): "ann@x" (users 1, 2), "cy@x" (users 4, 5); nothing was changed\n',
    });
    assert.equal(readFileSync(join(server.dataDir, 'indexes'), 'utf8'), before);
    assert.ok(
      !existsSync(join(server.dataDir, 'indexes.refused')) && !existsSync(join(server.dataDir, 'indexes.proposed')),
    );
    // Unique case-sensitive, the same emails fit: no two are equal.
    assert.equal((await runUsersServer(['index', 'add', 'email', '--unique', '--data', server.dataDir])).code, 0);
    if (running) {
      assertProblem(await create(server, { name: 'x', email: 'bob@x' }), 409, 'unique-violation');
      assert.equal((await create(server, { name: 'x', email: 'BOB@x' })).status, 201);
    }
  });

test('index refuses a bad PATH, a flag of another command and a directory that is no data directory', async (t) => {
  const dir = tempDir(t);
  const cases: [string[], number, RegExp][] = [
    [['index', 'add', 'a..b', '--data', dir], 2, /"a\.\.b" is not a path: a path is names joined by dots/],
    [['index', 'add', '--data', dir], 2, /index add takes exactly one PATH/],
    [['index', 'list', '--unique', '--data', dir], 2, /index list takes no --unique/],
    [['index', 'drop', 'email'], 2, /unknown index command "drop"/],
    [['index', 'add', 'email', '--data', dir], 1, /is not a users-server data directory/],
  ];
  for (const [args, code, message] of cases) {
    const run = await runUsersServer(args);
    assert.equal(run.code, code, args.join(' '));
    assert.match(run.stderr, message);
    assert.equal(run.stderr.split('\n').length, 2, 'one line');
  }
  assert.match((await runUsersServer(['index', '--help'])).stdout, /^usage: users-server index add PATH/);
});

test('of 32 POSTs of one email at once to a running server, exactly one creates a user; the others answer 409 naming it', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  assert.equal((await runUsersServer(['index', 'add', 'email', '--unique', '--data', server.dataDir])).code, 0);
  const replies = await Promise.all(
    Array.from({ length: 32 }, (_, i) => create(server, { name: `n${i}`, email: 'one@example.org' })),
  );
  const made = replies.filter((r) => r.status === 201);
  assert.equal(made.length, 1);
  const winner = `/users/${made[0]!.json().id}`;
  for (const reply of replies.filter((r) => r.status !== 201))
    assert.equal(assertProblem(reply, 409, 'unique-violation').conflictsWith, winner);
});

test('a backup carries the declared fields: a server on it enforces them', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  await createAll(server, ['ann@x']);
  assert.equal((await runUsersServer(['index', 'add', 'email', '--unique', '--data', server.dataDir])).code, 0);
  const to = join(tempDir(t), 'backup');
  assert.equal((await runUsersServer(['backup', '--data', server.dataDir, '--to', to])).code, 0);
  const restored = await startTestServer(t, { data: to });
  assertProblem(await create(restored, { name: 'x', email: 'ann@x' }), 409, 'unique-violation');
});

test('GET /indexes lists the declared fields with the access of GET /users', async (t) => {
  const server = await startTestServer(t, { requireSession: 'all', store: 'journal' });
  assertProblem(await send(server.url, 'GET', '/indexes'), 401, 'unauthorized');
  const cookie = await server.login();
  const none = await send(server.url, 'GET', '/indexes', { headers: { cookie } });
  assert.deepEqual([none.status, none.json()], [200, { items: [] }]);
  assert.equal(
    (await runUsersServer(['index', 'add', 'email', '--unique', '--case-insensitive', '--data', server.dataDir])).code,
    0,
  );
  const listed = await send(server.url, 'GET', '/indexes', { headers: { cookie } });
  assert.equal(listed.headers['content-type'], 'application/json');
  assert.deepEqual(listed.json(), { items: [{ path: 'email', unique: true, caseInsensitive: true }] });
});

test('usersctl says a taken email in one sentence naming the field and the user; an import with a duplicate email has one failed line and exits 8, the rest imported', async (t) => {
  const cli = await startCliServer(t, { store: 'journal' });
  assert.equal((await runUsersServer(['index', 'add', 'email', '--unique', '--data', cli.server.dataDir])).code, 0);
  assert.equal((await cli.run(['put', 'ann', '-f', '-'], { stdin: '{"name":"Ann","email":"ann@x"}' })).code, 0);
  const taken = await cli.run(['put', 'bob', '-f', '-'], { stdin: '{"name":"Bob","email":"ann@x"}' });
  assert.deepEqual(
    [taken.code, taken.stderr],
    [EXIT.conflict, 'usersctl: user 1 already holds this value of email, which the server declares unique\n'],
  );
  const file = join(tempDir(t), 'users.ndjson');
  writeFileSync(
    file,
    ['{"name":"Cy","email":"cy@x"}', '{"name":"Dee","email":"ann@x"}', '{"name":"Eve"}'].join('\n') + '\n',
  );
  const imported = await cli.run(['import', file]);
  assert.equal(imported.code, EXIT.partialImport);
  const results = imported.stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(
    results.map((r) => [r.line, r.ok]),
    [
      [1, true],
      [2, false],
      [3, true],
    ],
  );
  assert.deepEqual(results[1], {
    line: 2,
    ok: false,
    status: 409,
    error: 'user 1 already holds this value of email, which the server declares unique',
  });
  assert.equal(imported.stderr, 'usersctl: 1 of 3 lines failed; their results on stdout say why\n');
  const names = await send(cli.server.url, 'GET', '/users?sort=name');
  assert.deepEqual(
    (names.json() as { items: { name: string }[] }).items.map((u) => u.name),
    ['Ann', 'Cy', 'Eve'],
  );
});
