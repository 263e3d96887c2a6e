/**
 * Hostile and malformed input (API.md "Users and references", "PUT rules" 1
 * and 5, "Access control and limits", the --max-body limit). Every case
 * checks the documented status, then that the server still serves, that the
 * state is unchanged, that no id was consumed, and that Object.prototype was
 * not polluted (the server runs in this process, so its prototypes are ours).
 */
import assert from 'node:assert/strict';
import { type IncomingMessage, type ServerResponse } from 'node:http';
import { test, type TestContext } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { Config } from '../server/ops/config.js';
import { signSession } from '../server/security/session-token.js';
import { put, send, startTestServer, type TestServer, assertProblem } from './helpers.js';
import { parseResponses, RawConnection, type Answer } from './raw-http.js';

const PROBLEM_CONTENT_TYPE = 'application/problem+json';
const PROBLEM_PREFIX = 'tag:users-server,2026:problem/';
const TEN_MB = 10 * 1024 * 1024;
const COOKIE_CHALLENGE = 'Cookie realm="users", cookie-name="USER_TOKEN", form-action="/login"';

// ---------------------------------------------------------------- helpers

/**
 * One request whose path is sent exactly as given. The helpers' `send` parses
 * base + path as a WHATWG URL, which resolves `%2e%2e` as a dot-segment
 * before anything is sent.
 */
async function sendPath(server: TestServer, method: string, path: string, body?: string): Promise<Answer> {
  const reply = await send(
    server.url,
    method,
    path,
    body === undefined ? {} : { body, headers: { 'content-type': 'application/json' } },
  );
  const headers: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(reply.headers))
    headers[name] = Array.isArray(value) ? value.join(', ') : value;
  return { status: reply.status, headers, text: reply.text };
}

/** Sends raw bytes, waits until the server closes the connection, and parses what it answered. */
async function rawClosed(t: TestContext, server: TestServer, bytes: string | Buffer): Promise<Answer[]> {
  const connection = await RawConnection.open(t, server.url);
  connection.write(bytes);
  await connection.until(() => connection.closed);
  return parseResponses(connection.text);
}

interface Snapshot {
  list: string;
  user: string;
  etag: string | undefined;
}

/** Seeds user 1 through the alias "alice" and returns what later checks compare with. */
async function seed(server: TestServer): Promise<Snapshot> {
  const created = await put(server.url, '/users/alice', { name: 'Alice', tags: ['a'] });
  assert.equal(created.status, 201);
  assert.equal(created.headers.location, '/users/1');
  return snapshot(server);
}

async function snapshot(server: TestServer): Promise<Snapshot> {
  const list = await send(server.url, 'GET', '/users?limit=1000');
  assert.equal(list.status, 200, 'the server still serves GET /users');
  const user = await send(server.url, 'GET', '/users/1');
  assert.equal(user.status, 200, 'the server still serves GET /users/1');
  return { list: list.text, user: user.text, etag: user.headers.etag as string | undefined };
}

function assertNotPolluted(): void {
  assert.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype.polluted is not set');
  assert.equal(Object.hasOwn(Object.prototype, 'polluted'), false);
  assert.equal(Object.hasOwn(Array.prototype, 'polluted'), false);
}

/** The server keeps serving, nothing changed, and nobody's prototype was touched. */
async function assertUnchanged(server: TestServer, before: Snapshot): Promise<void> {
  assertNotPolluted();
  const health = await send(server.url, 'GET', '/healthz');
  assert.equal(health.status, 200, 'GET /healthz still answers');
  assert.deepEqual(await snapshot(server), before, 'the state is unchanged');
}

/** A normal PUT then GET works, and the refused requests consumed no id. */
async function assertNormalWritesWork(server: TestServer, expectedId: number): Promise<void> {
  const created = await put(server.url, '/users/after-check', { name: 'After' });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers.location, `/users/${expectedId}`, 'no id was consumed by the refused requests');
  const read = await send(server.url, 'GET', '/users/after-check');
  assert.equal(read.status, 200);
  assert.equal(read.text, `{"name":"After","id":${expectedId}}`);
  assertNotPolluted();
}

interface HostileCase {
  name: string;
  overrides?: Partial<Config>;
  /** Sends the hostile input and asserts the documented answer. */
  run(t: TestContext, server: TestServer): Promise<void>;
}

