/**
 * The schema of the users' fields where test/schema-writes, schema-command
 * and schema-carried leave off, over real sockets: a write that breaks it
 * and another rule is answered by that rule, as without a schema; the
 * OpenAPI document with a schema passes a validator, changes its ETag and
 * points the schema's own references at where it sits; usersctl says each
 * violation on a line of its own; on PostgreSQL every instance refuses each
 * kind of write that breaks it and describes it in its document.
 *
 * The assertions name fields and keywords, never the validator's
 * sentences, which are json-schema/compile-schema.ts's to choose.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import { Validator } from '@seriousme/openapi-schema-validator';
import { EXIT } from '../cli/main.js';
import { buildOpenApi } from '../server/http/openapi.js';
import { startCliServer } from './cli-helpers.js';
import { assertProblem, runUsersServer, send, startTestServer, tempDir, type TestServer } from './helpers.js';
import { postgresSkipReason, testDatabase } from './postgres.js';

/** Email, age and address, with the keywords every validator of the schema applies. */
const SCHEMA = {
  type: 'object',
  required: ['email'],
  properties: {
    email: { type: 'string', maxLength: 40 },
    age: { type: 'integer' },
    address: {
      type: 'object',
      required: ['city'],
      properties: { city: { type: 'string', maxLength: 10 } },
    },
  },
};

const ANN = { name: 'Ann', email: 'ann@example.org', age: 41, address: { city: 'Oslo' } };
/** Breaks SCHEMA three times: email's type, age's type, address.city's length. */
const BROKEN = { name: 'Bob', email: 5, age: 'old', address: { city: 'Llanfairpwllgwyngyll' } };
const BROKEN_AT = [
  ['address.city', 'maxLength'],
  ['age', 'type'],
  ['email', 'type'],
];

function schemaFile(t: TestContext, schema: unknown = SCHEMA): string {
  const file = join(tempDir(t), 'users.schema.json');
  writeFileSync(file, typeof schema === 'string' ? schema : JSON.stringify(schema));
  return file;
}

const create = (server: TestServer, body: unknown) => send(server.url, 'POST', '/users/new', { json: body });

const patch = (server: TestServer, path: string, body: unknown) =>
  send(server.url, 'PATCH', path, {
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify(body),
  });

/** Asserts a 422 invalid-user of the schema, and returns its violations as [field, keyword], sorted. */
function violations(reply: Parameters<typeof assertProblem>[0]): string[][] {
  const problem = assertProblem(reply, 422, 'invalid-user');
  const errors = problem.errors as { field: string; keyword: string; detail: string }[];
  assert.ok(Array.isArray(errors) && errors.length > 0, reply.text);
  for (const e of errors) assert.ok(typeof e.detail === 'string' && e.detail !== '', reply.text);
  assert.deepEqual([problem.field, problem.keyword], [errors[0]!.field, errors[0]!.keyword]);
  assert.equal(typeof problem.detail, 'string');
  return errors.map((e) => [e.field, e.keyword]).sort((a, b) => a[0]!.localeCompare(b[0]!));
}

test('a write that breaks the schema and another rule is answered by that rule: 404, 412, 409 before 422', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  assert.equal((await send(server.url, 'PUT', '/users/ann', { json: ANN })).status, 201);
  assert.equal((await runUsersServer(['schema', 'set', schemaFile(t), '--data', server.dataDir])).code, 0);
  assertProblem(await patch(server, '/users/nobody', { email: 5 }), 404, 'not-found');
  assertProblem(await send(server.url, 'PUT', '/users/9', { json: BROKEN }), 404, 'not-found');
  assertProblem(
    await send(server.url, 'PUT', '/users/ann', { json: BROKEN, headers: { 'if-match': '"nope"' } }),
    412,
    'precondition-failed',
  );
  assertProblem(await send(server.url, 'PUT', '/users/1', { json: { ...BROKEN, id: 2 } }), 409, 'id-conflict');
  assertProblem(await create(server, { ...BROKEN, id: 5 }), 409, 'id-conflict');
  assert.deepEqual(violations(await send(server.url, 'PUT', '/users/ann', { json: BROKEN })), BROKEN_AT);
});

test('/openapi.json describes the user with the schema, merged with the fixed rules, from the moment it is set; a validator accepts it, and its ETag changes', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  const first = await send(server.url, 'GET', '/openapi.json');
  const fixed = first.json().components.schemas.User;
  assert.equal(fixed.allOf, undefined);
  assert.equal((await runUsersServer(['schema', 'set', schemaFile(t), '--data', server.dataDir])).code, 0);
  const stale = await send(server.url, 'GET', '/openapi.json', { headers: { 'if-none-match': first.headers.etag! } });
  assert.equal(stale.status, 200, 'the old ETag no longer matches');
  const doc = stale.json();
  assert.notEqual(stale.headers.etag, first.headers.etag);
  assert.deepEqual(doc.components.schemas.UserFields, SCHEMA);
  assert.deepEqual(doc.components.schemas.User.allOf, [
    { type: 'object', required: ['name'], properties: fixed.properties, additionalProperties: true },
    { $ref: '#/components/schemas/UserFields' },
  ]);
  const validator = new Validator();
  const result = await validator.validate(doc);
  assert.equal(result.valid, true, JSON.stringify(result.errors));
  assert.deepEqual(doc, server.running.app.openapi);
  assert.equal((await runUsersServer(['schema', 'remove', '--data', server.dataDir])).code, 0);
  const back = await send(server.url, 'GET', '/openapi.json', { headers: { 'if-none-match': first.headers.etag! } });
  assert.equal(back.status, 304);
});

