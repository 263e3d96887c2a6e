/**
 * Slow-header clients (API.md "Access control and limits": headers 10 s):
 * 200 sockets each dripping one header line at a time are cut by the
 * headers timeout, found by node's connection check, while ordinary GETs on
 * fresh connections keep being answered.
 *
 * The real timeouts are checked as settings; the behaviour runs with a
 * 1-second headers timeout (the harness's `timeouts` option), so it takes
 * about two seconds. Nothing here asserts an upper time bound: a busy
 * machine may cut a dripper late, never early. How fast the server answers
 * meanwhile is measured in bench/, not here.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { TIMEOUTS } from '../server/http/server.js';
import { put, send, startTestServer } from './helpers.js';

const DRIPPERS = 200;
const TEST_TIMEOUTS = { headers: 1000, connectionsCheck: 200 };
const DRIP_EVERY_MS = 50;

interface Drip {
  /** Milliseconds from connect to close. */
  lived: number;
  /** Everything the server sent before closing. */
  answer: string;
}

/** One client that sends a request line, then a header line every DRIP_EVERY_MS, and never ends its headers. */
function drip(port: number, index: number): Promise<Drip> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let connectedAt = 0;
    let line = 0;
    let timer: NodeJS.Timeout | undefined;
    socket.on('connect', () => {
      connectedAt = performance.now();
      socket.write(`GET /users/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
      timer = setInterval(() => {
        if (socket.writable) socket.write(`X-Drip-${index}-${line++}: ${'d'.repeat(16)}\r\n`);
      }, DRIP_EVERY_MS);
    });
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    // The server may reset the socket while a drip is on the way: the close still counts.
    socket.on('error', () => {});
    socket.on('close', () => {
      clearInterval(timer);
      if (connectedAt === 0) reject(new Error(`dripper ${index} never connected`));
      else resolve({ lived: performance.now() - connectedAt, answer: Buffer.concat(chunks).toString('latin1') });
    });
  });
}

test('slow headers: the header timeout is 10 s and the connection check runs every 2 s or less', () => {
  assert.equal(TIMEOUTS.headers, 10_000);
  assert.ok(TIMEOUTS.connectionsCheck <= 2000, `connectionsCheck is ${TIMEOUTS.connectionsCheck} ms`);
});

test('slow headers: 200 sockets dripping a header line at a time are each answered 408 and closed, never before the headers timeout, while GETs on fresh connections are answered', async (t) => {
  const server = await startTestServer(t, {}, { timeouts: TEST_TIMEOUTS });
  assert.equal(server.running.server.headersTimeout, TEST_TIMEOUTS.headers);
  assert.equal((await put(server.url, '/users/alice', { name: 'Alice' })).status, 201);
  const port = Number(new URL(server.url).port);

  const drips = Promise.all(Array.from({ length: DRIPPERS }, (_, i) => drip(port, i)));
  let dripping = true;
  void drips.finally(() => (dripping = false)).catch(() => {});

  // Ordinary clients meanwhile, one fresh connection each.
  const latencies: number[] = [];
  const failures: string[] = [];
  while (dripping) {
    const started = performance.now();
    const reply = await send(server.url, 'GET', '/users/1');
    latencies.push(performance.now() - started);
    if (reply.status !== 200 || reply.text !== '{"name":"Alice","id":1}')
      failures.push(`${reply.status} ${reply.text}`);
  }
  const results = await drips;

  const lives = results.map((r) => r.lived).sort((a, b) => a - b);
  const maxProbe = Math.max(...latencies);
  t.diagnostic(
    `${DRIPPERS} drippers lived ${(lives[0]! / 1000).toFixed(2)} s to ${(lives[lives.length - 1]! / 1000).toFixed(2)} s; ` +
      `${latencies.length} GETs meanwhile, slowest ${maxProbe.toFixed(0)} ms`,
  );
  assert.deepEqual(failures, [], 'every GET made meanwhile answered 200 with the user');
  assert.ok(latencies.length >= 5, `GETs were answered throughout (${latencies.length})`);
  for (const [i, r] of results.entries()) {
    assert.ok(
      r.lived >= TEST_TIMEOUTS.headers - 50,
      `dripper ${i} was cut after ${r.lived.toFixed(0)} ms, before the headers timeout`,
    );
    assert.match(r.answer, /^HTTP\/1\.1 408 /, `dripper ${i} got a 408 before the close`);
    assert.match(r.answer, /\r\nContent-Type: application\/problem\+json\r\n/);
    assert.match(r.answer, /"type":"tag:users-server,2026:problem\/request-timeout"/);
  }
  // The server still serves afterwards.
  assert.equal((await send(server.url, 'GET', '/healthz')).status, 200);
});
