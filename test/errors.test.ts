import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { HttpError } from '../server/errors.js';
import { problems } from '../shared/problems.js';
import { memoryStore } from '../server/store/memory/state-store.js';
import type { Store } from '../server/store/store.js';
import { assertProblem, listText, put, send, startTestServer, type TestServer } from './helpers.js';

const SECRET_WORDS = 'disk on fire at /var/secret/path';

const WRITES: ReadonlySet<string | symbol> = new Set([
  'putUser',
  'deleteUser',
  'createUser',
  'reserveId',
  'revokeSessions',
]);

/**
 * A memory store whose writes fail (a rejected promise, as a disk or fsync
 * failure would) while `failing` is set, and whose session check throws at
 * once while `throwing` is set.
 */
function failingStore(): { store: Store; control: { failing: boolean; throwing: boolean } } {
  const control = { failing: false, throwing: false };
  const inner = memoryStore();
  const store = new Proxy(inner, {
    get(target, name) {
      const value: unknown = Reflect.get(target, name);
      if (typeof value !== 'function') return value;
      if (control.failing && WRITES.has(name)) return () => Promise.reject(new Error(SECRET_WORDS));
      if (control.throwing && name === 'isRevoked') {
        return () => {
          throw new Error(SECRET_WORDS);
        };
      }
      return (value as (...args: unknown[]) => unknown).bind(target);
    },
  });
  return { store, control };
}

async function mount(t: TestContext, store: Store): Promise<{ server: TestServer; url: string; logged: string[] }> {
  const logged: string[] = [];
  const server = await startTestServer(t, {}, { store, logError: (message) => logged.push(message) });
  return { server, url: server.url, logged };
}

function assertBare500(reply: {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}): void {
  const doc = assertProblem(reply, 500, 'internal');
  assert.equal(doc.detail, 'The server could not complete the request.');
  assert.ok(!reply.text.includes('disk on fire'), 'the cause leaks into the body');
  assert.ok(!reply.text.includes('/var/secret'), 'a path leaks into the body');
  assert.ok(!/\bat \S+ \(/.test(reply.text), 'a stack frame leaks into the body');
}

test('an unexpected error in a write becomes a bare 500 problem that leaks nothing, is logged with its stack, and changes nothing', async (t) => {
  const { store, control } = failingStore();
  const { url, logged } = await mount(t, store);
  assert.equal((await put(url, '/users/alice', { name: 'Alice' })).status, 201);
  const before = await listText({ url });
  control.failing = true;
  assertBare500(await put(url, '/users/alice', { name: 'Changed' }));
  assertBare500(await send(url, 'POST', '/users/new', { json: { name: 'Bob' } }));
  assertBare500(await send(url, 'POST', '/reservations'));
  assert.equal(logged.length, 3);
  assert.ok(
    logged[0]!.includes(SECRET_WORDS) && logged[0]!.includes('at '),
    'the log line carries the message and the stack',
  );
  control.failing = false;
  assert.equal(await listText({ url }), before);
  assert.equal((await send(url, 'GET', '/healthz')).status, 200);
});

test('an unexpected error thrown synchronously by a handler becomes a bare 500 and the server keeps serving', async (t) => {
  const { store, control } = failingStore();
  const { server, url, logged } = await mount(t, store);
  const cookie = await server.login();
  assert.equal((await send(url, 'GET', '/', { headers: { cookie } })).status, 200);
  control.throwing = true;
  assertBare500(await send(url, 'GET', '/', { headers: { cookie } }));
  assert.equal(logged.length, 1);
  assert.equal((await send(url, 'GET', '/healthz')).status, 200);
});

test('an HttpError (a refusal) captures no stack, and leaves Error.stackTraceLimit as it was; other errors keep theirs', () => {
  const before = Error.stackTraceLimit;
  const refusal = new HttpError(problems.notFound, 'No user 7.');
  assert.equal(refusal.stack, 'HttpError: No user 7.');
  assert.equal(Error.stackTraceLimit, before);
  assert.match(new Error('a bug').stack ?? '', /\n {4}at /);
});