test("the OpenAPI document points the schema's local references at where it sits, and leaves data alone", async (t) => {
  const server = await startTestServer(t);
  const document = {
    $defs: { city: { type: 'string' } },
    properties: { address: { $ref: '#/$defs/city' }, self: { $ref: '#' }, tag: { const: { $ref: '#/x' } } },
  };
  const doc = buildOpenApi(server.running.app.routes, { document, checkedExisting: true }) as {
    components: { schemas: Record<string, unknown> };
  };
  assert.deepEqual(doc.components.schemas.UserFields, {
    $defs: { city: { type: 'string' } },
    properties: {
      address: { $ref: '#/components/schemas/UserFields/$defs/city' },
      self: { $ref: '#/components/schemas/UserFields' },
      tag: { const: { $ref: '#/x' } },
    },
  });
  // The validator here takes any `$ref` member for a reference, data too: it checks the references alone.
  const { tag: _data, ...references } = document.properties;
  const checked = buildOpenApi(server.running.app.routes, {
    document: { ...document, properties: references },
    checkedExisting: true,
  });
  const result = await new Validator().validate(checked);
  assert.equal(result.valid, true, JSON.stringify(result.errors));
});

test('usersctl says each violation of the schema on a line of its own naming the field, exit 5; --json gives them as errors', async (t) => {
  const cli = await startCliServer(t, { store: 'journal' });
  assert.equal((await runUsersServer(['schema', 'set', schemaFile(t), '--data', cli.server.dataDir])).code, 0);
  const refused = await cli.run(['put', 'bob', '-f', '-'], { stdin: JSON.stringify(BROKEN) });
  assert.equal(refused.code, EXIT.conflict);
  const lines = refused.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 3, refused.stderr);
  for (const [field] of BROKEN_AT)
    assert.ok(
      lines.some((line) => line.startsWith(`usersctl: ${field}`)),
      `a line names ${field}: ${refused.stderr}`,
    );
  const json = await cli.run(['--json', 'put', 'bob', '-f', '-'], { stdin: JSON.stringify(BROKEN) });
  const record = JSON.parse(json.stderr) as { status: number; errors: { field: string; keyword: string }[] };
  assert.equal(record.status, 422);
  assert.deepEqual(record.errors.map((e) => [e.field, e.keyword]).sort(), BROKEN_AT);
});

// ------------------------------------------------------------ PostgreSQL

const skip = postgresSkipReason();

function pg(name: string, body: (t: TestContext) => Promise<void>): void {
  test(`PostgreSQL: ${name}`, async (t) => {
    if (skip !== undefined) return t.skip(skip);
    await body(t);
  });
}

/**
 * Waits until `server` refuses BROKEN: the poll of every instance, at most half a second apart. A user it takes is
 * deleted again.
 */
async function untilSchemaApplied(server: TestServer): Promise<void> {
  for (;;) {
    const reply = await send(server.url, 'PUT', '/users/probe', { json: BROKEN });
    if (reply.status === 422) return;
    assert.equal(reply.status, 201, reply.text);
    assert.equal((await send(server.url, 'DELETE', '/users/probe')).status, 204);
    await pause(25);
  }
}

pg(
  'every instance of a database refuses each kind of write that breaks the schema, and describes it in /openapi.json',
  async (t) => {
    const url = await testDatabase(t);
    const servers = [await startTestServer(t, { store: url }), await startTestServer(t, { store: url })];
    assert.equal((await send(servers[0]!.url, 'PUT', '/users/ann', { json: ANN })).status, 201);
    const set = await runUsersServer(['schema', 'set', schemaFile(t), '--store', url]);
    assert.equal(set.code, 0, set.stderr);
    for (const server of servers) {
      await untilSchemaApplied(server);
      // By id (the conditional write of a replace first), by alias, a create, a patch.
      assert.deepEqual(violations(await send(server.url, 'PUT', '/users/1', { json: BROKEN })), BROKEN_AT);
      assert.deepEqual(violations(await send(server.url, 'PUT', '/users/ann', { json: BROKEN })), BROKEN_AT);
      assert.deepEqual(violations(await create(server, BROKEN)), BROKEN_AT);
      assert.deepEqual(violations(await patch(server, '/users/ann', { email: null })), [['email', 'required']]);
      assert.deepEqual((await send(server.url, 'GET', '/openapi.json')).json().components.schemas.UserFields, SCHEMA);
      assert.equal((await patch(server, '/users/1', { age: 42 })).status, 200);
    }
    assert.equal((await send(servers[1]!.url, 'GET', '/users/1')).json().email, ANN.email);
  },
);
