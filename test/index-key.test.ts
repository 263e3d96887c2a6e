/**
 * The keys of a declared field's index (server/users/index-key.ts) and the
 * declarations' checks (server/users/declared-fields.ts), the pure part:
 * keys order as `sort` orders values, in JavaScript and as UTF-8 bytes; a
 * key gives its value back; every user a condition matches has a key in
 * the condition's range; a unique field refuses the value another user holds.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { startsWithCodePoints } from '../server/users/code-points.js';
import {
  checkDeclarations,
  declarationRefusal,
  parseFieldPath,
  uniqueConflict,
  uniqueKeysOf,
  type FieldDeclaration,
} from '../server/users/declared-fields.js';
import { matches } from '../server/users/filter-match.js';
import type { CompareOp } from '../server/users/filter-parse.js';
import {
  elementKeysOf,
  inRange,
  keyRangeOf,
  keyValue,
  LAST_KEY,
  sortKeyOf,
  valueKey,
} from '../server/users/index-key.js';
import { compareSortValues } from '../server/users/sort.js';

/**
 * Strings with the characters that test an encoding: NUL, U+0001, surrogates alone and paired, U+D7FF, U+E000, U+FFFF.
 */
const text = fc.oneof(
  fc.string({ unit: 'binary' }),
  fc.string({
    unit: fc.constantFrom(
      '\u0000',
      '\u0001',
      '\u0002',
      'a',
      'A',
      '\uD7FF',
      '\uD800',
      '\uDC00',
      '\uE000',
      '\uFFFF',
      '\u{1F600}',
    ),
  }),
);
const scalar = fc.oneof(text, fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.boolean());

const sign = (n: number) => Math.sign(n);
const compareKeys = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

test('keys order as sort orders values, and as UTF-8 bytes order them (a database with collate "C")', () => {
  fc.assert(
    fc.property(scalar, scalar, (a, b) => {
      const [x, y] = [valueKey(a, false)!, valueKey(b, false)!];
      assert.equal(compareKeys(x, y), sign(compareSortValues(a, b)), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
      assert.equal(sign(Buffer.compare(Buffer.from(x), Buffer.from(y))), compareKeys(x, y));
      assert.ok(compareKeys(x, LAST_KEY) < 0);
    }),
    { numRuns: 2000 },
  );
});

test('a key holds no NUL and no surrogate, and gives its value back', () => {
  fc.assert(
    fc.property(scalar, (value) => {
      const key = valueKey(value, false)!;
      assert.ok(![...key].some((c) => c === '\u0000' || c.charCodeAt(0) >= 0xd800), JSON.stringify(key));
      assert.deepEqual(keyValue(key), Object.is(value, -0) ? 0 : value);
    }),
    { numRuns: 2000 },
  );
});

test('a string that starts with another has a key that starts with its key', () => {
  fc.assert(
    fc.property(text, text, (a, b) => {
      if (startsWithCodePoints(a + b, a)) assert.ok(valueKey(a + b, false)!.startsWith(valueKey(a, false)!));
    }),
  );
});

const OPS: CompareOp[] = ['eq', 'sw', 'gt', 'ge', 'lt', 'le'];

test('every user a condition matches has a key in the range of the condition', () => {
  const member = fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }), fc.constant(null));
  fc.assert(
    fc.property(member, scalar, fc.constantFrom(...OPS), fc.boolean(), (held, value, op, fold) => {
      if (op === 'sw' && typeof value !== 'string') return;
      if (['gt', 'ge', 'lt', 'le'].includes(op) && typeof value === 'boolean') return;
      const user = { f: held };
      const filter = { kind: 'compare', path: ['f'], op, value } as const;
      if (!matches(filter, user, new Set(fold ? ['f'] : []))) return;
      const range = keyRangeOf(op, value, fold)!;
      assert.ok(
        elementKeysOf(user, ['f'], fold).some((key) => inRange(key, range)),
        `${JSON.stringify(user)} ${op} ${JSON.stringify(value)}`,
      );
    }),
    { numRuns: 3000 },
  );
});

