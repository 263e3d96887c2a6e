/**
 * A flood of logins (issue 19, "Login flood"; docs/operations.md "Abusive
 * clients"): password hashing is bounded (--login-concurrency hashes at
 * once, a short queue, then 503 login-busy unhashed), a server-wide budget
 * of failed logins (--login-failures-per-minute) refuses logins without a
 * session once spent, and a signed-in user gets through both. scrypt is a
 * stand-in the test holds and releases by hand, so nothing here waits on
 * time; the figures under a real flood are measured by bench/abuse-bench.ts.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import type { ScryptFunction } from '../server/security/credentials.js';
import { FailureBudget, HashingGate } from '../server/security/login-load.js';
import {
  ADMIN_PASSWORD,
  assertProblem,
  basic,
  canUseSecondLoopback,
  send,
  startTestServer,
  type Reply,
  type TestServer,
} from './helpers.js';

const T0 = 1_800_000_000_000;

test('HashingGate: runs `concurrency` at once, queues `queue` more, at most `perClient` of them from one client, refuses the next at once; first in, first out', async () => {
  const gate = new HashingGate(1, 3, 2);
  const order: string[] = [];
  let release = () => {};
  const first = gate.run(() => new Promise<void>((resolve) => (release = resolve)).then(() => order.push('first')), {
    client: 'a',
  });
  const queued = [
    gate.run(async () => order.push('a1'), { client: 'a' }),
    gate.run(async () => order.push('a2'), { client: 'a' }),
  ];
  assert.equal(
    gate.run(async () => order.push('a3'), { client: 'a' }),
    undefined,
    'client a holds its two places: refused at once',
  );
  queued.push(gate.run(async () => order.push('b1'), { client: 'b' }));
  assert.equal(
    gate.run(async () => order.push('c1'), { client: 'c' }),
    undefined,
    'the queue is full',
  );
  assert.ok(first !== undefined && queued.every((q) => q !== undefined));
  release();
  await Promise.all([first, ...queued]);
  assert.deepEqual(order, ['first', 'a1', 'a2', 'b1']);
  assert.ok(gate.run(async () => {}, { client: 'a' }) !== undefined, 'the places are given back');
});

test('HashingGate: a signed-in login waits past the bound, before the queue, one per account; a second of the account waits like any other', async () => {
  const gate = new HashingGate(1, 1, 1);
  const order: string[] = [];
  let release = () => {};
  const first = gate.run(() => new Promise<void>((resolve) => (release = resolve)).then(() => order.push('first')), {
    client: 'a',
  });
  const queued = gate.run(async () => order.push('queued'), { client: 'b' });
  const rita = gate.run(async () => order.push('rita'), { client: 'c', signedInAs: 'rita' });
  const bob = gate.run(async () => order.push('bob'), { client: 'c', signedInAs: 'bob' });
  assert.equal(
    gate.run(async () => order.push('rita again'), { client: 'd', signedInAs: 'rita' }),
    undefined,
    "rita's place past the bound is taken, and the queue is full",
  );
  assert.ok(first !== undefined && queued !== undefined && rita !== undefined && bob !== undefined);
  release();
  await Promise.all([first, queued, rita, bob]);
  assert.deepEqual(order, ['first', 'rita', 'bob', 'queued']);
});

test('FailureBudget: spent after `perMinute` failures in a sliding minute, with the seconds until the oldest leaves it; 0 means none', () => {
  const budget = new FailureBudget(30);
  for (let i = 0; i < 30; i++) {
    assert.equal(budget.spent(`client-${i}`, T0 + i * 1000), undefined);
    budget.record(`client-${i}`, T0 + i * 1000);
  }
  assert.equal(budget.spent('another', T0 + 29_000), 31);
  assert.equal(budget.spent('another', T0 + 60_000), undefined, 'the first failure left the window');
  const none = new FailureBudget(0);
  for (let i = 0; i < 1000; i++) none.record('a', T0);
  assert.equal(none.spent('a', T0), undefined);
});

test('FailureBudget: one client spends at most a tenth of it (at least one failure); the others still have the rest', () => {
  const budget = new FailureBudget(30);
  for (let i = 0; i < 3; i++) {
    assert.equal(budget.spent('a', T0 + i * 1000), undefined);
    budget.record('a', T0 + i * 1000);
  }
  assert.equal(budget.spent('a', T0 + 2000), 58, 'client a spent its three');
  assert.equal(budget.spent('b', T0 + 2000), undefined, 'client b has not');
  assert.equal(budget.spent('a', T0 + 60_000), undefined, "a's first failure left the window");
  const small = new FailureBudget(3);
  small.record('a', T0);
  assert.equal(small.spent('a', T0), 60, 'a budget of 3: one failure a client');
  assert.equal(small.spent('b', T0), undefined);
});

/** A stand-in for scrypt: it answers at once until `hold()`, then its runs wait for `releaseAll()`. */
function heldScrypt() {
  let runs = 0;
  let holding = false;
  let held: (() => void)[] = [];
  const scrypt: ScryptFunction = (password, salt, _params, length) => {
    runs++;
    const key = createHash('sha256').update(salt).update(password).digest().subarray(0, length);
    if (!holding) return Promise.resolve(key);
    return new Promise((resolve) => held.push(() => resolve(key)));
  };
  return {
    scrypt,
    runs: () => runs,
    held: () => held.length,
    hold: () => (holding = true),
    releaseAll: () => {
      holding = false;
      for (const release of held) release();
      held = [];
    },
  };
}

