/**
 * GatheredStatements (server/store/postgres/gathered-statements.ts): what
 * arrives while a statement is at the database goes out together in the
 * next, one per key, each caller getting its own result or the error.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatheredStatements } from '../server/store/postgres/gathered-statements.js';

interface Sent {
  items: number[];
  answer: (results: string[]) => void;
  fail: (error: Error) => void;
}

/**
 * A gathering whose statements wait until the test answers them; `next()` resolves with each statement as it is sent.
 */
function gathering(keyed: boolean) {
  const queue: Sent[] = [];
  const waiters: ((sent: Sent) => void)[] = [];
  const statements = new GatheredStatements<number, string>(
    (items) =>
      new Promise((answer, fail) => {
        const sent = { items, answer, fail };
        const waiter = waiters.shift();
        if (waiter === undefined) queue.push(sent);
        else waiter(sent);
      }),
    keyed ? (item) => item % 10 : undefined,
  );
  const next = () => new Promise<Sent>((take) => (queue.length > 0 ? take(queue.shift()!) : waiters.push(take)));
  return { statements, next, unsent: () => queue.length };
}

test('a lone operation goes at once; those arriving while it is under way share the next statement', async () => {
  const { statements, next, unsent } = gathering(false);
  const first = statements.run(1);
  const sent1 = await next();
  assert.deepEqual(sent1.items, [1]);
  const later = [2, 3, 4].map((n) => statements.run(n));
  for (let turn = 0; turn < 3; turn++) await new Promise((turned) => setImmediate(turned));
  assert.equal(unsent(), 0, 'nothing more is sent while a statement is under way');
  sent1.answer(['one']);
  assert.equal(await first, 'one');
  const sent2 = await next();
  assert.deepEqual(sent2.items, [2, 3, 4], 'one statement for all three');
  sent2.answer(['two', 'three', 'four']);
  assert.deepEqual(await Promise.all(later), ['two', 'three', 'four']);
});

test('with a key, two operations on one key never share a statement: the later goes in the next', async () => {
  const { statements, next } = gathering(true);
  const first = statements.run(5);
  const sent1 = await next();
  const later = [11, 21, 2, 31].map((n) => statements.run(n));
  sent1.answer(['5']);
  await first;
  const sent2 = await next();
  assert.deepEqual(sent2.items, [11, 2]);
  sent2.answer(['11', '2']);
  const sent3 = await next();
  assert.deepEqual(sent3.items, [21]);
  sent3.answer(['21']);
  const sent4 = await next();
  assert.deepEqual(sent4.items, [31]);
  sent4.answer(['31']);
  assert.deepEqual(await Promise.all(later), ['11', '21', '2', '31']);
});

test('a failed statement fails each of its operations, and the next statement still goes', async () => {
  const { statements, next } = gathering(false);
  const first = statements.run(1);
  const sent1 = await next();
  const second = statements.run(2);
  sent1.fail(new Error('database gone'));
  await assert.rejects(first, /database gone/);
  const sent2 = await next();
  assert.deepEqual(sent2.items, [2]);
  sent2.answer(['two']);
  assert.equal(await second, 'two');
});
