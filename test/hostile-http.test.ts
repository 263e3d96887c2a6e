/**
 * Malformed and hostile HTTP/1.1 over raw sockets (issue 6): request
 * smuggling shapes (Content-Length with Transfer-Encoding, duplicate or odd
 * Content-Length, bad chunk sizes), obs-fold, bare CR or LF, Host rules,
 * oversized header sections, absolute-form and authority-form targets, and
 * pipelining. Each answers its documented status (docs/api.md "Decisions":
 * parser-level errors are problem documents and close the connection), a
 * pipelined pair is exactly two requests answered in order, and afterwards
 * the server still serves with its state unchanged and nothing logged.
 *
 * bad-input.test.ts already covers a bad request line, a NUL in the target,
 * TLS bytes, one 20 KiB header, `GET *` and absolute-form GETs; this file
 * does not repeat them.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { MAX_FIELD_LINES } from '../server/http/app.js';
import { assertProblem, put, send, startTestServer, type TestServer } from './helpers.js';
import { exchangeUntilClosed } from './raw-http.js';

// ---------------------------------------------------------------- state checks

interface Watched {
  server: TestServer;
  /** What the server reported through logError: a bug's stack, a failed sync. */
  logged: string[];
}

/** A server with user 1 ("alice") and a log that must stay empty. */
async function seeded(t: TestContext): Promise<Watched> {
  const logged: string[] = [];
  const server = await startTestServer(t, {}, { logError: (message) => logged.push(message) });
  const created = await put(server.url, '/users/alice', { name: 'Alice' });
  assert.equal(created.status, 201, created.text);
  return { server, logged };
}

const ALICE = '{"name":"Alice","id":1}';
const ALICE_LIST = `{"items":[${ALICE}],"next":null}`;

/** The server answers a fresh connection, holds exactly `list`, and logged nothing. */
async function assertStillServing({ server, logged }: Watched, list = ALICE_LIST): Promise<void> {
  const health = await send(server.url, 'GET', '/healthz');
  assert.equal(health.status, 200, 'GET /healthz on a new connection still answers');
  const listing = await send(server.url, 'GET', '/users?limit=1000');
  assert.equal(listing.status, 200);
  assert.equal(listing.text, list, 'the state is as expected');
  assert.deepEqual(logged, [], 'nothing was logged as an unexpected error');
}