function login(
  url: string,
  user: string,
  password: string,
  headers: Record<string, string> = {},
  localAddress?: string,
): Promise<Reply> {
  return send(url, 'POST', '/login', {
    headers: { authorization: basic(user, password), ...headers },
    ...(localAddress !== undefined && { localAddress }),
  });
}

const READER_PASSWORD = 'reader-password';
const READER = { name: 'rita', role: 'reader' as const, password: READER_PASSWORD };

/** From the proxy's header (--trust-proxy): each number another client address. */
function from(client: number): Record<string, string> {
  return { 'x-forwarded-for': `198.51.100.${client}` };
}

/** Resolves once `condition()` holds, looking again after each turn of the event loop (no timer). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise(setImmediate);
}

test('POST /login under a flood: one hash at a time and 16 waiting; the rest answer 503 login-busy with Retry-After, unhashed; a signed-in user still logs in', async (t) => {
  const stand = heldScrypt();
  const server = await startTestServer(t, { loginConcurrency: 1, trustProxy: true }, { scrypt: stand.scrypt });
  const cookie = await server.login();
  stand.hold();
  const runsBefore = stand.runs();
  // 40 at once from ten clients, four each (what one client may queue): whichever arrive first take the
  // slot and the 16 places; the other 23 are refused at once.
  const answers: Reply[] = [];
  const flood = Array.from({ length: 40 }, (_, i) =>
    login(server.url, `nobody-${i}`, 'wrong', from(1 + (i % 10))).then((reply) => (answers.push(reply), reply)),
  );
  await until(() => answers.length === 23);
  for (const reply of answers) {
    assertProblem(reply, 503, 'login-busy');
    assert.equal(reply.headers['retry-after'], '1');
  }
  assert.equal(stand.held(), 1, 'one login is being hashed');
  assert.equal(stand.runs() - runsBefore, 1, 'the refused ones were not hashed');
  // A signed-in user waits past the full queue, first in line, instead of being refused.
  const again = login(server.url, 'admin', ADMIN_PASSWORD, { cookie });
  assertProblem(await login(server.url, 'late-probe', 'wrong'), 503, 'login-busy', 'the queue is still full');
  stand.releaseAll();
  assert.equal((await again).status, 200);
  const statuses = (await Promise.all(flood)).map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 401).length, 17, 'the 17 admitted were checked: wrong password');
});

test('POST /login: once --login-failures-per-minute failures are spent server-wide, logins without a session of their account answer 503 unhashed, from any address; a signed-in user still logs in', async (t) => {
  const stand = heldScrypt();
  const server = await startTestServer(
    t,
    { loginFailuresPerMinute: 3, trustProxy: true },
    { scrypt: stand.scrypt, accounts: [READER] },
  );
  const cookie = await server.login();
  const readerCookie = await server.login('rita', READER_PASSWORD);
  for (let i = 1; i <= 3; i++)
    assertProblem(
      await login(server.url, 'nobody', 'wrong', { 'x-forwarded-for': `198.51.100.${i}` }),
      401,
      'login-failed',
    );
  const runs = stand.runs();
  const refused = await login(server.url, 'admin', ADMIN_PASSWORD, { 'x-forwarded-for': '203.0.113.9' });
  assertProblem(refused, 503, 'login-busy');
  assert.ok(Number(refused.headers['retry-after']) >= 1);
  assert.equal(stand.runs(), runs, 'refused unhashed');
  assert.equal((await login(server.url, 'admin', ADMIN_PASSWORD, { cookie })).status, 200, 'a signed-in user');
  assertProblem(
    await login(server.url, 'admin', ADMIN_PASSWORD, { cookie: readerCookie }),
    503,
    'login-busy',
    "a reader's session does not get another account's login past the budget",
  );
  assert.equal(stand.runs(), runs + 1, 'only the signed-in login was hashed');
});

test("POST /login: a login refused busy takes none of its account's ten tries: the right password, refused busy twelve times, then logs in", async (t) => {
  const stand = heldScrypt();
  const server = await startTestServer(
    t,
    { loginConcurrency: 1, trustProxy: true },
    { scrypt: stand.scrypt, accounts: [READER] },
  );
  stand.hold();
  // One hash running and the 16 places of the queue taken, in whatever order the logins reach the
  // gate (on PostgreSQL each first takes its slot in the database): six clients of five logins
  // each, at most four places each, so every order fills the queue and refuses the other 13.
  let answered = 0;
  const flood = Array.from({ length: 30 }, (_, i) =>
    login(server.url, `nobody-${i}`, 'wrong', from(1 + (i % 6))).then((reply) => (answered++, reply)),
  );
  await until(() => stand.held() === 1 && answered === 13);
  const refused: Reply[] = [];
  for (let i = 0; i < 12; i++) refused.push(await login(server.url, 'rita', READER_PASSWORD, from(9)));
  for (const [i, reply] of refused.entries()) assertProblem(reply, 503, 'login-busy', `busy refusal ${i + 1}`);
  stand.releaseAll();
  await Promise.all(flood);
  assert.equal((await login(server.url, 'rita', READER_PASSWORD, from(9))).status, 200);
});

test('POST /login: concurrent logins with the right password are never told "too many failed logins"; past ten at once they are busy (503)', async (t) => {
  const stand = heldScrypt();
  const server = await startTestServer(t, { loginConcurrency: 1 }, { scrypt: stand.scrypt, accounts: [READER] });
  const cookie = await server.login('rita', READER_PASSWORD);
  stand.hold();
  const answers: Reply[] = [];
  const logins = Array.from({ length: 200 }, () =>
    login(server.url, 'rita', READER_PASSWORD, { cookie }).then((reply) => (answers.push(reply), reply)),
  );
  await until(() => answers.length >= 190);
  stand.releaseAll();
  const statuses = (await Promise.all(logins)).map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 429).length, 0, 'no 429');
  assert.deepEqual(new Set(statuses), new Set([200, 503]));
  assert.equal((await login(server.url, 'rita', READER_PASSWORD)).status, 200, 'and the next login');
});

/**
 * Sends `flood` at once, then, once the server has read every request of
 * it, the probe; resolves with the probe's answer. The held hash is let go
 * once the probe has its answer or the flood its `refused` answers,
 * whichever comes first.
 */
