import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ADMIN_PASSWORD, basic, cookiePair, send, startTestServer, type Reply } from './helpers.js';

// API.md endpoint rows POST /login and POST /logout, and "Sessions".

const PROBLEM = 'tag:users-server,2026:problem/';
const BASIC_CHALLENGE = 'Basic realm="users"';

function setCookies(reply: Reply): string[] {
  const value = reply.headers['set-cookie'];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

function attributesOf(setCookie: string): string[] {
  return setCookie.split(';').map((a) => a.trim());
}

function login(url: string, authorization?: string): Promise<Reply> {
  return send(url, 'POST', '/login', authorization === undefined ? {} : { headers: { authorization } });
}

function getRoot(url: string, cookie?: string): Promise<Reply> {
  return send(url, 'GET', '/', cookie === undefined ? {} : { headers: { cookie } });
}

// --- POST /login -----------------------------------------------------------

test('POST /login with curl-style Basic admin:PW answers 200, body "OK", and sets USER_TOKEN with Path=/; HttpOnly; SameSite=Lax; Max-Age=43200', async (t) => {
  const server = await startTestServer(t);
  const reply = await login(server.url, basic('admin', ADMIN_PASSWORD));
  assert.equal(reply.status, 200);
  assert.equal(reply.text, '"OK"');
  assert.equal(reply.headers['content-type'], 'application/json');
  assert.equal(reply.headers['cache-control'], 'no-store');
  const cookies = setCookies(reply);
  assert.equal(cookies.length, 1);
  const [pair, ...attributes] = attributesOf(cookies[0]!);
  assert.match(pair!, /^USER_TOKEN=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  assert.deepEqual(attributes.sort(), ['HttpOnly', 'Max-Age=43200', 'Path=/', 'SameSite=Lax']);
  assert.equal((await getRoot(server.url, pair)).status, 200);
});

test('POST /login: the cookie Max-Age follows sessionTtl', async (t) => {
  const server = await startTestServer(t, { sessionTtl: 90 });
  const reply = await login(server.url, basic('admin', ADMIN_PASSWORD));
  assert.equal(reply.status, 200);
  assert.ok(attributesOf(setCookies(reply)[0]!).includes('Max-Age=90'), setCookies(reply)[0]);
});

test('POST /login: with cookieSecure the cookie also carries Secure', async (t) => {
  const server = await startTestServer(t, { cookieSecure: true });
  const reply = await login(server.url, basic('admin', ADMIN_PASSWORD));
  assert.equal(reply.status, 200);
  const attributes = attributesOf(setCookies(reply)[0]!);
  assert.ok(attributes.includes('Secure'), setCookies(reply)[0]);
  assert.ok(attributes.includes('HttpOnly') && attributes.includes('SameSite=Lax') && attributes.includes('Path=/'));
});

test('POST /login: without cookieSecure the cookie has no Secure attribute', async (t) => {
  const server = await startTestServer(t);
  const reply = await login(server.url, basic('admin', ADMIN_PASSWORD));
  assert.ok(!attributesOf(setCookies(reply)[0]!).includes('Secure'));
});

test('Sessions: the whole Set-Cookie of a login stays under 4096 bytes', async (t) => {
  const server = await startTestServer(t, { cookieSecure: true, sessionTtl: 31_536_000 });
  const reply = await login(server.url, basic('admin', ADMIN_PASSWORD));
  const cookie = setCookies(reply)[0]!;
  assert.ok(Buffer.byteLength(cookie) < 4096, `${Buffer.byteLength(cookie)} bytes`);
});

test('POST /login: two logins open two distinct sessions, each passing GET /', async (t) => {
  const server = await startTestServer(t);
  const first = await server.login();
  const second = await server.login();
  assert.notEqual(first, second);
  assert.equal((await getRoot(server.url, first)).status, 200);
  assert.equal((await getRoot(server.url, second)).status, 200);
});

test('POST /login with a request body still answers 200 (the body is read and ignored)', async (t) => {
  const server = await startTestServer(t);
  const reply = await send(server.url, 'POST', '/login', {
    headers: { authorization: basic('admin', ADMIN_PASSWORD) },
    body: 'ignored',
  });
  assert.equal(reply.status, 200);
});

const b64 = (s: string) => Buffer.from(s).toString('base64');

const failures: { name: string; authorization: string | undefined }[] = [
  { name: 'a wrong password', authorization: basic('admin', ADMIN_PASSWORD + 'x') },
  { name: 'an empty password', authorization: basic('admin', '') },
  { name: 'an unknown user', authorization: basic('nobody', ADMIN_PASSWORD) },
  { name: 'a user name differing in case', authorization: basic('Admin', ADMIN_PASSWORD) },
  { name: 'no Authorization header', authorization: undefined },
  { name: 'a malformed header "Basic !!!"', authorization: 'Basic !!!' },
  { name: 'another scheme "Bearer x"', authorization: 'Bearer x' },
  { name: 'credentials without a colon', authorization: `Basic ${b64('admin' + ADMIN_PASSWORD)}` },
  { name: 'an empty Basic value', authorization: 'Basic ' },
];

for (const c of failures) {
  test(`POST /login with ${c.name} answers 401 problem login-failed with WWW-Authenticate: Basic realm="users" and sets no cookie`, async (t) => {
    const server = await startTestServer(t);
    const reply = await login(server.url, c.authorization);
    assert.equal(reply.status, 401);
    assert.equal(reply.headers['content-type'], 'application/problem+json');
    assert.equal(reply.headers['www-authenticate'], BASIC_CHALLENGE);
    const problem = reply.json();
    assert.equal(problem.type, PROBLEM + 'login-failed');
    assert.equal(problem.status, 401);
    assert.equal(typeof problem.title, 'string');
    assert.equal(typeof problem.detail, 'string');
    assert.ok(!problem.detail.includes(ADMIN_PASSWORD), 'the detail does not echo the password');
    assert.deepEqual(setCookies(reply), []);
  });
}

test('POST /login: a failed login does not disturb an existing session', async (t) => {
  const server = await startTestServer(t);
  const cookie = await server.login();
  const failed = await send(server.url, 'POST', '/login', {
    headers: { authorization: basic('admin', 'wrong'), cookie },
  });
  assert.equal(failed.status, 401);
  assert.equal((await getRoot(server.url, cookie)).status, 200);
});

test('GET /login answers 405 with Allow naming POST', async (t) => {
  const server = await startTestServer(t);
  const reply = await send(server.url, 'GET', '/login', { headers: { authorization: basic('admin', ADMIN_PASSWORD) } });
  assert.equal(reply.status, 405);
  assert.match(String(reply.headers.allow), /\bPOST\b/);
  assert.deepEqual(setCookies(reply), []);
});

// --- POST /logout ----------------------------------------------------------

function assertClearingCookie(reply: Reply): void {
  const cookies = setCookies(reply);
  assert.equal(cookies.length, 1, JSON.stringify(cookies));
  const [pair, ...attributes] = attributesOf(cookies[0]!);
  assert.equal(pair, 'USER_TOKEN=');
  assert.ok(attributes.includes('Max-Age=0'), cookies[0]);
  assert.ok(attributes.includes('Path=/'), cookies[0]);
}

test('POST /logout answers 204 with a Set-Cookie clearing USER_TOKEN (Max-Age=0)', async (t) => {
  const server = await startTestServer(t);
  const cookie = await server.login();
  const reply = await send(server.url, 'POST', '/logout', { headers: { cookie } });
  assert.equal(reply.status, 204);
  assert.equal(reply.text, '');
  assertClearingCookie(reply);
});

test('POST /logout revokes the session on the server: a saved copy of the cookie no longer passes GET /', async (t) => {
  const server = await startTestServer(t);
  const cookie = await server.login();
  assert.equal((await getRoot(server.url, cookie)).status, 200);
  assert.equal((await send(server.url, 'POST', '/logout', { headers: { cookie } })).status, 204);
  const reply = await getRoot(server.url, cookie);
  assert.equal(reply.status, 401);
  assert.equal(reply.text, '"not authorized"');
});

test('POST /logout revokes only the sessions the request carries: another session stays valid', async (t) => {
  const server = await startTestServer(t);
  const kept = await server.login();
  const dropped = await server.login();
  assert.equal((await send(server.url, 'POST', '/logout', { headers: { cookie: dropped } })).status, 204);
  assert.equal((await getRoot(server.url, dropped)).status, 401);
  assert.equal((await getRoot(server.url, kept)).status, 200);
});

test('POST /logout revokes every valid session the request carries', async (t) => {
  const server = await startTestServer(t);
  const first = await server.login();
  const second = await server.login();
  const reply = await send(server.url, 'POST', '/logout', {
    headers: { cookie: `USER_TOKEN=junk; ${first}; ${second}` },
  });
  assert.equal(reply.status, 204);
  assert.equal((await getRoot(server.url, first)).status, 401);
  assert.equal((await getRoot(server.url, second)).status, 401);
});

test('POST /logout without a session also answers 204 with the clearing cookie', async (t) => {
  const server = await startTestServer(t);
  const reply = await send(server.url, 'POST', '/logout');
  assert.equal(reply.status, 204);
  assertClearingCookie(reply);
  const junk = await send(server.url, 'POST', '/logout', { headers: { cookie: 'USER_TOKEN=junk' } });
  assert.equal(junk.status, 204);
  assertClearingCookie(junk);
});

test('POST /logout twice with the same cookie answers 204 both times', async (t) => {
  const server = await startTestServer(t);
  const cookie = await server.login();
  assert.equal((await send(server.url, 'POST', '/logout', { headers: { cookie } })).status, 204);
  const again = await send(server.url, 'POST', '/logout', { headers: { cookie } });
  assert.equal(again.status, 204);
  assertClearingCookie(again);
});

test('POST /logout with cookieSecure clears the cookie with Secure too', async (t) => {
  const server = await startTestServer(t, { cookieSecure: true });
  const reply = await send(server.url, 'POST', '/logout');
  assert.equal(reply.status, 204);
  assert.ok(attributesOf(setCookies(reply)[0]!).includes('Secure'), setCookies(reply)[0]);
});

test('after logout a new login opens a fresh session that passes GET /', async (t) => {
  const server = await startTestServer(t);
  const old = await server.login();
  await send(server.url, 'POST', '/logout', { headers: { cookie: old } });
  const reply = await login(server.url, basic('admin', ADMIN_PASSWORD));
  const fresh = cookiePair(reply.headers['set-cookie']);
  assert.notEqual(fresh, old);
  assert.equal((await getRoot(server.url, fresh)).status, 200);
  assert.equal((await getRoot(server.url, old)).status, 401);
});
