/**
 * API.md "Endpoints", the routing sentence under the table: an unknown path
 * answers 404; a known path with another method answers 405 with Allow.
 * Plus OPTIONS, HEAD and GET /healthz.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { put, rawExchange, send, startTestServer, type Reply, type TestServer, assertProblem } from './helpers.js';

/** The methods an Allow field lists, as a sorted list (RFC 9110 section 10.2.1: order carries no meaning). */
function allowOf(reply: Reply): string[] {
  const allow = reply.headers.allow;
  assert.equal(typeof allow, 'string', `an Allow field on ${reply.status}`);
  return (allow as string)
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m !== '')
    .sort();
}

/** Starts a server with user 1 (alias "alice"), so /users/1 is a known resource. */
async function seeded(t: Parameters<typeof startTestServer>[0]): Promise<TestServer> {
  const server = await startTestServer(t);
  const created = await put(server.url, '/users/alice', { name: 'Alice' });
  assert.equal(created.status, 201);
  return server;
}

async function snapshot(server: TestServer): Promise<string> {
  const list = await send(server.url, 'GET', '/users?limit=1000');
  assert.equal(list.status, 200);
  return list.text;
}

/** Allow per known path, as API.md's table gives the methods (HEAD with GET, OPTIONS everywhere). */
const knownPaths: Array<{ path: string; allow: string[] }> = [
  { path: '/', allow: ['GET', 'HEAD', 'OPTIONS'] },
  { path: '/users', allow: ['GET', 'HEAD', 'OPTIONS'] },
  { path: '/users/1', allow: ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'PUT'] },
  { path: '/users/alice', allow: ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'PUT'] },
  { path: '/users/new', allow: ['OPTIONS', 'POST'] },
  { path: '/reservations', allow: ['OPTIONS', 'POST'] },
  { path: '/login', allow: ['OPTIONS', 'POST'] },
  { path: '/logout', allow: ['OPTIONS', 'POST'] },
  { path: '/healthz', allow: ['GET', 'HEAD', 'OPTIONS'] },
];

test('GET /healthz answers 200 {"status":"ok"} as application/json, without a session', async (t) => {
  const server = await startTestServer(t, { requireSession: 'all' });
  const reply = await send(server.url, 'GET', '/healthz');
  assert.equal(reply.status, 200);
  assert.match(String(reply.headers['content-type']), /^application\/json/);
  assert.deepEqual(reply.json(), { status: 'ok' });
});

const unknownPaths = [
  '/nope',
  '/users/1/',
  '/users/',
  '/users/1/extra',
  '/users/new/',
  '/healthz/',
  '/reservations/1',
  '/USERS/1',
  '//users/1',
  '/users//1',
];
for (const path of unknownPaths) {
  test(`routing: the unknown path ${path} answers 404 not-found as a problem document`, async (t) => {
    const server = await seeded(t);
    for (const method of ['GET', 'PUT', 'POST', 'DELETE']) {
      const reply = await send(
        server.url,
        method,
        path,
        method === 'GET' || method === 'DELETE' ? {} : { json: { name: 'x' } },
      );
      assertProblem(reply, 404, 'not-found');
    }
    // Nothing was created or changed through the unknown path.
    assert.equal(await snapshot(server), '{"items":[{"name":"Alice","id":1}],"next":null}');
  });
}

const wrongMethods: Array<{ method: string; path: string; allow: string[] }> = [
  { method: 'PATCH', path: '/users', allow: ['GET', 'HEAD', 'OPTIONS'] },
  { method: 'POST', path: '/users/1', allow: ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'PUT'] },
  { method: 'DELETE', path: '/', allow: ['GET', 'HEAD', 'OPTIONS'] },
  { method: 'PUT', path: '/', allow: ['GET', 'HEAD', 'OPTIONS'] },
  { method: 'GET', path: '/login', allow: ['OPTIONS', 'POST'] },
  { method: 'GET', path: '/logout', allow: ['OPTIONS', 'POST'] },
  { method: 'GET', path: '/users/new', allow: ['OPTIONS', 'POST'] },
  { method: 'PUT', path: '/users/new', allow: ['OPTIONS', 'POST'] },
  { method: 'DELETE', path: '/users/new', allow: ['OPTIONS', 'POST'] },
  { method: 'GET', path: '/reservations', allow: ['OPTIONS', 'POST'] },
  { method: 'POST', path: '/users', allow: ['GET', 'HEAD', 'OPTIONS'] },
  { method: 'DELETE', path: '/users', allow: ['GET', 'HEAD', 'OPTIONS'] },
  { method: 'POST', path: '/healthz', allow: ['GET', 'HEAD', 'OPTIONS'] },
];
for (const c of wrongMethods) {
  test(`routing: ${c.method} ${c.path} answers 405 method-not-allowed with Allow: ${c.allow.join(', ')}, changing nothing`, async (t) => {
    const server = await seeded(t);
    const before = await snapshot(server);
    const reply = await send(
      server.url,
      c.method,
      c.path,
      c.method === 'GET' || c.method === 'DELETE' ? {} : { json: { name: 'Mallory' } },
    );
    assertProblem(reply, 405, 'method-not-allowed');
    assert.deepEqual(allowOf(reply), c.allow);
    assert.equal(await snapshot(server), before);
    assert.equal((await send(server.url, 'GET', '/users/1')).text, '{"name":"Alice","id":1}');
  });
}

