import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { RequireSession } from '../server/ops/config.js';
import { ADMIN_PASSWORD, basic, cookiePair, send, startTestServer, tempDir, type Reply } from './helpers.js';

// API.md "Access control and limits" (first bullet), "Sessions" (reader role)
// and SPEC.md "Authentication" 1-2.

const PROBLEM = 'tag:users-server,2026:problem/';
const COOKIE_CHALLENGE = 'Cookie realm="users", cookie-name="USER_TOKEN", form-action="/login"';
/** A /users request without credentials: the cookie, or an API token. */
const GUARD_CHALLENGE = `${COOKIE_CHALLENGE}, Bearer realm="users"`;

interface RequestCase {
  name: string;
  method: string;
  path: string;
  json?: unknown;
  access: 'read' | 'write';
  /** The status when the request is let through. */
  success: number;
}

// Every case runs against a store holding one user, /users/seed with id 1.
const requests: RequestCase[] = [
  {
    name: 'PUT creating through an alias',
    method: 'PUT',
    path: '/users/alice',
    json: { name: 'Alice' },
    access: 'write',
    success: 201,
  },
  {
    name: 'PUT replacing a user',
    method: 'PUT',
    path: '/users/1',
    json: { name: 'Changed' },
    access: 'write',
    success: 200,
  },
  { name: 'DELETE', method: 'DELETE', path: '/users/1', access: 'write', success: 204 },
  { name: 'POST /users/new', method: 'POST', path: '/users/new', json: { name: 'New' }, access: 'write', success: 201 },
  { name: 'POST /reservations', method: 'POST', path: '/reservations', access: 'write', success: 201 },
  { name: 'GET /users', method: 'GET', path: '/users', access: 'read', success: 200 },
  { name: 'GET /users/{id}', method: 'GET', path: '/users/1', access: 'read', success: 200 },
  { name: 'GET /users/{alias}', method: 'GET', path: '/users/seed', access: 'read', success: 200 },
  { name: 'HEAD /users/{id}', method: 'HEAD', path: '/users/1', access: 'read', success: 200 },
];

const modes: RequireSession[] = ['none', 'writes', 'all'];

function required(mode: RequireSession, access: 'read' | 'write'): boolean {
  return mode === 'all' || (mode === 'writes' && access === 'write');
}

function sendCase(url: string, c: RequestCase, cookie?: string): Promise<Reply> {
  const headers: Record<string, string> = cookie === undefined ? {} : { cookie };
  return send(url, c.method, c.path, c.json === undefined ? { headers } : { headers, json: c.json });
}

function assertUnauthorizedProblem(reply: Reply, withBody = true): void {
  assert.equal(reply.status, 401);
  assert.equal(reply.headers['www-authenticate'], GUARD_CHALLENGE);
  assert.equal(reply.headers['content-type'], 'application/problem+json');
  if (withBody) {
    const problem = reply.json();
    assert.equal(problem.type, PROBLEM + 'unauthorized');
    assert.equal(problem.status, 401);
  }
}

/** A server in `mode` holding /users/seed (id 1), and an admin cookie. */
async function seeded(t: TestContext, mode: RequireSession) {
  const server = await startTestServer(t, { requireSession: mode });
  const cookie = await server.login();
  const seed = await send(server.url, 'PUT', '/users/seed', { json: { name: 'Seed' }, headers: { cookie } });
  assert.equal(seed.status, 201);
  assert.equal(seed.headers.location, '/users/1');
  return { server, cookie };
}

/** What a refused request must leave alone: the user list, and the next id to be issued. */
async function assertUnchanged(url: string, cookie: string, listBefore: string): Promise<void> {
  const list = await send(url, 'GET', '/users', { headers: { cookie } });
  assert.equal(list.status, 200);
  assert.equal(list.text, listBefore, 'the users are unchanged');
  const reserved = await send(url, 'POST', '/reservations', { headers: { cookie } });
  assert.equal(reserved.status, 201);
  assert.equal(reserved.json().id, 2, 'no id was issued by the refused request');
}

