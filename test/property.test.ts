/**
 * Property-based tests (issue 6) with fast-check: random request lines,
 * paths, headers, cookies and bodies, sent as raw bytes, never make the
 * server answer 5xx (but 501 for a method it does not recognize), log an unexpected error or stop serving; every error
 * it
 * answers is a problem document (API.md "Endpoints": all but GET /'s
 * mandated 401); accepted user bodies are stored as their JSON round trip
 * plus `id` (docs/api.md "Users and representations"); and a session cookie
 * passes exactly when the server signed it.
 *
 * On failure fast-check prints the seed and the shrunk counterexample; rerun
 * one with `fc.assert(..., { seed, path })`.
 */
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import fc from 'fast-check';
import { PROBLEM_CONTENT_TYPE, PROBLEM_TYPE_PREFIX } from '../shared/problems.js';
import type { Config } from '../server/ops/config.js';
import { send, startTestServer, type TestServer } from './helpers.js';
import { parseResponses, RawConnection, type Answer } from './raw-http.js';

const RUNS = 300;
const RAW_RUNS = 600;

interface Watched {
  server: TestServer;
  logged: string[];
  /** The value of a valid admin USER_TOKEN. */
  token: string;
}

async function watchedServer(t: TestContext, overrides: Partial<Config> = {}): Promise<Watched> {
  const logged: string[] = [];
  const server = await startTestServer(t, overrides, { logError: (message) => logged.push(message) });
  const token = (await server.login()).slice('USER_TOKEN='.length);
  // A few users to aim at: 1 and 2, and "alice" (3).
  const cookie = `USER_TOKEN=${token}`;
  for (const path of ['/users/new', '/users/new'])
    assert.equal((await send(server.url, 'POST', path, { json: { name: 'Seed' }, headers: { cookie } })).status, 201);
  assert.equal(
    (await send(server.url, 'PUT', '/users/alice', { json: { name: 'Alice' }, headers: { cookie } })).status,
    201,
  );
  return { server, logged, token };
}

/** The server still answers, and logged no unexpected error. */
async function assertHealthy({ server, logged }: Watched): Promise<void> {
  assert.deepEqual(logged, [], 'nothing was logged as an unexpected error');
  const health = await send(server.url, 'GET', '/healthz');
  assert.equal(health.status, 200);
}

// ---------------------------------------------------------------- arbitraries

const char = (min: number, max: number) => fc.integer({ min, max }).map((c) => String.fromCharCode(c));
/** Any byte but CR and LF, so a value cannot end its own header line. */
const headerByte = fc.oneof(char(0x20, 0x7e), char(0x00, 0x09), char(0x0b, 0x0c), char(0x0e, 0x1f), char(0x7f, 0xff));
const headerText = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: char(0x20, 0x7e), maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: char(0x80, 0xff), maxLength: 10 }) },
  { weight: 1, arbitrary: fc.string({ unit: headerByte, maxLength: 40 }) },
);
const printable = (maxLength: number) => fc.string({ unit: char(0x21, 0x7e), maxLength });

