/**
 * X-Request-Id (docs/api.md "Request ids"): every response carries one:
 * the request's own when it is 1..128 of `A-Z a-z 0-9 . _ : -`, otherwise a
 * new one made by the server. Errors answered by the HTTP parser carry one
 * too, and an unexpected error's log line names it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isSaneRequestId } from '../server/http/observe.js';
import { assertProblem, put, rawExchange, send, startTestServer, type Reply, type TestServer } from './helpers.js';

/** A generated id: 12 hex digits of the process, "-", a counter in base 36. */
const GENERATED = /^[0-9a-f]{12}-[0-9a-z]+$/;

function idOf(reply: Reply): string {
  const id = reply.headers['x-request-id'];
  assert.equal(typeof id, 'string', `X-Request-Id on a ${reply.status}`);
  return id as string;
}

async function seeded(t: Parameters<typeof startTestServer>[0], overrides = {}): Promise<TestServer> {
  const server = await startTestServer(t, overrides);
  assert.equal((await put(server.url, '/users/alice', { name: 'Alice' })).status, 201);
  return server;
}

/** One request of every kind of answer: success, redirect-free errors, routing answers, the mandated 401 body. */
const answers: { name: string; status: number; send: (url: string) => Promise<Reply> }[] = [
  { name: 'GET of a user (200)', status: 200, send: (url) => send(url, 'GET', '/users/1') },
  { name: 'HEAD of a user (200, no body)', status: 200, send: (url) => send(url, 'HEAD', '/users/1') },
  { name: 'PUT creating a user (201)', status: 201, send: (url) => put(url, '/users/bob', { name: 'Bob' }) },
  { name: 'DELETE (204)', status: 204, send: (url) => send(url, 'DELETE', '/users/alice') },
  {
    name: 'a conditional GET (304)',
    status: 304,
    send: async (url) => send(url, 'GET', '/users/1', { headers: { 'if-none-match': '*' } }),
  },
  { name: 'OPTIONS (204 + Allow)', status: 204, send: (url) => send(url, 'OPTIONS', '/users/1') },
  { name: 'GET / without a session (401, mandated body)', status: 401, send: (url) => send(url, 'GET', '/') },
  { name: 'a malformed ref (400 problem)', status: 400, send: (url) => send(url, 'GET', '/users/%2F') },
  { name: 'an unknown path (404 problem)', status: 404, send: (url) => send(url, 'GET', '/nope') },
  { name: 'another method on a known path (405 problem)', status: 405, send: (url) => send(url, 'GET', '/users/new') },
  { name: 'a bad body (422 problem)', status: 422, send: (url) => put(url, '/users/carol', { nom: 'x' }) },
  { name: 'GET /healthz (200)', status: 200, send: (url) => send(url, 'GET', '/healthz') },
  { name: 'GET /metrics (200)', status: 200, send: (url) => send(url, 'GET', '/metrics') },
  { name: 'GET /openapi.json (200)', status: 200, send: (url) => send(url, 'GET', '/openapi.json') },
];
for (const a of answers) {
  test(`X-Request-Id: ${a.name} carries a generated id when the request sends none`, async (t) => {
    const server = await seeded(t);
    const reply = await a.send(server.url);
    assert.equal(reply.status, a.status, reply.text);
    assert.match(idOf(reply), GENERATED);
  });
}

test('X-Request-Id: generated ids are unique across requests of one server', async (t) => {
  const server = await seeded(t);
  const ids = new Set<string>();
  for (let i = 0; i < 50; i++) ids.add(idOf(await send(server.url, 'GET', i % 2 === 0 ? '/users/1' : '/nope')));
  assert.equal(ids.size, 50);
});

test('X-Request-Id: two servers make ids with different prefixes', async (t) => {
  const a = idOf(await send((await startTestServer(t)).url, 'GET', '/healthz'));
  const b = idOf(await send((await startTestServer(t)).url, 'GET', '/healthz'));
  assert.notEqual(a.split('-')[0], b.split('-')[0]);
});

