/**
 * API.md "Users and references": the grammar of `/users/{ref}`. A ref is a
 * canonical id (no leading zero, at most 2^53-1) or an alias (1..200
 * unreserved characters with at least one non-digit, not `new`).
 * Percent-encoded unreserved characters equal their plain form. A digit
 * string that is not a canonical safe integer: 404. Any other malformed ref:
 * 400 invalid-ref.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { idOfDigits, NO_SUCH_ID, NOT_DIGITS, parseRef } from '../shared/user.js';
import { send, startTestServer, type TestServer, assertProblem, listText } from './helpers.js';

const JSON_HEADERS = { 'content-type': 'application/json' };

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/**
 * One request whose path goes on the wire exactly as given. The helpers'
 * `send` parses base + path as a WHATWG URL, which resolves `.`, `..` and
 * `%2e%2e` as dot-segments before anything is sent.
 */
function sendPath(
  server: TestServer,
  method: string,
  path: string,
  options: { body?: string; headers?: Record<string, string> } = {},
): Promise<Answer> {
  return send(server.url, method, path, options);
}

function putPath(server: TestServer, path: string, json: unknown): Promise<Answer> {
  return sendPath(server, 'PUT', path, { body: JSON.stringify(json), headers: JSON_HEADERS });
}

/** A server with user 1 created through the alias "alice". */
async function seeded(t: TestContext): Promise<TestServer> {
  const server = await startTestServer(t);
  const created = await putPath(server, '/users/alice', { name: 'Alice' });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers.location, '/users/1');
  return server;
}

/** Asserts that no id was consumed: the next POST /users/new gets `expected`. */
async function assertNextId(server: TestServer, expected: number): Promise<void> {
  const created = await send(server.url, 'POST', '/users/new', { json: { name: 'probe' } });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers.location, `/users/${expected}`, 'no id was consumed');
}

// ---------------------------------------------------------------- ids

test('refs: a canonical id names its user for GET, PUT and DELETE', async (t) => {
  const server = await seeded(t);
  const read = await sendPath(server, 'GET', '/users/1');
  assert.equal(read.status, 200);
  assert.equal(read.text, '{"name":"Alice","id":1}');
  const replaced = await putPath(server, '/users/1', { name: 'Alice B' });
  assert.equal(replaced.status, 200, replaced.text);
  assert.equal(replaced.text, '{"name":"Alice B","id":1}');
  const deleted = await sendPath(server, 'DELETE', '/users/1');
  assert.equal(deleted.status, 204);
});

const nonCanonicalIds: Array<{ name: string; ref: string }> = [
  { name: 'a leading zero (01)', ref: '01' },
  { name: 'two leading zeros (001)', ref: '001' },
  { name: 'zero (0)', ref: '0' },
  { name: 'zeros only (00)', ref: '00' },
  { name: '2^53 (9007199254740992), one past the largest safe integer', ref: '9007199254740992' },
  { name: '2^53+1 (9007199254740993)', ref: '9007199254740993' },
  { name: 'a 30-digit number', ref: '1'.repeat(30) },
  { name: 'a percent-encoded leading zero (%30%31)', ref: '%30%31' },
];

for (const c of nonCanonicalIds) {
  test(`refs: a digit string that is not a canonical safe integer, ${c.name}, answers 404 not-found to GET, HEAD, PUT and DELETE, changing nothing`, async (t) => {
    const server = await seeded(t);
    const before = await listText(server);
    const path = `/users/${c.ref}`;
    assertProblem(await sendPath(server, 'GET', path), 404, 'not-found', `GET ${path}`);
    const head = await sendPath(server, 'HEAD', path);
    assert.equal(head.status, 404, `HEAD ${path}`);
    assert.equal(head.text, '');
    assertProblem(await putPath(server, path, { name: 'Mallory' }), 404, 'not-found', `PUT ${path}`);
    assertProblem(await sendPath(server, 'DELETE', path), 404, 'not-found', `DELETE ${path}`);
    assert.equal(await listText(server), before);
    // /users/01 must not have reached user 1.
    assert.equal((await sendPath(server, 'GET', '/users/1')).text, '{"name":"Alice","id":1}');
    await assertNextId(server, 2);
  });
}

test('refs: the largest safe integer 9007199254740991 is a canonical id: a GET answers 404 and a PUT 404 (never issued), not 400', async (t) => {
  const server = await seeded(t);
  assertProblem(await sendPath(server, 'GET', '/users/9007199254740991'), 404, 'not-found', 'GET');
  assertProblem(await putPath(server, '/users/9007199254740991', { name: 'Max' }), 404, 'not-found', 'PUT');
  await assertNextId(server, 2);
});

// ---------------------------------------------------------------- malformed refs