const segment = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.constantFrom(
      'users',
      'new',
      'reservations',
      'login',
      'logout',
      'healthz',
      '1',
      '2',
      '3',
      '4',
      '0',
      '007',
      '9007199254740991',
      '9007199254740992',
      '99999999999999999999',
      'alice',
      'bob',
      '..',
      '.',
      '',
      '%2F',
      '%00',
      '%61lice',
      '%6Eew',
      '%75sers',
      '%zz',
      '%',
      'a%20b',
      '%2e%2e',
      '%C3%A9',
      '%FF',
      '~',
      '-._~',
    ),
  },
  { weight: 1, arbitrary: fc.webSegment() },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 6 }).map((s) => encodeURIComponent(s)) },
  { weight: 1, arbitrary: printable(8) },
  { weight: 1, arbitrary: fc.string({ unit: char(0x80, 0xff), minLength: 1, maxLength: 3 }) },
);
const path = fc.oneof(
  { weight: 6, arbitrary: segment.map((ref) => `/users/${ref}`) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '/users',
      '/users/new',
      '/reservations',
      '/login',
      '/logout',
      '/',
      '/healthz',
      '/%75sers/1',
      '/users/',
    ),
  },
  { weight: 2, arbitrary: fc.array(segment, { maxLength: 4 }).map((segments) => '/' + segments.join('/')) },
);
const query = fc.oneof(
  { weight: 3, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.webQueryParameters().map((q) => `?${q}`) },
  {
    weight: 2,
    arbitrary: fc
      .array(
        fc.tuple(
          fc.constantFrom('limit', 'after', 'x'),
          fc.oneof(
            fc.integer().map(String),
            fc.constantFrom('', '-1', '1e3', '0x10', '1000', '1001', '9007199254740992', '%31'),
          ),
        ),
        { maxLength: 3 },
      )
      .map((pairs) => '?' + pairs.map(([k, v]) => `${k}=${v}`).join('&')),
  },
);
const target = fc.oneof(
  { weight: 8, arbitrary: fc.tuple(path, query).map(([p, q]) => p + q) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom('http://127.0.0.1', 'HTTPS://evil.example:1', 'http://a:b@h'), path, query)
      .map(([a, p, q]) => a + p + q),
  },
  { weight: 1, arbitrary: fc.oneof(fc.constant('*'), fc.webUrl(), printable(20)) },
);
const method = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('GET', 'HEAD', 'PUT', 'PUT', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'PATCH') },
  { weight: 1, arbitrary: fc.stringMatching(/^[A-Z]{1,7}$/).filter((m) => m !== 'CONNECT') },
);

const etag = fc.oneof(fc.constantFrom('*', '"x"', 'W/"x"', '"a", "b"', '', '"'), printable(30));
/** Session cookies: the valid one, tampered, forged with another key, or junk. */
function sessionCookie(token: string) {
  const forged = fc.tuple(fc.string({ maxLength: 10 }), fc.integer()).map(([s, e]) => {
    const payload = Buffer.from(JSON.stringify({ a: 'admin', s, i: 0, e })).toString('base64url');
    return `${payload}.${createHmac('sha256', randomBytes(32)).update(`USER_TOKEN=${payload}`).digest('base64url')}`;
  });
  const tampered = fc.tuple(fc.nat({ max: token.length - 1 }), fc.constantFrom(...'ABab01-_.=')).map(([at, c]) => {
    const flipped = token[at] === c ? (c === 'A' ? 'B' : 'A') : c;
    return token.slice(0, at) + flipped + token.slice(at + 1);
  });
  const junk = fc.string({ unit: char(0x21, 0x7e).filter((c) => c !== ';'), maxLength: 60 });
  return { valid: fc.constant(token), forged, tampered, junk };
}

