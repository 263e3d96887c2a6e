/**
 * The schema of the users' fields (docs/operations.md "A schema for the
 * users' fields") as an operator and a client meet it, over real sockets:
 * `users-server schema set|show|remove` on a data directory, applied by the
 * server running on it; every write (PUT, PATCH, POST) that breaks it
 * answered 422 invalid-user with every violation, nothing changed; a
 * schema the server cannot apply refused with its keyword and place; set
 * over users that break it refused naming them, unless --check-existing no;
 * a restart, a backup and /openapi.json keep it; usersctl says each
 * violation on a line. On PostgreSQL: every instance applies a change
 * within its poll, and copy carries the schema both ways.
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

async function userCount(server: TestServer): Promise<number> {
  const reply = await send(server.url, 'GET', '/users?count=true&filter=name%20pr');
  return (reply.json() as { total: number }).total;
}

test('schema set on a running server: PUT, PATCH and POST that break it answer 422 with every violation and change nothing; schema show prints it; schema remove lifts it', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  const dir = server.dataDir;
  assert.equal((await send(server.url, 'PUT', '/users/ann', { json: ANN })).status, 201);
  assert.deepEqual(await runUsersServer(['schema', 'show', '--data', dir]), {
    code: 0,
    stdout: `no schema is set in ${dir}\n`,
    stderr: '',
  });
  const file = schemaFile(t);
  assert.deepEqual(await runUsersServer(['schema', 'set', file, '--data', dir]), {
    code: 0,
    stdout: `set the schema of the users' fields in ${dir}\n`,
    stderr: '',
  });
  const shown = await runUsersServer(['schema', 'show', '--data', dir]);
  assert.deepEqual([shown.code, JSON.parse(shown.stdout), shown.stderr], [0, SCHEMA, '']);
  assert.equal(
    (await runUsersServer(['schema', 'set', file, '--data', dir])).stdout,
    `${dir} has this schema already: nothing changed\n`,
  );

  const before = await send(server.url, 'GET', '/users/ann');
  assert.deepEqual(violations(await send(server.url, 'PUT', '/users/ann', { json: BROKEN })), BROKEN_AT);
  assert.deepEqual(violations(await send(server.url, 'PUT', '/users/bob', { json: BROKEN })), BROKEN_AT);
  assert.deepEqual(violations(await create(server, BROKEN)), BROKEN_AT);
  assert.deepEqual(violations(await create(server, { name: 'Cy' })), [['email', 'required']]);
  // A PATCH is checked on the user it makes: the merge, not the patch alone.
  assert.deepEqual(violations(await patch(server, '/users/ann', { address: { city: 'Llanfairpwllgwyngyll' } })), [
    ['address.city', 'maxLength'],
  ]);
  assert.deepEqual(violations(await patch(server, '/users/1', { email: null })), [['email', 'required']]);
  const after = await send(server.url, 'GET', '/users/ann');
  assert.deepEqual([after.text, after.headers.etag], [before.text, before.headers.etag]);
  assert.equal(await userCount(server), 1);
  assertProblem(await send(server.url, 'GET', '/users/bob'), 404, 'not-found');
  // The other rules answer first, as they would without a schema.
  assertProblem(await patch(server, '/users/nobody', { email: 5 }), 404, 'not-found');
  assertProblem(
    await send(server.url, 'PUT', '/users/ann', { json: BROKEN, headers: { 'if-match': '"nope"' } }),
    412,
    'precondition-failed',
  );

  assert.equal((await patch(server, '/users/ann', { age: 42 })).status, 200);
  assert.equal((await create(server, { name: 'Cy', email: 'cy@example.org' })).status, 201);
  assert.deepEqual(await runUsersServer(['schema', 'remove', '--data', dir]), {
    code: 0,
    stdout: `removed the schema of the users' fields from ${dir}\n`,
    stderr: '',
  });
  assert.equal((await send(server.url, 'PUT', '/users/bob', { json: BROKEN })).status, 201);
  assert.equal(
    (await runUsersServer(['schema', 'remove', '--data', dir])).stdout,
    `no schema is set in ${dir}: nothing changed\n`,
  );
});

for (const running of [true, false])
  test(`schema set over users that break it is refused, naming how many and the first ten with their paths, and nothing changes; --check-existing no sets it for new writes only (${running ? 'a running server' : 'no server running'})`, async (t) => {
    const server = await startTestServer(t, { store: 'journal' });
    const dir = server.dataDir;
    for (let i = 1; i <= 12; i++) {
      const user = i === 3 ? { name: 'n3', email: 'x', age: 'old', address: {} } : { name: `n${i}`, email: 'x' };
      assert.equal((await create(server, i % 4 === 1 ? ANN : user)).status, 201);
    }
    if (!running) await server.running.stop();
    const file = schemaFile(t, { ...SCHEMA, required: ['email', 'age'] });
    const refused = await runUsersServer(['schema', 'set', file, '--data', dir]);
    assert.deepEqual(refused, {
      code: 1,
      stdout: '',
      stderr:
        'users-server schema: 9 users break the schema: users 2 (age), 3 (address.city, age), 4 (age), 6 (age), 7 (age), 8 (age), 10 (age), 11 (age), 12 (age); change them first, or set it with --check-existing no to check only what is written from now on; nothing was changed\n',
    });
    assert.equal((await runUsersServer(['schema', 'show', '--data', dir])).stdout, `no schema is set in ${dir}\n`);
    const unchecked = await runUsersServer(['schema', 'set', file, '--check-existing', 'no', '--data', dir]);
    assert.equal(
      unchecked.stdout,
      `set the schema of the users' fields in ${dir} (the users written before were not checked against it)\n`,
    );
    const shown = await runUsersServer(['schema', 'show', '--data', dir]);
    assert.deepEqual(JSON.parse(shown.stdout), { ...SCHEMA, required: ['email', 'age'] });
    assert.equal(
      shown.stderr,
      'users-server schema: set with --check-existing no: users written before it were not checked and may break it\n',
    );
    const serving = running ? server : await startTestServer(t, { data: dir });
    assert.equal((await send(serving.url, 'GET', '/users/2')).status, 200);
    assert.deepEqual(violations(await patch(serving, '/users/2', { name: 'n2 again' })), [['age', 'required']]);
    assert.equal((await patch(serving, '/users/2', { age: 30 })).status, 200);
  });

test('more than ten users that break a schema: the count, and the first ten by id', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  for (let i = 1; i <= 13; i++) assert.equal((await create(server, { name: `n${i}` })).status, 201);
  const refused = await runUsersServer(['schema', 'set', schemaFile(t), '--data', server.dataDir]);
  assert.equal(refused.code, 1);
  assert.match(
    refused.stderr,
    /^users-server schema: 13 users break the schema, the first 10: users 1 \(email\), 2 \(email\), .*, 10 \(email\); change them first/,
  );
});

test('schema set refuses a file that is not a schema the server applies, naming the keyword and where it is, and one that is not JSON; usage errors exit 2', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  const dir = server.dataDir;
  const unknown = await runUsersServer([
    'schema',
    'set',
    schemaFile(t, { type: 'object', properties: { email: { frobnicate: true } } }),
    '--data',
    dir,
  ]);
  assert.deepEqual([unknown.code, unknown.stdout], [1, '']);
  assert.match(
    unknown.stderr,
    /^users-server schema: .*users\.schema\.json: the schema is refused at \/properties\/email/,
  );
  assert.match(unknown.stderr, /frobnicate.*; nothing was changed\n$/);
  assert.equal(unknown.stderr.split('\n').length, 2, 'one line');
  const notJson = await runUsersServer(['schema', 'set', schemaFile(t, '{"type": '), '--data', dir]);
  assert.equal(notJson.code, 1);
  assert.match(notJson.stderr, /users\.schema\.json is not JSON \(.*\); nothing was changed\n$/);
  const missing = await runUsersServer(['schema', 'set', join(dir, 'nope.json'), '--data', dir]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /nope\.json/);
  assert.equal((await runUsersServer(['schema', 'show', '--data', dir])).stdout, `no schema is set in ${dir}\n`);
  const cases: [string[], RegExp][] = [
    [['schema', 'set', '--data', dir], /schema set takes exactly one FILE/],
    [['schema', 'show', 'x.json', '--data', dir], /schema show takes no FILE, got "x\.json"/],
    [['schema', 'remove', '--check-existing', 'no', '--data', dir], /schema remove takes no --check-existing/],
    [['schema', 'set', 'x.json', '--check-existing', 'maybe', '--data', dir], /--check-existing must be yes or no/],
    [['schema', 'drop'], /unknown schema command "drop"/],
  ];
  for (const [args, message] of cases) {
    const run = await runUsersServer(args);
    assert.deepEqual([run.code, run.stderr.split('\n').length], [2, 2], args.join(' '));
    assert.match(run.stderr, message);
  }
  assert.match((await runUsersServer(['schema', '--help'])).stdout, /^usage: users-server schema set FILE/);
});

test('a restart and a backup keep the schema: a server on either refuses a user that breaks it', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  const dir = server.dataDir;
  assert.equal((await runUsersServer(['schema', 'set', schemaFile(t), '--data', dir])).code, 0);
  const to = join(tempDir(t), 'backup');
  assert.equal((await runUsersServer(['backup', '--data', dir, '--to', to])).code, 0);
  await server.running.stop();
  for (const data of [dir, to]) {
    const again = await startTestServer(t, { data });
    assert.deepEqual(violations(await create(again, BROKEN)), BROKEN_AT);
    assert.equal((await create(again, ANN)).status, 201);
  }
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
 * Waits until `server` refuses BROKEN (`applied`) or takes it: the poll of
 * every instance, at most half a second apart. A user it takes is deleted again.
 */
