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
import { ADMIN_PASSWORD, assertProblem, basic, send, startTestServer, type Reply } from './helpers.js';

const T0 = 1_800_000_000_000;

test('HashingGate: runs `concurrency` at once, queues `queue` more, refuses the next at once; a priority run waits past the bound, first in line', async () => {
  const gate = new HashingGate(1, 1);
  const order: string[] = [];
  let release = () => {};
  const first = gate.run(() => new Promise<void>((resolve) => (release = resolve)).then(() => order.push('first')));
  const queued = gate.run(async () => order.push('queued'));
  assert.ok(first !== undefined && queued !== undefined);
  assert.equal(gate.run(async () => order.push('refused')), undefined, 'the queue is full: refused at once');
  const priority = gate.run(async () => order.push('priority'), true);
  assert.ok(priority !== undefined, 'a priority run is never refused');
  release();
  await Promise.all([first, queued, priority]);
  assert.deepEqual(order, ['first', 'priority', 'queued']);
});

test('FailureBudget: spent after `perMinute` failures in a sliding minute, with the seconds until the oldest leaves it; 0 means none', () => {
  const budget = new FailureBudget(3);
  for (let i = 0; i < 3; i++) {
    assert.equal(budget.spent(T0 + i * 1000), undefined);
    budget.record(T0 + i * 1000);
  }
  assert.equal(budget.spent(T0 + 2000), 58);
  assert.equal(budget.spent(T0 + 60_000), undefined, 'the first failure left the window');
  const none = new FailureBudget(0);
  for (let i = 0; i < 1000; i++) none.record(T0);
  assert.equal(none.spent(T0), undefined);
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

function login(url: string, user: string, password: string, headers: Record<string, string> = {}): Promise<Reply> {
  return send(url, 'POST', '/login', { headers: { authorization: basic(user, password), ...headers } });
}

/** Resolves once `condition()` holds, looking again after each turn of the event loop (no timer). */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise(setImmediate);
}

test('POST /login under a flood: one hash at a time and 16 waiting; the rest answer 503 login-busy with Retry-After, unhashed; a signed-in user still logs in', async (t) => {
  const stand = heldScrypt();
  const server = await startTestServer(t, { loginConcurrency: 1 }, { scrypt: stand.scrypt });
  const cookie = await server.login();
  stand.hold();
  const runsBefore = stand.runs();
  // 40 at once: whichever arrive first take the slot and the 16 places; the other 23 are refused at once.
  const answers: Reply[] = [];
  const flood = Array.from({ length: 40 }, (_, i) => login(server.url, `nobody-${i}`, 'wrong').then((reply) => (answers.push(reply), reply)));
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

test('POST /login: once --login-failures-per-minute failures are spent server-wide, logins without a session answer 503 unhashed, from any address; a signed-in user still logs in', async (t) => {
  const stand = heldScrypt();
  const server = await startTestServer(t, { loginFailuresPerMinute: 3, trustProxy: true }, { scrypt: stand.scrypt });
  const cookie = await server.login();
  for (let i = 1; i <= 3; i++) assertProblem(await login(server.url, 'nobody', 'wrong', { 'x-forwarded-for': `198.51.100.${i}` }), 401, 'login-failed');
  const runs = stand.runs();
  const refused = await login(server.url, 'admin', ADMIN_PASSWORD, { 'x-forwarded-for': '203.0.113.9' });
  assertProblem(refused, 503, 'login-busy');
  assert.ok(Number(refused.headers['retry-after']) >= 1);
  assert.equal(stand.runs(), runs, 'refused unhashed');
  assert.equal((await login(server.url, 'admin', ADMIN_PASSWORD, { cookie })).status, 200, 'a signed-in user');
});
