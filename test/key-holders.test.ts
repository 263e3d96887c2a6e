/**
 * A unique field's holders by key (server/store/memory/key-holders.ts),
 * read by an `eq` and a write's uniqueness check, against a plain model:
 * after any sequence of versions added and removed, two users holding one
 * key at once among them (as between two writes of one batch), the
 * holders of every key and an `eq` of every value are those of the model,
 * and those of the field's sorted entries.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { FieldIndexes } from '../server/store/memory/field-indexes.js';
import { KeyHolders } from '../server/store/memory/key-holders.js';
import { SortedEntries } from '../server/store/memory/sorted-entries.js';
import { keyRangeOf, LAST_KEY, valueKey } from '../server/users/index-key.js';

const EMAILS = ['a@x', 'A@x', 'b@x', 'c@x', 'ab@x'];
const UNIQUE = { path: 'email', unique: true, caseInsensitive: true };
const PLAIN = { path: 'email', unique: false, caseInsensitive: true };

/** A user's versions in turn: an email, a list of them, or none. */
const version = fc.oneof(
  fc.constantFrom(...EMAILS),
  fc.uniqueArray(fc.constantFrom(...EMAILS), { maxLength: 2 }),
  fc.constant(undefined),
);
const writes = fc.array(fc.tuple(fc.integer({ min: 1, max: 4 }), version), { maxLength: 40 });

/** The ids whose current version holds `email` (lowercased), ascending. */
function modelHolders(current: Map<number, unknown>, email: string): number[] {
  const key = email.toLowerCase();
  const holds = (value: unknown) =>
    (Array.isArray(value) ? value : [value]).some((e) => typeof e === 'string' && e.toLowerCase() === key);
  return [...current]
    .filter(([, value]) => holds(value))
    .map(([id]) => id)
    .sort((a, b) => a - b);
}

test('the holders of a unique field and its eq answer as the model after any writes, shared keys among them', () => {
  fc.assert(
    fc.property(writes, fc.boolean(), (steps, readBack) => {
      const unique = new FieldIndexes();
      const plain = new FieldIndexes();
      unique.declare([UNIQUE], []);
      plain.declare([PLAIN], []);
      const current = new Map<number, unknown>();
      const json = (id: number) => JSON.stringify({ id, email: current.get(id) });
      const write = ([id, email]: (typeof steps)[number]) => {
        if (current.has(id)) for (const index of [unique, plain]) index.remove(id, json(id));
        current.set(id, email);
        for (const index of [unique, plain]) index.add(id, json(id));
      };
      const half = steps.length >> 1;
      steps.slice(0, half).forEach(write);
      // A state read back from disk: built again whole, uniqueness unchecked; then written on.
      if (readBack) unique.rebuild([...current.keys()].map((id) => [id, { id, json: json(id) } as never]));
      steps.slice(half).forEach(write);
      const sortKey = (id: number) => {
        const email = current.get(id);
        return typeof email === 'string' ? valueKey(email, true)! : LAST_KEY;
      };
      const bySort = [...current.keys()].sort((a, b) =>
        sortKey(a) < sortKey(b) ? -1 : sortKey(a) > sortKey(b) ? 1 : a - b,
      );
      assert.deepEqual(
        unique.sortedAfter(UNIQUE, false, undefined, 10).map((e) => e.id),
        bySort,
        'sorted by email',
      );
      const startsWithA = [...current.keys()]
        .filter((id) => EMAILS.some((e) => e.toLowerCase().startsWith('a') && modelHolders(current, e).includes(id)))
        .sort((a, b) => a - b);
      assert.deepEqual(
        [...new Set(unique.idsInRange(UNIQUE, keyRangeOf('sw', 'a', true)!))].sort((a, b) => a - b),
        startsWithA,
        'sw a',
      );
      for (const email of EMAILS) {
        const expected = modelHolders(current, email);
        const key = valueKey(email, true)!;
        assert.deepEqual(unique.holders({ field: UNIQUE, key }), expected, `holders of ${email}`);
        assert.deepEqual(unique.idsInRange(UNIQUE, keyRangeOf('eq', email, true)!), expected, `eq ${email}`);
        assert.deepEqual(plain.idsInRange(PLAIN, keyRangeOf('eq', email, true)!), expected, `eq ${email}, not unique`);
      }
    }),
    { numRuns: 500 },
  );
});

