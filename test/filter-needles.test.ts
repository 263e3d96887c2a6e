/**
 * The scan's test over stored text (users/filter-needles.ts) answers as
 * `matches` does: on random users and filters drawn from one small
 * alphabet, so that most conditions meet values that nearly match.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { CompareOp, Filter, FilterValue } from '../server/users/filter-parse.js';
import { matches } from '../server/users/filter-match.js';
import { textMatcher } from '../server/users/filter-needles.js';

const NAMES = ['a', 'b', 'c'];
const STRINGS = ['x', 'xy', 'yx', 'X', '"q', 'q"', '\\', '😀', '\ud83d', 'é', 'É', '', 'a', '1'];
const PLAIN = { noNullPrototype: true };

const text = fc.constantFrom(...STRINGS);
const scalar = fc.oneof(text, fc.integer({ min: -2, max: 2 }), fc.constantFrom(true, false, null));
const { value: jsonValue } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom(...NAMES), tie('value'), { maxKeys: 3, ...PLAIN }),
  ),
}));
const user = fc.dictionary(fc.constantFrom(...NAMES), jsonValue, { maxKeys: 3, ...PLAIN });
const path = fc.array(fc.constantFrom(...NAMES), { minLength: 1, maxLength: 2 });
const value: fc.Arbitrary<FilterValue> = fc.oneof(text, fc.integer({ min: -2, max: 2 }), fc.constantFrom(null, true));
const op = fc.constantFrom<CompareOp>('eq', 'ne', 'co', 'sw', 'ew', 'gt', 'ge', 'lt', 'le');
const leaf: fc.Arbitrary<Filter> = fc.oneof(
  fc.record({ kind: fc.constant('compare' as const), path, op, value }, PLAIN),
  fc.record({ kind: fc.constant('present' as const), path }, PLAIN),
);
const { filter } = fc.letrec<{ filter: Filter }>((tie) => ({
  filter: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.record(
      {
        kind: fc.constantFrom('and' as const, 'or' as const),
        operands: fc.array(tie('filter'), { minLength: 2, maxLength: 3 }),
      },
      PLAIN,
    ),
    fc.record({ kind: fc.constant('not' as const), operand: tie('filter') }, PLAIN),
    fc.record({ kind: fc.constant('some' as const), path, filter: tie('filter') }, PLAIN),
  ),
}));
const folded = fc.constantFrom<ReadonlySet<string>>(new Set(), new Set(['a']), new Set(['a.b', 'c']));

test('property: the test over stored text agrees with matches on every user and filter, case-insensitive paths too', () => {
  fc.assert(
    fc.property(filter, user, folded, (f, u, lowered) => {
      const json = JSON.stringify({ ...u, id: 1 });
      assert.equal(textMatcher(f, lowered)(json), matches(f, JSON.parse(json), lowered), json);
    }),
    { numRuns: 5000 },
  );
});

test('property: one condition on a member that holds strings: the test over stored text agrees with matches', () => {
  const member = fc.oneof(text, fc.array(text, { maxLength: 3 }));
  const condition = fc.record({ kind: fc.constant('compare' as const), path: fc.constant(['a']), op, value }, PLAIN);
  fc.assert(
    fc.property(condition, member, folded, (f, a, lowered) => {
      const json = JSON.stringify({ a, id: 1 });
      assert.equal(textMatcher(f, lowered)(json), matches(f, JSON.parse(json), lowered), json);
    }),
    { numRuns: 5000 },
  );
});

test('the test over stored text turns away, unparsed, a user that lacks a piece every match holds', () => {
  const filter: Filter = { kind: 'compare', path: ['email'], op: 'eq', value: 'bob@example.org' };
  const test = textMatcher(filter, new Set());
  assert.equal(test('{"name":"Ann","id":1'), false, 'a text that is not JSON is never parsed when it cannot match');
  assert.equal(test('{"name":"Bob","email":"bob@example.org","id":2}'), true);
});