const malformed: Array<{ name: string; ref: string; code?: string }> = [
  { name: 'an encoded slash (%2F)', ref: '%2F' },
  { name: 'an encoded slash inside an alias (a%2Fb)', ref: 'a%2Fb' },
  { name: 'a lower-case encoded slash (%2f)', ref: '%2f' },
  { name: 'an encoded NUL (%00)', ref: '%00' },
  { name: 'an encoded NUL after a name (alice%00)', ref: 'alice%00' },
  { name: 'an encoded space (%20)', ref: '%20' },
  { name: 'an encoded space inside (a%20b)', ref: 'a%20b' },
  { name: 'a dot-dot segment (..)', ref: '..' },
  { name: 'a dot segment (.)', ref: '.' },
  { name: 'an encoded dot-dot (%2e%2e)', ref: '%2e%2e' },
  { name: 'an upper-case encoded dot-dot (%2E%2E)', ref: '%2E%2E' },
  { name: 'a half-encoded dot-dot (.%2e)', ref: '.%2e' },
  { name: 'an encoded dot (%2e)', ref: '%2e' },
  { name: 'an alias of 201 characters', ref: 'a'.repeat(201) },
  { name: 'an alias of 201 characters with one encoded (%61 + 200)', ref: '%61' + 'a'.repeat(200) },
  { name: 'a broken percent-escape (%zz)', ref: '%zz' },
  { name: 'a truncated percent-escape (a%)', ref: 'a%' },
  { name: 'a truncated percent-escape (a%6)', ref: 'a%6' },
  { name: 'a reserved character (a@b)', ref: 'a@b' },
  { name: 'a sub-delim (a+b)', ref: 'a+b' },
  { name: 'a sub-delim (a!b)', ref: 'a!b' },
  { name: 'an encoded non-ASCII letter (caf%C3%A9)', ref: 'caf%C3%A9' },
  // A raw byte above 0x7F is not allowed in a request-target at all (RFC 9112
  // section 3.2): the request line is refused before routing.
  { name: 'a raw non-ASCII byte (caf\\xe9)', ref: 'caf\xe9', code: 'bad-request' },
  { name: 'an encoded percent sign (%25)', ref: '%25' },
];

for (const c of malformed) {
  const code = c.code ?? 'invalid-ref';
  test(`refs: ${c.name} is a malformed ref: GET, PUT and DELETE answer 400 ${code}, changing nothing`, async (t) => {
    const server = await seeded(t);
    const before = await listText(server);
    const path = `/users/${c.ref}`;
    assertProblem(await sendPath(server, 'GET', path), 400, code, `GET ${path}`);
    assertProblem(await putPath(server, path, { name: 'Mallory' }), 400, code, `PUT ${path}`);
    assertProblem(await sendPath(server, 'DELETE', path), 400, code, `DELETE ${path}`);
    assert.equal(await listText(server), before);
    await assertNextId(server, 2);
  });
}

// ---------------------------------------------------------------- aliases

const EVERY_UNRESERVED = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~';

const aliases: Array<{ name: string; alias: string }> = [
  { name: 'every unreserved character (A-Z a-z 0-9 - . _ ~)', alias: EVERY_UNRESERVED },
  { name: 'one character', alias: 'x' },
  { name: 'a tilde only', alias: '~' },
  { name: 'three dots (not a dot-segment)', alias: '...' },
  { name: 'digits and a hyphen (-1)', alias: '-1' },
  { name: 'a decimal-looking string (1.5)', alias: '1.5' },
  { name: '199 digits and one letter', alias: '1'.repeat(199) + 'x' },
  { name: 'exactly 200 characters', alias: 'b'.repeat(200) },
  { name: 'a client-generated UUID', alias: '3f2504e0-4f89-41d3-9a0c-0305e82c3301' },
  { name: 'a capitalised reserved word (New), which is not "new"', alias: 'New' },
  { name: 'a word starting with the reserved word (news)', alias: 'news' },
];

for (const c of aliases) {
  test(`refs: an alias of ${c.name} is accepted: PUT creates (201), GET by alias and by id return it, a second PUT replaces (200), DELETE removes`, async (t) => {
    const server = await startTestServer(t);
    const path = `/users/${c.alias}`;
    const created = await putPath(server, path, { name: 'Al' });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.headers.location, '/users/1');
    const byAlias = await sendPath(server, 'GET', path);
    assert.equal(byAlias.status, 200);
    assert.equal(byAlias.text, '{"name":"Al","id":1}');
    assert.equal(byAlias.headers['content-location'], '/users/1');
    assert.equal((await sendPath(server, 'GET', '/users/1')).text, '{"name":"Al","id":1}');
    const replaced = await putPath(server, path, { name: 'Al 2' });
    assert.equal(replaced.status, 200, replaced.text);
    assert.equal(replaced.text, '{"name":"Al 2","id":1}');
    assert.equal((await sendPath(server, 'DELETE', path)).status, 204);
    assert.equal((await sendPath(server, 'GET', '/users/1')).status, 404);
  });
}