/** A request with a JSON body of the right Content-Length. */
function withBody(head: string, body: string): string {
  return `${head}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

// ---------------------------------------------------------------- malformed messages

interface MalformedCase {
  name: string;
  bytes: string;
  status: 400 | 414 | 431 | 501;
  code: string;
}

const BODY = '{"name":"Mallory"}';
const CHUNKED_BODY = `${BODY.length.toString(16)}\r\n${BODY}\r\n0\r\n\r\n`;
const PUT_HEAD = 'PUT /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n';
const POST_HEAD = 'POST /users/new HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n';
// The classic CL.TE and TE.CL smuggling shapes: the trailing bytes would be a second request to a server that picks the
// other framing.
const SMUGGLED =
  'PUT /users/smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 18\r\n\r\n{"name":"Smuggle"}';

const malformed: MalformedCase[] = [
  // RFC 9112 section 6.3: Content-Length with Transfer-Encoding is a smuggling attempt.
  {
    name: 'Content-Length before Transfer-Encoding: chunked (CL.TE smuggling)',
    bytes: `${POST_HEAD}Content-Length: ${CHUNKED_BODY.length}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'Transfer-Encoding: chunked before Content-Length (TE.CL smuggling)',
    bytes: `${POST_HEAD}Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n${SMUGGLED.length.toString(16)}\r\n${SMUGGLED}\r\n0\r\n\r\n`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'Content-Length with Transfer-Encoding: identity',
    bytes: `${PUT_HEAD}Transfer-Encoding: identity\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`,
    status: 400,
    code: 'bad-request',
  },
  // RFC 9112 section 6.3 item 5: an invalid Content-Length is unrecoverable.
  {
    name: 'two equal Content-Length fields',
    bytes: `${PUT_HEAD}Content-Length: ${BODY.length}\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'two different Content-Length fields',
    bytes: `${PUT_HEAD}Content-Length: ${BODY.length}\r\nContent-Length: 5\r\n\r\n${BODY}`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a Content-Length list "18, 18"',
    bytes: `${PUT_HEAD}Content-Length: ${BODY.length}, ${BODY.length}\r\n\r\n${BODY}`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a Content-Length with a plus sign',
    bytes: `${PUT_HEAD}Content-Length: +${BODY.length}\r\n\r\n${BODY}`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a negative Content-Length',
    bytes: `${PUT_HEAD}Content-Length: -1\r\n\r\n${BODY}`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a hexadecimal Content-Length',
    bytes: `${PUT_HEAD}Content-Length: 0x12\r\n\r\n${BODY}`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'an empty Content-Length',
    bytes: `${PUT_HEAD}Content-Length: \r\n\r\n${BODY}`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a Content-Length beyond 2^64',
    bytes: `${PUT_HEAD}Content-Length: 99999999999999999999999\r\n\r\n${BODY}`,
    status: 400,
    code: 'bad-request',
  },
  // RFC 9112 section 6.1: chunked twice, or a coding the server does not know.
  {
    name: 'Transfer-Encoding: chunked sent twice',
    bytes: `${PUT_HEAD}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n${CHUNKED_BODY}`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'Transfer-Encoding: gzip (chunked not last)',
    bytes: `${PUT_HEAD}Transfer-Encoding: gzip\r\n\r\n${BODY}`,
    status: 400,
    code: 'bad-request',
  },
  // RFC 9112 section 6.1: a coding the server does not implement is 501, never read as the body.
  {
    name: 'Transfer-Encoding: gzip, chunked',
    bytes: `${PUT_HEAD}Transfer-Encoding: gzip, chunked\r\n\r\n${CHUNKED_BODY}`,
    status: 501,
    code: 'not-implemented',
  },
  {
    name: 'Transfer-Encoding: gzip and chunked on two lines',
    bytes: `${PUT_HEAD}Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n${CHUNKED_BODY}`,
    status: 501,
    code: 'not-implemented',
  },
  {
    name: 'Transfer-Encoding: deflate, chunked on a POST',
    bytes: `${POST_HEAD}Transfer-Encoding: deflate, chunked\r\n\r\n${CHUNKED_BODY}`,
    status: 501,
    code: 'not-implemented',
  },
  {
    name: 'Transfer-Encoding: chunked, gzip',
    bytes: `${PUT_HEAD}Transfer-Encoding: chunked, gzip\r\n\r\n${CHUNKED_BODY}`,
    status: 400,
    code: 'bad-request',
  },
  // RFC 9112 section 5.1: no whitespace between a field name and the colon.
  {
    name: 'whitespace between Transfer-Encoding and its colon',
    bytes: `${PUT_HEAD}Transfer-Encoding : chunked\r\n\r\n${CHUNKED_BODY}`,
    status: 400,
    code: 'bad-request',
  },
  // RFC 9112 section 7.1: chunk-size = 1*HEXDIG, then CRLF; the data is followed by CRLF.
  ...[
    { what: 'a chunk size that is not hex ("zz")', size: 'zz' },
    { what: 'a negative chunk size', size: '-12' },
    { what: 'a chunk size with a 0x prefix', size: '0x12' },
    { what: 'a chunk size beyond 2^64', size: 'fffffffffffffffffffff' },
    { what: 'a chunk size followed by a space', size: '12 ' },
    { what: 'an empty chunk size', size: '' },
  ].map((c): MalformedCase => ({
    name: c.what,
    bytes: `${PUT_HEAD}Transfer-Encoding: chunked\r\n\r\n${c.size}\r\n${BODY}\r\n0\r\n\r\n`,
    status: 400,
    code: 'bad-request',
  })),
  {
    name: 'a chunk shorter than its data',
    bytes: `${PUT_HEAD}Transfer-Encoding: chunked\r\n\r\n5\r\n${BODY}\r\n0\r\n\r\n`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'chunk data not followed by CRLF',
    bytes: `${PUT_HEAD}Transfer-Encoding: chunked\r\n\r\n${BODY.length.toString(16)}\r\n${BODY}XX0\r\n\r\n`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'chunks framed with bare LF',
    bytes: `${PUT_HEAD}Transfer-Encoding: chunked\r\n\r\n${BODY.length.toString(16)}\n${BODY}\n0\n\n`,
    status: 400,
    code: 'bad-request',
  },
  // RFC 9112 section 5.2: obs-fold is refused with 400 (or unfolded; node refuses).
  {
    name: 'a header folded onto a line starting with a space (obs-fold)',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Folded: a\r\n b\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a header folded onto a line starting with a tab (obs-fold)',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Folded: a\r\n\tb\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'Transfer-Encoding folded onto a second line',
    bytes: `${PUT_HEAD}Transfer-Encoding:\r\n chunked\r\n\r\n${CHUNKED_BODY}`,
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'whitespace before the first header line',
    bytes: 'GET /users/1 HTTP/1.1\r\n Host: 127.0.0.1\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  // RFC 9112 section 2.2: a bare CR is refused; a bare LF is refused here too.
  {
    name: 'a bare CR ending the request line',
    bytes: 'GET /users/1 HTTP/1.1\rHost: 127.0.0.1\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a bare CR between two header lines',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\rX-A: b\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a bare CR inside a header value',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\rb\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'bare LF line endings throughout',
    bytes: 'GET /users/1 HTTP/1.1\nHost: 127.0.0.1\n\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a bare LF between two header lines',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\nX-A: b\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a header line without a colon',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nNoColon\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'an empty header name',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n: b\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a header name with a delimiter',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX(a): b\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a NUL byte in a header value',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\u0000b\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  // RFC 9110 section 9.1: a method the server does not recognize is 501 Not Implemented.
  {
    name: 'an unknown method token',
    bytes: 'FOO /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
    status: 501,
    code: 'not-implemented',
  },
  {
    name: 'the HTTP/2 connection preface',
    bytes: 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  // RFC 9112 section 3.2: a server MUST answer 400 to an HTTP/1.1 request without Host, or with more than one.
  {
    name: 'an HTTP/1.1 request without Host',
    bytes: 'GET /users/1 HTTP/1.1\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'an HTTP/1.1 PUT without Host',
    bytes: withBody('PUT /users/1 HTTP/1.1\r\n', BODY),
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'an absolute-form request without Host',
    bytes: 'GET http://127.0.0.1/users/1 HTTP/1.1\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'an HTTP/1.1 request with two Host fields',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  // RFC 9110 section 7.2: Host is uri-host [":" port]; anything else is 400.
  {
    name: 'a Host with a space (a b)',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: a b\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a Host with a slash',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: a/b\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a Host with a port that is not a number',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1:8x\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a Host with a user part',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: me@127.0.0.1\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a PUT with a Host with a space',
    bytes: withBody('PUT /users/1 HTTP/1.1\r\nHost: a b\r\n', BODY),
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a PUT with two Host fields',
    bytes: withBody('PUT /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n', BODY),
    status: 400,
    code: 'bad-request',
  },
  // Authority-form belongs to CONNECT only (RFC 9112 section 3.2.3), which this server does not serve: 400 bad-request.
  {
    name: 'a GET with an authority-form target',
    bytes: 'GET 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a CONNECT request',
    bytes: 'CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  {
    name: 'a CONNECT request to a path',
    bytes: 'CONNECT /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  // Not a parser error, so the close is asked for here.
  {
    name: 'an absolute-form target of another scheme (ftp)',
    bytes: 'GET ftp://127.0.0.1/users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
    status: 400,
    code: 'bad-request',
  },
  // Node's limit of 16 KiB covers the whole head: request line and every field (docs/api.md "Limits and timeouts").
  {
    name: 'a 20 KiB head spread over 400 header fields',
    bytes: `GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n${Array.from({ length: 400 }, (_, i) => `X-Field-${i}: ${'b'.repeat(40)}\r\n`).join('')}\r\n`,
    status: 431,
    code: 'headers-too-large',
  },
  // node collects no header line past MAX_FIELD_LINES + 1 (server.ts): a request with more is refused, never served
  // without the rest.
  {
    name: '2,100 short header lines, then a second Host',
    bytes: `GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n${'a:\r\n'.repeat(2100)}Host: evil.example\r\n\r\n`,
    status: 431,
    code: 'headers-too-large',
  },
  {
    name: 'a PUT with 2,100 short header lines, then a second Host',
    bytes: withBody(`PUT /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n${'a:\r\n'.repeat(2100)}Host: evil.example\r\n`, BODY),
    status: 431,
    code: 'headers-too-large',
  },
  {
    name: `a request of ${MAX_FIELD_LINES + 1} header lines`,
    bytes: `GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n${'a:\r\n'.repeat(MAX_FIELD_LINES)}\r\n`,
    status: 431,
    code: 'headers-too-large',
  },
  {
    name: 'a 20 KiB request target',
    bytes: `GET /users/${'a'.repeat(20 * 1024)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
    status: 414,
    code: 'uri-too-long',
  },
  // Methods are case-sensitive: a lower-case one is unknown (501); bytes that are no request line are 400.
  {
    name: 'a lower-case method (get: methods are case-sensitive)',
    bytes: `get /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
    status: 501,
    code: 'not-implemented',
  },
  {
    name: 'a TLS handshake on the plain HTTP port',
    bytes: '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03',
    status: 400,
    code: 'bad-request',
  },
  // RFC 9110 section 15.5.15: a request line that alone passes the limit has a target too long.
  {
    name: 'a query of 5,000 parameters',
    bytes: `GET /users?${'q=1&'.repeat(5 * 1024)} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
    status: 414,
    code: 'uri-too-long',
  },
  {
    name: 'a 20 KiB Cookie',
    bytes: `GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: USER_TOKEN=${'a'.repeat(20 * 1024)}\r\n\r\n`,
    status: 431,
    code: 'headers-too-large',
  },
  {
    name: 'a 20 KiB header on a PUT with a body',
    bytes: withBody(`PUT /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: ${'f'.repeat(20 * 1024)}\r\n`, BODY),
    status: 431,
    code: 'headers-too-large',
  },
];