test('a case-insensitive key is the key of the lowercased string; a member that sorts last has LAST_KEY', () => {
  assert.equal(valueKey('Ann@Example.ORG', true), valueKey('ann@example.org', false));
  assert.notEqual(valueKey('Ann', false), valueKey('ann', false));
  for (const user of [{}, { f: null }, { f: [1] }, { f: { a: 1 } }])
    assert.equal(sortKeyOf(user, ['f'], false), LAST_KEY);
  assert.deepEqual(elementKeysOf({ f: [1, 1, 'x', [true]] }, ['f'], false).map(keyValue), [1, 'x', true]);
  assert.deepEqual(keyRangeOf('ne', 1, false), undefined);
  assert.deepEqual(keyRangeOf('eq', null, false), undefined);
});

const paths: { text: string; ok: boolean }[] = [
  { text: 'email', ok: true },
  { text: 'emails.value', ok: true },
  { text: '_a-1.b_2', ok: true },
  { text: '', ok: false },
  { text: '1a', ok: false },
  { text: 'a..b', ok: false },
  { text: 'a.', ok: false },
  { text: 'a b', ok: false },
  { text: 'a'.repeat(201), ok: false },
];
for (const c of paths)
  test(`the declared path ${JSON.stringify(c.text.slice(0, 20))} is ${c.ok ? 'taken' : 'refused'}`, () => {
    assert.equal(parseFieldPath(c.text).ok, c.ok);
  });

test('a list of declarations is checked: objects with a path and two booleans, each path once', () => {
  assert.deepEqual(checkDeclarations([{ path: 'email', unique: true, caseInsensitive: false }]), [
    { path: 'email', unique: true, caseInsensitive: false },
  ]);
  assert.match(String(checkDeclarations({})), /not a list/);
  assert.match(String(checkDeclarations([{ path: 'a b', unique: true, caseInsensitive: true }])), /declared field 1/);
  assert.match(String(checkDeclarations([{ path: 'a', unique: 1, caseInsensitive: true }])), /true or false/);
  const twice = { path: 'a', unique: false, caseInsensitive: false };
  assert.match(String(checkDeclarations([twice, twice])), /declared twice/);
});

test('a unique field refuses a value another user holds, naming the field and that user, and never the user itself', () => {
  const email: FieldDeclaration = { path: 'email', unique: true, caseInsensitive: true };
  const keys = uniqueKeysOf({ email: 'Ann@x.org' }, [email, { path: 'name', unique: false, caseInsensitive: false }]);
  assert.deepEqual(keys, [{ field: email, key: valueKey('ann@x.org', false) }]);
  assert.equal(
    uniqueConflict(keys, 3, () => [3]),
    undefined,
  );
  assert.deepEqual(
    uniqueConflict(keys, 3, () => [3, 7]),
    {
      kind: 'unique-violation',
      field: 'email',
      conflictsWith: 7,
      detail:
        'The user /users/7 already holds this value of email, which is declared unique: no two users may hold equal values there.',
    },
  );
  assert.deepEqual(uniqueKeysOf({ name: 'x' }, [email]), []);
});

test('the values that keep a field from being unique are named with their users', () => {
  const email: FieldDeclaration = { path: 'email', unique: true, caseInsensitive: true };
  const users = [
    { id: 1, json: '{"email":"A@x"}' },
    { id: 2, json: '{"email":"a@x"}' },
    { id: 3, json: '{"email":"b@x"}' },
    { id: 4, json: '{}' },
    { id: 5, json: '{}' },
  ];
  assert.equal(
    declarationRefusal([], [email], users),
    'email cannot be unique: a value is held by more than one user (lowercased): "a@x" (users 1, 2)',
  );
  // Only a field declared anew is checked: the values of one declared before fit it.
  assert.equal(declarationRefusal([email], [email], users), undefined);
  assert.equal(declarationRefusal([], [{ ...email, caseInsensitive: false }], users), undefined);
});