async function probeAfterFlood(
  server: TestServer,
  stand: ReturnType<typeof heldScrypt>,
  flood: (() => Promise<Reply>)[],
  refused: number,
  probe: () => Promise<Reply>,
) {
  let arrived = 0;
  server.running.server.on('request', () => arrived++);
  stand.hold();
  const answers: Reply[] = [];
  const sent = flood.map((send) => send().then((reply) => (answers.push(reply), reply)));
  await until(() => arrived >= flood.length);
  let probed: Reply | undefined;
  const probing = probe().then((reply) => (probed = reply));
  await until(() => probed !== undefined || answers.length >= refused);
  stand.releaseAll();
  await Promise.all([...sent, probing]);
  return { probe: probed!, answers };
}

test('POST /login: one client address holds at most 4 of the 16 places of the hashing queue; another address still gets one', async (t) => {
  const stand = heldScrypt();
  const server = await startTestServer(t, { loginConcurrency: 1, trustProxy: true }, { scrypt: stand.scrypt });
  const flood = Array.from({ length: 40 }, (_, i) => () => login(server.url, `nobody-${i}`, 'wrong', from(1)));
  const { probe, answers } = await probeAfterFlood(server, stand, flood, 35, () =>
    login(server.url, 'admin', ADMIN_PASSWORD, from(2)),
  );
  assert.equal(probe.status, 200, 'the other address was queued and checked');
  assert.equal(
    answers.filter((r) => r.status === 503).length,
    35,
    'the flooding address: one hashing, four waiting, the rest busy',
  );
});

test("POST /login: a session lets its own account's login wait past the queue's bound, not any name's: made-up names sent with a reader's cookie are bounded like any others", async (t) => {
  const stand = heldScrypt();
  const server = await startTestServer(
    t,
    { loginConcurrency: 1, trustProxy: true },
    { scrypt: stand.scrypt, accounts: [READER] },
  );
  const cookie = await server.login('rita', READER_PASSWORD);
  const runs = stand.runs();
  const flood = Array.from(
    { length: 200 },
    (_, i) => () => login(server.url, `junk-${i}`, 'wrong', { cookie, ...from(1) }),
  );
  const { probe, answers } = await probeAfterFlood(server, stand, flood, 195, () =>
    login(server.url, 'admin', ADMIN_PASSWORD, from(2)),
  );
  assert.equal(probe.status, 200, 'a login of another client is not starved');
  assert.equal(answers.filter((r) => r.status === 503).length, 195);
  assert.equal(stand.runs() - runs, 5 + 1, 'the five of the flood admitted (one hashing, four waiting), and the probe');
});

test('POST /login: one address spending --login-failures-per-minute on made-up names spends at most a tenth of it; another address still logs in', async (t) => {
  const stand = heldScrypt();
  const server = await startTestServer(t, { loginFailuresPerMinute: 50 }, { scrypt: stand.scrypt });
  if (!(await canUseSecondLoopback(server.url))) return t.skip('127.0.0.2 is not a usable loopback address here');
  const statuses: number[] = [];
  for (let i = 0; i < 50; i++) statuses.push((await login(server.url, `junk${i}`, 'wrong', {}, '127.0.0.1')).status);
  assert.deepEqual(
    statuses,
    [...Array(5).fill(401), ...Array(45).fill(503)],
    'five checked, then this address is refused unhashed',
  );
  assert.equal((await login(server.url, 'admin', ADMIN_PASSWORD, {}, '127.0.0.5')).status, 200, 'from 127.0.0.5');
});