for (const c of malformed) {
  test(`malformed HTTP: ${c.name} answers ${c.status} ${c.code} as a problem document, once, and closes; the server keeps serving, unchanged`, async (t) => {
    const watched = await seeded(t);
    const answers = await exchangeUntilClosed(t, watched.server.url, c.bytes);
    assert.equal(answers.length, 1, `exactly one answer: ${answers.map((a) => a.status).join(', ')}`);
    assertProblem(answers[0]!, c.status, c.code);
    assert.equal(answers[0]!.headers.connection, 'close', 'the answer announces the close');
    await assertStillServing(watched);
    const alice = await send(watched.server.url, 'GET', '/users/1');
    assert.equal(alice.text, ALICE, 'user 1 is untouched');
    assert.equal(
      (await send(watched.server.url, 'GET', '/users/smuggled')).status,
      404,
      'no smuggled request was served',
    );
  });
}

test('malformed HTTP: all the malformed messages in a row, on one server, each answered alone, and the server keeps serving', async (t) => {
  const watched = await seeded(t);
  for (const c of malformed) {
    const answers = await exchangeUntilClosed(t, watched.server.url, c.bytes);
    assert.deepEqual(
      answers.map((a) => a.status),
      [c.status],
      c.name,
    );
  }
  await assertStillServing(watched);
});

