/**
 * API.md "Reservations and Idempotency-Key": Idempotency-Key on
 * POST /users/new and POST /reservations (the restart parts belong to the
 * durable-store issue).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { scopedKey } from '../server/users/rules.js';
import { send, startTestServer, type Reply, type TestServer, assertProblem } from './helpers.js';

const PROBLEM_CONTENT_TYPE = 'application/problem+json';
const PROBLEM_PREFIX = 'tag:users-server,2026:problem/';
const T0 = Date.UTC(2031, 4, 6, 7, 8, 9);

interface Endpoint {
  path: '/users/new' | '/reservations';
  /** A body the endpoint accepts. */
  body: string;
  /** Another acceptable body that differs from `body`. */
  other: string;
}

// Both bodies are 20 bytes, which the in-progress test relies on.
const endpoints: Endpoint[] = [
  { path: '/users/new', body: '{"name":"abcdefghi"}', other: '{"name":"jklmnopqr"}' },
  // POST /reservations ignores its body, but the body is part of the key's fingerprint.
  { path: '/reservations', body: '{"note":"abcdefghi"}', other: '{"note":"jklmnopqr"}' },
];

function post(server: TestServer, path: string, body: string, key?: string | string[]): Promise<Reply> {
  const headers: Record<string, string | string[]> = { 'content-type': 'application/json' };
  if (key !== undefined) headers['idempotency-key'] = key;
  return send(server.url, 'POST', path, { body, headers });
}

function idOf(reply: Reply): number {
  assert.equal(reply.status, 201, reply.text);
  const id = (reply.json() as { id: number }).id;
  assert.equal(reply.headers.location, `/users/${id}`);
  return id;
}

/** The next id the server issues, found by issuing it (a reservation creates no user). */
async function nextIssuedId(server: TestServer): Promise<number> {
  return idOf(await send(server.url, 'POST', '/reservations'));
}

async function userCount(server: TestServer): Promise<number> {
  const list = await send(server.url, 'GET', '/users?limit=1000');
  assert.equal(list.status, 200);
  return (list.json() as { items: unknown[] }).items.length;
}

/** Writes raw bytes; resolves with all the server answered once it closes the connection. */
function openRaw(server: TestServer): Promise<{ socket: Socket; answer: Promise<string> }> {
  const { hostname, port } = new URL(server.url);
  const socket = connect(Number(port), hostname);
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const answer = new Promise<string>((resolve) => {
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', () => {});
  });
  return once(socket, 'connect').then(() => ({ socket, answer }));
}

function parseRawResponse(text: string): { status: number; headers: Record<string, string>; body: string } {
  const end = text.indexOf('\r\n\r\n');
  assert.notEqual(end, -1, `a complete response head in ${JSON.stringify(text)}`);
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine!)?.[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status, headers, body: text.slice(end + 4) };
}

