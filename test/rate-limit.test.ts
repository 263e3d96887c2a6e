/**
 * API.md "Access control and limits": rate limit per client address, token
 * bucket, `--rate-limit` requests per second with `--rate-burst`; over it 429
 * with `Retry-After`, `RateLimit-Policy` and `RateLimit`
 * (draft-ietf-httpapi-ratelimit-headers-11). The bucket is tested with an
 * injected clock; the server with an injected clock too, so no test depends
 * on how fast the machine is.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test, type TestContext } from 'node:test';
import { clientAddress, lastForwardedAddress } from '../server/http/client-address.js';
import type { Config } from '../server/ops/config.js';
import { limitKey, RateLimiter } from '../server/security/rate-limit.js';
import { assertProblem, listText, send, startTestServer, type Reply } from './helpers.js';

/** A clock the test moves by hand, in milliseconds. */
function manualClock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let now = start;
  return { now: () => now, advance: (ms) => (now += ms) };
}

// ------------------------------------------------------------ the bucket

test('Rate limit: a fresh address may make --rate-burst requests at once, and the next one is refused', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ rate: 2, burst: 5, now: clock.now });
  const remaining = [];
  for (let i = 0; i < 5; i++) {
    const d = limiter.take('192.0.2.1');
    assert.equal(d.admitted, true, `request ${i + 1} of the burst`);
    remaining.push(d.remaining);
  }
  assert.deepEqual(remaining, [4, 3, 2, 1, 0]);
  const refused = limiter.take('192.0.2.1');
  assert.equal(refused.admitted, false);
  assert.equal(refused.remaining, 0);
});

test('Rate limit: the bucket refills --rate-limit tokens per second, and never beyond --rate-burst', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ rate: 2, burst: 3, now: clock.now });
  for (let i = 0; i < 3; i++) limiter.take('a');
  assert.equal(limiter.take('a').admitted, false);
  clock.advance(499);
  assert.equal(limiter.take('a').admitted, false, 'half a token short of 1 after 499 ms at 2/s');
  clock.advance(1);
  assert.equal(limiter.take('a').admitted, true, 'one token after 500 ms at 2/s');
  assert.equal(limiter.take('a').admitted, false);
  clock.advance(3_600_000);
  let admitted = 0;
  while (limiter.take('a').admitted) admitted++;
  assert.equal(admitted, 3, 'an hour idle refills to the burst, not to 7200');
});

test('Rate limit: a refused request takes no token, so a client hammering the server still gets --rate-limit per second', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ rate: 1, burst: 1, now: clock.now });
  assert.equal(limiter.take('a').admitted, true);
  for (let i = 0; i < 100; i++) assert.equal(limiter.take('a').admitted, false);
  clock.advance(1000);
  assert.equal(limiter.take('a').admitted, true);
});

test('Rate limit: a clock that steps back neither refills nor drains a bucket', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ rate: 1, burst: 2, now: clock.now });
  assert.equal(limiter.take('a').admitted, true);
  clock.advance(-10_000);
  assert.equal(limiter.take('a').admitted, true, 'the token left before the step is still there');
  assert.equal(limiter.take('a').admitted, false, 'and no more came from the step');
});

test('Rate limit: each key has its own bucket', () => {
  const limiter = new RateLimiter({ rate: 1, burst: 1, now: manualClock().now });
  assert.equal(limiter.take('192.0.2.1').admitted, true);
  assert.equal(limiter.take('192.0.2.1').admitted, false);
  assert.equal(limiter.take('192.0.2.2').admitted, true);
});

test('Rate limit: a refusal says how many whole seconds until a request is admitted, at least 1 (Retry-After)', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ rate: 1, burst: 4, now: clock.now });
  for (let i = 0; i < 4; i++) limiter.take('a');
  assert.equal(limiter.take('a').seconds, 1);
  clock.advance(900);
  const almost = limiter.take('a');
  assert.equal(almost.admitted, false);
  assert.equal(
    almost.seconds,
    1,
    'a tenth of a second to wait is still announced as 1 s: Retry-After has no fractions',
  );
});

test('Rate limit: an admitted request says how many whole seconds until the bucket is full again (the RateLimit t)', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ rate: 2, burst: 10, now: clock.now });
  assert.equal(limiter.take('a').seconds, 1, '1 token short at 2/s: 0.5 s, rounded up');
  for (let i = 0; i < 8; i++) limiter.take('a');
  const last = limiter.take('a');
  assert.equal(last.remaining, 0);
  assert.equal(last.seconds, 5, '10 tokens short at 2/s');
});

