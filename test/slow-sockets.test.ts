/**
 * Slow-header clients (issue 6, API.md "Access control and limits": headers
 * 10 s): 200 sockets each dripping one header line every half second are cut
 * by the headers timeout, found by node's connection check (every 2 s at
 * most), while ordinary GETs on fresh connections keep being answered.
 *
 * This test runs with the real timeouts and takes about 12 to 15 s. Its
 * bounds are liveness bounds with generous slack, not speed measurements.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { TIMEOUTS } from '../server/http/server.js';
import { put, send, startTestServer } from './helpers.js';

const DRIPPERS = 200;
const DRIP_EVERY_MS = 500;
const PROBE_EVERY_MS = 250;
// A drip is cut once the headers timeout has passed, at the next connection check.
const SLACK_MS = 1500;
const LONGEST_LIFE_MS = TIMEOUTS.headers + TIMEOUTS.connectionsCheck + SLACK_MS;
const SHORTEST_LIFE_MS = TIMEOUTS.headers - 1000;
// Liveness, not speed: an answer at all, well before a timeout would fire.
const PROBE_BOUND_MS = 2000;

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

test(
  'slow headers: 200 sockets dripping a header line every 0.5 s are each answered 408 and closed within the headers timeout plus one check, while GETs on fresh connections are answered',
  { timeout: 60_000 },
  async (t) => {
    const server = await startTestServer(t);
    assert.equal(server.running.server.headersTimeout, TIMEOUTS.headers);
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
      if (reply.status !== 200 || reply.text !== '{"name":"Alice","id":1}') failures.push(`${reply.status} ${reply.text}`);
      await new Promise((resolve) => setTimeout(resolve, PROBE_EVERY_MS));
    }
    const results = await drips;

    const lives = results.map((r) => r.lived).sort((a, b) => a - b);
    const maxProbe = Math.max(...latencies);
    t.diagnostic(
      `${DRIPPERS} drippers lived ${(lives[0]! / 1000).toFixed(2)} s to ${(lives[lives.length - 1]! / 1000).toFixed(2)} s; ` +
        `${latencies.length} GETs meanwhile, slowest ${maxProbe.toFixed(0)} ms`,
    );
    assert.deepEqual(failures, [], 'every GET made meanwhile answered 200 with the user');
    assert.ok(latencies.length >= 20, `GETs were made throughout (${latencies.length})`);
    assert.ok(maxProbe < PROBE_BOUND_MS, `every GET answered within ${PROBE_BOUND_MS} ms (slowest ${maxProbe.toFixed(0)} ms)`);
    for (const [i, r] of results.entries()) {
      assert.ok(r.lived <= LONGEST_LIFE_MS, `dripper ${i} was cut after ${r.lived.toFixed(0)} ms, later than ${LONGEST_LIFE_MS} ms`);
      assert.ok(r.lived >= SHORTEST_LIFE_MS, `dripper ${i} was cut after ${r.lived.toFixed(0)} ms, before the headers timeout`);
      assert.match(r.answer, /^HTTP\/1\.1 408 /, `dripper ${i} got a 408 before the close`);
      assert.match(r.answer, /\r\nContent-Type: application\/problem\+json\r\n/);
      assert.match(r.answer, /"type":"tag:users-server,2026:problem\/request-timeout"/);
    }
    // The server still serves afterwards.
    assert.equal((await send(server.url, 'GET', '/healthz')).status, 200);
  },
);