function header(token: string) {
  const cookie = sessionCookie(token);
  return fc.oneof(
    fc.tuple(fc.constantFrom('If-Match', 'If-None-Match'), etag),
    fc.tuple(
      fc.constant('Prefer'),
      fc.oneof(
        fc.constantFrom('return=minimal', 'return=representation', 'return = minimal; x', 'handling=strict'),
        headerText,
      ),
    ),
    fc.tuple(fc.constant('Idempotency-Key'), fc.oneof(printable(20), headerText, fc.constant('k'.repeat(256)))),
    fc.tuple(
      fc.constant('Content-Type'),
      fc.oneof(
        fc.constantFrom(
          'application/json',
          'application/json; charset=utf-8',
          'application/json; charset=utf-16',
          'application/merge-patch+json',
          'text/plain',
          'multipart/form-data; boundary=x',
          'application/x-www-form-urlencoded',
          '',
        ),
        headerText,
      ),
    ),
    fc.tuple(
      fc.constant('Cookie'),
      fc.oneof(cookie.valid, cookie.forged, cookie.tampered, cookie.junk).map((v) => `USER_TOKEN=${v}`),
    ),
    fc.tuple(fc.constant('Cookie'), headerText),
    fc.tuple(
      fc.constant('Authorization'),
      fc.oneof(
        fc.tuple(printable(10), printable(10)).map(([u, p]) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`),
        headerText,
      ),
    ),
    fc.tuple(
      fc.constantFrom(
        'Expect',
        'Origin',
        'Accept',
        'Accept-Encoding',
        'Content-Encoding',
        'Range',
        'Upgrade',
        'TE',
        'Trailer',
        'Forwarded',
        'Host',
      ),
      headerText,
    ),
    fc.tuple(fc.stringMatching(/^X-[A-Za-z0-9-]{1,12}$/), headerText),
  );
}

const jsonUser = fc
  .tuple(
    fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 20 }),
      fc.string({ unit: 'binary', maxLength: 20 }),
      fc.string({ maxLength: 210 }),
      fc.jsonValue({ maxDepth: 1 }),
    ),
    fc.dictionary(
      fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('id', '__proto__', 'constructor', '2', 'name')),
      fc.jsonValue({ maxDepth: 3 }),
      { maxKeys: 4 },
    ),
    fc.boolean(),
  )
  .map(([name, extra, nameFirst]) =>
    nameFirst ? JSON.stringify({ name, ...extra }) : JSON.stringify({ ...extra, name }),
  );
const body = fc.oneof(
  { weight: 2, arbitrary: fc.constant(undefined) },
  { weight: 4, arbitrary: jsonUser },
  { weight: 1, arbitrary: fc.json() },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 100 }).map((b) => Buffer.from(b).toString('latin1')) },
  { weight: 1, arbitrary: fc.nat({ max: 40_000 }).map((n) => `{"name":"x","pad":"${'p'.repeat(n)}"}`) },
);

interface RawRequest {
  method: string;
  target: string;
  headers: [string, string][];
  body: string | undefined;
  chunked: boolean;
  /** Adds Content-Type: application/json to a body, unless a Content-Type was drawn. */
  json: boolean;
}

function rawRequest(token: string): fc.Arbitrary<RawRequest> {
  return fc.record({
    method,
    target,
    headers: fc.array(header(token), { maxLength: 5 }),
    body,
    chunked: fc.boolean(),
    json: fc.boolean(),
  });
}

/** The request as bytes (latin1): framing and `Connection: close` are added here. */
function encode(r: RawRequest): string {
  let head = `${r.method} ${r.target} HTTP/1.1\r\nHost: 127.0.0.1\r\n`;
  for (const [name, value] of r.headers) head += `${name}: ${value}\r\n`;
  if (r.json && r.body !== undefined && !r.headers.some(([name]) => name === 'Content-Type'))
    head += 'Content-Type: application/json\r\n';
  head += 'Connection: close\r\n';
  if (r.body === undefined) return head + '\r\n';
  const bytes = Buffer.from(r.body, 'utf8').toString('latin1');
  if (!r.chunked) return `${head}Content-Length: ${bytes.length}\r\n\r\n${bytes}`;
  // Split into a few chunks so the parser sees several frames.
  let framed = '';
  for (let at = 0; at < bytes.length; at += 1000) {
    const chunk = bytes.slice(at, at + 1000);
    framed += `${chunk.length.toString(16)}\r\n${chunk}\r\n`;
  }
  return `${head}Transfer-Encoding: chunked\r\n\r\n${framed}0\r\n\r\n`;
}

/**
 * Sends `r` and parses the answers. A message the parser refuses is answered
 * before node knows it was a HEAD, so that answer has its body: read it as a
 * GET's when HEAD framing does not fit, and then it must be that refusal.
 */
async function exchange(base: string, r: RawRequest): Promise<Answer[]> {
  const connection = await RawConnection.open(undefined, base);
  try {
    connection.write(Buffer.from(encode(r), 'latin1'));
    await connection.until(() => connection.closed, 'the server closes the connection');
    if (r.method !== 'HEAD') return parseResponses(connection.text);
    try {
      return parseResponses(connection.text, true);
    } catch {
      const answers = parseResponses(connection.text);
      assert.deepEqual(
        answers.map((a) => a.status).filter((s) => s !== 400 && s !== 431),
        [],
        `a HEAD answered with a body is a parser refusal: ${connection.text.slice(0, 300)}`,
      );
      return answers;
    }
  } finally {
    connection.socket.destroy();
  }
}

/**
 * One final answer, maybe after 100 Continue; below 500 (but 501 for a
 * method the server does not recognize); an error is a
 * problem document whose status member is the status, except GET /'s
 * mandated 401 body (API.md "Endpoints").
 */
function assertWellFormedAnswer(answers: Answer[], r: RawRequest): void {
  const finals = answers.filter((a) => a.status >= 200);
  assert.equal(finals.length, 1, `one final answer, got ${answers.map((a) => a.status).join(', ')}`);
  assert.ok(
    answers.every((a) => a.status >= 200 || a.status === 100),
    'only 100 Continue before it',
  );
  const answer = finals[0]!;
  // 501 is the one 5xx a request can earn: a method the server does not recognize (RFC 9110 section 9.1).
  const unknownMethod =
    answer.status === 501 &&
    !/^(GET|HEAD|PUT|POST|DELETE|OPTIONS|PATCH)$/.test(r.method) &&
    answer.text.includes('"type":"tag:users-server,2026:problem/not-implemented"');
  assert.ok(
    answer.status < 500 || unknownMethod,
    `no 5xx but 501 for an unknown method: ${answer.status} ${answer.text}`,
  );
  if (answer.status < 400 || (r.method === 'HEAD' && answer.text === '')) return;
  if (answer.status === 401 && answer.text === '"not authorized"') {
    assert.equal(answer.headers['content-type'], 'application/json');
    return;
  }
  assert.equal(
    answer.headers['content-type'],
    PROBLEM_CONTENT_TYPE,
    `a problem document: ${answer.status} ${answer.text}`,
  );
  const doc = JSON.parse(answer.text) as Record<string, unknown>;
  assert.equal(doc.status, answer.status);
  assert.ok(
    typeof doc.type === 'string' && doc.type.startsWith(PROBLEM_TYPE_PREFIX),
    `a catalog type: ${String(doc.type)}`,
  );
  assert.equal(typeof doc.title, 'string');
  assert.equal(typeof doc.detail, 'string');
}

// ---------------------------------------------------------------- properties

const configurations: { name: string; overrides: Partial<Config> }[] = [
  { name: 'the defaults', overrides: {} },
  {
    name: '--require-session all --allow-id-change --require-if-match --max-body 1024',
    overrides: { requireSession: 'all', allowIdChange: true, requireIfMatch: true, maxBody: 1024 },
  },
];

for (const c of configurations) {
  test(`property (${c.name}): random request lines, paths, headers, cookies and bodies never get a 5xx but 501 for an unknown method, every error is a problem document, and the server keeps serving`, async (t) => {
    const watched = await watchedServer(t, c.overrides);
    const statuses = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(rawRequest(watched.token), async (r) => {
        const answers = await exchange(watched.server.url, r);
        assertWellFormedAnswer(answers, r);
        assert.deepEqual(watched.logged, [], 'nothing was logged as an unexpected error');
        const final = answers[answers.length - 1]!;
        const code = /problem\/([a-z-]+)/.exec(final.text)?.[1];
        const key = code === undefined ? String(final.status) : `${final.status} ${code}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
      }),
      { numRuns: RAW_RUNS, includeErrorInReport: true },
    );
    t.diagnostic(
      `statuses: ${[...statuses]
        .sort((a, b) => (a[0] < b[0] ? -1 : 1))
        .map(([s, n]) => `${s} x${n}`)
        .join(', ')}`,
    );
    await assertHealthy(watched);
  });
}

