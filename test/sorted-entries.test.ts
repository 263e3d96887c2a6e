/**
 * An index's entries built whole (server/store/memory/sorted-entries.ts
 * SortedEntries.of): in key then id order whether its ids come ascending
 * or not and whether its keys are few (counted) or many (compared), and a
 * copy of those below a key, which then changes apart from the original.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SortedEntries } from '../server/store/memory/sorted-entries.js';

type Entry = { key: string; id: number };

function inOrder(entries: readonly Entry[]): Entry[] {
  return [...entries].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.id - b.id));
}

function all(sorted: SortedEntries): Entry[] {
  return sorted.after(undefined, Infinity);
}

/** Entries, ids ascending or shuffled, of few keys or of up to 3,000; a pair given twice is kept once by the test. */
const entries = fc
  .tuple(
    fc.uniqueArray(fc.tuple(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 1, max: 5000 })), {
      maxLength: 3000,
      selector: ([key, id]) => `${key} ${id}`,
    }),
    fc.constantFrom(3, 3001),
    fc.boolean(),
  )
  .map(([pairs, keys, ascending]) => {
    const made = pairs.map(([key, id]) => ({ key: `1k${key % keys}`, id }));
    return ascending ? made.sort((a, b) => a.id - b.id) : made;
  });

test('entries built whole come in key then id order, counted or compared, ids ascending or not', () => {
  fc.assert(
    fc.property(entries, (list) => {
      const unique = [...new Map(list.map((e) => [`${e.key} ${e.id}`, e])).values()];
      const built = SortedEntries.of(
        unique.map((e) => e.key),
        unique.map((e) => e.id),
      );
      assert.deepEqual(all(built), inOrder(unique));
      for (const bound of ['1k1', '1k15', '1k2', '2'])
        assert.deepEqual(
          all(built.below(bound)),
          inOrder(unique).filter((e) => e.key < bound),
        );
    }),
    { numRuns: 200 },
  );
});

test('100,000 entries of one key and of all distinct keys come in order', () => {
  const ids = Array.from({ length: 100_000 }, (_, i) => i + 1);
  const one = SortedEntries.of(
    ids.map(() => '1same'),
    ids,
  );
  assert.deepEqual(
    one.after(undefined, 3).map((e) => e.id),
    [1, 2, 3],
  );
  const distinct = SortedEntries.of(
    ids.map((id) => `1user${id}`),
    ids,
  );
  assert.deepEqual(
    distinct.after(undefined, 4).map((e) => e.key),
    ['1user1', '1user10', '1user100', '1user1000'],
  );
});

test('the entries below a key are a copy: what changes in one stays out of the other', () => {
  const keys = ['0a', '1b', '4', '1a', '4', '0c'];
  const original = SortedEntries.of(keys, [1, 2, 3, 4, 5, 6]);
  const below = original.below('4');
  assert.deepEqual(all(below), [
    { key: '0a', id: 1 },
    { key: '0c', id: 6 },
    { key: '1a', id: 4 },
    { key: '1b', id: 2 },
  ]);
  below.insert('1c', 9);
  original.delete('0a', 1);
  assert.equal(all(original).length, 5);
  assert.deepEqual(all(below).at(-1), { key: '1c', id: 9 });
  assert.deepEqual(all(below)[0], { key: '0a', id: 1 });
  assert.deepEqual(all(SortedEntries.of(['4'], [1]).below('4')), []);
});