// ---------------------------------------------------------------- well-formed edge cases

interface AcceptedCase {
  name: string;
  bytes: string;
  status: number;
  body: string;
  /** The listing afterwards. */
  list?: string;
}

const accepted: AcceptedCase[] = [
  // RFC 9112 section 3.2.2: absolute-form is routed by its path; its authority, like Host, names this server
  // (host-names.test.ts).
  {
    name: 'a PUT with an absolute-form target naming the server otherwise than Host writes the user of its path',
    bytes: withBody(
      'PUT http://localhost/users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n',
      '{"name":"Abs"}',
    ),
    status: 200,
    body: '{"name":"Abs","id":1}',
    list: '{"items":[{"name":"Abs","id":1}],"next":null}',
  },
  {
    name: 'a POST /users/new with an uppercase HTTPS absolute-form target creates one user',
    bytes: withBody(
      'POST HTTPS://127.0.0.1/users/new HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n',
      '{"name":"Abs"}',
    ),
    status: 201,
    body: '{"name":"Abs","id":2}',
    list: `{"items":[${ALICE},{"name":"Abs","id":2}],"next":null}`,
  },
  {
    name: 'an absolute-form target with userinfo is routed by its path',
    bytes: 'GET http://user:pass@127.0.0.1/users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
    status: 200,
    body: ALICE,
  },
  {
    name: 'an absolute-form target without a path is routed to /',
    bytes: 'GET http://127.0.0.1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
    status: 401,
    body: '"not authorized"',
  },
  {
    name: `a request of ${MAX_FIELD_LINES} header lines`,
    bytes: `GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${'a:\r\n'.repeat(MAX_FIELD_LINES - 2)}\r\n`,
    status: 200,
    body: ALICE,
  },
  // RFC 9112 section 3.2: an empty Host is valid when the target has no authority.
  {
    name: 'an empty Host field',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n',
    status: 200,
    body: ALICE,
  },
  // Host is required of HTTP/1.1 only.
  { name: 'an HTTP/1.0 request without Host', bytes: 'GET /users/1 HTTP/1.0\r\n\r\n', status: 200, body: ALICE },
  // RFC 9112 section 2.2: empty lines before the request line SHOULD be ignored.
  {
    name: 'empty lines before the request line',
    bytes: '\r\n\r\nGET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
    status: 200,
    body: ALICE,
  },
  // RFC 9112 section 7.1.1 and 7.1.2: chunk extensions and trailers are allowed and ignored.
  {
    name: 'a chunked PUT with a chunk extension and a trailer',
    bytes: `${PUT_HEAD}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${BODY.length.toString(16)};ext="1"\r\n${BODY}\r\n0\r\nX-Trailer: 1\r\n\r\n`,
    status: 200,
    body: '{"name":"Mallory","id":1}',
    list: '{"items":[{"name":"Mallory","id":1}],"next":null}',
  },
  // Transfer-Encoding is case-insensitive (RFC 9112 section 7).
  {
    name: 'Transfer-Encoding: CHUNKED in capitals',
    bytes: `${PUT_HEAD}Transfer-Encoding: CHUNKED\r\nConnection: close\r\n\r\n${CHUNKED_BODY}`,
    status: 200,
    body: '{"name":"Mallory","id":1}',
    list: '{"items":[{"name":"Mallory","id":1}],"next":null}',
  },
  // RFC 9110 section 10.1.1: an expectation other than 100-continue MAY be refused with 417; it is ignored here.
  {
    name: 'a GET with Expect: 200-ok (an unknown expectation)',
    bytes: 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 200-ok\r\nConnection: close\r\n\r\n',
    status: 200,
    body: ALICE,
  },
  {
    name: 'a PUT with an empty Expect',
    bytes: withBody('PUT /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect:\r\nConnection: close\r\n', BODY),
    status: 200,
    body: '{"name":"Mallory","id":1}',
    list: '{"items":[{"name":"Mallory","id":1}],"next":null}',
  },
  // No upgrade is offered: the request is answered as plain HTTP/1.1 (RFC 9110 section 7.8: Upgrade MAY be ignored).
  {
    name: 'a GET asking to upgrade to websocket',
    bytes:
      'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    status: 200,
    body: ALICE,
  },
];