const userWrites = [
  { method: 'PUT', path: '/users/1' },
  { method: 'PUT', path: '/users/bob' },
  { method: 'POST', path: '/users/new' },
] as const;

/** A JSON body refused the same way by every write that takes a user. */
function bodyCase(
  what: string,
  body: string | Buffer,
  status: number,
  code: string,
  options: {
    contentType?: string | null;
    overrides?: Partial<Config>;
    check?: (doc: Record<string, unknown>) => void;
  } = {},
): HostileCase {
  return {
    name: `bad input: ${what} answers ${status} ${code} on PUT /users/1, PUT /users/bob and POST /users/new`,
    ...(options.overrides && { overrides: options.overrides }),
    async run(_t, server) {
      for (const target of userWrites) {
        const contentType = options.contentType === undefined ? 'application/json' : options.contentType;
        const headers: Record<string, string> = contentType === null ? {} : { 'content-type': contentType };
        const reply = await send(server.url, target.method, target.path, { body, headers });
        const doc = assertProblem(reply, status, code, `${target.method} ${target.path}`);
        options.check?.(doc);
      }
    },
  };
}

function namesField(key: string) {
  return (doc: Record<string, unknown>) => {
    assert.equal(typeof doc.field, 'string', 'the 422 names the field');
    assert.ok((doc.field as string).includes(key), `field ${String(doc.field)} names "${key}"`);
  };
}

const utf8Bad = (bytes: number[]) => Buffer.concat([Buffer.from('{"name":"'), Buffer.from(bytes), Buffer.from('"}')]);

const forgedToken = signSession(
  {
    account: 'admin',
    sessionId: 'forged',
    issuedAt: Math.floor(Date.now() / 1000),
    expiresAt: Math.floor(Date.now() / 1000) + 3600,
  },
  Buffer.from('a key this server never had, 32 bytes or more'),
);

// ---------------------------------------------------------------- the cases

