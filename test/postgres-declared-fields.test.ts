/**
 * Declared fields on PostgreSQL, as an operator meets them with several
 * instances on one database (API.md "Declared fields"): `index add --store`
 * on a database with users, which every running instance applies without
 * a restart; a unique field over values two users hold refused, naming
 * them, nothing changed; of concurrent creates of one value across three
 * instances exactly one wins; and `copy` carries the declarations both
 * ways. Without PostgreSQL binaries every test skips and says why.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { assertProblem, runUsersServer, send, startTestServer, tempDir, type TestServer } from './helpers.js';
import { jitCompiledStatements, postgresSkipReason, testDatabase } from './postgres.js';

const skip = postgresSkipReason();

function pg(name: string, body: (t: TestContext) => Promise<void>): void {
  test(`PostgreSQL: ${name}`, async (t) => {
    if (skip !== undefined) return t.skip(skip);
    await body(t);
  });
}

async function instances(t: TestContext, count: number): Promise<{ url: string; servers: TestServer[] }> {
  const url = await testDatabase(t);
  const servers: TestServer[] = [];
  for (let i = 0; i < count; i++) servers.push(await startTestServer(t, { store: url }));
  return { url, servers };
}

const create = (server: TestServer, body: Record<string, unknown>) =>
  send(server.url, 'POST', '/users/new', { json: body });

/** Waits until `server` lists `paths` as declared: the poll of every instance (at most half a second apart). */
async function untilDeclared(server: TestServer, paths: string[]): Promise<void> {
  for (;;) {
    const listed = (await send(server.url, 'GET', '/indexes')).json() as { items: { path: string }[] };
    if (JSON.stringify(listed.items.map((i) => i.path)) === JSON.stringify(paths)) return;
    await pause(25);
  }
}

async function namesFound(server: TestServer, query: Record<string, string>): Promise<string[]> {
  const reply = await send(server.url, 'GET', `/users?${new URLSearchParams(query)}`);
  assert.equal(reply.status, 200, reply.text);
  return (reply.json() as { items: { name: string }[] }).items.map((u) => u.name);
}

