/**
 * The schema of the users' fields on every write (API.md "A schema for
 * the users' fields"), over real sockets on each store: the default one
 * (memory, or PostgreSQL with USERS_TEST_STORE=postgres) and the journal.
 * PUT, POST and PATCH (on the merged result) that break it answer 422
 * invalid-user with the first violation's field and keyword and every
 * violation in `errors`, and change nothing; a write that fits is kept.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as pause } from 'node:timers/promises';
import {
  assertProblem,
  put,
  runUsersServer,
  send,
  startTestServer,
  tempDir,
  type Reply,
  type TestServer,
} from './helpers.js';

const SCHEMA = {
  type: 'object',
  required: ['email'],
  properties: {
    email: { type: 'string', maxLength: 40 },
    age: { type: 'integer' },
    address: { type: 'object', properties: { city: { type: 'string', maxLength: 20 } } },
  },
};

/** The store a test runs on: the default one of the suite, or the journal. */
type Kind = 'default' | 'journal';

/** The `--data` or `--store` that names where `server` keeps its users, for users-server commands. */
interface Running {
  server: TestServer;
  place: string[];
}

async function startWithSchema(t: TestContext, kind: Kind): Promise<Running> {
  const store =
    kind === 'journal'
      ? 'journal'
      : process.env.USERS_TEST_STORE === 'postgres'
        ? await (await import('./postgres.js')).testDatabase(t)
        : 'memory';
  const server = await startTestServer(t, { store });
  const place = store.startsWith('postgres') ? ['--store', store] : ['--data', server.dataDir];
  const file = join(tempDir(t), 'users.schema.json');
  writeFileSync(file, JSON.stringify(SCHEMA));
  const set = await runUsersServer(['schema', 'set', file, ...place]);
  assert.equal(set.code, 0, set.stderr);
  await untilRefused(server);
  return { server, place };
}

/** Waits until the server refuses a user without email: at once on a data directory, within the poll of a database. */
async function untilRefused(server: TestServer): Promise<void> {
  for (;;) {
    const created = await send(server.url, 'POST', '/users/new', { json: { name: 'Probe' } });
    if (created.status === 422) return;
    assert.equal(created.status, 201, created.text);
    assert.equal((await send(server.url, 'DELETE', `/users/${(created.json() as { id: number }).id}`)).status, 204);
    await pause(25);
  }
}

function patch(server: TestServer, path: string, body: unknown) {
  return send(server.url, 'PATCH', path, {
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/merge-patch+json' },
  });
}

/** The 422 of a write that breaks the schema: its field and keyword, and every violation listed in errors. */
function assertBreaks(reply: Reply, expected: readonly { field: string; keyword: string }[]): void {
  const problem = assertProblem(reply, 422, 'invalid-user');
  assert.equal(problem.field, expected[0]!.field);
  assert.equal(problem.keyword, expected[0]!.keyword);
  assert.equal(typeof problem.detail, 'string');
  const errors = problem.errors as { field: string; keyword: string; detail: string }[];
  assert.deepEqual(
    errors.map(({ field, keyword }) => ({ field, keyword })),
    expected,
  );
  for (const error of errors) {
    assert.deepEqual(Object.keys(error).sort(), ['detail', 'field', 'keyword']);
    assert.ok(error.detail.length > 0, 'each violation says what is wrong');
  }
}

for (const kind of ['default', 'journal'] as const) {
  test(`${kind} store: PUT, POST and PATCH that break the schema answer 422 invalid-user listing every violation, and change nothing`, async (t) => {
    const { server } = await startWithSchema(t, kind);
    const ann = { name: 'Ann', email: 'ann@example.org', age: 30, address: { city: 'Oslo' } };
    const created = await put(server.url, '/users/ann', ann);
    assert.equal(created.status, 201, created.text);
    const { id } = created.json() as { id: number };
    const before = await send(server.url, 'GET', '/users/ann');

    assertBreaks(await send(server.url, 'PUT', '/users/ann', { json: { name: 'Ann', age: 'old' } }), [
      { field: 'email', keyword: 'required' },
      { field: 'age', keyword: 'type' },
    ]);
    assertBreaks(
      await send(server.url, 'POST', '/users/new', {
        json: { name: 'Bob', email: 'b'.repeat(41), address: { city: 7 } },
      }),
      [
        { field: 'email', keyword: 'maxLength' },
        { field: 'address.city', keyword: 'type' },
      ],
    );
    assertBreaks(await send(server.url, 'PUT', '/users/cy', { json: { name: 'Cy' } }), [
      { field: 'email', keyword: 'required' },
    ]);
    // The patch alone fits; the merged user does not: it is the result that is checked.
    assertBreaks(await patch(server, '/users/ann', { email: null, address: { city: 'x'.repeat(21) } }), [
      { field: 'email', keyword: 'required' },
      { field: 'address.city', keyword: 'maxLength' },
    ]);

    const after = await send(server.url, 'GET', '/users/ann');
    assert.equal(after.text, before.text, 'a refused write changes nothing');
    assert.equal(after.headers.etag, before.headers.etag);
    assert.equal((await send(server.url, 'GET', '/users/cy')).status, 404, 'a refused PUT creates nothing');
    const listed = (await send(server.url, 'GET', '/users')).json() as { items: { name: string }[] };
    assert.deepEqual(
      listed.items.map((u) => u.name),
      ['Ann'],
      'a refused POST creates nothing',
    );

    const patched = await patch(server, '/users/ann', { age: 31, address: { city: 'Bergen' } });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(JSON.parse(patched.text), { ...ann, age: 31, address: { city: 'Bergen' }, id });
    const posted = await send(server.url, 'POST', '/users/new', { json: { name: 'Dee', email: 'dee@example.org' } });
    assert.equal(posted.status, 201, posted.text);
  });

  test(`${kind} store: schema remove lets through what the schema refused, at once or within 2 s`, async (t) => {
    const { server, place } = await startWithSchema(t, kind);
    assertBreaks(await send(server.url, 'PUT', '/users/cy', { json: { name: 'Cy' } }), [
      { field: 'email', keyword: 'required' },
    ]);
    const removed = await runUsersServer(['schema', 'remove', ...place]);
    assert.equal(removed.code, 0, removed.stderr);
    for (;;) {
      const reply = await send(server.url, 'PUT', '/users/cy', { json: { name: 'Cy' } });
      if (reply.status === 201) break;
      assert.equal(reply.status, 422, reply.text);
      await pause(25);
    }
  });
}
