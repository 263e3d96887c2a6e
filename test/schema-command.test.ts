/**
 * `users-server schema set FILE | show | remove` through the real command
 * line (docs/operations.md "A schema for the users' fields"), on a data
 * directory a server runs on, on one no server runs on, and on the default
 * store (memory, or PostgreSQL with USERS_TEST_STORE=postgres: `--store`):
 * a running server applies a change within 2 s; a schema the validator
 * refuses is refused naming its keyword and pointer; one that users already
 * break is refused naming how many and the first ten, unless
 * `--check-existing no`, which `schema show` says; nothing changes on a
 * refusal.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { runUsersServer, send, startTestServer, tempDir, type TestServer } from './helpers.js';

const NAME_SHORT = { type: 'object', properties: { name: { type: 'string', maxLength: 5 } } };

function schemaFile(t: TestContext, schema: unknown): string {
  const file = join(tempDir(t), 'users.schema.json');
  writeFileSync(file, typeof schema === 'string' ? schema : JSON.stringify(schema));
  return file;
}

/** A server on the default store, and the `--data` or `--store` that names where it keeps its users. */
async function startDefault(t: TestContext): Promise<{ server: TestServer; place: string[] }> {
  const store =
    process.env.USERS_TEST_STORE === 'postgres' ? await (await import('./postgres.js')).testDatabase(t) : 'memory';
  const server = await startTestServer(t, { store });
  return { server, place: store.startsWith('postgres') ? ['--store', store] : ['--data', server.dataDir] };
}

/** Waits until a PUT of `name` to /users/{alias} answers `status`: a running server applies a change within 2 s. */
async function untilPutAnswers(server: TestServer, name: string, status: number, alias = 'probe'): Promise<void> {
  for (;;) {
    const reply = await send(server.url, 'PUT', `/users/${alias}`, { json: { name } });
    if (reply.status === status) return;
    await pause(25);
  }
}

