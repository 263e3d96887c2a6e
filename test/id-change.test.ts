/**
 * API.md "Optional variant: client may change the id" (`--allow-id-change`,
 * config `allowIdChange: true`), and PUT rule 5 without it.
 *   1. A PUT whose body carries a different id moves the user to
 *      /users/{new}: 200, representation, Location /users/{new}. The new id
 *      must never have been issued (else 409); it is then issued.
 *   2. Any request to an old id answers 301 with Location naming the current
 *      URI (chains followed to the end). The alias follows the user.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import {
  put,
  rawExchange,
  send,
  startTestServer,
  type Reply,
  type TestServer,
  assertProblem,
  listText,
} from './helpers.js';

function get(server: TestServer, path: string): Promise<Reply> {
  return send(server.url, 'GET', path);
}

function assertMoved(reply: Reply, location: string, where: string): void {
  assert.equal(reply.status, 301, `${where}: expected 301, got ${reply.status}: ${reply.text}`);
  assert.equal(reply.headers.location, location, `${where}: Location`);
}

/** A server with allowIdChange and user 1 "Ann" created through the alias "ann". */
async function withAnn(t: TestContext, allowIdChange = true): Promise<TestServer> {
  const server = await startTestServer(t, { allowIdChange });
  const created = await put(server.url, '/users/ann', { name: 'Ann' });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers.location, '/users/1');
  return server;
}

test('id change: a PUT with a new id in the body moves the user: 200, the representation, Location /users/{new}', async (t) => {
  const server = await withAnn(t);
  const moved = await put(server.url, '/users/1', { name: 'Ann', role: 'x', id: 5 });
  assert.equal(moved.status, 200, moved.text);
  assert.equal(moved.headers.location, '/users/5');
  assert.equal(moved.text, '{"name":"Ann","role":"x","id":5}');
  const read = await get(server, '/users/5');
  assert.equal(read.status, 200);
  assert.equal(read.text, '{"name":"Ann","role":"x","id":5}');
  assert.equal(await listText(server), '{"items":[{"name":"Ann","role":"x","id":5}],"next":null}');
});