const aliasArb = fc
  .stringMatching(/^[A-Za-z0-9._~-]{1,24}$/)
  .filter((a) => /\D/.test(a) && a !== 'new' && a !== '.' && a !== '..');

test('property: a random JSON body to PUT /users/{alias}, PUT /users/1 or POST /users/new is refused with a 4xx, or stored as its JSON round trip plus id and read back byte for byte', async (t) => {
  const watched = await watchedServer(t);
  const bodyArb = fc.oneof(
    { weight: 6, arbitrary: jsonUser },
    { weight: 1, arbitrary: fc.json() },
    { weight: 1, arbitrary: jsonUser.map((s) => s.slice(0, -1)) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)) },
  );
  const targetArb = fc.oneof(
    aliasArb.map((a) => ({ method: 'PUT', path: `/users/${a}` })),
    fc.constantFrom({ method: 'PUT', path: '/users/1' }, { method: 'POST', path: '/users/new' }),
  );
  await fc.assert(
    fc.asyncProperty(targetArb, bodyArb, async ({ method, path }, raw) => {
      const reply = await send(watched.server.url, method, path, {
        body: raw,
        headers: { 'content-type': 'application/json' },
      });
      assert.ok(
        [200, 201, 400, 409, 413, 422].includes(reply.status),
        `an expected status: ${reply.status} ${reply.text}`,
      );
      const text = Buffer.isBuffer(raw) ? raw.toString('latin1') : raw;
      let parsed: unknown;
      try {
        parsed = JSON.parse(Buffer.isBuffer(raw) ? new TextDecoder('utf-8', { fatal: true }).decode(raw) : raw);
      } catch {
        assert.equal(
          reply.status,
          400,
          `not JSON (${JSON.stringify(text.slice(0, 60))}): 400 invalid-json, got ${reply.status}`,
        );
        assert.equal(reply.json().type, `${PROBLEM_TYPE_PREFIX}invalid-json`);
        return;
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        assert.equal(reply.status, 422, 'not an object: 422');
        assert.equal(reply.json().field, '');
        return;
      }
      if (reply.status >= 400) {
        assert.equal(reply.headers['content-type'], PROBLEM_CONTENT_TYPE);
        return;
      }
      const location = reply.headers['content-location'] ?? reply.headers.location;
      const id = Number(String(location).slice('/users/'.length));
      assert.equal(
        reply.text,
        JSON.stringify(Object.assign({}, parsed, { id })),
        'the representation is the JSON round trip plus id',
      );
      const read = await send(watched.server.url, 'GET', `/users/${id}`);
      assert.equal(read.status, 200);
      assert.equal(read.text, reply.text, 'GET returns the stored representation byte for byte');
    }),
    { numRuns: RUNS, includeErrorInReport: true },
  );
  await assertHealthy(watched);
});