pg(
  'index add --store on a database with users: every running instance finds by the field, lowercased, and enforces it, without a restart',
  async (t) => {
    const { url, servers } = await instances(t, 2);
    for (const [name, email] of [
      ['Ann', 'Ann@x.org'],
      ['bob', 'bob@x.org'],
      ['Cy', 'CY@x.org'],
    ])
      assert.equal((await create(servers[0]!, { name, email })).status, 201);
    const added = await runUsersServer(['index', 'add', 'email', '--unique', '--case-insensitive', '--store', url]);
    assert.equal(added.code, 0, added.stderr);
    assert.match(added.stdout, /^declared email \(unique, case-insensitive\) in /);
    for (const server of servers) {
      await untilDeclared(server, ['email']);
      assert.deepEqual(await namesFound(server, { filter: 'email eq "cy@X.ORG"' }), ['Cy']);
      assert.deepEqual(await namesFound(server, { sort: '-email', filter: 'email pr' }), ['Cy', 'bob', 'Ann']);
      const taken = assertProblem(await create(server, { name: 'Eve', email: 'ann@X.org' }), 409, 'unique-violation');
      assert.deepEqual([taken.field, taken.conflictsWith], ['email', '/users/1']);
      const patched = await send(server.url, 'PATCH', '/users/2', {
        headers: { 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify({ email: 'ANN@x.org' }),
      });
      assert.equal(assertProblem(patched, 409, 'unique-violation').conflictsWith, '/users/1');
    }
    const listed = await runUsersServer(['index', 'list', '--store', url]);
    assert.equal(listed.stdout, 'email  unique, case-insensitive\n');
    assert.equal((await runUsersServer(['index', 'remove', 'email', '--store', url])).code, 0);
    for (const server of servers) await untilDeclared(server, []);
    assert.equal((await create(servers[1]!, { name: 'Eve', email: 'ann@X.org' })).status, 201);
  },
);

pg(
  'index add --unique --store over values two users hold is refused naming them and their users; nothing changes',
  async (t) => {
    const { url, servers } = await instances(t, 1);
    for (const email of ['a@x', 'A@x', 'b@x'])
      assert.equal((await create(servers[0]!, { name: 'n', email })).status, 201);
    const refused = await runUsersServer(['index', 'add', 'email', '--unique', '--case-insensitive', '--store', url]);
    assert.deepEqual([refused.code, refused.stdout], [1, '']);
    assert.equal(
      refused.stderr,
      'users-server index: email cannot be unique: a value is held by more than one user (lowercased): "a@x" (users 1, 2); nothing was changed\n',
    );
    assert.equal(
      (await runUsersServer(['index', 'list', '--store', url])).stdout.split(' in ')[0],
      'no fields are declared',
    );
    assert.equal((await create(servers[0]!, { name: 'n', email: 'b@x' })).status, 201);
  },
);

pg('of 32 creates of one email at once across three instances, by POST and by PUT, exactly one is made', async (t) => {
  const { url, servers } = await instances(t, 3);
  assert.equal((await runUsersServer(['index', 'add', 'email', '--unique', '--store', url])).code, 0);
  for (const server of servers) await untilDeclared(server, ['email']);
  const replies = await Promise.all(
    Array.from({ length: 32 }, (_, i) => {
      const server = servers[i % 3]!;
      const body = { name: `n${i}`, email: 'one@example.org' };
      return i % 2 === 0 ? create(server, body) : send(server.url, 'PUT', `/users/u${i}`, { json: body });
    }),
  );
  const made = replies.filter((r) => r.status === 201);
  assert.equal(made.length, 1, replies.map((r) => r.status).join(' '));
  const winner = `/users/${made[0]!.json().id}`;
  for (const reply of replies.filter((r) => r.status !== 201))
    assert.equal(assertProblem(reply, 409, 'unique-violation').conflictsWith, winner);
});

pg('copy carries the declared fields from a data directory to a database and back', async (t) => {
  const data = tempDir(t);
  const server = await startTestServer(t, { data });
  assert.equal((await create(server, { name: 'Ann', email: 'ann@x' })).status, 201);
  assert.equal((await runUsersServer(['index', 'add', 'email', '--unique', '--data', data])).code, 0);
  await server.running.stop();
  const url = await testDatabase(t);
  const copied = await runUsersServer(['copy', '--from', data, '--to', url]);
  assert.equal(copied.code, 0, copied.stderr);
  assert.match(copied.stdout, /1 declared fields/);
  const onDatabase = await startTestServer(t, { store: url });
  assertProblem(await create(onDatabase, { name: 'Bob', email: 'ann@x' }), 409, 'unique-violation');
  assert.deepEqual(await namesFound(onDatabase, { filter: 'email eq "ann@x"' }), ['Ann']);
  await onDatabase.running.stop();
  const back = join(tempDir(t), 'back');
  assert.equal((await runUsersServer(['copy', '--from', url, '--to', back])).code, 0);
  const listed = await runUsersServer(['index', 'list', '--data', back]);
  assert.equal(listed.stdout, 'email  unique\n');
});

pg(
  "no statement of a store (its start, the declared fields and the schema read by every instance, writes, finds) is compiled by PostgreSQL's JIT: the tables of declarations are never analyzed, and a join of them is planned as millions of rows",
  async (t) => {
    const { url, servers } = await instances(t, 2);
    const dir = tempDir(t);
    const schema = join(dir, 'schema.json');
    writeFileSync(schema, JSON.stringify({ properties: { email: { type: 'string' } } }));
    for (const args of [
      ['index', 'add', 'email', '--unique', '--case-insensitive', '--store', url],
      ['schema', 'set', schema, '--store', url],
    ])
      assert.equal((await runUsersServer(args)).code, 0, args.join(' '));
    await untilDeclared(servers[1]!, ['email']);
    for (const [name, email] of [
      ['Ann', 'ann@x.org'],
      ['Bob', 'bob@x.org'],
    ])
      assert.equal((await create(servers[1]!, { name, email })).status, 201);
    assert.deepEqual(await namesFound(servers[0]!, { filter: 'email eq "ANN@x.org"' }), ['Ann']);
    assert.deepEqual(await namesFound(servers[0]!, { sort: '-email' }), ['Bob', 'Ann']);
    const compiled = await jitCompiledStatements(url);
    if (compiled === undefined) return t.skip('pg_stat_statements is not installed beside the server binaries');
    assert.deepEqual(compiled, []);
  },
);
