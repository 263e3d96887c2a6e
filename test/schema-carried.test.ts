/**
 * Where the schema of the users' fields goes besides the writes: `backup`
 * and `copy` carry it (a data directory to a database and back, with
 * `--check-existing no` kept), and `/openapi.json` gives it as the user's
 * schema, with the fixed rules (`name`, `id`), once a running server applies
 * it. Real command line and sockets; the copy to PostgreSQL skips, saying
 * why, without its binaries.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { assertProblem, runUsersServer, send, startTestServer, tempDir, type TestServer } from './helpers.js';
import { postgresSkipReason, testDatabase } from './postgres.js';

const SCHEMA = {
  type: 'object',
  required: ['email'],
  properties: { email: { type: 'string', maxLength: 40 }, age: { type: 'integer' } },
};

function schemaFile(t: TestContext): string {
  const file = join(tempDir(t), 'users.schema.json');
  writeFileSync(file, JSON.stringify(SCHEMA));
  return file;
}

/** The 422 of a user without email: the schema is applied. */
async function assertApplied(server: TestServer): Promise<void> {
  const problem = assertProblem(
    await send(server.url, 'POST', '/users/new', { json: { name: 'No email' } }),
    422,
    'invalid-user',
  );
  assert.equal(problem.keyword, 'required');
  assert.equal(problem.field, 'email');
}

test('a backup carries the schema: a server on it applies it, and schema show gives it', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  assert.equal((await send(server.url, 'PUT', '/users/ann', { json: { name: 'Ann', email: 'a@x' } })).status, 201);
  const set = await runUsersServer(['schema', 'set', schemaFile(t), '--data', server.dataDir]);
  assert.equal(set.code, 0, set.stderr);
  const to = join(tempDir(t), 'backup');
  const backup = await runUsersServer(['backup', '--data', server.dataDir, '--to', to]);
  assert.equal(backup.code, 0, backup.stderr);
  const restored = await startTestServer(t, { data: to });
  await assertApplied(restored);
  assert.deepEqual(JSON.parse((await runUsersServer(['schema', 'show', '--data', to])).stdout), SCHEMA);
});

test('copy carries the schema from a data directory to a database and back, --check-existing no with it', async (t) => {
  const skip = postgresSkipReason();
  if (skip !== undefined) return t.skip(skip);
  const data = tempDir(t);
  const server = await startTestServer(t, { data });
  assert.equal((await send(server.url, 'PUT', '/users/old', { json: { name: 'Old' } })).status, 201);
  const set = await runUsersServer(['schema', 'set', schemaFile(t), '--check-existing', 'no', '--data', data]);
  assert.equal(set.code, 0, set.stderr);
  await server.running.stop();
  const url = await testDatabase(t);
  const copied = await runUsersServer(['copy', '--from', data, '--to', url]);
  assert.equal(copied.code, 0, copied.stderr);
  assert.match(copied.stdout, /the schema of the users' fields/);
  const onDatabase = await startTestServer(t, { store: url });
  await assertApplied(onDatabase);
  const shown = await runUsersServer(['schema', 'show', '--store', url]);
  assert.deepEqual(JSON.parse(shown.stdout), SCHEMA);
  assert.match(shown.stderr, /--check-existing no/, 'how it was set is carried too');
  await onDatabase.running.stop();
  const back = join(tempDir(t), 'back');
  const returned = await runUsersServer(['copy', '--from', url, '--to', back]);
  assert.equal(returned.code, 0, returned.stderr);
  const again = await runUsersServer(['schema', 'show', '--data', back]);
  assert.deepEqual(JSON.parse(again.stdout), SCHEMA);
  assert.match(again.stderr, /--check-existing no/);
});

/** The User schema of the server's OpenAPI document. */
async function userSchema(server: TestServer): Promise<Record<string, Record<string, unknown>>> {
  const reply = await send(server.url, 'GET', '/openapi.json');
  assert.equal(reply.status, 200);
  const document = reply.json() as { components: { schemas: Record<string, Record<string, unknown>> } };
  return document.components.schemas;
}

test('/openapi.json gives the schema as the user schema with the fixed rules once it is set, and the rules alone once removed', async (t) => {
  const store =
    process.env.USERS_TEST_STORE === 'postgres' ? await (await import('./postgres.js')).testDatabase(t) : 'memory';
  const server = await startTestServer(t, { store });
  const place = store.startsWith('postgres') ? ['--store', store] : ['--data', server.dataDir];
  const before = await userSchema(server);
  assert.deepEqual(before.User!.required, ['name']);
  assert.equal(before.UserFields, undefined);

  assert.equal((await runUsersServer(['schema', 'set', schemaFile(t), ...place])).code, 0);
  let schemas = await userSchema(server);
  while (schemas.UserFields === undefined) {
    await pause(25);
    schemas = await userSchema(server);
  }
  assert.deepEqual(schemas.UserFields, SCHEMA);
  const user = schemas.User as { allOf: Record<string, unknown>[] };
  const [rules, fields] = user.allOf;
  assert.deepEqual(rules!.required, ['name'], 'the fixed rules: a name');
  assert.deepEqual(Object.keys(rules!.properties as object), ['name', 'id']);
  assert.deepEqual(fields, { $ref: '#/components/schemas/UserFields' });

  assert.equal((await runUsersServer(['schema', 'remove', ...place])).code, 0);
  while ((await userSchema(server)).UserFields !== undefined) await pause(25);
  assert.deepEqual(await userSchema(server), before);
});