test('refs: aliases are distinct from one another: two aliases create two users', async (t) => {
  const server = await startTestServer(t);
  assert.equal((await putPath(server, '/users/a-1', { name: 'one' })).headers.location, '/users/1');
  assert.equal((await putPath(server, '/users/a_1', { name: 'two' })).headers.location, '/users/2');
  assert.equal((await sendPath(server, 'GET', '/users/a-1')).text, '{"name":"one","id":1}');
  assert.equal((await sendPath(server, 'GET', '/users/a_1')).text, '{"name":"two","id":2}');
});

test('refs: /users/%61lice is /users/alice: GET returns the same user and PUT replaces it (200, not a second user)', async (t) => {
  const server = await seeded(t);
  const read = await sendPath(server, 'GET', '/users/%61lice');
  assert.equal(read.status, 200);
  assert.equal(read.text, '{"name":"Alice","id":1}');
  assert.equal(read.headers['content-location'], '/users/1');
  assert.equal(read.headers.etag, (await sendPath(server, 'GET', '/users/alice')).headers.etag);
  const replaced = await putPath(server, '/users/%61lic%65', { name: 'Alice 2' });
  assert.equal(replaced.status, 200, replaced.text);
  assert.equal(replaced.text, '{"name":"Alice 2","id":1}');
  assert.equal((await sendPath(server, 'GET', '/users/alice')).text, '{"name":"Alice 2","id":1}');
  assert.equal(await listText(server), '{"items":[{"name":"Alice 2","id":1}],"next":null}');
});

test('refs: percent-encoded unreserved characters equal their plain form in either hex case (~ as %7E and %7e, digits as %31)', async (t) => {
  const server = await startTestServer(t);
  assert.equal((await putPath(server, '/users/a~b', { name: 'T' })).status, 201);
  for (const path of ['/users/a%7Eb', '/users/a%7eb', '/users/%61%7E%62', '/users/%31']) {
    const read = await sendPath(server, 'GET', path);
    assert.equal(read.status, 200, path);
    assert.equal(read.text, '{"name":"T","id":1}', path);
  }
  // A PUT through an encoded form of the alias does not create a second user.
  assert.equal((await putPath(server, '/users/a%7Eb', { name: 'T2' })).status, 200);
  assert.equal(await listText(server), '{"items":[{"name":"T2","id":1}],"next":null}');
});

test('refs: an alias that names nobody answers 404 not-found to GET and DELETE', async (t) => {
  const server = await seeded(t);
  assertProblem(await sendPath(server, 'GET', '/users/bob'), 404, 'not-found', 'GET');
  assertProblem(await sendPath(server, 'DELETE', '/users/bob'), 404, 'not-found', 'DELETE');
  await assertNextId(server, 2);
});

// ---------------------------------------------------------------- the reserved word "new"

for (const path of ['/users/new', '/users/%6Eew', '/users/n%65w']) {
  test(`refs: the reserved word as a PUT target (${path}) answers 405 method-not-allowed with Allow listing POST, creating nothing`, async (t) => {
    const server = await seeded(t);
    const before = await listText(server);
    const refused = await putPath(server, path, { name: 'Newt' });
    assertProblem(refused, 405, 'method-not-allowed', `PUT ${path}`);
    const allow = String(refused.headers.allow)
      .split(',')
      .map((m) => m.trim());
    assert.ok(allow.includes('POST'), `Allow ${refused.headers.allow} lists POST`);
    assert.ok(!allow.includes('PUT'), `Allow ${refused.headers.allow} does not list PUT`);
    assert.equal(await listText(server), before);
    await assertNextId(server, 2);
  });
}

test('refs: GET and DELETE on /users/new answer 405 method-not-allowed, not a user lookup', async (t) => {
  const server = await seeded(t);
  assertProblem(await sendPath(server, 'GET', '/users/new'), 405, 'method-not-allowed', 'GET');
  assertProblem(await sendPath(server, 'DELETE', '/users/new'), 405, 'method-not-allowed', 'DELETE');
  assert.equal((await sendPath(server, 'GET', '/users/1')).status, 200);
});

// ---------------------------------------------------------------- prototype names

const prototypeNames = [
  '__proto__',
  'hasOwnProperty',
  'constructor',
  'prototype',
  'toString',
  'valueOf',
  'isPrototypeOf',
];

