import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test, type TestContext } from 'node:test';
import { Accounts, hashPassword } from '../server/security/accounts.js';
import { createApp } from '../server/http/app.js';
import { parseConfig } from '../server/ops/config.js';
import { newSessionId, signSession } from '../server/security/session-token.js';
import { memoryStore } from '../server/store/memory/state-store.js';
import type { Store } from '../server/store/store.js';
import { assertProblem, listText, put, send } from './helpers.js';

const KEY = Buffer.from('errors-test-secret'.padEnd(40, 'e'));
const SECRET_WORDS = 'disk on fire at /var/secret/path';

const WRITES: ReadonlySet<string | symbol> = new Set(['putUser', 'deleteUser', 'createUser', 'reserveId', 'revokeSessions']);

/** A memory store whose writes fail while `failing` is set, as a disk or fsync failure would. */
function failingStore(): { store: Store; control: { failing: boolean } } {
  const control = { failing: false };
  const inner = memoryStore();
  const store = new Proxy(inner, {
    get(target, name) {
      const value: unknown = Reflect.get(target, name);
      if (typeof value !== 'function') return value;
      if (control.failing && WRITES.has(name)) return () => Promise.reject(new Error(SECRET_WORDS));
      return (value as (...args: unknown[]) => unknown).bind(target);
    },
  });
  return { store, control };
}

async function mount(t: TestContext, store: Store, accounts: Accounts): Promise<{ url: string; logged: string[] }> {
  const logged: string[] = [];
  const { config } = parseConfig([], {});
  const app = createApp({ store, config, accounts, keys: [KEY], logError: (message) => logged.push(message) });
  const server = createServer(app.handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  }));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, logged };
}

function assertBare500(reply: { status: number; headers: Record<string, string | string[] | undefined>; text: string }): void {
  const doc = assertProblem(reply, 500, 'internal');
  assert.equal(doc.detail, 'The server could not complete the request.');
  assert.ok(!reply.text.includes('disk on fire'), 'the cause leaks into the body');
  assert.ok(!reply.text.includes('/var/secret'), 'a path leaks into the body');
  assert.ok(!/\bat \S+ \(/.test(reply.text), 'a stack frame leaks into the body');
}

test('an unexpected error in a write becomes a bare 500 problem that leaks nothing, is logged with its stack, and changes nothing', async (t) => {
  const { store, control } = failingStore();
  const { url, logged } = await mount(t, store, new Accounts());
  assert.equal((await put(url, '/users/alice', { name: 'Alice' })).status, 201);
  const before = await listText({ url });
  control.failing = true;
  assertBare500(await put(url, '/users/alice', { name: 'Changed' }));
  assertBare500(await send(url, 'POST', '/users/new', { json: { name: 'Bob' } }));
  assertBare500(await send(url, 'POST', '/reservations'));
  assert.equal(logged.length, 3);
  assert.ok(logged[0]!.includes(SECRET_WORDS) && logged[0]!.includes('at '), 'the log line carries the message and the stack');
  control.failing = false;
  assert.equal(await listText({ url }), before);
  assert.equal((await send(url, 'GET', '/healthz')).status, 200);
});

test('an unexpected error thrown synchronously by a handler becomes a bare 500 and the server keeps serving', async (t) => {
  const accounts = new Accounts();
  accounts.add('admin', 'admin', await hashPassword('pw'));
  const { url, logged } = await mount(t, memoryStore(), accounts);
  const now = Math.floor(Date.now() / 1000);
  const token = signSession({ account: 'admin', sessionId: newSessionId(), issuedAt: now, expiresAt: now + 60 }, KEY);
  const cookie = `USER_TOKEN=${token}`;
  assert.equal((await send(url, 'GET', '/', { headers: { cookie } })).status, 200);
  accounts.get = () => {
    throw new Error(SECRET_WORDS);
  };
  assertBare500(await send(url, 'GET', '/', { headers: { cookie } }));
  assert.equal(logged.length, 1);
  assert.equal((await send(url, 'GET', '/healthz')).status, 200);
});