test('property (--require-session all): a Cookie header passes GET / and GET /users/1 exactly when it carries the USER_TOKEN the server signed', async (t) => {
  const watched = await watchedServer(t, { requireSession: 'all' });
  const token = watched.token;
  const cookie = sessionCookie(token);
  const pair = fc.oneof(
    cookie.valid.map((v) => ({ text: `USER_TOKEN=${v}`, valid: true })),
    cookie.valid.map((v) => ({ text: `USER_TOKEN="${v}"`, valid: true })),
    fc.oneof(cookie.forged, cookie.tampered, cookie.junk).map((v) => ({ text: `USER_TOKEN=${v}`, valid: false })),
    fc
      .constantFrom('user_token', 'USER_TOKEN2', 'XUSER_TOKEN', '__Host-USER_TOKEN')
      .map((name) => ({ text: `${name}=${token}`, valid: false })),
    fc
      .tuple(fc.stringMatching(/^[A-Za-z0-9_-]{1,10}$/), cookie.junk)
      .map(([name, v]) => ({ text: `${name}=${v}`, valid: name === 'USER_TOKEN' && v === token })),
  );
  const header = fc
    .tuple(fc.array(pair, { minLength: 1, maxLength: 6 }), fc.constantFrom('; ', ';', ' ; '))
    .map(([pairs, separator]) => ({
      cookie: pairs.map((p) => p.text).join(separator),
      valid: pairs.some((p) => p.valid),
    }));
  await fc.assert(
    fc.asyncProperty(header, async ({ cookie: value, valid }) => {
      const root = await send(watched.server.url, 'GET', '/', { headers: { cookie: value } });
      assert.equal(root.status, valid ? 200 : 401, `GET / with ${value}`);
      assert.equal(root.text, valid ? '"OK"' : '"not authorized"');
      const user = await send(watched.server.url, 'GET', '/users/1', { headers: { cookie: value } });
      assert.equal(user.status, valid ? 200 : 401, `GET /users/1 with ${value}`);
      if (!valid) assert.equal(user.json().type, `${PROBLEM_TYPE_PREFIX}unauthorized`);
    }),
    { numRuns: RUNS, includeErrorInReport: true },
  );
  await assertHealthy(watched);
});