for (const c of accepted) {
  test(`well-formed edge case: ${c.name} answers ${c.status}`, async (t) => {
    const watched = await seeded(t);
    const answers = await exchangeUntilClosed(t, watched.server.url, c.bytes);
    assert.deepEqual(
      answers.map((a) => a.status),
      [c.status],
      'exactly one answer',
    );
    assert.equal(answers[0]!.text, c.body);
    await assertStillServing(watched, c.list ?? ALICE_LIST);
  });
}

// ---------------------------------------------------------------- pipelining

test('pipelining: two GETs sent in one write are exactly two requests, answered in order on the same connection', async (t) => {
  const watched = await seeded(t);
  const answers = await exchangeUntilClosed(
    t,
    watched.server.url,
    'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
  );
  assert.deepEqual(
    answers.map((a) => a.status),
    [200, 200],
  );
  assert.equal(answers[0]!.text, ALICE);
  assert.equal(answers[0]!.headers.connection, 'keep-alive', 'the first answer keeps the connection for the second');
  assert.equal(answers[1]!.text, '{"status":"ok"}');
  await assertStillServing(watched);
});

test('pipelining: two POST /users/new in one write create exactly two users, answered 201 in order', async (t) => {
  const watched = await seeded(t);
  const answers = await exchangeUntilClosed(
    t,
    watched.server.url,
    withBody('POST /users/new HTTP/1.1\r\nHost: 127.0.0.1\r\n', '{"name":"First"}') +
      withBody('POST /users/new HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n', '{"name":"Second"}'),
  );
  assert.deepEqual(
    answers.map((a) => a.status),
    [201, 201],
  );
  assert.deepEqual(
    answers.map((a) => a.text),
    ['{"name":"First","id":2}', '{"name":"Second","id":3}'],
  );
  assert.deepEqual(
    answers.map((a) => a.headers.location),
    ['/users/2', '/users/3'],
  );
  await assertStillServing(
    watched,
    `{"items":[${ALICE},{"name":"First","id":2},{"name":"Second","id":3}],"next":null}`,
  );
});