const policyCases = [
  { name: 'a burst equal to the rate is q=rate per 1 s', rate: 10, burst: 10, policy: '"default";q=10;w=1' },
  {
    name: 'a burst larger than the rate is q=burst per the seconds a drained bucket takes to refill',
    rate: 10,
    burst: 50,
    policy: '"default";q=50;w=5',
  },
  {
    name: 'a refill time that is not whole seconds is rounded up, so the policy never promises more than the bucket gives',
    rate: 3,
    burst: 5,
    policy: '"default";q=5;w=2',
  },
  { name: 'a burst smaller than the rate is q=burst per 1 s', rate: 100, burst: 10, policy: '"default";q=10;w=1' },
];
for (const c of policyCases) {
  test(`Rate limit: RateLimit-Policy: ${c.name}`, () => {
    assert.equal(new RateLimiter({ rate: c.rate, burst: c.burst }).policy, c.policy);
  });
}

test('Rate limit: the RateLimit field is one structured-field Item "default" with integer r and t parameters', () => {
  const limiter = new RateLimiter({ rate: 5, burst: 7, now: manualClock().now });
  const admitted = limiter.field(limiter.take('a'));
  assert.equal(admitted, '"default";r=6;t=1');
  for (let i = 0; i < 6; i++) limiter.take('a');
  assert.equal(limiter.field(limiter.take('a')), '"default";r=0;t=1');
});

test('Rate limit: a rate or burst below 1 is refused when the limiter is built', () => {
  assert.throws(() => new RateLimiter({ rate: 0, burst: 1 }), RangeError);
  assert.throws(() => new RateLimiter({ rate: 1, burst: 0 }), RangeError);
});

// ------------------------------------------------------------ bounded memory

test('Rate limit: memory is bounded: however many addresses come, at most maxBuckets are tracked', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ rate: 1, burst: 5, maxBuckets: 100, now: clock.now });
  let most = 0;
  for (let i = 0; i < 10_000; i++) {
    // Every bucket is left partly drained, so no prune finds a full one to drop.
    assert.equal(limiter.take(`10.0.${i >> 8}.${i & 255}`).admitted, true);
    most = Math.max(most, limiter.size);
    if (i % 7 === 0) clock.advance(1);
  }
  assert.ok(most <= 100, `tracked ${most} addresses with a cap of 100`);
  assert.ok(limiter.size >= 90, 'a prune frees only a tenth of the cap');
});

test('Rate limit: at the cap, full buckets are dropped first, so a client being limited keeps its state', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ rate: 1, burst: 3, maxBuckets: 10, now: clock.now });
  for (let i = 0; i < 3; i++) limiter.take('hot');
  for (let i = 0; i < 9; i++) limiter.take(`quiet-${i}`);
  assert.equal(limiter.size, 10);
  clock.advance(1500); // the quiet buckets are full again; "hot" has 1.5 tokens
  limiter.take('newcomer');
  assert.ok(limiter.size <= 10);
  assert.equal(limiter.take('hot').admitted, true);
  assert.equal(limiter.take('hot').admitted, false, 'a fresh bucket would have admitted 3: "hot" was evicted');
});

test('Rate limit: at the cap with no full bucket, the oldest keys are dropped and the newest kept', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ rate: 1, burst: 1, maxBuckets: 10, now: clock.now });
  for (let i = 0; i < 10; i++) limiter.take(`k${i}`);
  limiter.take('k10');
  assert.ok(limiter.size <= 10);
  assert.equal(limiter.take('k9').admitted, false, 'the newest drained bucket is still tracked');
  assert.equal(limiter.take('k0').admitted, true, 'the oldest was dropped and starts afresh');
});

// ------------------------------------------------------------ keys and client addresses

const keyCases = [
  { address: '192.0.2.1', key: '192.0.2.1' },
  { address: '2001:db8:1:2:3:4:5:6', key: '2001:db8:1:2::/64' },
  { address: '2001:db8:1:2::9', key: '2001:db8:1:2::/64' },
  { address: '2001:0DB8:0001:0002:ffff::1', key: '2001:db8:1:2::/64' },
  { address: '::1', key: '0:0:0:0::/64' },
  { address: 'fe80::1%eth0', key: 'fe80:0:0:0::/64' },
  { address: '64:ff9b::192.0.2.1', key: '64:ff9b:0:0::/64' },
  { address: '::ffff:192.0.2.1', key: '192.0.2.1' },
  { address: '::FFFF:192.0.2.2', key: '192.0.2.2' },
];
for (const c of keyCases) {
  test(`Rate limit: the bucket of ${c.address} is ${c.key} (IPv4 per address, also IPv4-mapped; IPv6 per /64)`, () => {
    assert.equal(limitKey(c.address), c.key);
  });
}

function fakeRequest(
  remoteAddress: string | undefined,
  headers: Record<string, string | string[]> = {},
): IncomingMessage {
  return { headers, socket: { remoteAddress } } as unknown as IncomingMessage;
}