for (const c of knownPaths) {
  test(`routing: OPTIONS ${c.path} answers 204 with Allow: ${c.allow.join(', ')} and no body`, async (t) => {
    const server = await seeded(t);
    const reply = await send(server.url, 'OPTIONS', c.path);
    assert.equal(reply.status, 204);
    assert.equal(reply.text, '');
    assert.deepEqual(allowOf(reply), c.allow);
  });
}

test('routing: OPTIONS on an unknown path answers 404 not-found', async (t) => {
  const server = await seeded(t);
  assertProblem(await send(server.url, 'OPTIONS', '/nope'), 404, 'not-found');
});

test('routing: the Allow of a 405 equals the Allow of OPTIONS on the same path', async (t) => {
  const server = await seeded(t);
  for (const c of knownPaths) {
    const options = await send(server.url, 'OPTIONS', c.path);
    const method = ['PATCH', 'POST', 'PUT'].find((m) => !c.allow.includes(m))!;
    const refused = await send(server.url, method, c.path);
    assert.equal(refused.status, 405, `${method} ${c.path}`);
    assert.deepEqual(allowOf(refused), allowOf(options), c.path);
  }
});

test('routing: HEAD on every GET route answers the GET status and headers with no body', async (t) => {
  const server = await seeded(t);
  // The GET routes of API.md's table this issue serves, plus any other GET route in the app's table.
  const paths = new Set(['/', '/users', '/users/1', '/users/alice', '/healthz']);
  for (const route of server.running.app.routes) {
    if (route.method === 'GET') paths.add(route.path.replace(/:[a-z]+/g, '1'));
  }
  for (const path of paths) {
    const get = await send(server.url, 'GET', path);
    const head = await rawExchange(server.url, `HEAD ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    const end = head.indexOf('\r\n\r\n');
    assert.notEqual(end, -1, `HEAD ${path}: a response head`);
    assert.equal(head.slice(end + 4), '', `HEAD ${path}: nothing after the head`);
    assert.match(head, new RegExp(`^HTTP/1\\.1 ${get.status} `), `HEAD ${path} answers ${get.status} like GET`);
    const contentType = /\r\ncontent-type: ([^\r]*)/i.exec(head)?.[1];
    assert.equal(contentType, get.headers['content-type'], `HEAD ${path}: the Content-Type of GET`);
    const etag = /\r\netag: ([^\r]*)/i.exec(head)?.[1];
    assert.equal(etag, get.headers.etag, `HEAD ${path}: the ETag of GET`);
  }
});

test('routing: percent-encoded unreserved characters in the path are decoded before routing', async (t) => {
  const server = await seeded(t);
  const health = await send(server.url, 'GET', '/%68ealt%68%7A');
  assert.equal(health.status, 200);
  assert.deepEqual(health.json(), { status: 'ok' });
  const user = await send(server.url, 'GET', '/%75sers/%61lice');
  assert.equal(user.status, 200);
  assert.equal(user.text, '{"name":"Alice","id":1}');
  // /users/%6Eew is /users/new: POST only.
  const created = await send(server.url, 'POST', '/users/%6Eew', { json: { name: 'Neo' } });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers.location, '/users/2');
});

test('routing: a query string does not change the route', async (t) => {
  const server = await seeded(t);
  const health = await send(server.url, 'GET', '/healthz?verbose=1');
  assert.equal(health.status, 200);
  assert.deepEqual(health.json(), { status: 'ok' });
  const user = await send(server.url, 'GET', '/users/1?x=y');
  assert.equal(user.text, '{"name":"Alice","id":1}');
});

test('routing: OPTIONS * (RFC 9110 section 9.3.7, the server as a whole) answers 204 with every method some path takes; another method with * is 400', async (t) => {
  const server = await startTestServer(t);
  const options = await rawExchange(server.url, 'OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  assert.match(options, /^HTTP\/1\.1 204 No Content\r\n/);
  const allow = /\r\nAllow: ([^\r]*)\r\n/.exec(options)?.[1]?.split(', ').sort();
  assert.deepEqual(allow, [...new Set(knownPaths.flatMap((known) => known.allow))].sort());
  const get = await rawExchange(server.url, 'GET * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
  assert.match(get, /^HTTP\/1\.1 400 Bad Request\r\n/);
});