test('holders filled a step at a time over 50,000 users answer as the model, with writes between the steps', async () => {
  const index = new FieldIndexes();
  const current = new Map<number, string | undefined>();
  for (let id = 1; id <= 50_000; id++) current.set(id, `u${id}@x`);
  const json = (id: number) => JSON.stringify({ id, email: current.get(id) });
  index.declare(
    [UNIQUE],
    [...current.keys()].map((id) => [id, { id, json: json(id) } as never]),
  );
  const filled = index.filled();
  let done = false;
  void filled.then(() => (done = true));
  const touched = new Set<string>();
  let steps = 0;
  for (let turn = 0; !done; turn++) {
    // Each turn: a user takes a new email, another gives its own up, a third takes the one given up.
    const [a, b, c] = [1 + ((turn * 7919) % 50_000), 1 + ((turn * 104_729) % 50_000), 1 + ((turn * 15_485) % 50_000)];
    const change = (id: number, email: string | undefined) => {
      index.remove(id, json(id));
      touched.add(String(current.get(id)));
      current.set(id, email);
      if (email !== undefined) touched.add(email);
      index.add(id, json(id));
    };
    change(a, `new${turn}@x`);
    const given = current.get(b);
    if (b !== a) change(b, undefined);
    if (c !== a && c !== b && given !== undefined) change(c, given);
    const last = [...current].filter(([, e]) => e === 'u49999@x').map(([id]) => id);
    assert.deepEqual(index.holders({ field: UNIQUE, key: valueKey('u49999@x', true)! }), last, 'while filling');
    await new Promise((resolve) => setTimeout(resolve, 0));
    steps++;
  }
  assert.ok(steps >= 2, `the fill took ${steps} turns`);
  for (const email of [...touched, 'u1@x', 'u25000@x', 'u50000@x', 'none@x']) {
    if (email === 'undefined') continue;
    const holders = [...current].filter(([, e]) => e === email).map(([id]) => id);
    assert.deepEqual(index.holders({ field: UNIQUE, key: valueKey(email, true)! }), holders, email);
  }
});

test('a unique field is declared over users that lack it, and refused over two that share a value', () => {
  const stored = (values: unknown[]) =>
    values.map((email, i) => [i + 1, { id: i + 1, json: JSON.stringify({ id: i + 1, email }) }] as never);
  assert.equal(new FieldIndexes().declare([UNIQUE], stored([undefined, null, 'a@x', undefined])), undefined);
  assert.match(new FieldIndexes().declare([UNIQUE], stored([undefined, 'a@x', 'A@x'])) ?? '', /a@x/);
});

test('a key two users held at once is known by the Map again once one of them has let it go', () => {
  const entries = SortedEntries.of([], []);
  const holders = new KeyHolders(
    () => entries,
    LAST_KEY,
    () => true,
  );
  const change = (add: boolean, id: number) => {
    if (add) entries.insert('1a@x', id);
    else entries.delete('1a@x', id);
    if (add) holders.add('1a@x', id);
    else holders.delete('1a@x', id);
  };
  change(true, 1);
  change(true, 2);
  change(true, 3);
  assert.equal(holders.idsOf('1a@x'), undefined, 'three holders: read from the entries');
  change(false, 1);
  assert.equal(holders.idsOf('1a@x'), undefined, 'two holders: read from the entries');
  change(false, 3);
  assert.deepEqual(holders.idsOf('1a@x'), [2]);
  change(false, 2);
  assert.deepEqual(holders.idsOf('1a@x'), []);
});