for (const mode of modes) {
  for (const c of requests) {
    const guarded = required(mode, c.access);
    const withBody = c.method !== 'HEAD';

    test(`Access control, require-session ${mode}: ${c.name} without a session ${guarded ? 'answers 401 unauthorized with the Cookie challenge and changes nothing' : `is let through (${c.success})`}`, async (t) => {
      const { server, cookie } = await seeded(t, mode);
      const before = (await send(server.url, 'GET', '/users', { headers: { cookie } })).text;
      const reply = await sendCase(server.url, c);
      if (guarded) {
        assertUnauthorizedProblem(reply, withBody);
        await assertUnchanged(server.url, cookie, before);
      } else {
        assert.equal(reply.status, c.success, reply.text);
      }
    });

    test(`Access control, require-session ${mode}: ${c.name} with an invalid USER_TOKEN ${guarded ? 'answers 401 unauthorized and changes nothing' : `is let through, sessions not consulted (${c.success})`}`, async (t) => {
      const { server, cookie } = await seeded(t, mode);
      const before = (await send(server.url, 'GET', '/users', { headers: { cookie } })).text;
      const reply = await sendCase(server.url, c, 'USER_TOKEN=forged.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
      if (guarded) {
        assertUnauthorizedProblem(reply, withBody);
        await assertUnchanged(server.url, cookie, before);
      } else {
        assert.equal(reply.status, c.success, reply.text);
        assert.equal(reply.headers['www-authenticate'], undefined);
      }
    });

    test(`Access control, require-session ${mode}: ${c.name} with an admin session answers ${c.success}`, async (t) => {
      const { server, cookie } = await seeded(t, mode);
      const reply = await sendCase(server.url, c, cookie);
      assert.equal(reply.status, c.success, reply.text);
    });
  }
}

test('Access control, require-session writes: a session revoked by logout no longer passes a PUT (401) and the PUT changes nothing', async (t) => {
  const { server, cookie } = await seeded(t, 'writes');
  const other = await server.login();
  const before = (await send(server.url, 'GET', '/users')).text;
  assert.equal((await send(server.url, 'POST', '/logout', { headers: { cookie } })).status, 204);
  const reply = await send(server.url, 'PUT', '/users/1', { json: { name: 'Changed' }, headers: { cookie } });
  assertUnauthorizedProblem(reply);
  await assertUnchanged(server.url, other, before);
});

test('Access control, require-session writes: an expired session answers 401 on a PUT (injected clock)', async (t) => {
  let now = Date.UTC(2026, 0, 1);
  const server = await startTestServer(t, { requireSession: 'writes', sessionTtl: 60 }, { clock: () => now });
  const cookie = await server.login();
  assert.equal((await send(server.url, 'PUT', '/users/a', { json: { name: 'A' }, headers: { cookie } })).status, 201);
  now += 61_000;
  assertUnauthorizedProblem(await send(server.url, 'PUT', '/users/b', { json: { name: 'B' }, headers: { cookie } }));
  const list = await send(server.url, 'GET', '/users');
  assert.deepEqual(list.json().items, [{ name: 'A', id: 1 }]);
});

test('Access control, require-session writes: a session signed with an older key passes a PUT and is re-issued', async (t) => {
  const secretA = 'access-secret-A'.padEnd(40, 'a');
  const secretB = 'access-secret-B'.padEnd(40, 'b');
  // One server restarted with each list of secrets: its data directory keeps the admin's identity.
  const data = tempDir(t);
  const old = await startTestServer(t, { data, store: 'memory', secrets: [secretA] });
  const cookie = await old.login();
  await old.running.stop();
  const rotated = await startTestServer(t, {
    data,
    store: 'memory',
    requireSession: 'writes',
    secrets: [secretB, secretA],
  });
  const reply = await send(rotated.url, 'PUT', '/users/a', { json: { name: 'A' }, headers: { cookie } });
  assert.equal(reply.status, 201);
  const fresh = cookiePair(reply.headers['set-cookie']);
  assert.notEqual(fresh, cookie);
  await rotated.running.stop();
  const onlyB = await startTestServer(t, { data, store: 'memory', requireSession: 'writes', secrets: [secretB] });
  assert.equal((await send(onlyB.url, 'POST', '/reservations', { headers: { cookie: fresh } })).status, 201);
  assertUnauthorizedProblem(await send(onlyB.url, 'POST', '/reservations', { headers: { cookie } }));
});

const openPaths: { name: string; method: string; path: string; status: number; cookieStatus: number }[] = [
  { name: 'GET / (answers for itself)', method: 'GET', path: '/', status: 401, cookieStatus: 200 },
  { name: 'POST /logout', method: 'POST', path: '/logout', status: 204, cookieStatus: 204 },
  { name: 'GET /healthz', method: 'GET', path: '/healthz', status: 200, cookieStatus: 200 },
];

for (const c of openPaths) {
  test(`Access control, require-session all: ${c.name} stays open`, async (t) => {
    const server = await startTestServer(t, { requireSession: 'all' });
    const reply = await send(server.url, c.method, c.path);
    assert.equal(reply.status, c.status);
    assert.notEqual(reply.headers['content-type'], 'application/problem+json');
    const cookie = await server.login();
    assert.equal((await send(server.url, c.method, c.path, { headers: { cookie } })).status, c.cookieStatus);
  });
}

test('Access control, require-session all: GET / without a session gives the row-6 body, not the unauthorized problem', async (t) => {
  const server = await startTestServer(t, { requireSession: 'all' });
  const reply = await send(server.url, 'GET', '/');
  assert.equal(reply.text, '"not authorized"');
  assert.equal(reply.headers['content-type'], 'application/json');
});

test('Access control, require-session all: POST /login stays open and opens a session', async (t) => {
  const server = await startTestServer(t, { requireSession: 'all' });
  const reply = await send(server.url, 'POST', '/login', {
    headers: { authorization: basic('admin', ADMIN_PASSWORD) },
  });
  assert.equal(reply.status, 200);
  assert.equal(reply.text, '"OK"');
  const cookie = cookiePair(reply.headers['set-cookie']);
  assert.equal((await send(server.url, 'GET', '/users', { headers: { cookie } })).status, 200);
});

test('Access control, require-session all: reads answer Cache-Control: private (no shared cache keeps them for others), their 304 too; without the mode reads carry none', async (t) => {
  const server = await startTestServer(t, { requireSession: 'all' });
  const cookie = await server.login();
  assert.equal(
    (await send(server.url, 'PUT', '/users/seed', { json: { name: 'Seed' }, headers: { cookie } })).status,
    201,
  );
  for (const path of ['/users/1', '/users/seed', '/users?limit=1']) {
    assert.equal(
      (await send(server.url, 'GET', path, { headers: { cookie } })).headers['cache-control'],
      'private',
      path,
    );
  }
  const one = await send(server.url, 'GET', '/users/1', { headers: { cookie } });
  const notModified = await send(server.url, 'GET', '/users/1', {
    headers: { cookie, 'if-none-match': String(one.headers.etag) },
  });
  assert.deepEqual([notModified.status, notModified.headers['cache-control']], [304, 'private']);
  assert.equal((await send(server.url, 'GET', '/users/1')).headers['cache-control'], 'no-store', 'the 401');
  const open = await startTestServer(t, { requireSession: 'writes' });
  assert.equal(
    (await send(open.url, 'PUT', '/users/seed', { json: { name: 'Seed' }, headers: { cookie: await open.login() } }))
      .status,
    201,
  );
  assert.equal((await send(open.url, 'GET', '/users/1')).headers['cache-control'], undefined);
});

// --- reader role -------------------------------------------------------------

const READER_PASSWORD = 'reader-password';

/** A server in `mode` with an admin and a reader account. */
async function appWithReader(t: TestContext, mode: RequireSession): Promise<string> {
  const server = await startTestServer(
    t,
    { requireSession: mode },
    { accounts: [{ name: 'reader', role: 'reader', password: READER_PASSWORD }] },
  );
  return server.url;
}

async function loginAs(url: string, user: string, password: string): Promise<string> {
  const reply = await send(url, 'POST', '/login', { headers: { authorization: basic(user, password) } });
  assert.equal(reply.status, 200, reply.text);
  return cookiePair(reply.headers['set-cookie']);
}

const readerWrites: RequestCase[] = requests.filter((c) => c.access === 'write');

for (const mode of ['writes', 'all'] as const) {
  for (const c of readerWrites) {
    test(`Sessions, require-session ${mode}: a reader session on ${c.name} answers 403 forbidden and changes nothing`, async (t) => {
      const url = await appWithReader(t, mode);
      const admin = await loginAs(url, 'admin', ADMIN_PASSWORD);
      assert.equal(
        (await send(url, 'PUT', '/users/seed', { json: { name: 'Seed' }, headers: { cookie: admin } })).status,
        201,
      );
      const before = (await send(url, 'GET', '/users', { headers: { cookie: admin } })).text;
      const reader = await loginAs(url, 'reader', READER_PASSWORD);
      const reply = await sendCase(url, c, reader);
      assert.equal(reply.status, 403);
      assert.equal(reply.headers['content-type'], 'application/problem+json');
      assert.equal(reply.json().type, PROBLEM + 'forbidden');
      await assertUnchanged(url, admin, before);
    });
  }
}

test('Sessions: a reader session passes GET / and the reads under require-session all', async (t) => {
  const url = await appWithReader(t, 'all');
  const admin = await loginAs(url, 'admin', ADMIN_PASSWORD);
  assert.equal(
    (await send(url, 'PUT', '/users/seed', { json: { name: 'Seed' }, headers: { cookie: admin } })).status,
    201,
  );
  const reader = await loginAs(url, 'reader', READER_PASSWORD);
  const root = await send(url, 'GET', '/', { headers: { cookie: reader } });
  assert.equal(root.status, 200);
  assert.equal(root.text, '"OK"');
  const list = await send(url, 'GET', '/users', { headers: { cookie: reader } });
  assert.equal(list.status, 200);
  assert.deepEqual(list.json().items, [{ name: 'Seed', id: 1 }]);
  const one = await send(url, 'GET', '/users/1', { headers: { cookie: reader } });
  assert.equal(one.status, 200);
  assert.deepEqual(one.json(), { name: 'Seed', id: 1 });
  assertUnauthorizedProblem(await send(url, 'GET', '/users/1'));
});

test('Sessions: a reader without a session on a write under require-session writes gets 401, not 403', async (t) => {
  const url = await appWithReader(t, 'writes');
  assertUnauthorizedProblem(await send(url, 'PUT', '/users/a', { json: { name: 'A' } }));
});

test('Sessions: the reader role is looked up per request: an admin session in the same app may write', async (t) => {
  const url = await appWithReader(t, 'writes');
  const admin = await loginAs(url, 'admin', ADMIN_PASSWORD);
  assert.equal((await send(url, 'PUT', '/users/a', { json: { name: 'A' }, headers: { cookie: admin } })).status, 201);
});
