/**
 * The table of a unique field's holders (server/store/memory/key-table.ts)
 * against a Map: after any sequence of sets and deletes, every key reads
 * as the Map has it. The hashes are the table's own, or few, or at the
 * top and the bottom of the range, so that runs of slots meet, wrap around the table's end, and
 * the table grows and shrinks under them.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { KeyTable } from '../server/store/memory/key-table.js';

const KEYS = Array.from({ length: 60 }, (_, i) => `1user${i}@example.com`);
const TOP = 0x3fffffff;
/** The table's own hash, or one of 3 values, or one of 4 at the top and the bottom of the range. */
const hashes = fc.constantFrom<((key: string) => number) | undefined>(
  undefined,
  (key) => (key.charCodeAt(5) % 3) * 0x10000000,
  (key) => [TOP, Math.floor(TOP * 0.9), 0, 5][key.charCodeAt(5) % 4]!,
);
const step = fc.tuple(fc.boolean(), fc.integer({ min: 0, max: KEYS.length - 1 }), fc.integer({ min: 1, max: 9 }));

test('a key table reads as a Map after any sets and deletes', () => {
  fc.assert(
    fc.property(
      fc.array(step, { maxLength: 400, size: 'max' }),
      fc.integer({ min: 0, max: 40 }),
      hashes,
      (steps, expected, hash) => {
        const table = new KeyTable(expected, hash);
        const model = new Map<string, number>();
        for (const [set, which, value] of steps) {
          const key = KEYS[which]!;
          if (set) {
            table.set(key, value);
            model.set(key, value);
          } else {
            table.delete(key);
            model.delete(key);
          }
          assert.equal(table.size, model.size);
        }
        for (const key of KEYS) assert.equal(table.get(key), model.get(key), key);
      },
    ),
    { numRuns: 600 },
  );
});

test('a key table of 100,000 keys, two in three deleted, reads each as it was left', () => {
  const keys = Array.from({ length: 100_000 }, (_, i) => `1user${i}@example.com`);
  const table = new KeyTable(keys.length);
  keys.forEach((key, i) => table.set(key, i));
  keys.forEach((key, i) => i % 3 !== 0 && table.delete(key));
  assert.equal(table.size, Math.ceil(keys.length / 3));
  keys.forEach((key, i) => assert.equal(table.get(key), i % 3 === 0 ? i : undefined));
  // A key the table never held.
  assert.equal(table.get('1nobody@example.com'), undefined);
});