test('pipelining (RFC 9112 section 9.3.2): a GET pipelined after a PUT reads the state the PUT left', async (t) => {
  const watched = await seeded(t);
  const answers = await exchangeUntilClosed(
    t,
    watched.server.url,
    withBody('PUT /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n', '{"name":"Changed"}') +
      'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
  );
  assert.deepEqual(
    answers.map((a) => a.status),
    [200, 200],
  );
  assert.equal(answers[0]!.text, '{"name":"Changed","id":1}');
  assert.equal(answers[1]!.text, '{"name":"Changed","id":1}', 'the GET sees the PUT before it');
  await assertStillServing(watched, '{"items":[{"name":"Changed","id":1}],"next":null}');
});

test('pipelining (RFC 9112 section 9.3.2): a PUT pipelined after a DELETE of the same alias creates a new user', async (t) => {
  const watched = await seeded(t);
  const answers = await exchangeUntilClosed(
    t,
    watched.server.url,
    'DELETE /users/alice HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' +
      withBody('PUT /users/alice HTTP/1.1\r\nHost: 127.0.0.1\r\n', '{"name":"Again"}') +
      'GET /users/alice HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
  );
  assert.deepEqual(
    answers.map((a) => a.status),
    [204, 201, 200],
  );
  assert.equal(answers[1]!.headers.location, '/users/2');
  assert.equal(answers[2]!.text, '{"name":"Again","id":2}');
  await assertStillServing(watched, '{"items":[{"name":"Again","id":2}],"next":null}');
});

test('pipelining: a body that contains a request is one request, not two', async (t) => {
  const watched = await seeded(t);
  const inner = 'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
  const body = JSON.stringify({ name: 'Carrier', note: inner });
  const answers = await exchangeUntilClosed(
    t,
    watched.server.url,
    withBody('POST /users/new HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n', body),
  );
  assert.deepEqual(
    answers.map((a) => a.status),
    [201],
    'one answer',
  );
  assert.equal(answers[0]!.text, JSON.stringify({ name: 'Carrier', note: inner, id: 2 }));
  await assertStillServing(watched, `{"items":[${ALICE},${answers[0]!.text}],"next":null}`);
});

test('pipelining: a malformed request after a good one gets the good answer, then one 400, then the close', async (t) => {
  const watched = await seeded(t);
  const answers = await exchangeUntilClosed(
    t,
    watched.server.url,
    'GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' +
      `${PUT_HEAD}Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
  );
  assert.deepEqual(
    answers.map((a) => a.status),
    [200, 400],
  );
  assert.equal(answers[0]!.text, ALICE);
  assertProblem(answers[1]!, 400, 'bad-request');
  await assertStillServing(watched);
});

test('pipelining: requests after a 413 that closes the connection are not served', async (t) => {
  const watched = await seeded(t);
  const answers = await exchangeUntilClosed(
    t,
    watched.server.url,
    withBody('PUT /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n', `{"name":"x","pad":"${'p'.repeat(17_000)}"}`) +
      withBody('PUT /users/late HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n', '{"name":"Late"}'),
  );
  assert.deepEqual(
    answers.map((a) => a.status),
    [413],
  );
  assertProblem(answers[0]!, 413, 'payload-too-large');
  await assertStillServing(watched);
  assert.equal(
    (await send(watched.server.url, 'GET', '/users/late')).status,
    404,
    'the request behind the 413 was not served',
  );
});

test('pipelining: 50 GETs in one write are answered 50 times, in order', async (t) => {
  const watched = await seeded(t);
  let bytes = '';
  for (let i = 0; i < 50; i++)
    bytes += `GET /users/${i % 2 === 0 ? '1' : 'nobody'}?n=${i} HTTP/1.1\r\nHost: 127.0.0.1\r\n${i === 49 ? 'Connection: close\r\n' : ''}\r\n`;
  const answers = await exchangeUntilClosed(t, watched.server.url, bytes);
  assert.deepEqual(
    answers.map((a) => a.status),
    Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? 200 : 404)),
  );
  await assertStillServing(watched);
});