const TRUST: Pick<Config, 'trustProxy'> = { trustProxy: true };
const NO_TRUST: Pick<Config, 'trustProxy'> = { trustProxy: false };

const addressCases = [
  {
    name: 'without --trust-proxy, X-Forwarded-For is ignored',
    config: NO_TRUST,
    peer: '127.0.0.1',
    xff: '203.0.113.9',
    expected: '127.0.0.1',
  },
  {
    name: 'with --trust-proxy, the last X-Forwarded-For entry (the one the proxy appended) is the client',
    config: TRUST,
    peer: '127.0.0.1',
    xff: '198.51.100.66, 203.0.113.9',
    expected: '203.0.113.9',
  },
  {
    name: 'with --trust-proxy, repeated X-Forwarded-For lines count as one list',
    config: TRUST,
    peer: '127.0.0.1',
    xff: ['198.51.100.66', '203.0.113.9'],
    expected: '203.0.113.9',
  },
  {
    name: 'with --trust-proxy, an IPv6 entry is taken as is',
    config: TRUST,
    peer: '127.0.0.1',
    xff: '2001:db8::7',
    expected: '2001:db8::7',
  },
  {
    name: 'with --trust-proxy, a port after an IPv4 entry is dropped',
    config: TRUST,
    peer: '127.0.0.1',
    xff: '203.0.113.9:4711',
    expected: '203.0.113.9',
  },
  {
    name: 'with --trust-proxy, a bracketed IPv6 entry with a port is unwrapped',
    config: TRUST,
    peer: '127.0.0.1',
    xff: '[2001:db8::7]:4711',
    expected: '2001:db8::7',
  },
  {
    name: 'with --trust-proxy, a last entry that is no address falls back to the peer',
    config: TRUST,
    peer: '127.0.0.1',
    xff: '203.0.113.9, unknown',
    expected: '127.0.0.1',
  },
  {
    name: 'with --trust-proxy, an empty last entry falls back to the peer',
    config: TRUST,
    peer: '127.0.0.1',
    xff: '203.0.113.9,',
    expected: '127.0.0.1',
  },
  {
    name: 'with --trust-proxy and no X-Forwarded-For, the peer is the client',
    config: TRUST,
    peer: '192.0.2.5',
    xff: undefined,
    expected: '192.0.2.5',
  },
  {
    name: 'an IPv4-mapped IPv6 peer is given as IPv4',
    config: NO_TRUST,
    peer: '::ffff:192.0.2.5',
    xff: undefined,
    expected: '192.0.2.5',
  },
];
for (const c of addressCases) {
  test(`Client address: ${c.name}`, () => {
    const headers: Record<string, string | string[]> = c.xff === undefined ? {} : { 'x-forwarded-for': c.xff };
    assert.equal(clientAddress(fakeRequest(c.peer, headers), c.config), c.expected);
  });
}

test('Client address: only the last X-Forwarded-For element is ever read, whatever the client wrote before it', () => {
  assert.equal(lastForwardedAddress('1.1.1.1, 2.2.2.2, 3.3.3.3'), '3.3.3.3');
  assert.equal(lastForwardedAddress('evil, 3.3.3.3'), '3.3.3.3');
  assert.equal(lastForwardedAddress('3.3.3.3, 1.1.1.1 junk'), undefined);
});

// ------------------------------------------------------------ the real server

const RATE_LIMIT_FIELD = /^"default";r=\d+;t=\d+$/;

async function limitedServer(t: TestContext, overrides: Partial<Config>) {
  const clock = manualClock(Date.now());
  const server = await startTestServer(t, { store: 'memory', ...overrides }, { clock: clock.now });
  return { ...server, advance: clock.advance };
}

function assertTooManyRequests(reply: Reply, policy: string, where = ''): void {
  assertProblem(reply, 429, 'too-many-requests', where);
  assert.equal(reply.headers['retry-after'], '1', `${where} Retry-After`);
  assert.equal(reply.headers['ratelimit-policy'], policy, `${where} RateLimit-Policy`);
  assert.equal(reply.headers['ratelimit'], '"default";r=0;t=1', `${where} RateLimit`);
}

test('Rate limit over HTTP: past the burst a client gets 429 too-many-requests with Retry-After, RateLimit-Policy and RateLimit', async (t) => {
  const server = await limitedServer(t, { rateLimit: 1, rateBurst: 3 });
  const remaining: string[] = [];
  for (let i = 0; i < 3; i++) {
    const reply = await send(server.url, 'GET', '/users');
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['ratelimit-policy'], '"default";q=3;w=3');
    assert.match(String(reply.headers['ratelimit']), RATE_LIMIT_FIELD);
    remaining.push(String(reply.headers['ratelimit']));
  }
  assert.deepEqual(remaining, ['"default";r=2;t=1', '"default";r=1;t=2', '"default";r=0;t=3']);
  assertTooManyRequests(await send(server.url, 'GET', '/users'), '"default";q=3;w=3');
  server.advance(1000);
  const again = await send(server.url, 'GET', '/users');
  assert.equal(again.status, 200, 'a second later one token is back');
});