test('id change: after a move, GET, HEAD, PUT and DELETE on the old id answer 301 with Location /users/{new} and change nothing', async (t) => {
  const server = await withAnn(t);
  assert.equal((await put(server.url, '/users/1', { name: 'Ann', id: 5 })).status, 200);
  const before = await listText(server);
  assertMoved(await get(server, '/users/1'), '/users/5', 'GET');
  const head = await rawExchange(server.url, 'HEAD /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  assert.match(head, /^HTTP\/1\.1 301 /, 'HEAD');
  assert.match(head, /\r\nLocation: \/users\/5\r\n/i, 'HEAD Location');
  assertMoved(await put(server.url, '/users/1', { name: 'Overwrite' }), '/users/5', 'PUT');
  assertMoved(
    await put(server.url, '/users/1', { name: 'Overwrite', id: 1 }),
    '/users/5',
    'PUT with the old id in the body',
  );
  assertMoved(await send(server.url, 'DELETE', '/users/1'), '/users/5', 'DELETE');
  assert.equal(await listText(server), before);
  assert.equal((await get(server, '/users/5')).text, '{"name":"Ann","id":5}');
});

test('id change: any request to an old id answers 301, even a PUT whose body would be refused (415, 422)', async (t) => {
  const server = await withAnn(t);
  assert.equal((await put(server.url, '/users/1', { name: 'Ann', id: 5 })).status, 200);
  assertMoved(
    await send(server.url, 'PUT', '/users/1', { body: '{"name":"x"}', headers: { 'content-type': 'text/plain' } }),
    '/users/5',
    'PUT text/plain',
  );
  assertMoved(await put(server.url, '/users/1', { nick: 'no name' }), '/users/5', 'PUT without name');
});

test('id change: chains collapse: after 1 -> 5 -> 9, GET /users/1 and GET /users/5 answer 301 Location /users/9 directly', async (t) => {
  const server = await withAnn(t);
  assert.equal((await put(server.url, '/users/1', { name: 'Ann', id: 5 })).headers.location, '/users/5');
  const second = await put(server.url, '/users/5', { name: 'Ann', id: 9 });
  assert.equal(second.status, 200, second.text);
  assert.equal(second.headers.location, '/users/9');
  assertMoved(await get(server, '/users/1'), '/users/9', 'GET /users/1');
  assertMoved(await get(server, '/users/5'), '/users/9', 'GET /users/5');
  assertMoved(await send(server.url, 'DELETE', '/users/1'), '/users/9', 'DELETE /users/1');
  assert.equal((await get(server, '/users/9')).text, '{"name":"Ann","id":9}');
});

test('id change: a move through the alias works, and the alias follows the user to the new id', async (t) => {
  const server = await withAnn(t);
  const moved = await put(server.url, '/users/ann', { name: 'Ann', id: 7 });
  assert.equal(moved.status, 200, moved.text);
  assert.equal(moved.headers.location, '/users/7');
  const byAlias = await get(server, '/users/ann');
  assert.equal(byAlias.status, 200);
  assert.equal(byAlias.text, '{"name":"Ann","id":7}');
  assert.equal(byAlias.headers['content-location'], '/users/7');
  assertMoved(await get(server, '/users/1'), '/users/7', 'GET old id');
  // A PUT through the alias replaces the moved user, and does not create one.
  const replaced = await put(server.url, '/users/ann', { name: 'Ann 2' });
  assert.equal(replaced.status, 200);
  assert.equal(replaced.text, '{"name":"Ann 2","id":7}');
});

test('id change: after a move by id the alias names the user at the new id', async (t) => {
  const server = await withAnn(t);
  assert.equal((await put(server.url, '/users/1', { name: 'Ann', id: 3 })).status, 200);
  const byAlias = await get(server, '/users/ann');
  assert.equal(byAlias.headers['content-location'], '/users/3');
  assert.equal((await send(server.url, 'DELETE', '/users/ann')).status, 204);
  assert.equal(await listText(server), '{"items":[],"next":null}');
});

test('id change: the new id is issued by the move: no other move can take it and the server never issues it again', async (t) => {
  const server = await withAnn(t);
  assert.equal((await put(server.url, '/users/1', { name: 'Ann', id: 5 })).status, 200);
  // Only 5 was issued by the move, not the ids it skipped (API.md: "it is then issued").
  assertProblem(
    await put(server.url, '/users/3', { name: 'x' }),
    404,
    'not-found',
    'a skipped id is still never issued',
  );
  const issued: string[] = [];
  for (let i = 0; i < 3; i++)
    issued.push((await send(server.url, 'POST', '/users/new', { json: { name: `n${i}` } })).headers.location as string);
  issued.push((await send(server.url, 'POST', '/reservations')).headers.location as string);
  assert.ok(!issued.includes('/users/5'), `the server did not issue 5 again: ${issued.join(' ')}`);
  assert.equal(new Set(issued).size, issued.length, 'distinct ids');
  assertProblem(
    await put(server.url, issued[0]!, { name: 'n0', id: 5 }),
    409,
    'id-conflict',
    'another user cannot move to 5',
  );
  assert.equal((await get(server, '/users/5')).text, '{"name":"Ann","id":5}');
});

test('id change: the moved user gets a new ETag and a conditional move with a stale If-Match answers 412 without moving', async (t) => {
  const server = await withAnn(t);
  const etag = (await get(server, '/users/1')).headers.etag as string;
  assert.equal((await put(server.url, '/users/1', { name: 'Changed' })).status, 200);
  assertProblem(
    await put(server.url, '/users/1', { name: 'Ann', id: 5 }, { 'if-match': etag }),
    412,
    'precondition-failed',
  );
  assert.equal((await get(server, '/users/1')).status, 200);
  assert.equal((await get(server, '/users/5')).status, 404);
});

const issuedTargets: Array<{ name: string; setup: (server: TestServer) => Promise<void>; to: number }> = [
  {
    name: 'the id of another existing user',
    setup: async (s) =>
      assert.equal((await send(s.url, 'POST', '/users/new', { json: { name: 'Bob' } })).headers.location, '/users/2'),
    to: 2,
  },
  {
    name: 'a reserved id',
    setup: async (s) => assert.equal((await send(s.url, 'POST', '/reservations')).headers.location, '/users/2'),
    to: 2,
  },
  {
    name: 'the id of a deleted user',
    setup: async (s) => {
      assert.equal((await send(s.url, 'POST', '/users/new', { json: { name: 'Gone' } })).headers.location, '/users/2');
      assert.equal((await send(s.url, 'DELETE', '/users/2')).status, 204);
    },
    to: 2,
  },
  {
    name: 'an old id left behind by an earlier move',
    setup: async (s) => {
      assert.equal((await send(s.url, 'POST', '/users/new', { json: { name: 'Mover' } })).headers.location, '/users/2');
      assert.equal((await put(s.url, '/users/2', { name: 'Mover', id: 3 })).status, 200);
    },
    to: 2,
  },
];

for (const c of issuedTargets) {
  test(`id change: a move to ${c.name} (an id already issued) answers 409 id-conflict and changes nothing`, async (t) => {
    const server = await withAnn(t);
    await c.setup(server);
    const before = await listText(server);
    const ann = await get(server, '/users/1');
    assertProblem(await put(server.url, '/users/1', { name: 'Ann', id: c.to }), 409, 'id-conflict');
    assertProblem(
      await put(server.url, '/users/ann', { name: 'Ann', id: c.to }),
      409,
      'id-conflict',
      'through the alias',
    );
    assert.equal(await listText(server), before);
    const after = await get(server, '/users/1');
    assert.equal(after.status, 200);
    assert.equal(after.text, ann.text);
    assert.equal(after.headers.etag, ann.headers.etag);
  });
}

for (const id of [0, -3, 1.5, '"6"', 9007199254740992]) {
  test(`id change: a body id of ${String(id)} (not a positive safe integer) answers 422 invalid-user naming "id" and does not move`, async (t) => {
    const server = await withAnn(t);
    const reply = await send(server.url, 'PUT', '/users/1', {
      body: `{"name":"Ann","id":${String(id)}}`,
      headers: { 'content-type': 'application/json' },
    });
    const doc = assertProblem(reply, 422, 'invalid-user');
    assert.equal(doc.field, 'id');
    assert.equal((await get(server, '/users/1')).text, '{"name":"Ann","id":1}');
  });
}

test('id change: a body id equal to the current id is a plain replace (200, no Location)', async (t) => {
  const server = await withAnn(t);
  const reply = await put(server.url, '/users/1', { name: 'Ann 2', id: 1 });
  assert.equal(reply.status, 200);
  assert.equal(reply.headers.location, undefined);
  assert.equal((await get(server, '/users/1')).text, '{"name":"Ann 2","id":1}');
});

test('PUT rule 5 without the id-change variant: a different body id answers 409 id-conflict, moves nothing and issues no id', async (t) => {
  const server = await withAnn(t, false);
  const before = await listText(server);
  assertProblem(await put(server.url, '/users/1', { name: 'Ann', id: 5 }), 409, 'id-conflict', 'by id');
  assertProblem(await put(server.url, '/users/ann', { name: 'Ann', id: 5 }), 409, 'id-conflict', 'by alias');
  assert.equal(await listText(server), before);
  assert.equal((await get(server, '/users/1')).status, 200);
  assertProblem(await get(server, '/users/5'), 404, 'not-found');
  assert.equal((await send(server.url, 'POST', '/users/new', { json: { name: 'n' } })).headers.location, '/users/2');
});