const cases: HostileCase[] = [
  // Unparseable JSON: 400 (PUT rule 1).
  bodyCase('malformed JSON {"name":', '{"name":', 400, 'invalid-json'),
  bodyCase("single-quoted JSON {'name':'x'}", "{'name':'x'}", 400, 'invalid-json'),
  bodyCase('JSON with a trailing comma', '{"name":"x",}', 400, 'invalid-json'),
  bodyCase('two JSON values in one body', '{"name":"x"}{"name":"y"}', 400, 'invalid-json'),
  bodyCase('an empty body', '', 400, 'invalid-json'),
  // Invalid UTF-8 is not valid JSON text (RFC 8259 section 8.1).
  bodyCase('invalid UTF-8 (a 0xFF byte) in the body', utf8Bad([0xff]), 400, 'invalid-json'),
  bodyCase('invalid UTF-8 (an overlong encoding of "/") in the body', utf8Bad([0xc0, 0xaf]), 400, 'invalid-json'),
  bodyCase('invalid UTF-8 (an encoded lone surrogate) in the body', utf8Bad([0xed, 0xa0, 0x80]), 400, 'invalid-json'),
  bodyCase('invalid UTF-8 (a truncated sequence) in the body', utf8Bad([0xe2, 0x82]), 400, 'invalid-json'),
  // JSON that is not an object: 422.
  bodyCase('a JSON array', '[{"name":"x"}]', 422, 'invalid-user'),
  bodyCase('a JSON string', '"x"', 422, 'invalid-user'),
  bodyCase('a JSON number', '42', 422, 'invalid-user'),
  bodyCase('JSON null', 'null', 422, 'invalid-user'),
  bodyCase('JSON true', 'true', 422, 'invalid-user'),
  // Nesting deeper than 16 levels: 422, without blowing the stack.
  bodyCase(
    'a body nested 5,000 arrays deep',
    `{"name":"x","a":${'['.repeat(5000)}${']'.repeat(5000)}}`,
    422,
    'invalid-user',
  ),
  bodyCase(
    'a body nested 5,000 objects deep',
    `{"name":"x","a":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}`,
    422,
    'invalid-user',
    {
      overrides: { maxBody: 65536 },
    },
  ),
  // Prototype-pollution vectors: 422 naming the field.
  bodyCase('{"__proto__":{"polluted":1},"name":"x"}', '{"__proto__":{"polluted":1},"name":"x"}', 422, 'invalid-user', {
    check: namesField('__proto__'),
  }),
  bodyCase(
    '{"name":"x","a":{"constructor":{"prototype":{"polluted":1}}}}',
    '{"name":"x","a":{"constructor":{"prototype":{"polluted":1}}}}',
    422,
    'invalid-user',
    { check: namesField('constructor') },
  ),
  bodyCase(
    'a __proto__ key inside an array element',
    '{"name":"x","list":[{"__proto__":{"polluted":1}}]}',
    422,
    'invalid-user',
    {
      check: namesField('__proto__'),
    },
  ),
  bodyCase('a top-level prototype key', '{"name":"x","prototype":{"polluted":1}}', 422, 'invalid-user', {
    check: namesField('prototype'),
  }),
  // I-JSON (RFC 7493): a number that does not fit a double, a string or key with a lone surrogate: 422 naming where.
  bodyCase('a number that does not fit a double (1e400)', '{"name":"x","score":1e400}', 422, 'invalid-user', {
    check: namesField('score'),
  }),
  bodyCase('a nested number below -1.8e308', '{"name":"x","a":{"b":[1,-2e308]}}', 422, 'invalid-user', {
    check: namesField('a.b[1]'),
  }),
  bodyCase('a lone high surrogate in another field', '{"name":"x","note":"a\\ud800b"}', 422, 'invalid-user', {
    check: namesField('note'),
  }),
  bodyCase('a lone low surrogate deep in an array', '{"name":"x","a":[["ok","\\udc00"]]}', 422, 'invalid-user', {
    check: namesField('a[0][1]'),
  }),
  bodyCase('a lone surrogate in a key', '{"name":"x","k\\ud800":1}', 422, 'invalid-user'),
  bodyCase('a lone surrogate in the name', '{"name":"\\ud800"}', 422, 'invalid-user', { check: namesField('name') }),
  // Content types: 415 (PUT rule 1).
  bodyCase('Content-Type text/plain', '{"name":"x"}', 415, 'unsupported-media-type', { contentType: 'text/plain' }),
  bodyCase('Content-Type application/xml', '<name>x</name>', 415, 'unsupported-media-type', {
    contentType: 'application/xml',
  }),
  bodyCase('no Content-Type', '{"name":"x"}', 415, 'unsupported-media-type', { contentType: null }),
  bodyCase('application/json with charset=utf-16', '{"name":"x"}', 415, 'unsupported-media-type', {
    contentType: 'application/json; charset=utf-16',
  }),
  // A body id that differs from the target: 409 (PUT rule 5; POST /users/new assigns ids itself).
  bodyCase('a body whose id differs from the target', '{"name":"x","id":99}', 409, 'id-conflict'),

  // Malformed references: 400 (API.md "Users and references").
  ...['%2F', 'a%2Fb', '%00', 'a%00', '%2e%2e', '%2E%2E', '%2e', '%20', 'a%zz', '%'].map((ref): HostileCase => ({
    name: `bad input: the reference /users/${ref} answers 400 invalid-ref on GET, PUT and DELETE`,
    async run(_t, server) {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const reply = await sendPath(server, method, `/users/${ref}`, method === 'PUT' ? '{"name":"x"}' : undefined);
        assertProblem(reply, 400, 'invalid-ref', `${method} /users/${ref}`);
      }
    },
  })),

  // Size limits: 413 (--max-body, default 16384).
  ...['PUT /users/1', 'PUT /users/bob', 'POST /users/new', 'POST /reservations', 'POST /login'].map(
    (target): HostileCase => ({
      name: `bad input: ${target} declaring a 10 MB Content-Length answers 413 payload-too-large before the body is sent, and closes`,
      async run(t, server) {
        const [answer, ...more] = await rawClosed(
          t,
          server,
          `${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${TEN_MB}\r\n\r\n{"name":"x",`,
        );
        assertProblem(answer!, 413, 'payload-too-large', target);
        assert.equal(more.length, 0);
      },
    }),
  ),
  ...['PUT /users/1', 'PUT /users/bob', 'POST /users/new', 'POST /reservations'].map((target): HostileCase => ({
    name: `bad input: ${target} streaming a chunked 10 MB body without Content-Length answers 413 payload-too-large while streaming`,
    async run(t, server) {
      // The server runs in this process: stop writing once it has answered. A write
      // after it closed would fail with EPIPE and lose the answer on our side.
      let response: ServerResponse | undefined;
      const onRequest = (_req: IncomingMessage, res: ServerResponse) => (response = res);
      server.running.server.on('request', onRequest);
      t.after(() => server.running.server.off('request', onRequest));
      const connection = await RawConnection.open(t, server.url);
      const answered = () => response?.headersSent === true || connection.text !== '' || connection.closed;
      connection.write(
        `${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      const chunk = Buffer.alloc(64 * 1024, 0x20); // JSON whitespace
      const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
      // The last chunk is never sent: only a server that counts while streaming can answer.
      for (let sent = 0; sent < TEN_MB && !answered(); sent += chunk.length) {
        if (!connection.write(frame))
          await connection.until(
            () => connection.text !== '' || connection.closed || connection.socket.writableLength === 0,
          );
        await new Promise((resolve) => setImmediate(resolve));
      }
      await connection.until(() => connection.closed);
      const [answer] = parseResponses(connection.text);
      assertProblem(answer!, 413, 'payload-too-large', target);
    },
  })),
  {
    name: 'bad input: Expect: 100-continue with an oversized Content-Length answers 413 without asking for the body (no 100 Continue)',
    async run(t, server) {
      for (const target of ['PUT /users/1', 'POST /users/new', 'POST /reservations']) {
        const answers = await rawClosed(
          t,
          server,
          `${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${TEN_MB}\r\nExpect: 100-continue\r\n\r\n`,
        );
        assert.deepEqual(
          answers.map((a) => a.status),
          [413],
          `${target}: one 413 and no 100 Continue`,
        );
        assertProblem(answers[0]!, 413, 'payload-too-large', target);
      }
    },
  },

  // The request line and headers.
  {
    name: 'bad input: an absolute-form request target (RFC 9112 section 3.2.2) is routed by its path',
    async run(t, server) {
      const { port } = new URL(server.url);
      const [user] = await rawClosed(
        t,
        server,
        'GET http://127.0.0.1/users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
      );
      assert.equal(user!.status, 200);
      assert.equal(user!.text, '{"name":"Alice","tags":["a"],"id":1}');
      const [list] = await rawClosed(
        t,
        server,
        `GET http://127.0.0.1:${port}/users?limit=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
      );
      assert.equal(list!.status, 200);
      assert.deepEqual(JSON.parse(list!.text), { items: [{ name: 'Alice', tags: ['a'], id: 1 }], next: null });
      const [health] = await rawClosed(
        t,
        server,
        'GET http://localhost/healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n',
      );
      assert.equal(health!.status, 200);
      assert.equal(health!.text, '{"status":"ok"}');
    },
  },
  ...[
    { what: 'a request line that is not HTTP', bytes: 'HELLO THERE\r\n\r\n' },
    { what: 'a request line without a target', bytes: 'GET\r\n\r\n' },
    { what: 'a request line with an unknown HTTP version', bytes: 'GET /users/1 HTTP/9.9\r\nHost: x\r\n\r\n' },
    { what: 'a NUL byte in the request target', bytes: 'GET /users/\u00001 HTTP/1.1\r\nHost: x\r\n\r\n' },
    {
      what: 'a TLS ClientHello sent to the plain-HTTP port',
      bytes: Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03, 0x0d, 0x0a, 0x0d, 0x0a]),
    },
  ].map((c): HostileCase => ({
    name: `bad input: ${c.what} answers 400 as application/problem+json and the connection is closed`,
    async run(t, server) {
      const connection = await RawConnection.open(t, server.url);
      connection.write(c.bytes);
      await connection.until(() => connection.closed);
      const [answer, ...more] = parseResponses(connection.text);
      assert.ok(answer !== undefined, 'the server answered before closing');
      assert.equal(answer.status, 400);
      assert.equal(answer.headers['content-type'], PROBLEM_CONTENT_TYPE);
      const doc = JSON.parse(answer.text) as Record<string, unknown>;
      assert.ok(String(doc.type).startsWith(PROBLEM_PREFIX), `a catalog type: ${String(doc.type)}`);
      assert.equal(doc.status, 400);
      assert.equal(more.length, 0);
    },
  })),
  {
    name: 'bad input: an asterisk-form target on GET (RFC 9112 section 3.2.4: OPTIONS only) answers 400 bad-request',
    async run(t, server) {
      const [answer] = await rawClosed(t, server, 'GET * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
      assertProblem(answer!, 400, 'bad-request');
    },
  },
  {
    name: 'bad input: a 20 KiB header answers 431 headers-too-large as a problem document',
    async run(t, server) {
      const [answer] = await rawClosed(
        t,
        server,
        `GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: ${'a'.repeat(20 * 1024)}\r\n\r\n`,
      );
      assertProblem(answer!, 431, 'headers-too-large');
    },
  },
  {
    name: 'bad input: GET / with a Cookie header of 50 forged USER_TOKEN cookies answers 401 "not authorized"',
    async run(_t, server) {
      const cookie = Array.from(
        { length: 50 },
        (_, i) => `USER_TOKEN=${i % 2 === 0 ? forgedToken : 'x'.repeat(40) + i}`,
      ).join('; ');
      const reply = await send(server.url, 'GET', '/', { headers: { cookie } });
      assert.equal(reply.status, 401);
      assert.equal(reply.text, '"not authorized"');
      assert.match(String(reply.headers['content-type']), /^application\/json/);
      assert.equal(reply.headers['www-authenticate'], COOKIE_CHALLENGE);
    },
  },
];

for (const c of cases) {
  test(`${c.name}; the server keeps serving, the state is unchanged and no prototype is polluted`, async (t) => {
    const server = await startTestServer(t, c.overrides ?? {});
    const before = await seed(server);
    await c.run(t, server);
    await assertUnchanged(server, before);
    await assertNormalWritesWork(server, 2);
  });
}

test('after all the hostile input in a row on one server, a normal PUT and GET still work', async (t) => {
  const server = await startTestServer(t);
  const before = await seed(server);
  for (const c of cases) {
    if (c.overrides !== undefined) continue;
    await c.run(t, server);
    await assertUnchanged(server, before);
  }
  await assertNormalWritesWork(server, 2);
});

// ---------------------------------------------------------------- --max-body boundary

/** A JSON user body of exactly `size` bytes. */
function bodyOfSize(size: number): string {
  const body = `{"name":"${'x'.repeat(size - 11)}"}`;
  assert.equal(Buffer.byteLength(body), size);
  return body;
}

const boundaryTargets = [
  { method: 'PUT', path: '/users/bob', created: 201 },
  { method: 'PUT', path: '/users/1', created: 200 },
  { method: 'POST', path: '/users/new', created: 201 },
  { method: 'POST', path: '/reservations', created: 201 },
] as const;

for (const framing of ['Content-Length', 'chunked'] as const) {
  for (const target of boundaryTargets) {
    test(`--max-body 64: ${target.method} ${target.path} with a ${framing} body of exactly 64 bytes is accepted, 65 bytes is 413`, async (t) => {
      const server = await startTestServer(t, { maxBody: 64 });
      const before = await seed(server);
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (framing === 'chunked') headers['transfer-encoding'] = 'chunked';
      const refused = await send(server.url, target.method, target.path, { body: bodyOfSize(65), headers });
      assertProblem(refused, 413, 'payload-too-large');
      await assertUnchanged(server, before);
      const accepted = await send(server.url, target.method, target.path, { body: bodyOfSize(64), headers });
      assert.equal(accepted.status, target.created, accepted.text);
      if (target.created === 201)
        assert.equal(accepted.headers.location, '/users/2', 'the refused request consumed no id');
    });
  }
}

test('Expect: 100-continue with an acceptable Content-Length gets 100 Continue, then the request is served', async (t) => {
  const server = await startTestServer(t);
  const body = '{"name":"Cid"}';
  const connection = await RawConnection.open(t, server.url);
  connection.write(
    `POST /users/new HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n` +
      'Expect: 100-continue\r\nConnection: close\r\n\r\n',
  );
  await connection.until(() => connection.text.includes('\r\n\r\n'));
  assert.match(connection.text, /^HTTP\/1\.1 100 /);
  connection.write(body);
  await connection.until(() => connection.closed);
  const answers = parseResponses(connection.text);
  assert.deepEqual(
    answers.map((a) => a.status),
    [100, 201],
  );
  assert.equal(answers[1]!.text, '{"name":"Cid","id":1}');
});

test('a UTF-8 byte order mark before a JSON body is skipped (RFC 8259 section 8.1); one after the first byte is invalid JSON', async (t) => {
  const server = await startTestServer(t);
  const bom = Buffer.from([0xef, 0xbb, 0xbf]);
  const headers = { 'content-type': 'application/json' };
  const created = await send(server.url, 'PUT', '/users/bom', {
    body: Buffer.concat([bom, Buffer.from('{"name":"Bo\u00f6m"}')]),
    headers,
  });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.text, '{"name":"Boöm","id":1}');
  const late = await send(server.url, 'PUT', '/users/bom', {
    body: Buffer.concat([Buffer.from(' '), bom, Buffer.from('{"name":"Late"}')]),
    headers,
  });
  assertProblem(late, 400, 'invalid-json');
  assert.equal((await send(server.url, 'GET', '/users/1')).text, '{"name":"Boöm","id":1}');
});

