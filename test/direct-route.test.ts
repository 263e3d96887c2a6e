/**
 * The router matches a plain path such as `/users/12` (no query, fragment
 * or percent-encoding) without splitting the target; the same requests
 * written so that they are split first (`/users/12?`, an empty query;
 * `/users/%31%32`, percent-encoded digits) must get the same answers:
 * status, headers but the request id, and body, on servers with each
 * setting that changes what /users/{ref} answers.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ADMIN_PASSWORD, put, send, startTestServer, tempDir, type Reply } from './helpers.js';
import { cleanEnv, SERVER_BIN, spawnChild } from './processes.js';
import type { Route } from '../server/http/route.js';
import { Router } from '../server/http/router.js';

/** An answer without what differs between any two requests. */
function comparable(reply: Reply): unknown {
  const { 'x-request-id': _id, date: _date, ...headers } = reply.headers;
  return { status: reply.status, headers, text: reply.text };
}

/** `/users/<digits>` as a plain path, then the two spellings of it that are split first: the same answers. */
async function sameAnswers(
  url: string,
  digits: string,
  method: 'GET' | 'HEAD' | 'PUT',
  headers: Record<string, string> = {},
  body?: string,
): Promise<number> {
  const direct = await send(url, method, `/users/${digits}`, { headers, body });
  const withQuery = await send(url, method, `/users/${digits}?`, { headers, body });
  const encoded = await send(url, method, `/users/${[...digits].map((d) => `%3${d}`).join('')}`, { headers, body });
  assert.deepEqual(comparable(withQuery), comparable(direct), `${method} /users/${digits}?`);
  assert.deepEqual(comparable(encoded), comparable(direct), `${method} /users/${digits} percent-encoded`);
  return direct.status;
}

test('GET and HEAD /users/<digits> answer as the same target through the router: found, missing, leading zeros, too long, If-None-Match', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/ann', { name: 'Ann' });
  const etag = (await send(server.url, 'GET', '/users/1')).headers.etag as string;
  for (const method of ['GET', 'HEAD'] as const) {
    assert.equal(await sameAnswers(server.url, '1', method), 200);
    assert.equal(await sameAnswers(server.url, '2', method), 404);
    assert.equal(await sameAnswers(server.url, '01', method), 404);
    assert.equal(await sameAnswers(server.url, '123456789012345678', method), 404);
    assert.equal(await sameAnswers(server.url, '1', method, { 'if-none-match': etag }), 304);
    assert.equal(await sameAnswers(server.url, '1', method, { 'if-none-match': '"other"' }), 200);
  }
});