test('schema set, show and remove on a running server: it applies the schema, show prints it, remove lifts it', async (t) => {
  const { server, place } = await startDefault(t);
  const file = schemaFile(t, NAME_SHORT);
  const set = await runUsersServer(['schema', 'set', file, ...place]);
  assert.equal(set.code, 0, set.stderr);
  assert.match(set.stdout, /^set the schema of the users' fields in /);
  await untilPutAnswers(server, 'Too long a name', 422);
  const shown = await runUsersServer(['schema', 'show', ...place]);
  assert.equal(shown.code, 0, shown.stderr);
  assert.deepEqual(JSON.parse(shown.stdout), NAME_SHORT);
  assert.equal(shown.stderr, '', 'a schema checked against the users says nothing more');
  const again = await runUsersServer(['schema', 'set', file, ...place]);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /has this schema already: nothing changed/);
  const removed = await runUsersServer(['schema', 'remove', ...place]);
  assert.equal(removed.code, 0, removed.stderr);
  assert.match(removed.stdout, /^removed the schema of the users' fields from /);
  await untilPutAnswers(server, 'Too long a name', 201);
  const none = await runUsersServer(['schema', 'show', ...place]);
  assert.equal(none.code, 0);
  assert.match(none.stdout, /^no schema is set in /);
});

test('schema set of a schema the validator refuses names the keyword and its pointer, and changes nothing', async (t) => {
  const { server, place } = await startDefault(t);
  const refused = await runUsersServer([
    'schema',
    'set',
    schemaFile(t, { type: 'object', properties: { email: { type: 'string', frobnicate: true } } }),
    ...place,
  ]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /keyword frobnicate/);
  assert.match(refused.stderr, /\/properties\/email\/frobnicate/);
  assert.match(refused.stderr, /nothing was changed/);
  const notJson = await runUsersServer(['schema', 'set', schemaFile(t, '{"type":'), ...place]);
  assert.equal(notJson.code, 1);
  assert.match(notJson.stderr, /is not JSON/);
  assert.match((await runUsersServer(['schema', 'show', ...place])).stdout, /^no schema is set in /);
  assert.equal((await send(server.url, 'PUT', '/users/x', { json: { name: 'Any name at all' } })).status, 201);
});

test('schema set over users that break it is refused, naming how many and the first ten with their fields; --check-existing no sets it, and show says so', async (t) => {
  const { server, place } = await startDefault(t);
  for (let i = 1; i <= 12; i++)
    assert.equal((await send(server.url, 'PUT', `/users/u${i}`, { json: { name: `Long name ${i}` } })).status, 201);
  assert.equal((await send(server.url, 'PUT', '/users/ok', { json: { name: 'Ok' } })).status, 201);
  const file = schemaFile(t, NAME_SHORT);
  const refused = await runUsersServer(['schema', 'set', file, ...place]);
  assert.equal(refused.code, 1, refused.stdout);
  assert.match(
    refused.stderr,
    /12 users break the schema, the first 10: users 1 \(name\), 2 \(name\), 3 \(name\), 4 \(name\), 5 \(name\), 6 \(name\), 7 \(name\), 8 \(name\), 9 \(name\), 10 \(name\);/,
  );
  assert.match(refused.stderr, /--check-existing no/);
  assert.match(refused.stderr, /nothing was changed/);
  assert.match((await runUsersServer(['schema', 'show', ...place])).stdout, /^no schema is set in /);
  assert.equal((await send(server.url, 'PUT', '/users/more', { json: { name: 'Still long' } })).status, 201);

  const unchecked = await runUsersServer(['schema', 'set', file, '--check-existing', 'no', ...place]);
  assert.equal(unchecked.code, 0, unchecked.stderr);
  assert.match(unchecked.stdout, /were not checked/);
  await untilPutAnswers(server, 'Too long a name', 422);
  const shown = await runUsersServer(['schema', 'show', ...place]);
  assert.deepEqual(JSON.parse(shown.stdout), NAME_SHORT);
  assert.match(shown.stderr, /--check-existing no/);
  // The users written before stay as they are, and are read as they are.
  assert.equal((await send(server.url, 'GET', '/users/u1')).status, 200);
});

test('schema set on a data directory no server runs on checks its users, and a server started on it applies the schema', async (t) => {
  const data = tempDir(t);
  let server = await startTestServer(t, { data });
  assert.equal((await send(server.url, 'PUT', '/users/ann', { json: { name: 'Ann' } })).status, 201);
  assert.equal((await send(server.url, 'PUT', '/users/long', { json: { name: 'Long name' } })).status, 201);
  await server.running.stop();
  const file = schemaFile(t, NAME_SHORT);
  const refused = await runUsersServer(['schema', 'set', file, '--data', data]);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /1 user breaks the schema: user 2 \(name\)/);
  server = await startTestServer(t, { data });
  assert.equal((await send(server.url, 'DELETE', '/users/long')).status, 204);
  await server.running.stop();
  const set = await runUsersServer(['schema', 'set', file, '--data', data]);
  assert.equal(set.code, 0, set.stderr);
  server = await startTestServer(t, { data });
  assert.equal((await send(server.url, 'PUT', '/users/cy', { json: { name: 'Cy the long' } })).status, 422);
  assert.equal((await send(server.url, 'PUT', '/users/cy', { json: { name: 'Cy' } })).status, 201);
});

test('schema usage errors exit 2 and name the help', async () => {
  for (const args of [
    ['schema'],
    ['schema', 'frob'],
    ['schema', 'set'],
    ['schema', 'show', 'file.json'],
    ['schema', 'set', 'file.json', '--check-existing', 'maybe'],
    ['schema', 'remove', '--check-existing', 'no'],
  ]) {
    const run = await runUsersServer(args);
    assert.equal(run.code, 2, args.join(' '));
    assert.match(run.stderr, /users-server schema --help/, args.join(' '));
  }
});

test('schema set --store on a database: every running instance applies it within 2 s, and remove lifts it on every one', async (t) => {
  const { postgresSkipReason, testDatabase } = await import('./postgres.js');
  const skip = postgresSkipReason();
  if (skip !== undefined) return t.skip(skip);
  const url = await testDatabase(t);
  const servers = [await startTestServer(t, { store: url }), await startTestServer(t, { store: url })];
  const set = await runUsersServer(['schema', 'set', schemaFile(t, NAME_SHORT), '--store', url]);
  assert.equal(set.code, 0, set.stderr);
  for (const server of servers) await untilPutAnswers(server, 'Too long a name', 422);
  assert.equal((await runUsersServer(['schema', 'remove', '--store', url])).code, 0);
  for (const [i, server] of servers.entries()) await untilPutAnswers(server, 'Too long a name', 201, `probe${i}`);
});