async function untilSchemaApplied(server: TestServer, applied: boolean): Promise<void> {
  for (;;) {
    const reply = await send(server.url, 'PUT', '/users/probe', { json: BROKEN });
    if (reply.status < 300) assert.equal((await send(server.url, 'DELETE', '/users/probe')).status, 204);
    else assert.equal(reply.status, 422, reply.text);
    if ((reply.status === 422) === applied) return;
    await pause(25);
  }
}

pg(
  'schema set --store: every running instance applies it without a restart, refusing each kind of write; the refusal over existing users; show and remove',
  async (t) => {
    const url = await testDatabase(t);
    const servers = [await startTestServer(t, { store: url }), await startTestServer(t, { store: url })];
    assert.equal((await send(servers[0]!.url, 'PUT', '/users/ann', { json: ANN })).status, 201);
    assert.equal((await create(servers[0]!, { name: 'Bob' })).status, 201);
    const file = schemaFile(t);
    const refused = await runUsersServer(['schema', 'set', file, '--store', url]);
    assert.deepEqual([refused.code, refused.stdout], [1, '']);
    assert.match(refused.stderr, /^users-server schema: 1 user breaks the schema: user 2 \(email\); change them first/);
    assert.equal((await patch(servers[0]!, '/users/2', { email: 'bob@example.org' })).status, 200);
    const set = await runUsersServer(['schema', 'set', file, '--store', url]);
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /^set the schema of the users' fields in /);
    for (const server of servers) {
      await untilSchemaApplied(server, true);
      assert.deepEqual(violations(await send(server.url, 'PUT', '/users/1', { json: BROKEN })), BROKEN_AT);
      assert.deepEqual(violations(await send(server.url, 'PUT', '/users/cy', { json: BROKEN })), BROKEN_AT);
      assert.deepEqual(violations(await create(server, BROKEN)), BROKEN_AT);
      assert.deepEqual(violations(await patch(server, '/users/ann', { email: null })), [['email', 'required']]);
      assert.deepEqual((await send(server.url, 'GET', '/openapi.json')).json().components.schemas.UserFields, SCHEMA);
    }
    assert.equal((await send(servers[1]!.url, 'GET', '/users/1')).json().email, ANN.email);
    assert.deepEqual(JSON.parse((await runUsersServer(['schema', 'show', '--store', url])).stdout), SCHEMA);
    assert.equal((await runUsersServer(['schema', 'remove', '--store', url])).code, 0);
    for (const server of servers) await untilSchemaApplied(server, false);
  },
);

pg('copy carries the schema from a data directory to a database and back', async (t) => {
  const data = tempDir(t);
  const server = await startTestServer(t, { data });
  assert.equal((await create(server, ANN)).status, 201);
  assert.equal(
    (await runUsersServer(['schema', 'set', schemaFile(t), '--check-existing', 'no', '--data', data])).code,
    0,
  );
  await server.running.stop();
  const url = await testDatabase(t);
  const copied = await runUsersServer(['copy', '--from', data, '--to', url]);
  assert.equal(copied.code, 0, copied.stderr);
  assert.match(copied.stdout, /the schema of the users' fields/);
  const onDatabase = await startTestServer(t, { store: url });
  assert.deepEqual(violations(await create(onDatabase, BROKEN)), BROKEN_AT);
  await onDatabase.running.stop();
  const back = join(tempDir(t), 'back');
  assert.equal((await runUsersServer(['copy', '--from', url, '--to', back])).code, 0);
  const shown = await runUsersServer(['schema', 'show', '--data', back]);
  assert.deepEqual(JSON.parse(shown.stdout), SCHEMA);
  assert.match(shown.stderr, /set with --check-existing no/);
});
