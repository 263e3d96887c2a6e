import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyMergePatch, mergePatchBetween, sameJson } from '../shared/merge-patch.js';
import { APPENDIX_A } from './merge-patch-examples.js';

for (const [i, [original, patch, result]] of APPENDIX_A.entries()) {
  test(`merge patch: RFC 7396 appendix A example ${i + 1} gives ${JSON.stringify(result)}`, () => {
    const before = JSON.stringify(original);
    assert.deepEqual(applyMergePatch(original, patch), result);
    assert.equal(JSON.stringify(original), before, 'the original is not changed');
  });
}

test('merge patch: a __proto__ member of the patch becomes an own member, never the prototype', () => {
  const patched = applyMergePatch({ name: 'a' }, JSON.parse('{"__proto__":{"admin":true}}')) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(patched), Object.prototype);
  assert.deepEqual(Object.keys(patched), ['name', '__proto__']);
  assert.equal(({} as Record<string, unknown>).admin, undefined);
});

const PAIRS: [unknown, unknown][] = [
  [
    { name: 'a', email: 'x' },
    { name: 'b', email: 'x' },
  ],
  [{ name: 'a', email: 'x' }, { name: 'a' }],
  [{ name: 'a' }, { name: 'a', address: { city: 'Oslo' } }],
  [
    { name: 'a', address: { city: 'Oslo', zip: '1' } },
    { name: 'a', address: { city: 'Bergen', zip: '1' } },
  ],
  [
    { name: 'a', tags: [1, 2] },
    { name: 'a', tags: [2] },
  ],
  [
    { name: 'a', x: { y: 1 } },
    { name: 'a', x: 3 },
  ],
];

for (const [from, to] of PAIRS) {
  test(`merge patch: the patch between ${JSON.stringify(from)} and ${JSON.stringify(to)} turns one into the other`, () => {
    const patch = mergePatchBetween(from, to);
    assert.notEqual(patch, undefined);
    assert.deepEqual(applyMergePatch(from, patch), to);
  });
}

test('merge patch: equal documents (members in another order, 1 and 1.0) need no patch', () => {
  assert.equal(mergePatchBetween({ a: 1, b: [1, { c: 2 }] }, JSON.parse('{"b":[1.0,{"c":2}],"a":1}')), undefined);
  assert.ok(sameJson({ a: 1, b: 2 }, { b: 2, a: 1 }));
  assert.ok(!sameJson({ a: 1 }, { a: 1, b: undefined as unknown as number }));
  assert.ok(!sameJson([1], { 0: 1 }));
});

test("merge patch: the patch between two versions re-applied onto a third keeps the third one's other changes", () => {
  const base = { name: 'Bob', email: 'b@x', age: 30 };
  const mine = { name: 'Bob', email: 'bob@x', age: 30 };
  const theirs = { name: 'Robert', email: 'b@x', age: 31 };
  assert.deepEqual(applyMergePatch(theirs, mergePatchBetween(base, mine)), { name: 'Robert', email: 'bob@x', age: 31 });
});