test('GET /users/<digits> as a plain path: an old id answers 301, a session is asked for under --require-session all, and the metrics count it under /users/:ref', async (t) => {
  const moving = await startTestServer(t, { allowIdChange: true });
  await put(moving.url, '/users/ann', { name: 'Ann' });
  assert.equal((await put(moving.url, '/users/1', { name: 'Ann', id: 7 })).status, 200);
  assert.equal(await sameAnswers(moving.url, '1', 'GET'), 301);
  assert.equal(await sameAnswers(moving.url, '7', 'GET'), 200);

  const closed = await startTestServer(t, { requireSession: 'all' });
  assert.equal(await sameAnswers(closed.url, '1', 'GET'), 401);
  const basic = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` };
  const login = await send(closed.url, 'POST', '/login', { headers: basic });
  const cookie = String(login.headers['set-cookie']).split(';')[0]!;
  assert.equal(await sameAnswers(closed.url, '1', 'GET', { cookie }), 404);

  const metrics = (await send(moving.url, 'GET', '/metrics')).text;
  // Three spellings each of /users/1 (301) and /users/7 (200), all under the route's label.
  assert.match(metrics, /^users_server_requests_total\{route="\/users\/:ref",method="GET",status="301"\} 3$/m);
  assert.match(metrics, /^users_server_requests_total\{route="\/users\/:ref",method="GET",status="200"\} 3$/m);
});

test('with --rate-limit a plain path is limited like any other target', async (t) => {
  const server = await startTestServer(t, { rateLimit: 1000 });
  await put(server.url, '/users/ann', { name: 'Ann' });
  const direct = await send(server.url, 'GET', '/users/1');
  assert.equal(direct.status, 200);
  assert.ok(direct.headers.ratelimit !== undefined, 'the limiter saw it');
});

test('PUT and DELETE /users/<digits> as a plain path: the same answers, and a cross-site request with the session cookie is still refused', async (t) => {
  const server = await startTestServer(t);
  for (const alias of ['ann', 'bob', 'cy', 'dee']) await put(server.url, `/users/${alias}`, { name: alias });
  const json = { 'content-type': 'application/json' };
  assert.equal(await sameAnswers(server.url, '1', 'PUT', json, '{"name":"Ann"}'), 200);
  assert.equal(await sameAnswers(server.url, '1', 'PUT', json, '{"name":"Ann","id":1}'), 200);
  assert.equal(await sameAnswers(server.url, '9', 'PUT', json, '{"name":"Nobody"}'), 404);
  assert.equal(await sameAnswers(server.url, '1', 'PUT', { 'content-type': 'text/plain' }, '{"name":"Ann"}'), 415);
  assert.equal(await sameAnswers(server.url, '1', 'PUT', json, '{"nick":"no name"}'), 422);
  const deleted = [
    await send(server.url, 'DELETE', '/users/2'),
    await send(server.url, 'DELETE', '/users/3?'),
    await send(server.url, 'DELETE', '/users/%34'),
  ];
  assert.deepEqual(deleted.map(comparable), Array(3).fill(comparable(deleted[0]!)));
  assert.equal(deleted[0]!.status, 204);

  const basic = { authorization: `Basic ${Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64')}` };
  const cookie = String((await send(server.url, 'POST', '/login', { headers: basic })).headers['set-cookie']).split(
    ';',
  )[0]!;
  const crossSite = { ...json, cookie, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' };
  assert.equal(await sameAnswers(server.url, '1', 'PUT', crossSite, '{"name":"Forged"}'), 403);
  assert.equal((await send(server.url, 'DELETE', '/users/1', { headers: crossSite })).status, 403);
  assert.equal((await send(server.url, 'GET', '/users/1')).text, '{"name":"Ann","id":1}');
});

test('under node --disallow-code-generation-from-strings the server starts, and routes /users/<digits> each way', async (t) => {
  const env = {
    ...cleanEnv(),
    USERS_ADMIN_PASSWORD: ADMIN_PASSWORD,
    USERS_PASSWORD_COST: '1',
    USERS_REQUIRE_SESSION: 'none',
  };
  const child = spawnChild(
    t,
    process.execPath,
    ['--disallow-code-generation-from-strings', SERVER_BIN, '--port', '0', '--data', tempDir(t)],
    { env },
  );
  const url = (await child.waitForLine(/^listening on (http:\/\/\S+)$/))[1]!;
  await put(url, '/users/ann', { name: 'Ann' });
  assert.equal(await sameAnswers(url, '1', 'GET'), 200);
});

test('the router answers a plain path as it answers the same path split from its target', () => {
  const route = (method: string, path: string) => ({ method, path, handler: () => {} }) as unknown as Route;
  const router = new Router([route('GET', '/users/new'), route('GET', '/users/:ref'), route('PUT', '/users/:ref')]);
  const answer = (method: string, target: string) => {
    const match = router.match(method, target);
    return match.kind === 'route'
      ? { kind: match.kind, path: match.route.path, params: { ...match.params }, slot: match.slot }
      : match;
  };
  for (const target of ['/users/1', '/users/0012', '/users/123456789012345678', '/users/new', '/users/alice']) {
    const plain = answer('GET', target);
    assert.equal(plain.kind, 'route', target);
    assert.deepEqual(answer('GET', `${target}?`), plain, `${target}?`);
    assert.deepEqual(answer('GET', `http://localhost${target}`), plain, `${target} absolute-form`);
    assert.deepEqual(answer('HEAD', target), plain, `HEAD ${target}`);
  }
  assert.deepEqual(answer('GET', '/users/%31%32'), answer('GET', '/users/12'));
  assert.deepEqual((router.match('GET', '/users/7?x=1') as { query: string }).query, 'x=1');
  assert.equal(router.match('GET', '/users/7#top').kind, 'route');
  assert.equal(router.match('DELETE', '/users/7').kind, 'method-not-allowed');
  assert.equal(router.match('OPTIONS', '/users/7').kind, 'options');
  for (const target of ['/users/', '/users/7/', '/users', '/users/7/x'])
    assert.equal(router.match('GET', target).kind, 'not-found', target);
  assert.equal(router.match('GET', '*').kind, 'bad-target');
});