test('Rate limit over HTTP: every path and method is limited, unknown paths and OPTIONS included', async (t) => {
  const server = await limitedServer(t, { rateLimit: 1 });
  assert.equal((await send(server.url, 'OPTIONS', '/users')).status, 204);
  const cases: [string, string][] = [
    ['GET', '/'],
    ['GET', '/nope'],
    ['OPTIONS', '/users'],
    ['POST', '/login'],
    ['DELETE', '/users/1'],
  ];
  for (const [method, path] of cases)
    assertTooManyRequests(await send(server.url, method, path), '"default";q=1;w=1', `${method} ${path}`);
});

test('Rate limit over HTTP: GET /healthz is never limited and carries no RateLimit fields', async (t) => {
  const server = await limitedServer(t, { rateLimit: 1 });
  assert.equal((await send(server.url, 'GET', '/users')).status, 200);
  for (let i = 0; i < 5; i++) {
    const health = await send(server.url, 'GET', '/healthz');
    assert.equal(health.status, 200);
    assert.equal(health.headers['ratelimit'], undefined);
    assert.equal(health.headers['ratelimit-policy'], undefined);
  }
  assertTooManyRequests(await send(server.url, 'GET', '/users'), '"default";q=1;w=1', 'the bucket is still empty');
});

test('Rate limit over HTTP: refused requests change nothing (no user written, no id issued, no reservation)', async (t) => {
  const server = await limitedServer(t, { rateLimit: 1, rateBurst: 1 });
  const before = await send(server.url, 'GET', '/users?limit=1000');
  assert.equal(before.status, 200);
  assertTooManyRequests(
    await send(server.url, 'PUT', '/users/alice', { json: { name: 'Alice' } }),
    '"default";q=1;w=1',
    'PUT',
  );
  assertTooManyRequests(
    await send(server.url, 'POST', '/users/new', { json: { name: 'Bob' } }),
    '"default";q=1;w=1',
    'POST /users/new',
  );
  assertTooManyRequests(await send(server.url, 'POST', '/reservations'), '"default";q=1;w=1', 'POST /reservations');
  server.advance(1000);
  assert.equal(await listText(server), before.text);
  server.advance(1000);
  const alice = await send(server.url, 'GET', '/users/alice');
  assert.equal(alice.status, 404, 'the refused PUT created nobody');
  server.advance(1000);
  const created = await send(server.url, 'POST', '/users/new', { json: { name: 'Carol' } });
  assert.equal(created.status, 201);
  assert.equal(created.headers.location, '/users/1', 'no id was issued to the refused POSTs');
});

test('Rate limit over HTTP: with --trust-proxy each X-Forwarded-For client has its own bucket', async (t) => {
  const server = await limitedServer(t, { rateLimit: 1, trustProxy: true });
  const from = (address: string) => ({ headers: { 'x-forwarded-for': `198.51.100.66, ${address}` } });
  assert.equal((await send(server.url, 'GET', '/users', from('203.0.113.1'))).status, 200);
  assertTooManyRequests(await send(server.url, 'GET', '/users', from('203.0.113.1')), '"default";q=1;w=1');
  assert.equal(
    (await send(server.url, 'GET', '/users', from('203.0.113.2'))).status,
    200,
    'another client behind the same proxy',
  );
  assert.equal((await send(server.url, 'GET', '/users')).status, 200, 'the proxy itself, without the header');
});

test('Rate limit over HTTP: without --trust-proxy X-Forwarded-For is ignored: one socket address, one bucket', async (t) => {
  const server = await limitedServer(t, { rateLimit: 1 });
  assert.equal(
    (await send(server.url, 'GET', '/users', { headers: { 'x-forwarded-for': '203.0.113.1' } })).status,
    200,
  );
  assertTooManyRequests(
    await send(server.url, 'GET', '/users', { headers: { 'x-forwarded-for': '203.0.113.2' } }),
    '"default";q=1;w=1',
  );
});

test('Rate limit over HTTP: with --rate-limit 0 (the default) nothing is refused and no RateLimit fields are sent', async (t) => {
  const server = await limitedServer(t, {});
  for (let i = 0; i < 20; i++) {
    const reply = await send(server.url, 'GET', '/users');
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['ratelimit'], undefined);
    assert.equal(reply.headers['ratelimit-policy'], undefined);
  }
});
