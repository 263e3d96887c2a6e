/**
 * The limit on failed logins (API.md "Access control and limits": "Failed
 * logins are always limited: at most 10 a minute per address and account"):
 * the LoginLimiter itself, then POST /login over real sockets.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test, type TestContext } from 'node:test';
import type { Config } from '../server/ops/config.js';
import type { ScryptFunction } from '../server/security/credentials.js';
import { LoginLimiter, loginLimitKey, type LoginRefusal, type SlotAnswer } from '../server/security/login-limit.js';
import {
  ADMIN_PASSWORD,
  assertProblem,
  basic,
  canUseSecondLoopback,
  send,
  startTestServer,
  type Reply,
  type TestStartOptions,
} from './helpers.js';

const MINUTE = 60_000;
const T0 = 1_800_000_000_000;
const READER_PASSWORD = 'reader-password';

// ---------------------------------------------------------------- LoginLimiter

const A = '10.0.0.1';

/** A try that fails: undefined when it went ahead (and was counted), else the limit's answer. */
function fail(limiter: LoginLimiter, now: number, account = 'bob', address = A): LoginRefusal | undefined {
  const taken = limiter.take(address, account, now);
  if (!('slot' in taken)) return taken;
  taken.slot.failed();
  return undefined;
}

function waitOf(answer: SlotAnswer | LoginRefusal | undefined): number | undefined {
  return answer !== undefined && 'wait' in answer ? answer.wait : undefined;
}

test('Failed logins: ten failures a minute pass, the eleventh try is refused with the seconds until the oldest leaves the window', () => {
  const limiter = new LoginLimiter();
  for (let i = 0; i < 10; i++) assert.equal(fail(limiter, T0 + i * 1000), undefined, `failure ${i + 1}`);
  assert.deepEqual(fail(limiter, T0 + 10_000), { wait: 50, scope: 'account' });
  assert.equal(waitOf(fail(limiter, T0 + 59_001)), 1, 'a part of a second counts as a whole one');
  assert.equal(fail(limiter, T0 + MINUTE), undefined, 'a minute after the first failure, its slot is free');
  assert.equal(waitOf(fail(limiter, T0 + MINUTE)), 1, 'and only that one slot');
});

test('Failed logins: a refused try takes no slot, so waiting Retry-After seconds is enough', () => {
  const limiter = new LoginLimiter();
  for (let i = 0; i < 10; i++) fail(limiter, T0);
  for (let i = 0; i < 50; i++) assert.equal(waitOf(fail(limiter, T0 + 30_000)), 30);
  assert.equal(fail(limiter, T0 + 30_000 + 30 * 1000), undefined);
});

test('Failed logins: a success forgets the failures of its address and account', () => {
  const limiter = new LoginLimiter();
  for (let i = 0; i < 9; i++) fail(limiter, T0);
  const taken = limiter.take(A, 'bob', T0);
  assert.ok('slot' in taken);
  taken.slot.succeeded();
  for (let i = 0; i < 10; i++) assert.equal(fail(limiter, T0), undefined, `failure ${i + 1} after the success`);
  assert.equal(waitOf(fail(limiter, T0)), 60);
});

test('Failed logins: tries being checked hold slots; past the limit a try is busy, not refused as failed; a released slot counts for nothing', () => {
  const limiter = new LoginLimiter();
  const slots = Array.from({ length: 10 }, () => limiter.take(A, 'bob', T0));
  assert.ok(slots.every((s) => 'slot' in s));
  assert.deepEqual(limiter.take(A, 'bob', T0), { busy: 1 }, 'ten under way: the 11th is told to retry shortly');
  for (const s of slots) if ('slot' in s) s.slot.released();
  for (let i = 0; i < 10; i++)
    assert.equal(fail(limiter, T0), undefined, `failure ${i + 1}: the released tries left nothing`);
  assert.equal(waitOf(fail(limiter, T0)), 60);
  assert.equal(limiter.size, 1);
});

test('Failed logins: pairs are independent: a limited account does not limit another of the address, nor the same account from another address', () => {
  const limiter = new LoginLimiter();
  for (let i = 0; i < 10; i++) fail(limiter, T0);
  assert.equal(waitOf(fail(limiter, T0)), 60);
  assert.equal(fail(limiter, T0, 'carol'), undefined, 'same address, other account');
  assert.equal(fail(limiter, T0, 'bob', '10.0.0.2'), undefined, 'same account, other address');
});