// ---------------------------------------------------------------- limits with their defaults

/** `{"name":"x","pad":"..."}` of exactly `size` bytes. */
function paddedBody(size: number): string {
  const body = `{"name":"x","pad":"${'p'.repeat(size - 21)}"}`;
  assert.equal(Buffer.byteLength(body), size);
  return body;
}

test('limits: with the default --max-body a body of 16384 bytes is accepted and one of 16385 bytes is 413', async (t) => {
  const server = await startTestServer(t);
  const before = await seed(server);
  assertProblem(await put(server.url, '/users/1', JSON.parse(paddedBody(16385))), 413, 'payload-too-large');
  await assertUnchanged(server, before);
  const accepted = await send(server.url, 'PUT', '/users/1', {
    body: paddedBody(16384),
    headers: { 'content-type': 'application/json' },
  });
  assert.equal(accepted.status, 200, accepted.text);
});

/** A user whose deepest container sits at `levels`, counting the top-level object as level 1. */
function nestedBody(levels: number): string {
  return `{"name":"x","a":${'{"a":'.repeat(levels - 2)}{}${'}'.repeat(levels - 2)}}`;
}

test('limits: nesting of 16 levels is accepted and 17 levels is 422 invalid-user (the top-level object is level 1)', async (t) => {
  const server = await startTestServer(t);
  const before = await seed(server);
  const refused = await send(server.url, 'PUT', '/users/1', {
    body: nestedBody(17),
    headers: { 'content-type': 'application/json' },
  });
  assertProblem(refused, 422, 'invalid-user');
  await assertUnchanged(server, before);
  const accepted = await send(server.url, 'PUT', '/users/1', {
    body: nestedBody(16),
    headers: { 'content-type': 'application/json' },
  });
  assert.equal(accepted.status, 200, accepted.text);
  assert.equal((await send(server.url, 'GET', '/users/1')).text, nestedBody(16).slice(0, -1) + ',"id":1}');
});