function rawPostHead(path: string, key: string, length: number): string {
  return (
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Idempotency-Key: ${key}\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`
  );
}

for (const ep of endpoints) {
  test(`Idempotency-Key on POST ${ep.path}: a replay answers the same status, body and Location, plus Idempotent-Replayed: true`, async (t) => {
    const server = await startTestServer(t);
    const first = await post(server, ep.path, ep.body, 'key-1');
    assert.equal(first.status, 201, first.text);
    assert.equal(first.headers['idempotent-replayed'], undefined, 'the first response is not a replay');
    for (let i = 0; i < 2; i++) {
      const replay = await post(server, ep.path, ep.body, 'key-1');
      assert.equal(replay.status, first.status);
      assert.equal(replay.text, first.text);
      assert.equal(replay.headers.location, first.headers.location);
      assert.equal(replay.headers['idempotent-replayed'], 'true');
    }
  });

  test(`Idempotency-Key on POST ${ep.path}: replays create nothing new`, async (t) => {
    const server = await startTestServer(t);
    const id = idOf(await post(server, ep.path, ep.body, 'key-1'));
    const usersBefore = await userCount(server);
    await post(server, ep.path, ep.body, 'key-1');
    await post(server, ep.path, ep.body, 'key-1');
    assert.equal(await userCount(server), usersBefore);
    assert.equal(await nextIssuedId(server), id + 1, 'the replays issued no id');
  });

  test(`Idempotency-Key on POST ${ep.path}: the same key with a different body answers 422 idempotency-key-reused and changes nothing`, async (t) => {
    const server = await startTestServer(t);
    const first = await post(server, ep.path, ep.body, 'key-1');
    const id = idOf(first);
    const usersBefore = await userCount(server);
    assertProblem(await post(server, ep.path, ep.other, 'key-1'), 422, 'idempotency-key-reused');
    assert.equal(await userCount(server), usersBefore);
    // The kept response is not replaced by the refused request.
    const replay = await post(server, ep.path, ep.body, 'key-1');
    assert.equal(replay.text, first.text);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(await nextIssuedId(server), id + 1);
  });

  test(`Idempotency-Key on POST ${ep.path}: the same key while the first request is in progress answers 409 idempotency-in-progress`, async (t) => {
    const server = await startTestServer(t);
    assert.equal(Buffer.byteLength(ep.body), 20);
    const { socket, answer } = await openRaw(server);
    t.after(() => socket.destroy());
    // The 'request' event fires once the head is parsed: the app's listener runs first and claims the key.
    const started = once(server.running.server, 'request');
    socket.write(rawPostHead(ep.path, 'slow-key', 20) + ep.body.slice(0, 10));
    await started;
    assertProblem(await post(server, ep.path, ep.body, 'slow-key'), 409, 'idempotency-in-progress');
    socket.write(ep.body.slice(10));
    const first = parseRawResponse(await answer);
    assert.equal(first.status, 201, first.body);
    const id = (JSON.parse(first.body) as { id: number }).id;
    assert.equal(first.headers.location, `/users/${id}`);
    // Once the first is done, the retried request is a replay of it.
    const retry = await post(server, ep.path, ep.body, 'slow-key');
    assert.equal(retry.status, 201);
    assert.equal(retry.text, first.body);
    assert.equal(retry.headers['idempotent-replayed'], 'true');
    assert.equal(await nextIssuedId(server), id + 1, 'exactly one id was issued for the key');
  });

  test(`Idempotency-Key on POST ${ep.path}: a first request the client abandons mid-body does not hold its key`, async (t) => {
    const server = await startTestServer(t);
    const { socket } = await openRaw(server);
    const started = once(server.running.server, 'request') as Promise<[IncomingMessage, ServerResponse]>;
    socket.write(rawPostHead(ep.path, 'cut-key', 20) + ep.body.slice(0, 10));
    const [, res] = await started;
    const closed = once(res, 'close');
    socket.destroy();
    await closed;
    await new Promise((resolve) => setImmediate(resolve));
    const retry = await post(server, ep.path, ep.body, 'cut-key');
    assert.equal(retry.status, 201, retry.text);
    assert.equal(retry.headers['idempotent-replayed'], undefined);
  });

  const invalidKeys: Array<{ name: string; key: string | string[] }> = [
    { name: 'empty', key: '' },
    { name: 'of 256 characters', key: 'k'.repeat(256) },
    { name: 'with a space', key: 'two words' },
    { name: 'with a tab', key: 'tab\there' },
    { name: 'with a non-ASCII (Latin-1) character', key: 'cl\u00e9' },
    { name: 'sent twice', key: ['one', 'two'] },
  ];
  for (const c of invalidKeys) {
    test(`Idempotency-Key on POST ${ep.path}: a key ${c.name} answers 400 invalid-header and creates nothing`, async (t) => {
      const server = await startTestServer(t);
      assertProblem(await post(server, ep.path, ep.body, c.key), 400, 'invalid-header');
      assert.equal(await userCount(server), 0);
      assert.equal(await nextIssuedId(server), 1);
    });
  }

  test(`Idempotency-Key on POST ${ep.path}: a key with UTF-8 non-ASCII bytes answers 400 invalid-header and creates nothing`, async (t) => {
    const server = await startTestServer(t);
    const { socket, answer } = await openRaw(server);
    t.after(() => socket.destroy());
    socket.write(
      Buffer.concat([Buffer.from(rawPostHead(ep.path, '\u043a\u043b\u044e\u0447', 20), 'utf8'), Buffer.from(ep.body)]),
    );
    const reply = parseRawResponse(await answer);
    assert.equal(reply.status, 400, reply.body);
    assert.equal(reply.headers['content-type'], PROBLEM_CONTENT_TYPE);
    assert.equal((JSON.parse(reply.body) as { type: string }).type, PROBLEM_PREFIX + 'invalid-header');
    assert.equal(await userCount(server), 0);
    assert.equal(await nextIssuedId(server), 1);
  });

  test(`Idempotency-Key on POST ${ep.path}: a key of 255 visible ASCII characters is accepted and replayed`, async (t) => {
    const server = await startTestServer(t);
    let key = '';
    for (let i = 0; key.length < 255; i++) key += String.fromCharCode(0x21 + (i % 94)); // every VCHAR, cycled
    const first = await post(server, ep.path, ep.body, key);
    assert.equal(first.status, 201, first.text);
    const replay = await post(server, ep.path, ep.body, key);
    assert.equal(replay.text, first.text);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
  });

  test(`without an Idempotency-Key two identical POST ${ep.path} create two distinct ids`, async (t) => {
    const server = await startTestServer(t);
    const a = idOf(await post(server, ep.path, ep.body));
    const b = idOf(await post(server, ep.path, ep.body));
    assert.notEqual(a, b);
    if (ep.path === '/users/new') assert.equal(await userCount(server), 2);
  });

  test(`Idempotency-Key on POST ${ep.path}: a replay within 24 h still answers the first response`, async (t) => {
    let now = T0;
    const server = await startTestServer(t, {}, { clock: () => now });
    const first = await post(server, ep.path, ep.body, 'day-key');
    assert.equal(first.status, 201);
    now = T0 + 24 * 60 * 60 * 1000 - 1000;
    const replay = await post(server, ep.path, ep.body, 'day-key');
    assert.equal(replay.text, first.text);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
  });
}

test('Idempotency-Key on POST /users/new: a replay answers the kept first response even after the user was changed or deleted, and recreates nothing', async (t) => {
  const server = await startTestServer(t);
  const first = await post(server, '/users/new', '{"name":"Ann"}', 'k');
  assert.equal(first.text, '{"name":"Ann","id":1}');
  const changed = await send(server.url, 'PUT', '/users/1', { json: { name: 'Changed' } });
  assert.equal(changed.status, 200);
  const replay1 = await post(server, '/users/new', '{"name":"Ann"}', 'k');
  assert.equal(replay1.text, first.text);
  assert.equal((await send(server.url, 'GET', '/users/1')).text, '{"name":"Changed","id":1}');
  assert.equal((await send(server.url, 'DELETE', '/users/1')).status, 204);
  const replay2 = await post(server, '/users/new', '{"name":"Ann"}', 'k');
  assert.equal(replay2.status, 201);
  assert.equal(replay2.text, first.text);
  assert.equal((await send(server.url, 'GET', '/users/1')).status, 404);
  assert.equal(await userCount(server), 0);
});

test('Idempotency-Key: only successful responses are kept, so after a refused POST /users/new the same key can succeed', async (t) => {
  const server = await startTestServer(t);
  assertProblem(await post(server, '/users/new', '{"nick":"no name"}', 'k'), 422, 'invalid-user');
  assertProblem(await post(server, '/users/new', '{"name":"x","id":3}', 'k'), 409, 'id-conflict');
  const created = await post(server, '/users/new', '{"name":"ok"}', 'k');
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers['idempotent-replayed'], undefined);
  assert.deepEqual(created.json(), { name: 'ok', id: 1 });
});

test('Idempotency-Key: only successful responses are kept, so a POST /reservations refused by the cap can succeed later with the same key', async (t) => {
  let now = T0;
  const server = await startTestServer(t, { maxReservations: 1, reservationTtl: 1 }, { clock: () => now });
  assert.equal(idOf(await send(server.url, 'POST', '/reservations')), 1);
  assertProblem(await post(server, '/reservations', '{}', 'k'), 503, 'too-many-reservations');
  now = T0 + 1000;
  const later = await post(server, '/reservations', '{}', 'k');
  assert.equal(later.status, 201, later.text);
  assert.equal(later.headers['idempotent-replayed'], undefined);
  assert.equal(idOf(later), 2);
});

test('Idempotency-Key: the same key on POST /users/new and POST /reservations is independent', async (t) => {
  const server = await startTestServer(t);
  const body = '{"name":"Same"}';
  const user = await post(server, '/users/new', body, 'shared');
  const reservation = await post(server, '/reservations', body, 'shared');
  assert.equal(idOf(user), 1);
  assert.equal(idOf(reservation), 2);
  assert.equal(reservation.headers['idempotent-replayed'], undefined);
  assert.deepEqual(Object.keys(reservation.json() as object), ['id', 'expiresAt']);
  // Each endpoint replays its own response.
  assert.equal((await post(server, '/users/new', body, 'shared')).text, user.text);
  assert.equal((await post(server, '/reservations', body, 'shared')).text, reservation.text);
  assert.equal(await userCount(server), 1);
});

test('a key is stored under its scope as journals and databases keep it: "/users/new KEY" and "/reservations KEY"', () => {
  assert.equal(scopedKey('create-user', 'k 1'), '/users/new k 1');
  assert.equal(scopedKey('reserve-id', 'k 1'), '/reservations k 1');
});
