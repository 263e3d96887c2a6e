/**
 * API.md "Access control and limits": timeouts for the headers (10 s), the
 * whole request (30 s) and an idle keep-alive connection (5 s), over raw
 * sockets. The server is started with small timeouts (StartOptions.timeouts)
 * so each test takes about a second; the real defaults are checked as the
 * settings of a server started without them. Times are asserted only as
 * lower bounds: the cut must come (the test waits for it), and not before
 * the configured timeout.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { test } from 'node:test';
import { problemType, PROBLEM_CONTENT_TYPE } from '../shared/problems.js';
import { TIMEOUTS } from '../server/http/server.js';
import { listText, startTestServer } from './helpers.js';

/** Small timeouts: the connections check runs often so a cut follows its timeout closely. */
const SHORT = { headers: 600, request: 1200, keepAlive: 1000, connectionsCheck: 100 };
/** Timers may fire a little early by the clock the test reads; this much is tolerated. */
const SLACK_MS = 50;

interface Conversation {
  /** Everything the server sent, as latin1. */
  text: string;
  /** Milliseconds from the connect to the server closing the connection. */
  closedAfter: number;
  /** Milliseconds from the connect to the first byte answered. */
  firstByteAfter: number | undefined;
}

/**
 * Connects, writes `first`, then writes `drip` every `everyMs` (if given)
 * until the server closes the connection.
 */
function converse(url: string, first: string, drip?: { bytes: string; everyMs: number }): Promise<Conversation> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let started = 0;
    let firstByteAfter: number | undefined;
    let dripping: NodeJS.Timeout | undefined;
    const finish = (closedAfter: number) => {
      clearInterval(dripping);
      socket.destroy();
      resolve({ text: Buffer.concat(chunks).toString('latin1'), closedAfter, firstByteAfter });
    };
    socket.on('connect', () => {
      started = performance.now();
      socket.write(first);
      if (drip !== undefined) {
        dripping = setInterval(() => {
          if (socket.writable) socket.write(drip.bytes);
        }, drip.everyMs);
      }
    });
    socket.on('data', (chunk: Buffer) => {
      firstByteAfter ??= performance.now() - started;
      chunks.push(chunk);
    });
    socket.on('close', () => finish(performance.now() - started));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // A reset is also the server cutting us off; it is reported by 'close'.
      if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') reject(error);
    });
  });
}

/** Asserts one raw 408 request-timeout problem document and nothing else on the wire. */
function assertOne408(text: string): void {
  const responses = text.match(/HTTP\/1\.1 \d{3}/g) ?? [];
  assert.deepEqual(responses, ['HTTP/1.1 408'], `expected exactly one 408, got: ${JSON.stringify(text)}`);
  const [head, body] = text.split('\r\n\r\n') as [string, string];
  assert.match(head, new RegExp(`^content-type: ${PROBLEM_CONTENT_TYPE.replace('+', '\\+')}$`, 'im'));
  assert.match(head, /^connection: close$/im);
  const doc = JSON.parse(body) as Record<string, unknown>;
  assert.equal(doc.type, problemType({ code: 'request-timeout', status: 408, title: '' }));
  assert.equal(doc.status, 408);
}

test('Timeouts: a client dripping header lines is answered 408 request-timeout and cut off, not before the headers timeout', async (t) => {
  const server = await startTestServer(t, { store: 'memory' }, { timeouts: SHORT });
  const talk = await converse(server.url, 'GET /users HTTP/1.1\r\nHost: 127.0.0.1\r\n', {
    bytes: 'X-Drip: 1\r\n',
    everyMs: 50,
  });
  assertOne408(talk.text);
  assert.ok(
    talk.firstByteAfter! >= SHORT.headers - SLACK_MS,
    `408 after ${talk.firstByteAfter} ms, before the ${SHORT.headers} ms headers timeout`,
  );
});

test('Timeouts: a client dripping its body is answered 408 and cut off at the request timeout, and its PUT changes nothing', async (t) => {
  const server = await startTestServer(t, { store: 'memory' }, { timeouts: SHORT });
  const before = await listText(server);
  const head =
    'PUT /users/alice HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":"Alice"';
  const talk = await converse(server.url, head, { bytes: ' ', everyMs: 50 });
  assertOne408(talk.text);
  assert.ok(
    talk.firstByteAfter! >= SHORT.request - SLACK_MS,
    `408 after ${talk.firstByteAfter} ms, before the ${SHORT.request} ms request timeout`,
  );
  assert.equal(await listText(server), before, 'the cut-off PUT wrote nothing');
});

test('Timeouts: the headers timeout counts per request: a keep-alive connection busy for longer than it is not cut', async (t) => {
  const server = await startTestServer(t, { store: 'memory' }, { timeouts: { ...SHORT, keepAlive: 2000 } });
  const request = 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';
  const { hostname, port } = new URL(server.url);
  const socket = connect(Number(port), hostname);
  t.after(() => socket.destroy());
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  // One request after another, each sent when the one before was answered,
  // until the connection has been busy for three headers timeouts.
  const started = performance.now();
  let count = 0;
  while (performance.now() - started < 3 * SHORT.headers) {
    socket.write(request);
    count++;
    while ((text.match(/HTTP\/1\.1 /g) ?? []).length < count) await once(socket, 'data');
  }
  socket.end();
  await new Promise((resolve) => socket.once('close', resolve));
  const statuses = text.match(/HTTP\/1\.1 \d{3}/g) ?? [];
  assert.deepEqual(statuses, Array<string>(count).fill('HTTP/1.1 200'));
});

test('Timeouts: an idle keep-alive connection is closed by the server after the keep-alive timeout, not before', async (t) => {
  const server = await startTestServer(t, { store: 'memory' }, { timeouts: SHORT });
  const talk = await converse(server.url, 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  assert.match(talk.text, /^HTTP\/1\.1 200 /);
  assert.match(talk.text, /^keep-alive: timeout=1$/im);
  const idle = talk.closedAfter! - talk.firstByteAfter!;
  assert.ok(
    idle >= SHORT.keepAlive - SLACK_MS,
    `closed after ${idle} ms idle, before the ${SHORT.keepAlive} ms keep-alive timeout`,
  );
});

test("Timeouts: a server started with the defaults has API.md's timeouts and announces the 5 s keep-alive", async (t) => {
  const server = await startTestServer(t);
  const http = server.running.server;
  assert.deepEqual([http.headersTimeout, http.requestTimeout, http.keepAliveTimeout], [10_000, 30_000, 5_000]);
  const reply = await new Promise<string>((resolve, reject) => {
    const { hostname, port } = new URL(server.url);
    const socket = connect(Number(port), hostname, () =>
      socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'),
    );
    socket.once('data', (chunk: Buffer) => {
      socket.destroy();
      resolve(chunk.toString('latin1'));
    });
    socket.once('error', reject);
  });
  assert.match(reply, /^HTTP\/1\.1 200 /);
  assert.match(reply, /^keep-alive: timeout=5$/im);
});

test('Timeouts: API.md values are the defaults: TLS handshake 10 s, headers 10 s, whole request 30 s, idle keep-alive 5 s', () => {
  assert.equal(TIMEOUTS.handshake, 10_000);
  assert.equal(TIMEOUTS.headers, 10_000);
  assert.equal(TIMEOUTS.request, 30_000);
  assert.equal(TIMEOUTS.keepAlive, 5_000);
  // A cut comes at most one check interval after its timeout.
  assert.ok(TIMEOUTS.connectionsCheck <= 2_000);
});
