/**
 * The limit on failed logins (API.md "Access control and limits": "Failed
 * logins are always limited: at most 10 a minute per address and account"):
 * the LoginLimiter itself, then POST /login over real sockets.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, request as httpRequest } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { test, type TestContext } from 'node:test';
import type { ScryptFunction } from '../server/security/credentials.js';
import { LoginLimiter, loginLimitKey } from '../server/security/login-limit.js';
import { ADMIN_PASSWORD, assertProblem, basic, readReply, send, startTestServer, type Reply } from './helpers.js';

const MINUTE = 60_000;
const T0 = 1_800_000_000_000;
const READER_PASSWORD = 'reader-password';

// ---------------------------------------------------------------- LoginLimiter

test('Failed logins: ten attempts a minute pass, the eleventh is refused with the seconds until the oldest leaves the window', () => {
  const limiter = new LoginLimiter();
  for (let i = 0; i < 10; i++) assert.equal(limiter.attempt('k', T0 + i * 1000), undefined, `attempt ${i + 1}`);
  assert.equal(limiter.attempt('k', T0 + 10_000), 50);
  assert.equal(limiter.attempt('k', T0 + 59_001), 1, 'a part of a second counts as a whole one');
  assert.equal(limiter.attempt('k', T0 + MINUTE), undefined, 'a minute after the first attempt, its slot is free');
  assert.equal(limiter.attempt('k', T0 + MINUTE), 1, 'and only that one slot');
});

test('Failed logins: a refused attempt takes no slot, so waiting Retry-After seconds is enough', () => {
  const limiter = new LoginLimiter();
  for (let i = 0; i < 10; i++) limiter.attempt('k', T0);
  for (let i = 0; i < 50; i++) assert.equal(limiter.attempt('k', T0 + 30_000), 30);
  assert.equal(limiter.attempt('k', T0 + 30_000 + 30 * 1000), undefined);
});

test('Failed logins: a success gives every slot of its key back', () => {
  const limiter = new LoginLimiter();
  for (let i = 0; i < 10; i++) limiter.attempt('k', T0);
  limiter.succeeded('k');
  for (let i = 0; i < 10; i++) assert.equal(limiter.attempt('k', T0), undefined, `attempt ${i + 1} after the success`);
  assert.equal(limiter.attempt('k', T0), 60);
});

test('Failed logins: keys are independent: a limited key does not limit another', () => {
  const limiter = new LoginLimiter();
  for (let i = 0; i < 10; i++) limiter.attempt(loginLimitKey('10.0.0.1', 'bob'), T0);
  assert.equal(limiter.attempt(loginLimitKey('10.0.0.1', 'bob'), T0), 60);
  assert.equal(limiter.attempt(loginLimitKey('10.0.0.1', 'carol'), T0), undefined, 'same address, other account');
  assert.equal(limiter.attempt(loginLimitKey('10.0.0.2', 'bob'), T0), undefined, 'same account, other address');
});

test('Failed logins: IPv6 addresses of one /64 share a key (one host holds a whole /64), another /64 does not', () => {
  const limiter = new LoginLimiter();
  for (let i = 1; i <= 10; i++) limiter.attempt(loginLimitKey(`2001:db8:1:2::${i.toString(16)}`, 'bob'), T0);
  assert.equal(limiter.attempt(loginLimitKey('2001:db8:1:2:ffff:ffff:ffff:ffff', 'bob'), T0), 60, 'the 11th guess from the same /64');
  assert.equal(limiter.attempt(loginLimitKey('2001:db8:1:3::1', 'bob'), T0), undefined, 'the next /64');
});

test('Failed logins: memory is bounded: past maxKeys the least recently attempted key is dropped', () => {
  const limiter = new LoginLimiter({ maxKeys: 3 });
  for (let i = 0; i < 10; i++) limiter.attempt('a', T0);
  limiter.attempt('b', T0);
  limiter.attempt('c', T0);
  // Touching "a" again (even refused) makes "b" the least recent.
  assert.equal(limiter.attempt('a', T0), 60);
  limiter.attempt('d', T0);
  assert.equal(limiter.size, 3);
  assert.equal(limiter.attempt('a', T0), 60, '"a" was kept');
  for (let i = 0; i < 10000; i++) limiter.attempt(`key-${i}`, T0);
  assert.equal(limiter.size, 3);
});

test('Failed logins: account names longer than any real one (64) share a key, so long names cannot grow memory', () => {
  assert.equal(loginLimitKey('10.0.0.1', 'x'.repeat(65) + 'a'), loginLimitKey('10.0.0.1', 'x'.repeat(65) + 'b'));
  assert.notEqual(loginLimitKey('10.0.0.1', 'x'.repeat(64) + 'a'), loginLimitKey('10.0.0.1', 'x'.repeat(64) + 'b'));
  assert.notEqual(loginLimitKey('10.0.0.1', 'bob'), loginLimitKey('10.0.0.11', 'bob'));
});

// ---------------------------------------------------------------- POST /login

interface Mounted {
  url: string;
  /** scrypt runs so far. */
  scryptRuns(): number;
  /** Moves the app's clock. */
  setNow(now: number): void;
}

/** A server with admin and a reader, a fast counting stand-in for scrypt, and a clock the test moves. */
async function mount(t: TestContext): Promise<Mounted> {
  let runs = 0;
  let now = T0;
  const scrypt: ScryptFunction = async (password, salt, _params, length) => {
    runs++;
    return createHash('sha256').update(salt).update(password).digest().subarray(0, length);
  };
  const server = await startTestServer(t, {}, { scrypt, clock: () => now, accounts: [{ name: 'rita', role: 'reader', password: READER_PASSWORD }] });
  runs = 0;
  return { url: server.url, scryptRuns: () => runs, setNow: (n) => (now = n) };
}

