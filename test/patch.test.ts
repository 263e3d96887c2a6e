/**
 * PATCH /users/{ref} with a JSON merge patch (RFC 7396): merged into the
 * user inside the store's write and checked as a PUT body, never creating;
 * its preconditions, media types, id rules and the feed. Real sockets, on
 * the default store (memory, or PostgreSQL with USERS_TEST_STORE) and on the
 * journal across a restart.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertProblem, put, runUsersServer, send, startTestServer, tempDir } from './helpers.js';
import { APPENDIX_A } from './merge-patch-examples.js';

const MERGE = { 'content-type': 'application/merge-patch+json' };

function patch(base: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  return send(base, 'PATCH', path, { body: JSON.stringify(body), headers: { ...MERGE, ...headers } });
}

const isObject = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value);

for (const store of ['default', 'journal'] as const) {
  test(`PATCH over real sockets (${store} store): each example of RFC 7396 appendix A on an object user gives its result, with the name kept; a patch that makes no object is 422 and changes nothing`, async (t) => {
    const server = await startTestServer(t, store === 'journal' ? { store } : {});
    for (const [i, [original, mergePatch, result]] of APPENDIX_A.entries()) {
      if (!isObject(original)) continue;
      const path = `/users/example-${i + 1}`;
      assert.equal((await put(server.url, path, { name: 'N', ...(original as object) })).status, 201);
      const reply = await patch(server.url, path, mergePatch);
      const now = (await send(server.url, 'GET', path)).json();
      if (isObject(result)) {
        assert.equal(reply.status, 200, `example ${i + 1}: ${reply.text}`);
        assert.deepEqual(now, { name: 'N', ...(result as object), id: now.id }, `example ${i + 1}`);
      } else {
        assertProblem(reply, 422, 'invalid-user');
        assert.deepEqual(now, { name: 'N', ...(original as object), id: now.id }, `example ${i + 1} changed nothing`);
      }
    }
  });
}

test('PATCH merges: a member set, one removed by null, a nested object merged, an array replaced; 200 with the user and Content-Location, and GET gives its ETag', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/bob', {
    name: 'Bob',
    email: 'b@x',
    nick: 'bb',
    address: { city: 'Oslo', zip: '1' },
    tags: [1, 2],
  });
  const reply = await patch(server.url, '/users/bob', {
    email: 'bob@x',
    nick: null,
    address: { city: 'Bergen' },
    tags: [3],
  });
  assert.equal(reply.status, 200, reply.text);
  assert.deepEqual(JSON.parse(reply.text), {
    name: 'Bob',
    email: 'bob@x',
    address: { city: 'Bergen', zip: '1' },
    tags: [3],
    id: 1,
  });
  const got = await send(server.url, 'GET', '/users/1');
  assert.equal(got.text, reply.text);
  assert.equal(
    reply.headers.etag,
    undefined,
    'the patch is not the representation: no validator (RFC 9110 section 9.3.4)',
  );
  assert.equal(reply.headers['content-location'], '/users/1');
});

test('PATCH is idempotent: the same patch twice leaves the same user and the same ETag', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/ann', { name: 'Ann' });
  const first = await patch(server.url, '/users/ann', { email: 'a@x' });
  const etag = (await send(server.url, 'GET', '/users/ann')).headers.etag;
  const second = await patch(server.url, '/users/ann', { email: 'a@x' });
  assert.equal(second.status, 200);
  assert.equal(second.text, first.text);
  assert.equal((await send(server.url, 'GET', '/users/ann')).headers.etag, etag);
});

test('PATCH never creates: an alias or an id that names nobody is 404, and nothing is made', async (t) => {
  const server = await startTestServer(t);
  assertProblem(await patch(server.url, '/users/ghost', { name: 'G' }), 404, 'not-found');
  assertProblem(await patch(server.url, '/users/7', { name: 'G' }), 404, 'not-found');
  assert.equal((await send(server.url, 'GET', '/users/ghost')).status, 404);
  // A reserved id is no user yet: PATCH does not create it either.
  const reserved = JSON.parse((await send(server.url, 'POST', '/reservations')).text).id as number;
  assertProblem(await patch(server.url, `/users/${reserved}`, { name: 'R' }), 404, 'not-found');
});

test('PATCH with If-Match: the current ETag applies, an old one is 412 and changes nothing; --require-if-match makes it 428', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/cy', { name: 'Cy' });
  const etag = (await send(server.url, 'GET', '/users/cy')).headers.etag as string;
  assert.equal((await patch(server.url, '/users/cy', { a: 1 }, { 'if-match': etag })).status, 200);
  assertProblem(await patch(server.url, '/users/cy', { a: 2 }, { 'if-match': etag }), 412, 'precondition-failed');
  assert.equal(JSON.parse((await send(server.url, 'GET', '/users/cy')).text).a, 1);
  const strict = await startTestServer(t, { requireIfMatch: true });
  await put(strict.url, '/users/cy', { name: 'Cy' });
  assertProblem(await patch(strict.url, '/users/cy', { a: 1 }), 428, 'precondition-required');
  const current = (await send(strict.url, 'GET', '/users/cy')).headers.etag as string;
  assert.equal((await patch(strict.url, '/users/cy', { a: 1 }, { 'if-match': current })).status, 200);
});

test('PATCH takes application/merge-patch+json only: another type is 415 with Accept-Patch; OPTIONS and 405 list PATCH', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/dee', { name: 'Dee' });
  for (const type of [
    'application/json',
    'application/json-patch+json',
    'text/plain',
    'application/merge-patch+json; charset=latin1',
  ]) {
    const reply = await send(server.url, 'PATCH', '/users/dee', { body: '{"a":1}', headers: { 'content-type': type } });
    assertProblem(reply, 415, 'unsupported-media-type', type);
    assert.equal(reply.headers['accept-patch'], 'application/merge-patch+json', type);
  }
  const ok = await send(server.url, 'PATCH', '/users/dee', {
    body: '{"a":1}',
    headers: { 'content-type': 'application/merge-patch+json; charset=utf-8' },
  });
  assert.equal(ok.status, 200);
  const options = await send(server.url, 'OPTIONS', '/users/dee');
  assert.match(options.headers.allow as string, /\bPATCH\b/);
  assert.equal(options.headers['accept-patch'], 'application/merge-patch+json');
  const notAllowed = await send(server.url, 'POST', '/users/dee', { json: {} });
  assert.match(notAllowed.headers.allow as string, /\bPATCH\b/);
});

test('PATCH checks the result as a PUT body: a name removed or emptied, a patch that is no object, bad JSON, too deep; nothing changes', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/eve', { name: 'Eve' });
  const before = (await send(server.url, 'GET', '/users/eve')).text;
  const noName = assertProblem(await patch(server.url, '/users/eve', { name: null }), 422, 'invalid-user');
  assert.equal(noName.field, 'name');
  assertProblem(await patch(server.url, '/users/eve', { name: '' }), 422, 'invalid-user');
  assertProblem(await patch(server.url, '/users/eve', ['x']), 422, 'invalid-user');
  const polluting = await send(server.url, 'PATCH', '/users/eve', {
    body: '{"bad":{"__proto__":{"x":1}}}',
    headers: MERGE,
  });
  assertProblem(polluting, 422, 'invalid-user');
  const raw = await send(server.url, 'PATCH', '/users/eve', { body: '{"a":', headers: MERGE });
  assertProblem(raw, 400, 'invalid-json');
  let deep = '1';
  for (let i = 0; i < 1000; i++) deep = `{"a":${deep}}`;
  assertProblem(await send(server.url, 'PATCH', '/users/eve', { body: deep, headers: MERGE }), 422, 'invalid-user');
  assert.equal((await send(server.url, 'GET', '/users/eve')).text, before);
});

test('PATCH and the id: the same id is fine, another is 409 id-conflict; under --allow-id-change it moves the user (Location)', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/fay', { name: 'Fay' });
  assert.equal((await patch(server.url, '/users/fay', { id: 1, x: 1 })).status, 200);
  assertProblem(await patch(server.url, '/users/fay', { id: 5 }), 409, 'id-conflict');
  const moving = await startTestServer(t, { allowIdChange: true });
  await put(moving.url, '/users/fay', { name: 'Fay' });
  const moved = await patch(moving.url, '/users/fay', { id: 50 });
  assert.equal(moved.status, 200, moved.text);
  assert.equal(moved.headers.location, '/users/50');
  assert.equal(JSON.parse((await send(moving.url, 'GET', '/users/50')).text).name, 'Fay');
});

test('PATCH under --require-session writes needs a session that may write (401 without one), like PUT', async (t) => {
  const server = await startTestServer(t, { requireSession: 'writes' });
  assert.equal((await send(server.url, 'GET', '/users/1')).status, 404);
  const refused = await patch(server.url, '/users/1', { a: 1 });
  assertProblem(refused, 401, 'unauthorized');
});

test('PATCH writes a put to the feed of changes with the new representation', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/gus', { name: 'Gus' });
  const patched = await patch(server.url, '/users/gus', { mood: 'fine' });
  const lines = (await send(server.url, 'GET', '/changes?since=0')).text.split('\n').filter((l) => l !== '');
  const last = JSON.parse(lines[lines.length - 1]!);
  assert.equal(last.op, 'put');
  assert.deepEqual(last.user, JSON.parse(patched.text));
});

test('journal: a PATCH survives a restart', async (t) => {
  const data = tempDir(t);
  const first = await startTestServer(t, { data });
  await put(first.url, '/users/hal', { name: 'Hal' });
  const patched = await patch(first.url, '/users/hal', { role: 'ops' });
  await first.running.stop();
  const second = await startTestServer(t, { data });
  assert.equal((await send(second.url, 'GET', '/users/hal')).text, patched.text);
});

test('journal: PATCH to a value another user holds at a unique field is 409 unique-violation naming the field and that user; nothing changes', async (t) => {
  const server = await startTestServer(t, { store: 'journal' });
  await put(server.url, '/users/ann', { name: 'Ann', email: 'ann@example.org' });
  await put(server.url, '/users/bob', { name: 'Bob', email: 'bob@example.org' });
  assert.equal(
    (await runUsersServer(['index', 'add', 'email', '--unique', '--case-insensitive', '--data', server.dataDir])).code,
    0,
  );
  const before = (await send(server.url, 'GET', '/users/bob')).text;
  const taken = assertProblem(
    await patch(server.url, '/users/bob', { email: 'ANN@example.org' }),
    409,
    'unique-violation',
  );
  assert.equal(taken.field, 'email');
  assert.equal(taken.conflictsWith, '/users/1');
  assert.equal((await send(server.url, 'GET', '/users/bob')).text, before);
  assert.equal((await patch(server.url, '/users/bob', { email: 'robert@example.org' })).status, 200);
});