test('Failed logins: at most 100 failures a minute per address over all names; then every name of the address is refused, with the seconds until its oldest failure leaves', () => {
  const limiter = new LoginLimiter();
  for (let i = 0; i < 100; i++) assert.equal(fail(limiter, T0 + i * 100, `name${i}`), undefined, `failure ${i + 1}`);
  assert.deepEqual(fail(limiter, T0 + 30_000, 'never-tried'), { wait: 30, scope: 'address' });
  assert.equal(fail(limiter, T0 + 30_000, 'never-tried', '10.0.0.2'), undefined, 'another address');
  assert.equal(fail(limiter, T0 + MINUTE, 'never-tried'), undefined, 'the oldest failure left the window');
});

test('Failed logins: IPv6 addresses of one /64 share a count (one host holds a whole /64), another /64 does not', () => {
  const limiter = new LoginLimiter();
  for (let i = 1; i <= 10; i++) fail(limiter, T0, 'bob', `2001:db8:1:2::${i.toString(16)}`);
  assert.equal(
    waitOf(fail(limiter, T0, 'bob', '2001:db8:1:2:ffff:ffff:ffff:ffff')),
    60,
    'the 11th guess from the same /64',
  );
  assert.equal(fail(limiter, T0, 'bob', '2001:db8:1:3::1'), undefined, 'the next /64');
});

test('Failed logins: 10,050 made-up names from one address leave its count for admin in the table', () => {
  const limiter = new LoginLimiter();
  for (let i = 0; i < 10; i++) fail(limiter, T0, 'admin');
  for (let i = 0; i < 10_050; i++) fail(limiter, T0, `junk${i}`);
  assert.deepEqual(fail(limiter, T0, 'admin'), { wait: 60, scope: 'account' });
  assert.equal(limiter.size, 91, 'admin and the 90 made-up names the address had failures left for');
});