function prototypeFingerprint(): string {
  return JSON.stringify(
    Object.getOwnPropertyNames(Object.prototype)
      .sort()
      .map((name) => {
        const d = Object.getOwnPropertyDescriptor(Object.prototype, name)!;
        return [name, typeof d.value, typeof d.get, d.writable, d.enumerable, d.configurable];
      }),
  );
}

test('refs: __proto__, hasOwnProperty, constructor and other Object.prototype names are ordinary aliases, and Object.prototype stays untouched', async (t) => {
  const fingerprint = prototypeFingerprint();
  const hasOwnProperty = Object.prototype.hasOwnProperty;
  const toString = Object.prototype.toString;
  const server = await startTestServer(t);
  const ids = new Map<string, number>();
  for (const [i, alias] of prototypeNames.entries()) {
    const created = await putPath(server, `/users/${alias}`, { name: alias, polluted: 'yes', isAdmin: true });
    assert.equal(created.status, 201, `PUT /users/${alias}: ${created.text}`);
    assert.equal(created.headers.location, `/users/${i + 1}`, `PUT /users/${alias} creates a fresh user`);
    ids.set(alias, i + 1);
  }
  for (const alias of prototypeNames) {
    const read = await sendPath(server, 'GET', `/users/${alias}`);
    assert.equal(read.status, 200, `GET /users/${alias}`);
    assert.deepEqual(JSON.parse(read.text), { name: alias, polluted: 'yes', isAdmin: true, id: ids.get(alias) });
    assert.equal(read.headers['content-location'], `/users/${ids.get(alias)}`);
    // A replace reaches the same user, not a new one.
    const replaced = await putPath(server, `/users/${alias}`, { name: `${alias}!` });
    assert.equal(replaced.status, 200, `second PUT /users/${alias}`);
  }
  // An alias bound to nobody with a prototype name is still unknown.
  assertProblem(
    await sendPath(server, 'GET', '/users/__defineGetter__'),
    404,
    'not-found',
    'GET /users/__defineGetter__',
  );
  const list = JSON.parse(await listText(server)) as { items: Array<{ id: number }> };
  assert.deepEqual(
    list.items.map((u) => u.id),
    prototypeNames.map((_, i) => i + 1),
  );
  // The server runs in this process: its prototypes are ours.
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
  assert.equal(({} as Record<string, unknown>).isAdmin, undefined);
  assert.equal(Object.getPrototypeOf({}), Object.prototype);
  assert.equal(Object.prototype.hasOwnProperty, hasOwnProperty);
  assert.equal(Object.prototype.toString, toString);
  assert.equal({}.constructor, Object);
  assert.equal(prototypeFingerprint(), fingerprint);
});

test('refs: deleting the user bound to __proto__ releases that alias like any other', async (t) => {
  const server = await startTestServer(t);
  assert.equal((await putPath(server, '/users/__proto__', { name: 'p' })).status, 201);
  assert.equal((await sendPath(server, 'DELETE', '/users/__proto__')).status, 204);
  assertProblem(await sendPath(server, 'GET', '/users/__proto__'), 404, 'not-found', 'GET after DELETE');
  const again = await putPath(server, '/users/__proto__', { name: 'p2' });
  assert.equal(again.status, 201);
  assert.equal(again.headers.location, '/users/2');
  assert.equal(({} as Record<string, unknown>).name, undefined);
});

test("refs: parseRef reads a plain id, its percent-encoded digits and an alias the same way idOfDigits reads a target's digits", () => {
  const cases: [string, ReturnType<typeof parseRef>][] = [
    ['1', { kind: 'id', id: 1 }],
    ['42', { kind: 'id', id: 42 }],
    ['9007199254740991', { kind: 'id', id: 9007199254740991 }],
    ['9007199254740992', { kind: 'no-such-id' }],
    ['123456789012345678901', { kind: 'no-such-id' }],
    ['0', { kind: 'no-such-id' }],
    ['01', { kind: 'no-such-id' }],
    ['%31', { kind: 'id', id: 1 }],
    ['%30%31', { kind: 'no-such-id' }],
    ['12a', { kind: 'alias', alias: '12a' }],
    ['', { kind: 'invalid', reason: 'the reference is empty' }],
  ];
  for (const [segment, ref] of cases) {
    assert.deepEqual(parseRef(segment), ref, segment);
    const digits = idOfDigits(`/users/${segment}`, '/users/'.length);
    const expected =
      ref.kind === 'id' && !segment.includes('%')
        ? ref.id
        : ref.kind === 'no-such-id' && !segment.includes('%')
          ? NO_SUCH_ID
          : NOT_DIGITS;
    assert.equal(digits, expected, `idOfDigits of /users/${segment}`);
  }
});
