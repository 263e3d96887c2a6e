/**
 * API.md "Endpoints": POST /users/new and POST /reservations, and the
 * reservation cap of "Reservations and Idempotency-Key" (restart parts are
 * left to the durable-store issue).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { put, send, startTestServer, type Reply, type TestServer, assertProblem, listText } from './helpers.js';

// RFC 3339 section 5.6 date-time, in UTC ("Z"), fractional seconds optional.
const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
// A fixed instant on a whole second, for the injectable clock.
const T0 = Date.UTC(2031, 4, 6, 7, 8, 9);

function postNew(server: TestServer, body: string, headers: Record<string, string> = {}): Promise<Reply> {
  return send(server.url, 'POST', '/users/new', { body, headers: { 'content-type': 'application/json', ...headers } });
}

function reserve(server: TestServer, headers: Record<string, string> = {}): Promise<Reply> {
  return send(server.url, 'POST', '/reservations', { headers });
}

function idOf(reply: Reply): number {
  assert.equal(reply.status, 201, reply.text);
  const id = (reply.json() as { id: unknown }).id;
  assert.ok(
    typeof id === 'number' && Number.isSafeInteger(id) && id > 0,
    `id ${String(id)} is a positive safe integer`,
  );
  assert.equal(reply.headers.location, `/users/${id}`);
  return id;
}

// ---------------------------------------------------------------- POST /users/new

test('POST /users/new answers 201 with Location /users/{id} and the representation: the body as sent with id appended', async (t) => {
  const server = await startTestServer(t);
  const created = await postNew(server, '{"name":"Ann","team":{"lead":true},"tags":["a","b"]}');
  assert.equal(created.status, 201);
  assert.equal(created.headers.location, '/users/1');
  assert.match(String(created.headers['content-type']), /^application\/json/);
  assert.equal(created.text, '{"name":"Ann","team":{"lead":true},"tags":["a","b"],"id":1}');
  const read = await send(server.url, 'GET', '/users/1');
  assert.equal(read.status, 200);
  assert.equal(read.text, created.text);
});

test('POST /users/new accepts a +json media type with charset=utf-8 (RFC 6839)', async (t) => {
  const server = await startTestServer(t);
  const created = await postNew(server, '{"name":"Vnd"}', {
    'content-type': 'application/vnd.example+json; charset=utf-8',
  });
  assert.equal(created.status, 201, created.text);
  assert.deepEqual(created.json(), { name: 'Vnd', id: 1 });
});

test('POST /users/new issues monotonic ids, and an id freed by DELETE is never reused', async (t) => {
  const server = await startTestServer(t);
  const ids: number[] = [];
  for (const name of ['a', 'b', 'c', 'd']) ids.push(idOf(await postNew(server, JSON.stringify({ name }))));
  assert.deepEqual(ids, [1, 2, 3, 4]);
  const deleted = await send(server.url, 'DELETE', '/users/4');
  assert.equal(deleted.status, 204);
  assert.equal(idOf(await postNew(server, '{"name":"e"}')), 5);
});

for (const body of ['{"name":"x","id":1}', '{"id":7,"name":"x"}']) {
  test(`POST /users/new with an id in the body (${body}) answers 409 id-conflict and creates nothing`, async (t) => {
    const server = await startTestServer(t);
    const before = await listText(server);
    assertProblem(await postNew(server, body), 409, 'id-conflict');
    assert.equal(await listText(server), before);
    // No id was consumed by the refused request.
    assert.equal(idOf(await postNew(server, '{"name":"ok"}')), 1);
  });
}

const badBodies: Array<{
  name: string;
  body: string;
  contentType?: string;
  status: number;
  code: string;
  field?: string;
}> = [
  { name: 'malformed JSON', body: '{"name":', status: 400, code: 'invalid-json' },
  { name: 'an empty body', body: '', status: 400, code: 'invalid-json' },
  { name: 'trailing garbage after the JSON', body: '{"name":"x"} x', status: 400, code: 'invalid-json' },
  {
    name: 'Content-Type text/plain',
    body: '{"name":"x"}',
    contentType: 'text/plain',
    status: 415,
    code: 'unsupported-media-type',
  },
  {
    name: 'a form-encoded Content-Type',
    body: 'name=x',
    contentType: 'application/x-www-form-urlencoded',
    status: 415,
    code: 'unsupported-media-type',
  },
  {
    name: 'application/json with charset=iso-8859-1',
    body: '{"name":"x"}',
    contentType: 'application/json; charset=iso-8859-1',
    status: 415,
    code: 'unsupported-media-type',
  },
  { name: 'a JSON array', body: '[{"name":"x"}]', status: 422, code: 'invalid-user' },
  { name: 'a JSON string', body: '"x"', status: 422, code: 'invalid-user' },
  { name: 'JSON null', body: 'null', status: 422, code: 'invalid-user' },
  { name: 'an object without name', body: '{"nick":"x"}', status: 422, code: 'invalid-user', field: 'name' },
  { name: 'an empty name', body: '{"name":""}', status: 422, code: 'invalid-user', field: 'name' },
  { name: 'a name that is not a string', body: '{"name":42}', status: 422, code: 'invalid-user', field: 'name' },
  {
    name: 'a name of 201 characters',
    body: JSON.stringify({ name: 'n'.repeat(201) }),
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
  {
    name: 'a name with a control character',
    body: '{"name":"a\\u0007b"}',
    status: 422,
    code: 'invalid-user',
    field: 'name',
  },
];

for (const c of badBodies) {
  test(`POST /users/new with ${c.name} answers ${c.status} ${c.code} and creates nothing`, async (t) => {
    const server = await startTestServer(t);
    const before = await listText(server);
    const reply = await postNew(server, c.body, c.contentType === undefined ? {} : { 'content-type': c.contentType });
    const doc = assertProblem(reply, c.status, c.code);
    if (c.field !== undefined) assert.equal(doc.field, c.field);
    assert.equal(await listText(server), before);
    assert.equal(idOf(await postNew(server, '{"name":"ok"}')), 1);
  });
}

test('POST /users/new without a Content-Type answers 415 unsupported-media-type and creates nothing', async (t) => {
  const server = await startTestServer(t);
  assertProblem(await send(server.url, 'POST', '/users/new', { body: '{"name":"x"}' }), 415, 'unsupported-media-type');
  assert.equal(idOf(await postNew(server, '{"name":"ok"}')), 1);
});

// ---------------------------------------------------------------- POST /reservations

test('POST /reservations answers 201, Location /users/{id} and exactly {"id":N,"expiresAt":<RFC 3339 UTC>} at now + reservationTtl', async (t) => {
  const server = await startTestServer(t, { reservationTtl: 300 }, { clock: () => T0 });
  const reply = await reserve(server);
  assert.equal(reply.status, 201, reply.text);
  assert.equal(reply.headers.location, '/users/1');
  assert.match(String(reply.headers['content-type']), /^application\/json/);
  const body = reply.json() as Record<string, unknown>;
  assert.deepEqual(Object.keys(body), ['id', 'expiresAt']);
  assert.equal(body.id, 1);
  assert.equal(typeof body.expiresAt, 'string');
  assert.match(body.expiresAt as string, RFC3339_UTC);
  assert.equal(Date.parse(body.expiresAt as string), T0 + 300_000);
});

test('POST /reservations on the real clock: expiresAt is about now + the default reservationTtl of 300 s', async (t) => {
  const server = await startTestServer(t);
  const before = Date.now();
  const reply = await reserve(server);
  const after = Date.now();
  assert.equal(reply.status, 201, reply.text);
  const { expiresAt } = reply.json() as { expiresAt: string };
  assert.match(expiresAt, RFC3339_UTC);
  const at = Date.parse(expiresAt);
  // Allow the server to round down to whole seconds.
  assert.ok(at >= before + 300_000 - 1000 && at <= after + 300_000, `${expiresAt} is within [now+300s] of the request`);
});

test('POST /reservations ignores its body: a JSON body, another non-form body or none all reserve (form content is refused: csrf.test.ts)', async (t) => {
  const server = await startTestServer(t);
  assert.equal(idOf(await send(server.url, 'POST', '/reservations', { json: { name: 'ignored', id: 99 } })), 1);
  assert.equal(
    idOf(
      await send(server.url, 'POST', '/reservations', {
        body: 'not json',
        headers: { 'content-type': 'application/octet-stream' },
      }),
    ),
    2,
  );
  assert.equal(idOf(await send(server.url, 'POST', '/reservations')), 3);
  // The reservation created no user.
  assert.deepEqual((await send(server.url, 'GET', '/users')).json(), { items: [], next: null });
});

test('ids from POST /reservations, POST /users/new and alias PUTs never collide and keep increasing', async (t) => {
  const server = await startTestServer(t);
  const issued: Array<{ kind: string; id: number }> = [];
  for (let round = 0; round < 3; round++) {
    issued.push({ kind: 'reserve', id: idOf(await reserve(server)) });
    issued.push({ kind: 'new', id: idOf(await postNew(server, JSON.stringify({ name: `new${round}` }))) });
    issued.push({ kind: 'alias', id: idOf(await put(server.url, `/users/alias-${round}`, { name: `alias${round}` })) });
  }
  const ids = issued.map((i) => i.id);
  assert.equal(new Set(ids).size, ids.length, `ids are distinct: ${ids.join(',')}`);
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i]! > ids[i - 1]!, `ids increase: ${ids.join(',')}`);
  // Each reserved id is then creatable with PUT, and nobody else took it.
  for (const r of issued.filter((i) => i.kind === 'reserve')) {
    const created = await put(server.url, `/users/${r.id}`, { name: `reserved${r.id}` });
    assert.equal(created.status, 201, created.text);
  }
  const listed = (await send(server.url, 'GET', '/users')).json() as { items: Array<{ id: number }> };
  assert.deepEqual(
    listed.items.map((u) => u.id),
    ids,
  );
});

test('maxReservations: past the cap POST /reservations answers 503 too-many-reservations with Retry-After in whole seconds >= 1, issuing no id', async (t) => {
  const server = await startTestServer(t, { maxReservations: 2, reservationTtl: 300 }, { clock: () => T0 });
  assert.equal(idOf(await reserve(server)), 1);
  assert.equal(idOf(await reserve(server)), 2);
  const refused = await reserve(server);
  assertProblem(refused, 503, 'too-many-reservations');
  const retryAfter = String(refused.headers['retry-after']);
  assert.match(retryAfter, /^[1-9]\d*$/, 'Retry-After is delay-seconds (RFC 9110 section 10.2.3), at least 1');
  assert.ok(Number(retryAfter) <= 300, `Retry-After ${retryAfter} is no later than the first expiry`);
  // The cap is on live reservations only: other creates go on, and the refused request consumed no id.
  assert.equal(idOf(await postNew(server, '{"name":"x"}')), 3);
});

test('maxReservations: once a reservation expires, POST /reservations succeeds again with a fresh id (injected clock)', async (t) => {
  let now = T0;
  const server = await startTestServer(t, { maxReservations: 2, reservationTtl: 1 }, { clock: () => now });
  assert.equal(idOf(await reserve(server)), 1);
  assert.equal(idOf(await reserve(server)), 2);
  now = T0 + 999;
  const refused = await reserve(server);
  assertProblem(refused, 503, 'too-many-reservations');
  assert.equal(refused.headers['retry-after'], '1');
  now = T0 + 1000;
  assert.equal(idOf(await reserve(server)), 3);
  // The expired ids are not handed out again: a PUT to one is 410.
  assertProblem(await put(server.url, '/users/1', { name: 'late' }), 410, 'gone');
});

test('maxReservations: a reservation used up by a PUT no longer counts against the cap', async (t) => {
  const server = await startTestServer(t, { maxReservations: 2 });
  assert.equal(idOf(await reserve(server)), 1);
  assert.equal(idOf(await reserve(server)), 2);
  assertProblem(await reserve(server), 503, 'too-many-reservations');
  const created = await put(server.url, '/users/1', { name: 'used' });
  assert.equal(created.status, 201, created.text);
  assert.equal(idOf(await reserve(server)), 3);
});

test('maxReservations: a client that waits the Retry-After seconds can reserve again (reservationTtl 1, injected clock)', async (t) => {
  let now = Date.UTC(2026, 0, 1);
  const server = await startTestServer(t, { maxReservations: 1, reservationTtl: 1 }, { clock: () => now });
  assert.equal(idOf(await reserve(server)), 1);
  now += 400;
  const refused = await reserve(server);
  assertProblem(refused, 503, 'too-many-reservations');
  // The only live reservation expires in 0.6 s: whole seconds, rounded up, give 1.
  assert.equal(refused.headers['retry-after'], '1');
  // Waiting exactly what the server asked must be enough.
  now += Number(refused.headers['retry-after']) * 1000;
  assert.equal(idOf(await reserve(server)), 2);
});

test('64 concurrent creations through POST /users/new, POST /reservations and alias PUTs never share an id', async (t) => {
  const server = await startTestServer(t);
  const replies = await Promise.all(
    Array.from({ length: 64 }, (_, i) => {
      if (i % 3 === 0) return send(server.url, 'POST', '/users/new', { json: { name: `new-${i}` } });
      if (i % 3 === 1) return send(server.url, 'POST', '/reservations');
      return put(server.url, `/users/alias-${i}`, { name: `alias-${i}` });
    }),
  );
  const ids = replies.map((reply) => {
    assert.equal(reply.status, 201, reply.text);
    return reply.json().id as number;
  });
  assert.equal(new Set(ids).size, 64);
  assert.deepEqual(
    [...ids].sort((a, b) => a - b),
    Array.from({ length: 64 }, (_, i) => i + 1),
  );
});