test('Failed logins: memory is bounded: past maxKeys pairs the least recently tried address goes whole, never the one trying', () => {
  const limiter = new LoginLimiter({ limit: 2, addressLimit: 3, maxKeys: 3 });
  fail(limiter, T0, 'bob', 'a');
  fail(limiter, T0, 'bob', 'a');
  fail(limiter, T0, 'bob', 'b');
  fail(limiter, T0, 'bob', 'c');
  // Trying "a" again (even refused) makes "b" the least recent.
  assert.equal(waitOf(fail(limiter, T0, 'bob', 'a')), 60);
  fail(limiter, T0, 'bob', 'd');
  assert.equal(limiter.size, 3);
  assert.equal(waitOf(fail(limiter, T0, 'bob', 'a')), 60, '"a" was kept');
  assert.equal(fail(limiter, T0, 'bob', 'b'), undefined, '"b" was dropped: it starts over');
  for (let i = 0; i < 10_000; i++) fail(limiter, T0, 'bob', `key-${i}`);
  assert.equal(limiter.size, 3);
  for (let i = 0; i < 3; i++) assert.equal(fail(limiter, T0, `name-${i}`, 'e'), undefined);
  assert.deepEqual(
    fail(limiter, T0, 'name-3', 'e'),
    { wait: 60, scope: 'address' },
    'one address holds at most addressLimit pairs',
  );
  assert.equal(limiter.size, 3);
  assert.throws(() => new LoginLimiter({ maxKeys: 99 }), RangeError, 'a table smaller than what one address may fill');
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
async function mount(
  t: TestContext,
  options: TestStartOptions = {},
  overrides: Partial<Config> = {},
): Promise<Mounted> {
  let runs = 0;
  let now = T0;
  const scrypt: ScryptFunction = async (password, salt, _params, length) => {
    runs++;
    return createHash('sha256').update(salt).update(password).digest().subarray(0, length);
  };
  const server = await startTestServer(t, overrides, {
    scrypt,
    clock: () => now,
    accounts: [{ name: 'rita', role: 'reader', password: READER_PASSWORD }],
    ...options,
  });
  runs = 0;
  return { url: server.url, scryptRuns: () => runs, setNow: (n) => (now = n) };
}

function login(url: string, user: string, password: string): Promise<Reply> {
  return send(url, 'POST', '/login', { headers: { authorization: basic(user, password) } });
}

/** POST /login sent from `localAddress` (another loopback address is another client). */
function loginFrom(
  url: string,
  localAddress: string,
  user: string,
  password: string,
  headers: Record<string, string> = {},
): Promise<Reply> {
  return send(url, 'POST', '/login', { headers: { authorization: basic(user, password), ...headers }, localAddress });
}

async function failTenTimes(url: string, user: string): Promise<void> {
  for (let i = 0; i < 10; i++)
    assertProblem(await login(url, user, `wrong-${i}`), 401, 'login-failed', `failed login ${i + 1}`);
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
  assertProblem(
    await login(app.url, 'nobody', 'wrong'),
    401,
    'login-failed',
    'an unknown name is limited per name too, not per address',
  );
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

test('Failed logins: twenty concurrent wrong logins run scrypt at most ten times; the rest answer 429, or 503 when more of them reach the hashing queue at once than one address may hold there', async (t) => {
  const app = await mount(t);
  const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => login(app.url, 'admin', `wrong-${i}`)));
  const statuses = replies.map((r) => r.status);
  const checked = statuses.filter((s) => s === 401).length;
  assert.ok(
    statuses.every((s) => s === 401 || s === 429 || s === 503),
    `${statuses}`,
  );
  assert.ok(checked <= 10, `at most ten checked: ${statuses}`);
  assert.equal(app.scryptRuns(), checked, 'a busy answer ran no hash');
  // A busy answer was no try: the tries it left are tried again.
  const again = await login(app.url, 'admin', 'wrong-again');
  assert.equal(again.status, checked === 10 ? 429 : 401);
});

test('Failed logins are always on: the real server with default flags answers the 11th failed login with 429 and Retry-After', async (t) => {
  const server = await startTestServer(t);
  await failTenTimes(server.url, 'admin');
  const reply = await login(server.url, 'admin', ADMIN_PASSWORD);
  assertProblem(reply, 429, 'too-many-requests');
  const retryAfter = Number(reply.headers['retry-after']);
  assert.ok(
    Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60,
    `Retry-After: ${reply.headers['retry-after']}`,
  );
});

test('Failed logins: made-up names from one address cannot push its count for an account out of the table: its next guesses are still refused', async (t) => {
  // A table of 200 keys stands for the 10,000 of a real server: the attack is the same, with fewer
  // requests. Without the server-wide budget, which would refuse the address sooner (503).
  const app = await mount(t, { loginLimits: new LoginLimiter({ maxKeys: 200 }) }, { loginFailuresPerMinute: 0 });
  await failTenTimes(app.url, 'admin');
  const statuses: number[] = [];
  for (let i = 0; i < 210; i++) statuses.push((await login(app.url, `junk${i}`, 'wrong')).status);
  assertTooMany(await login(app.url, 'admin', 'wrong-again'), '60', 'the 11th guess at admin');
  assertTooMany(await login(app.url, 'admin', ADMIN_PASSWORD), '60', 'the right password too');
  assert.deepEqual(
    statuses,
    [...Array(90).fill(401), ...Array(120).fill(429)],
    'the address had its 100 failures a minute',
  );
  assert.equal(app.scryptRuns(), 100);
});

test('Failed logins: at most 100 a minute per address over all names (429, the right password too); another address is not limited', async (t) => {
  const app = await mount(t, {}, { loginFailuresPerMinute: 0 });
  if (!(await canUseSecondLoopback(app.url))) return t.skip('127.0.0.2 is not a usable loopback address here');
  for (let i = 0; i < 100; i++)
    assertProblem(await login(app.url, `name${i}`, 'wrong'), 401, 'login-failed', `failure ${i + 1}`);
  app.setNow(T0 + 20_000);
  const refused = await login(app.url, 'rita', READER_PASSWORD);
  assertTooMany(refused, '40', 'a name this address never tried');
  assert.match(refused.json().detail, /from this address/);
  assert.equal((await loginFrom(app.url, '127.0.0.2', 'rita', READER_PASSWORD)).status, 200, 'from 127.0.0.2');
  app.setNow(T0 + MINUTE);
  assert.equal((await login(app.url, 'rita', READER_PASSWORD)).status, 200, 'a minute later');
});