function login(url: string, user: string, password: string): Promise<Reply> {
  return send(url, 'POST', '/login', { headers: { authorization: basic(user, password) } });
}

/** POST /login sent from `localAddress` (another loopback address is another client). */
function loginFrom(url: string, localAddress: string, user: string, password: string): Promise<Reply> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, path: '/login', method: 'POST', localAddress, agent: false, headers: { authorization: basic(user, password) } }, (res) => readReply(res, resolve, reject));
    req.on('error', reject);
    req.end();
  });
}

/** Whether this machine routes 127.0.0.2 to the loopback (Linux does; macOS only with an alias). */
function canUseSecondLoopback(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port), localAddress: '127.0.0.2' });
    socket.on('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

async function failTenTimes(url: string, user: string): Promise<void> {
  for (let i = 0; i < 10; i++) assertProblem(await login(url, user, `wrong-${i}`), 401, 'login-failed', `failed login ${i + 1}`);
}

function assertTooMany(reply: Reply, retryAfter: string, where = ''): void {
  assertProblem(reply, 429, 'too-many-requests', where);
  assert.equal(reply.headers['retry-after'], retryAfter, `${where} Retry-After`);
  assert.equal(reply.headers['set-cookie'], undefined, `${where} no session cookie`);
  assert.equal(reply.headers['www-authenticate'], undefined, `${where} no Basic challenge: retrying now is pointless`);
}

test('Failed logins: the 11th login within a minute for one address and account answers 429 too-many-requests with Retry-After, without running scrypt', async (t) => {
  const app = await mount(t);
  await failTenTimes(app.url, 'admin');
  assert.equal(app.scryptRuns(), 10);
  app.setNow(T0 + 15_000);
  assertTooMany(await login(app.url, 'admin', 'wrong-again'), '45');
  assert.equal(app.scryptRuns(), 10, 'no scrypt for a limited attempt');
});

test('Failed logins: while limited, the right password is refused too (429), and no session is opened', async (t) => {
  const app = await mount(t);
  await failTenTimes(app.url, 'admin');
  assertTooMany(await login(app.url, 'admin', ADMIN_PASSWORD), '60');
  assert.equal(app.scryptRuns(), 10);
});

test('Failed logins: once the minute has passed the right password logs in again', async (t) => {
  const app = await mount(t);
  await failTenTimes(app.url, 'admin');
  app.setNow(T0 + 59_999);
  assertTooMany(await login(app.url, 'admin', ADMIN_PASSWORD), '1');
  app.setNow(T0 + MINUTE);
  assert.equal((await login(app.url, 'admin', ADMIN_PASSWORD)).status, 200);
});

test('Failed logins: another account from the same address is not limited', async (t) => {
  const app = await mount(t);
  await failTenTimes(app.url, 'admin');
  assert.equal((await login(app.url, 'rita', READER_PASSWORD)).status, 200);
  assertProblem(await login(app.url, 'rita', 'wrong'), 401, 'login-failed');
  assertProblem(await login(app.url, 'nobody', 'wrong'), 401, 'login-failed', 'an unknown name is limited per name too, not per address');
});

test('Failed logins: the same account from another address is not limited', async (t) => {
  const app = await mount(t);
  if (!(await canUseSecondLoopback(app.url))) {
    t.skip('127.0.0.2 is not a usable loopback address here');
    return;
  }
  await failTenTimes(app.url, 'admin');
  assertTooMany(await loginFrom(app.url, '127.0.0.1', 'admin', ADMIN_PASSWORD), '60', 'from 127.0.0.1');
  assert.equal((await loginFrom(app.url, '127.0.0.2', 'admin', ADMIN_PASSWORD)).status, 200, 'from 127.0.0.2');
});

test('Failed logins: an unknown account name is limited like a real one (the answer does not tell them apart)', async (t) => {
  const app = await mount(t);
  await failTenTimes(app.url, 'nobody');
  assertTooMany(await login(app.url, 'nobody', 'x'), '60');
});

test('Failed logins: a login without Basic credentials is not counted against any account', async (t) => {
  const app = await mount(t);
  for (let i = 0; i < 15; i++) assertProblem(await send(app.url, 'POST', '/login'), 401, 'login-failed');
  assert.equal(app.scryptRuns(), 0);
  assert.equal((await login(app.url, 'admin', ADMIN_PASSWORD)).status, 200);
});

test('Failed logins: a successful login starts the count over', async (t) => {
  const app = await mount(t);
  for (let i = 0; i < 9; i++) assertProblem(await login(app.url, 'admin', 'wrong'), 401, 'login-failed');
  assert.equal((await login(app.url, 'admin', ADMIN_PASSWORD)).status, 200);
  await failTenTimes(app.url, 'admin');
  assertTooMany(await login(app.url, 'admin', 'wrong'), '60');
});

test('Failed logins: twenty concurrent wrong logins run scrypt at most ten times; the rest answer 429', async (t) => {
  const app = await mount(t);
  const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => login(app.url, 'admin', `wrong-${i}`)));
  const statuses = replies.map((r) => r.status).sort();
  assert.deepEqual(statuses, [...Array(10).fill(401), ...Array(10).fill(429)]);
  assert.equal(app.scryptRuns(), 10);
});

test('Failed logins are always on: the real server with default flags answers the 11th failed login with 429 and Retry-After', async (t) => {
  const server = await startTestServer(t);
  await failTenTimes(server.url, 'admin');
  const reply = await login(server.url, 'admin', ADMIN_PASSWORD);
  assertProblem(reply, 429, 'too-many-requests');
  const retryAfter = Number(reply.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After: ${reply.headers['retry-after']}`);
});