const sane = ['a', 'abc-123', 'A.b_c:d-e', '0b7e3c52-ca5e-4f8e-9d1a-2c3b4d5e6f70', 'x'.repeat(128)];
for (const id of sane) {
  test(`X-Request-Id: a sane id from the request (${id.length > 40 ? `${id.length} characters` : id}) is echoed, on success and on a problem`, async (t) => {
    const server = await seeded(t);
    assert.equal(idOf(await send(server.url, 'GET', '/users/1', { headers: { 'x-request-id': id } })), id);
    const problem = await send(server.url, 'GET', '/nope', { headers: { 'x-request-id': id } });
    assertProblem(problem, 404, 'not-found');
    assert.equal(idOf(problem), id);
  });
}

const insane: { name: string; value: string | string[] }[] = [
  { name: 'empty', value: '' },
  { name: '129 characters', value: 'x'.repeat(129) },
  { name: 'a space', value: 'a b' },
  { name: 'a slash', value: 'a/b' },
  { name: 'a quote', value: 'a"b' },
  { name: 'non-ASCII (latin1 é)', value: 'caf\xe9' },
  { name: 'sent twice (joined with ", ")', value: ['one', 'two'] },
];
for (const c of insane) {
  test(`X-Request-Id: a request id that is ${c.name} is not echoed; the server makes its own`, async (t) => {
    const server = await seeded(t);
    const reply = await send(server.url, 'GET', '/users/1', { headers: { 'x-request-id': c.value } });
    assert.equal(reply.status, 200);
    assert.match(idOf(reply), GENERATED);
  });
}

test('isSaneRequestId accepts exactly 1..128 of A-Z a-z 0-9 . _ : -', () => {
  for (let c = 0; c < 256; c++) {
    const ch = String.fromCharCode(c);
    assert.equal(isSaneRequestId(ch), /[A-Za-z0-9._:-]/.test(ch), `character ${c}`);
  }
  assert.equal(isSaneRequestId(''), false);
  assert.equal(isSaneRequestId('a'.repeat(128)), true);
  assert.equal(isSaneRequestId('a'.repeat(129)), false);
  assert.equal(isSaneRequestId('ok\u0100'), false);
});

const parserErrors: { name: string; bytes: string; status: number }[] = [
  { name: 'a malformed request line', bytes: 'NOT HTTP AT ALL\r\n\r\n', status: 400 },
  { name: 'a malformed header', bytes: 'GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n', status: 400 },
  {
    name: 'headers over 16 KiB',
    bytes: `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    status: 431,
  },
];
for (const c of parserErrors) {
  test(`X-Request-Id: the raw problem answered for ${c.name} (${c.status}) carries a generated id`, async (t) => {
    const server = await startTestServer(t);
    const answer = await rawExchange(server.url, c.bytes);
    assert.match(answer, new RegExp(`^HTTP/1\\.1 ${c.status} `));
    const id = /\r\nX-Request-Id: ([^\r]*)\r\n/i.exec(answer)?.[1];
    assert.ok(id !== undefined, `no X-Request-Id in ${JSON.stringify(answer.slice(0, 300))}`);
    assert.match(id, GENERATED);
  });
}

test('an unexpected error answers a bare 500 with the X-Request-Id, and its stack goes to the error log with that id, never to the client', async (t) => {
  const logged: string[] = [];
  const server = await startTestServer(t, {}, { logError: (message) => logged.push(message) });
  assert.equal((await put(server.url, '/users/alice', { name: 'Alice' })).status, 201);
  const before = await send(server.url, 'GET', '/users?limit=1000');
  (server.running.store as { putUser: unknown }).putUser = () => {
    throw new Error('disk on fire at /var/secret/path');
  };
  const reply = await put(server.url, '/users/alice', { name: 'Changed' }, { 'x-request-id': 'trace-500' });
  const doc = assertProblem(reply, 500, 'internal');
  assert.equal(doc.detail, 'The server could not complete the request.');
  assert.ok(
    !reply.text.includes('disk on fire') && !reply.text.includes('/var/secret') && !/\bat \S+ \(/.test(reply.text),
    `the body leaks: ${reply.text}`,
  );
  assert.equal(idOf(reply), 'trace-500');
  assert.equal(logged.length, 1, JSON.stringify(logged));
  assert.match(
    logged[0]!,
    /^users-server: unexpected error \(request trace-500\): Error: disk on fire at \/var\/secret\/path\n\s+at /,
  );
  assert.equal((await send(server.url, 'GET', '/users?limit=1000')).text, before.text, 'nothing changed');
});