test('limits: the timeouts are headers 10 s, whole request 30 s and idle keep-alive 5 s, and the keep-alive one is announced', async (t) => {
  const server = await startTestServer(t);
  assert.equal(server.running.server.headersTimeout, 10_000);
  assert.equal(server.running.server.requestTimeout, 30_000);
  assert.equal(server.running.server.keepAliveTimeout, 5_000);
  const connection = await RawConnection.open(t, server.url);
  connection.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  await connection.until(() => connection.text.endsWith('{"status":"ok"}'));
  const [answer] = parseResponses(connection.text);
  assert.equal(answer!.headers['keep-alive'], 'timeout=5');
});

test('bad input: a body in a content coding (gzip, br) answers 415 with Accept-Encoding: identity on every write that takes a user, and changes nothing; Content-Encoding: identity is taken', async (t) => {
  const server = await startTestServer(t);
  const before = await seed(server);
  const gzipped = gzipSync('{"name":"x"}');
  for (const coding of ['gzip', 'br', 'identity, gzip']) {
    for (const target of userWrites) {
      const reply = await send(server.url, target.method, target.path, {
        body: gzipped,
        headers: { 'content-type': 'application/json', 'content-encoding': coding },
      });
      const doc = assertProblem(reply, 415, 'unsupported-media-type', `${coding}: ${target.method} ${target.path}`);
      assert.equal(reply.headers['accept-encoding'], 'identity');
      assert.match(String(doc.detail), new RegExp(`came with Content-Encoding: ${coding}\\.`));
    }
  }
  await assertUnchanged(server, before);
  const plain = await send(server.url, 'PUT', '/users/1', {
    body: '{"name":"Plain"}',
    headers: { 'content-type': 'application/json', 'content-encoding': 'Identity' },
  });
  assert.equal(plain.status, 200, plain.text);
});
