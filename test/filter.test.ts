/**
 * Finding users, the pure part (API.md "Finding users: filter, sort,
 * count"): the filter's parser and its failures with their columns, what a
 * filter means on tricky users, the sort's parser and order, and the
 * cursor. Tables of cases and fast-check properties: code points order
 * strings, a printed filter parses back to itself, the order is total and
 * breaks ties by id, and a cursor is refused unless it is intact and its own.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  compareCodePoints,
  containsCodePoints,
  endsWithCodePoints,
  startsWithCodePoints,
} from '../server/users/code-points.js';
import {
  decodeCursor as decodeListing,
  encodeCursor as encodeListing,
  type CursorDecode,
} from '../server/users/cursor.js';
import { matches } from '../server/users/filter-match.js';
import {
  MAX_FILTER_CONDITIONS,
  MAX_FILTER_DEPTH,
  MAX_FILTER_LENGTH,
  parseFilter,
  type CompareOp,
  type Filter,
  type FilterParse,
  type FilterValue,
} from '../server/users/filter-parse.js';
import { printFilter } from '../server/users/filter-print.js';
import {
  compareSortEntries,
  compareSortValues,
  MAX_SORT_KEYS,
  parseSort,
  printSort,
  sortValuesOf,
  type SortEntry,
  type SortKey,
  type SortParse,
  type SortValue,
} from '../server/users/sort.js';
import { memberOf, parsePath } from '../server/users/user-path.js';

function parsed(text: string): Filter {
  const result: FilterParse = parseFilter(text);
  if (!result.ok) assert.fail(`${text}: ${result.detail}`);
  return result.filter;
}

// ------------------------------------------------------------ parsing: what parses, and its canonical text

const parses: { text: string; printed: string }[] = [
  { text: 'name eq "Alice"', printed: 'name eq "Alice"' },
  { text: 'name EQ "Alice"', printed: 'name eq "Alice"' },
  { text: 'NAME Eq "Alice"', printed: 'NAME eq "Alice"' },
  { text: 'age eq 1.0', printed: 'age eq 1' },
  { text: 'age eq -0', printed: 'age eq 0' },
  { text: 'age gt 1e2', printed: 'age gt 100' },
  { text: 'age lt 1E-2', printed: 'age lt 0.01' },
  { text: 'age le -12.5e+1', printed: 'age le -125' },
  { text: 'age ge 12345678901234567890', printed: 'age ge 12345678901234567000' },
  { text: 'active eq true', printed: 'active eq true' },
  { text: 'active ne false', printed: 'active ne false' },
  { text: 'x eq null', printed: 'x eq null' },
  { text: 'x ne null', printed: 'x ne null' },
  { text: 'name sw "A"', printed: 'name sw "A"' },
  { text: 'name ew "e"', printed: 'name ew "e"' },
  { text: 'name co ""', printed: 'name co ""' },
  { text: 'name gt "A"', printed: 'name gt "A"' },
  { text: 'email pr', printed: 'email pr' },
  { text: 'email PR', printed: 'email pr' },
  { text: 'address.city eq "Paris"', printed: 'address.city eq "Paris"' },
  { text: '_x-1.y_2 pr', printed: '_x-1.y_2 pr' },
  { text: 'a eq 1 and b eq 2 or c eq 3', printed: 'a eq 1 and b eq 2 or c eq 3' },
  { text: 'a eq 1 or b eq 2 and c eq 3', printed: 'a eq 1 or b eq 2 and c eq 3' },
  { text: 'a eq 1 and (b eq 2 or c eq 3)', printed: 'a eq 1 and (b eq 2 or c eq 3)' },
  { text: '(a eq 1 or b eq 2) and c eq 3', printed: '(a eq 1 or b eq 2) and c eq 3' },
  { text: 'a eq 1 and (b eq 2 and c eq 3)', printed: 'a eq 1 and b eq 2 and c eq 3' },
  { text: '(a eq 1 or b eq 2) or c eq 3', printed: 'a eq 1 or b eq 2 or c eq 3' },
  { text: '(((a pr)))', printed: 'a pr' },
  { text: 'a eq 1 AND b eq 2 oR c eq 3', printed: 'a eq 1 and b eq 2 or c eq 3' },
  { text: 'not (a eq 1)', printed: 'not (a eq 1)' },
  { text: 'NOT(a eq 1)', printed: 'not (a eq 1)' },
  { text: 'not   (a pr)', printed: 'not (a pr)' },
  { text: 'not (not (a pr))', printed: 'not (not (a pr))' },
  { text: 'not (a pr) and b pr', printed: 'not (a pr) and b pr' },
  { text: '( a pr )', printed: 'a pr' },
  { text: '(a eq 1)and(b eq 2)', printed: 'a eq 1 and b eq 2' },
  { text: '  a  eq   1  ', printed: 'a eq 1' },
  {
    text: 'emails[type eq "work" and value ew "@example.com"]',
    printed: 'emails[type eq "work" and value ew "@example.com"]',
  },
  { text: 'emails [ type eq "work" ]', printed: 'emails[type eq "work"]' },
  { text: 'a[b[c eq 1]] or d pr', printed: 'a[b[c eq 1]] or d pr' },
  { text: 'not eq 1', printed: 'not eq 1' },
  { text: 'not pr', printed: 'not pr' },
  { text: 'not[a pr]', printed: 'not[a pr]' },
  { text: 'and eq 1 and or pr or or pr', printed: 'and eq 1 and or pr or or pr' },
  { text: 'eq eq "eq"', printed: 'eq eq "eq"' },
  { text: 'a eq "\\u00e9\\n\\"\\\\\\/\\b\\f\\r\\t"', printed: 'a eq "é\\n\\"\\\\/\\b\\f\\r\\t"' },
  { text: 'a eq "\\ud83d\\ude00"', printed: 'a eq "😀"' },
  { text: 'a eq "\\ud800"', printed: 'a eq "\\ud800"' },
  { text: 'a eq "😀 \u2028 é"', printed: 'a eq "😀 \u2028 é"' },
  { text: 'a eq "\u007f"', printed: 'a eq "\u007f"' },
];
for (const c of parses) {
  test(`the filter ${JSON.stringify(c.text)} parses, and prints as ${JSON.stringify(c.printed)}`, () => {
    const filter = parsed(c.text);
    assert.equal(printFilter(filter), c.printed);
    assert.deepEqual(parsed(printFilter(filter)), filter);
  });
}

test('the parsed tree: and/or are flat, not and path[filter] nest, paths are split at their dots', () => {
  assert.deepEqual(parsed('a.b eq 1 and (c pr and not (d lt "x")) or e[f ne null]'), {
    kind: 'or',
    operands: [
      {
        kind: 'and',
        operands: [
          { kind: 'compare', path: ['a', 'b'], op: 'eq', value: 1 },
          { kind: 'present', path: ['c'] },
          { kind: 'not', operand: { kind: 'compare', path: ['d'], op: 'lt', value: 'x' } },
        ],
      },
      { kind: 'some', path: ['e'], filter: { kind: 'compare', path: ['f'], op: 'ne', value: null } },
    ],
  });
});

// ------------------------------------------------------------ parsing: failures, their columns and what was expected

const OPERATOR_LIST = 'an operator (eq, ne, co, sw, ew, gt, ge, lt, le, pr) or `[`';
const VALUE_LIST = 'a value (a JSON string, number, true, false or null)';
const failures: { text: string; column: number; expected: string }[] = [
  { text: 'email', column: 6, expected: `expected ${OPERATOR_LIST} after the path \`email\`` },
  { text: 'email foo "x"', column: 7, expected: `expected ${OPERATOR_LIST} after the path \`email\`` },
  { text: 'email =  "x"', column: 7, expected: `expected ${OPERATOR_LIST} after the path \`email\`` },
  { text: 'a\teq 1', column: 2, expected: `expected ${OPERATOR_LIST} after the path \`a\`` },
  { text: 'a eqs 1', column: 3, expected: `expected ${OPERATOR_LIST} after the path \`a\`` },
  { text: 'a eq.x 1', column: 3, expected: `expected ${OPERATOR_LIST} after the path \`a\`` },
  { text: '', column: 1, expected: 'expected a path, `not (` or `(`' },
  { text: '   ', column: 4, expected: 'expected a path, `not (` or `(`' },
  { text: '1a eq 1', column: 1, expected: 'expected a path, `not (` or `(`' },
  { text: '"a" eq 1', column: 1, expected: 'expected a path, `not (` or `(`' },
  { text: 'é eq 1', column: 1, expected: 'expected a path, `not (` or `(`' },
  { text: ')', column: 1, expected: 'expected a path, `not (` or `(`' },
  { text: 'a eq 1 and', column: 11, expected: 'expected a path, `not (` or `(`' },
  { text: 'a eq 1 and é eq 2', column: 12, expected: 'expected a path, `not (` or `(`' },
  { text: 'a eq 1 or or', column: 13, expected: `expected ${OPERATOR_LIST} after the path \`or\`` },
  { text: 'a eq', column: 5, expected: `expected ${VALUE_LIST} after \`eq\`` },
  { text: 'a eq TRUE', column: 6, expected: `expected ${VALUE_LIST} after \`eq\`` },
  { text: 'a eq Null', column: 6, expected: `expected ${VALUE_LIST} after \`eq\`` },
  { text: 'a eq .5', column: 6, expected: `expected ${VALUE_LIST} after \`eq\`` },
  { text: 'a eq +1', column: 6, expected: `expected ${VALUE_LIST} after \`eq\`` },
  { text: 'a eq (1)', column: 6, expected: `expected ${VALUE_LIST} after \`eq\`` },
  { text: "a eq 'x'", column: 6, expected: `expected ${VALUE_LIST} after \`eq\`` },
  { text: 'a eq"x"', column: 5, expected: 'expected a space between two words or values' },
  { text: 'a eq "x"and b pr', column: 9, expected: 'expected a space between two words or values' },
  { text: 'a eq 1and b pr', column: 6, expected: 'expected a JSON number, not `1and`' },
  { text: 'a eq 01', column: 6, expected: 'expected a JSON number, not `01`' },
  { text: 'a eq 1.', column: 6, expected: 'expected a JSON number, not `1.`' },
  { text: 'a eq -', column: 6, expected: 'expected a JSON number, not `-`' },
  { text: 'a eq 0x10', column: 6, expected: 'expected a JSON number, not `0x10`' },
  { text: 'a eq 1e400', column: 6, expected: 'expected a number a double can hold' },
  { text: 'a eq "abc', column: 10, expected: 'expected `"` to close the string' },
  { text: 'a eq "abc\\"', column: 12, expected: 'expected `"` to close the string' },
  {
    text: 'a eq "a\\qb"',
    column: 8,
    expected:
      'expected an escape after `\\`: `\\"`, `\\\\`, `\\/`, `\\b`, `\\f`, `\\n`, `\\r`, `\\t` or `\\u` and four hex digits',
  },
  { text: 'a eq "\\u12"', column: 7, expected: 'expected an escape after `\\`' },
  { text: 'a eq "\\U0041"', column: 7, expected: 'expected an escape after `\\`' },
  { text: 'a eq "tab\there"', column: 10, expected: 'expected `\\u0009` in place of the control character U+0009' },
  { text: 'a eq "\u0000"', column: 7, expected: 'expected `\\u0000` in place of the control character U+0000' },
  { text: 'a co 1', column: 6, expected: 'expected a string after `co`: co, sw and ew compare strings' },
  { text: 'a sw null', column: 6, expected: 'expected a string after `sw`' },
  { text: 'a EW true', column: 6, expected: 'expected a string after `ew`' },
  {
    text: 'a gt true',
    column: 6,
    expected: 'expected a number or a string after `gt`: true, false and null have no order',
  },
  { text: 'a ge false', column: 6, expected: 'expected a number or a string after `ge`' },
  { text: 'a lt null', column: 6, expected: 'expected a number or a string after `lt`' },
  { text: 'a LE null', column: 6, expected: 'expected a number or a string after `le`' },
  { text: 'a eq 1 xor b eq 2', column: 8, expected: 'expected `and`, `or` or the end of the filter' },
  { text: 'a eq 1)', column: 7, expected: 'expected `and`, `or` or the end of the filter' },
  { text: 'a pr pr', column: 6, expected: 'expected `and`, `or` or the end of the filter' },
  { text: 'a eq "x" eq', column: 10, expected: 'expected `and`, `or` or the end of the filter' },
  { text: 'a[b pr]]', column: 8, expected: 'expected `and`, `or` or the end of the filter' },
  { text: 'a[b pr].c eq 1', column: 8, expected: 'expected `and`, `or` or the end of the filter' },
  { text: '(a eq 1', column: 8, expected: 'expected `and`, `or` or `)`' },
  { text: '(a eq 1]', column: 8, expected: 'expected `and`, `or` or `)`' },
  { text: 'a[b eq 1', column: 9, expected: 'expected `and`, `or` or `]`' },
  { text: 'a[b eq 1)', column: 9, expected: 'expected `and`, `or` or `]`' },
  { text: 'a[]', column: 3, expected: 'expected a path, `not (` or `(`' },
  { text: '()', column: 2, expected: 'expected a path, `not (` or `(`' },
  { text: 'not a eq 1', column: 5, expected: 'expected `(` after `not`' },
  { text: 'not', column: 4, expected: 'expected `(` after `not`' },
  {
    text: 'a. eq 1',
    column: 3,
    expected: 'expected a name after `.`: a letter or `_`, then letters, digits, `_` or `-`',
  },
  { text: 'a.1 eq 1', column: 3, expected: 'expected a name after `.`' },
  { text: 'a..b pr', column: 3, expected: 'expected a name after `.`' },
  { text: 'a.b.-c pr', column: 5, expected: 'expected a name after `.`' },
  { text: 'x eq a.1', column: 6, expected: `expected ${VALUE_LIST} after \`eq\`` },
  // Columns count characters (code points): the emoji is one column, though two UTF-16 units.
  { text: 'a eq "😀" and x', column: 15, expected: `expected ${OPERATOR_LIST} after the path \`x\`` },
  { text: 'a eq "😀😀" or "\\q"', column: 14, expected: 'expected a path, `not (` or `(`' },
];
/** The filter fails at `column`, and its detail begins with that column and `expected`. */
function assertFailsAt(text: string, column: number, expected: string): void {
  const result = parseFilter(text);
  assert.equal(result.ok, false, 'it parsed');
  if (result.ok) return;
  assert.equal(result.column, column, result.detail);
  assert.ok(result.detail.startsWith(`at column ${column}: ${expected}`), result.detail);
}

for (const c of failures) {
  test(`the filter ${JSON.stringify(c.text)} fails at column ${c.column}: ${c.expected}`, () => {
    assertFailsAt(c.text, c.column, c.expected);
  });
}

test('a filter given again is parsed once, kept while other filters come and go', () => {
  const kept = parseFilter('a eq 1');
  const others = (from: number) => {
    for (let i = from; i < from + 900; i++) parseFilter(`b eq ${i}`);
  };
  others(0);
  // Kept while fewer than the 1,000 filters of a generation come after it.
  assert.equal(parseFilter('a eq 1'), kept);
  others(900);
  assert.equal(parseFilter('a eq 1'), kept);
  others(1800);
  others(2700);
  others(3600);
  const again = parseFilter('a eq 1');
  assert.deepEqual(again, kept);
  assert.deepEqual(parseFilter('b eq 5'), { ok: true, filter: { kind: 'compare', path: ['b'], op: 'eq', value: 5 } });
});

test("a failure's detail is one sentence in the form of API.md's example", () => {
  assert.deepEqual(parseFilter('name eq "x" and email'), {
    ok: false,
    column: 22,
    detail: 'at column 22: expected an operator (eq, ne, co, sw, ew, gt, ge, lt, le, pr) or `[` after the path `email`',
  });
});

// ------------------------------------------------------------ parsing: the bounds

const conditions = (n: number) => Array.from({ length: n }, (_, i) => `a${i} pr`).join(' and ');
const bounds: { name: string; text: string; column?: number; expected?: string }[] = [
  { name: `${MAX_FILTER_LENGTH} characters`, text: 'a pr'.padEnd(MAX_FILTER_LENGTH) },
  {
    name: `${MAX_FILTER_LENGTH + 1} characters`,
    text: 'a pr'.padEnd(MAX_FILTER_LENGTH + 1),
    column: MAX_FILTER_LENGTH + 1,
    expected: 'a filter has at most 2,048 characters',
  },
  {
    name: `${MAX_FILTER_LENGTH} characters, most of them two UTF-16 units`,
    text: `a eq "${'😀'.repeat(MAX_FILTER_LENGTH - 7)}"`,
  },
  {
    name: 'a megabyte',
    text: `a eq "${'x'.repeat(1 << 20)}"`,
    column: MAX_FILTER_LENGTH + 1,
    expected: 'a filter has at most 2,048 characters',
  },
  { name: `${MAX_FILTER_CONDITIONS} conditions`, text: conditions(MAX_FILTER_CONDITIONS) },
  {
    name: `${MAX_FILTER_CONDITIONS + 1} conditions`,
    text: conditions(MAX_FILTER_CONDITIONS + 1),
    column: conditions(MAX_FILTER_CONDITIONS).length + 6,
    expected: 'a filter has at most 32 conditions',
  },
  {
    name: 'conditions inside path[filter], which counts one itself',
    text: `x[${conditions(MAX_FILTER_CONDITIONS - 1)}] and y pr`,
    column: `x[${conditions(MAX_FILTER_CONDITIONS - 1)}] and `.length + 1,
    expected: 'a filter has at most 32 conditions',
  },
  {
    name: `${MAX_FILTER_DEPTH} parentheses`,
    text: `${'('.repeat(MAX_FILTER_DEPTH)}a pr${')'.repeat(MAX_FILTER_DEPTH)}`,
  },
  {
    name: `${MAX_FILTER_DEPTH + 1} parentheses`,
    text: `${'('.repeat(MAX_FILTER_DEPTH + 1)}a pr${')'.repeat(MAX_FILTER_DEPTH + 1)}`,
    column: MAX_FILTER_DEPTH + 1,
    expected: 'a filter nests at most 16 levels of `(`, `not (` and `[`',
  },
  {
    name: `${MAX_FILTER_DEPTH} levels of not ( and path[`,
    text: `${'not ('.repeat(8)}${'a['.repeat(8)}b pr${']'.repeat(8)}${')'.repeat(8)}`,
  },
  {
    name: `${MAX_FILTER_DEPTH + 1} levels of not ( and path[`,
    text: `${'not ('.repeat(8)}${'a['.repeat(9)}b pr${']'.repeat(9)}${')'.repeat(8)}`,
    column: 5 * 8 + 2 * 8 + 1,
    expected: 'a filter nests at most 16 levels',
  },
  {
    name: 'two thousand parentheses',
    text: '('.repeat(2000),
    column: MAX_FILTER_DEPTH + 1,
    expected: 'a filter nests at most 16 levels',
  },
  {
    name: 'a long chain of or within the length, past the conditions',
    text: Array.from({ length: 200 }, () => 'a pr').join(' or '),
    column: 33 * 8 - 7,
    expected: 'a filter has at most 32 conditions',
  },
];
for (const c of bounds) {
  test(`the bounds: a filter of ${c.name} ${c.column === undefined ? 'parses' : `fails at column ${c.column}`}`, () => {
    if (c.column !== undefined) return assertFailsAt(c.text, c.column, c.expected!);
    const result = parseFilter(c.text);
    assert.ok(result.ok, result.ok ? '' : result.detail);
  });
}

// ------------------------------------------------------------ what a filter means

const alice = {
  id: 1,
  name: 'Alice',
  age: 30,
  active: true,
  off: false,
  nothing: null,
  empty: '',
  list: [],
  obj: {},
  objWithNull: { a: null },
  big: 2 ** 64,
  zero: -0,
  tags: ['staff', 'admin'],
  emails: [
    { type: 'work', value: 'A@Example.com' },
    { type: 'home', value: 'alice@home.org' },
  ],
  address: { city: 'Paris', zip: '75001' },
  nested: [
    [1, 2],
    [3, [4]],
  ],
  holes: [[], [[]]],
  matrix: [[{ k: 'x' }], [{ k: 'y' }]],
  mixed: [1, 'one', true, null, { v: 2 }],
  word: 'ÉCOLE',
  turkish: 'İstanbul',
  astral: '😀',
  bmp: '\uFFFD',
  e000: '\uE000',
  lone: '\ud83dx',
};
const NONE: ReadonlySet<string> = new Set();
const meaning: { filter: string; expected: boolean; folded?: string[] }[] = [
  // eq, ne on strings: exact, or lowercased on a case-insensitive path
  { filter: 'name eq "Alice"', expected: true },
  { filter: 'name eq "alice"', expected: false },
  { filter: 'name eq "alice"', folded: ['name'], expected: true },
  { filter: 'name eq "ALICE"', folded: ['name'], expected: true },
  { filter: 'name ne "alice"', folded: ['name'], expected: false },
  { filter: 'name ne "Bob"', expected: true },
  { filter: 'name ne "Alice"', expected: false },
  { filter: 'Name eq "Alice"', expected: false },
  { filter: 'Name eq null', expected: true },
  // missing equals null; ne is not eq
  { filter: 'missing eq null', expected: true },
  { filter: 'missing ne null', expected: false },
  { filter: 'missing ne "x"', expected: true },
  { filter: 'missing ne 1', expected: true },
  { filter: 'not (missing eq "x")', expected: true },
  { filter: 'missing eq "x"', expected: false },
  { filter: 'missing co ""', expected: false },
  { filter: 'missing gt 0', expected: false },
  { filter: 'missing le "z"', expected: false },
  { filter: 'nothing eq null', expected: true },
  { filter: 'nothing ne null', expected: false },
  { filter: 'nothing eq 0', expected: false },
  { filter: 'address.country eq null', expected: true },
  { filter: 'missing.deeper eq null', expected: true },
  { filter: 'name.first eq null', expected: true },
  { filter: 'list eq null', expected: true },
  { filter: 'holes eq null', expected: true },
  { filter: 'obj eq null', expected: false },
  { filter: 'off eq null', expected: false },
  { filter: 'empty eq null', expected: false },
  // numbers by value, never across types
  { filter: 'age eq 30.0', expected: true },
  { filter: 'age eq 3e1', expected: true },
  { filter: 'age eq "30"', expected: false },
  { filter: 'age ne "30"', expected: true },
  { filter: 'age gt 29.5', expected: true },
  { filter: 'age ge 30', expected: true },
  { filter: 'age gt 30', expected: false },
  { filter: 'age lt 30', expected: false },
  { filter: 'age le 30', expected: true },
  { filter: 'age lt 1e308', expected: true },
  { filter: 'age gt -1e308', expected: true },
  { filter: 'age gt "3"', expected: false },
  { filter: 'age lt "3"', expected: false },
  { filter: 'name gt 1', expected: false },
  { filter: 'name lt 1', expected: false },
  { filter: 'active gt 0', expected: false },
  { filter: 'active eq true', expected: true },
  { filter: 'active eq "true"', expected: false },
  { filter: 'active eq 1', expected: false },
  { filter: 'off eq false', expected: true },
  { filter: 'off eq 0', expected: false },
  { filter: 'big eq 18446744073709551616', expected: true },
  // The nearest double to 2^64 - 1 is 2^64: a JSON number means the double it reads as.
  { filter: 'big eq 18446744073709551615', expected: true },
  { filter: 'big gt 18446744073709551615', expected: false },
  { filter: 'zero eq 0', expected: true },
  { filter: 'zero ge 0', expected: true },
  { filter: 'id eq 1', expected: true },
  { filter: 'id eq 1.0', expected: true },
  // co, sw, ew
  { filter: 'name co "lic"', expected: true },
  { filter: 'name sw "Al"', expected: true },
  { filter: 'name ew "ce"', expected: true },
  { filter: 'name co "LIC"', expected: false },
  { filter: 'name co "LIC"', folded: ['name'], expected: true },
  { filter: 'name co ""', expected: true },
  { filter: 'empty co ""', expected: true },
  { filter: 'empty sw ""', expected: true },
  { filter: 'age co "3"', expected: false },
  { filter: 'age sw ""', expected: false },
  { filter: 'active ew "e"', expected: false },
  { filter: 'obj co ""', expected: false },
  // pr
  { filter: 'name pr', expected: true },
  { filter: 'age pr', expected: true },
  { filter: 'off pr', expected: true },
  { filter: 'zero pr', expected: true },
  { filter: 'address pr', expected: true },
  { filter: 'objWithNull pr', expected: true },
  { filter: 'tags pr', expected: true },
  { filter: 'missing pr', expected: false },
  { filter: 'nothing pr', expected: false },
  { filter: 'empty pr', expected: false },
  { filter: 'list pr', expected: false },
  { filter: 'obj pr', expected: false },
  { filter: 'holes pr', expected: false },
  { filter: 'objWithNull.a pr', expected: false },
  { filter: 'emails.value pr', expected: true },
  { filter: 'emails.other pr', expected: false },
  // any element of an array, at any step
  { filter: 'tags eq "admin"', expected: true },
  { filter: 'tags eq "boss"', expected: false },
  { filter: 'tags ne "admin"', expected: false },
  { filter: 'tags ne "boss"', expected: true },
  { filter: 'tags co "dmi"', expected: true },
  { filter: 'tags sw "st"', expected: true },
  { filter: 'tags ew "min"', expected: true },
  { filter: 'tags gt "sa"', expected: true },
  { filter: 'tags lt "a"', expected: false },
  { filter: 'tags eq null', expected: false },
  { filter: 'tags.x eq null', expected: true },
  { filter: 'emails.value ew "@Example.com"', expected: true },
  { filter: 'emails.value ew "@example.com"', expected: false },
  { filter: 'emails.value ew "@example.com"', folded: ['emails.value'], expected: true },
  { filter: 'emails.type eq "home"', expected: true },
  { filter: 'emails.value eq null', expected: false },
  { filter: 'nested eq 4', expected: true },
  { filter: 'nested eq 5', expected: false },
  { filter: 'nested gt 3', expected: true },
  { filter: 'nested lt 1', expected: false },
  { filter: 'nested ne 2', expected: false },
  { filter: 'matrix.k eq "y"', expected: true },
  { filter: 'mixed eq "one"', expected: true },
  { filter: 'mixed eq true', expected: true },
  { filter: 'mixed eq null', expected: true },
  { filter: 'mixed gt 0', expected: true },
  { filter: 'mixed co "n"', expected: true },
  { filter: 'mixed.v eq 2', expected: true },
  // path[filter]: one element satisfies all of it, with paths relative to the element
  { filter: 'emails[type eq "work" and value ew "@Example.com"]', expected: true },
  { filter: 'emails[type eq "home" and value ew "@Example.com"]', expected: false },
  { filter: 'emails.type eq "home" and emails.value ew "@Example.com"', expected: true },
  { filter: 'emails[value eq "a@example.com"]', expected: false },
  { filter: 'emails[value eq "a@example.com"]', folded: ['emails.value'], expected: true },
  { filter: 'emails[value eq "a@example.com"]', folded: ['value'], expected: false },
  { filter: 'emails[not (type eq "work")]', expected: true },
  { filter: 'emails[missing eq null]', expected: true },
  { filter: 'emails[type pr]', expected: true },
  { filter: 'matrix[k eq "x"]', expected: true },
  { filter: 'matrix[k eq "z"]', expected: false },
  { filter: 'address[city eq "Paris" and zip sw "75"]', expected: true },
  { filter: 'mixed[v eq 2]', expected: true },
  { filter: 'mixed[v eq null]', expected: false },
  { filter: 'tags[x eq null]', expected: false },
  { filter: 'name[x eq null]', expected: false },
  { filter: 'list[x eq null]', expected: false },
  { filter: 'missing[x eq null]', expected: false },
  { filter: 'not (missing[x pr])', expected: true },
  // strings by code points: U+1F600 (UTF-16 D83D DE00) sorts after U+E000 and U+FFFD
  { filter: 'astral gt "\\uFFFD"', expected: true },
  { filter: 'astral gt "\\uE000"', expected: true },
  { filter: 'astral lt "\\uFFFD"', expected: false },
  { filter: 'bmp lt "😀"', expected: true },
  { filter: 'e000 lt "😀"', expected: true },
  { filter: 'e000 lt "\\uFFFD"', expected: true },
  { filter: 'astral ge "\\ud83d"', expected: true },
  { filter: 'astral gt "\\ud83d\\ude00"', expected: false },
  { filter: 'astral eq "\\ud83d\\ude00"', expected: true },
  { filter: 'astral co "\\ud83d"', expected: false },
  { filter: 'astral sw "\\ud83d"', expected: false },
  { filter: 'astral ew "\\ude00"', expected: false },
  { filter: 'astral co "\\ude00"', expected: false },
  { filter: 'lone sw "\\ud83d"', expected: true },
  { filter: 'lone co "\\ud83d"', expected: true },
  { filter: 'lone lt "\\uE000"', expected: true },
  // lowercasing is toLowerCase: Unicode, not ASCII only; İ lowercases to i and U+0307
  { filter: 'word eq "école"', expected: false },
  { filter: 'word eq "école"', folded: ['word'], expected: true },
  { filter: 'word eq "ÉCOLE"', folded: ['word'], expected: true },
  { filter: 'word sw "éc"', folded: ['word'], expected: true },
  { filter: 'word gt "écol"', folded: ['word'], expected: true },
  { filter: 'word lt "f"', folded: ['word'], expected: false },
  { filter: 'word gt "Z"', expected: true },
  { filter: 'turkish eq "istanbul"', folded: ['turkish'], expected: false },
  { filter: 'turkish eq "i\\u0307stanbul"', folded: ['turkish'], expected: true },
  { filter: 'turkish eq "İSTANBUL"', folded: ['turkish'], expected: true },
  { filter: 'turkish sw "i"', folded: ['turkish'], expected: true },
  { filter: 'turkish sw "İ"', folded: ['turkish'], expected: true },
  { filter: 'turkish sw "i"', expected: false },
  // members of the prototype are not members
  { filter: 'constructor eq null', expected: true },
  { filter: 'constructor pr', expected: false },
  { filter: 'toString pr', expected: false },
  { filter: 'name.length eq 5', expected: false },
  { filter: 'tags.length pr', expected: false },
  // and, or, not
  { filter: 'name eq "Alice" and age gt 20', expected: true },
  { filter: 'name eq "Alice" and age gt 40', expected: false },
  { filter: 'name eq "Bob" or age gt 20', expected: true },
  { filter: 'name eq "Bob" or age gt 40', expected: false },
  { filter: 'name eq "Bob" and age gt 40 or active eq true', expected: true },
  { filter: 'name eq "Bob" and (age gt 40 or active eq true)', expected: false },
  { filter: 'not (name eq "Alice")', expected: false },
  { filter: 'not (not (name eq "Alice"))', expected: true },
];
for (const c of meaning) {
  const folded = c.folded === undefined ? '' : ` (case-insensitive: ${c.folded.join(', ')})`;
  test(`the filter ${JSON.stringify(c.filter)}${folded} ${c.expected ? 'matches' : 'does not match'} the tricky user`, () => {
    const user = JSON.parse(JSON.stringify(alice)) as unknown;
    assert.equal(matches(parsed(c.filter), user, new Set(c.folded)), c.expected);
  });
}

test('a filter matches the user as parsed JSON: -0 stays -0 after a round trip, and matches 0', () => {
  const user = JSON.parse('{"id":2,"name":"Z","zero":-0,"deep":{"a":[{"b":[{"c":"x"}]}]}}') as unknown;
  assert.ok(Object.is((user as { zero: number }).zero, -0));
  assert.ok(matches(parsed('zero eq 0 and zero le 0 and zero ge 0'), user, NONE));
  assert.ok(matches(parsed('deep.a.b.c eq "x" and deep.a[b[c eq "x"]] and deep[a.b.c sw "x"]'), user, NONE));
  assert.ok(matches(parsed('deep.a[b.c eq "X"]'), user, new Set(['deep.a.b.c'])));
  assert.ok(!matches(parsed('deep.a[b.c eq "X"]'), user, new Set(['b.c'])));
});

test('ne is exactly not eq on every member of the tricky user, for values of every kind', () => {
  const user = JSON.parse(JSON.stringify(alice)) as unknown;
  const values = ['null', 'true', 'false', '0', '30', '1', '"Alice"', '"admin"', '""', '"😀"', '"école"'];
  for (const path of [...Object.keys(alice), 'missing', 'emails.type', 'nested', 'address.city']) {
    for (const value of values) {
      for (const folded of [NONE, new Set([path])]) {
        const eq = matches(parsed(`${path} eq ${value}`), user, folded);
        assert.equal(matches(parsed(`${path} ne ${value}`), user, folded), !eq, `${path} ne ${value}`);
      }
    }
  }
});

// ------------------------------------------------------------ code points

const codePointCases: { a: string; b: string; order: number }[] = [
  { a: '😀', b: '\uFFFD', order: 1 },
  { a: '😀', b: '\uE000', order: 1 },
  { a: '\uE000', b: '\uFFFF', order: -1 },
  { a: '\ud800', b: '\uE000', order: -1 },
  { a: '\ud83d', b: '😀', order: -1 },
  { a: '\ud83d\uE000', b: '😀', order: -1 },
  { a: 'a😀', b: 'a\uFFFD', order: 1 },
  { a: '𝐀', b: '😀', order: -1 },
  { a: 'a', b: 'ab', order: -1 },
  { a: '', b: '', order: 0 },
  { a: 'B', b: 'a', order: -1 },
  { a: 'é', b: 'z', order: 1 },
  { a: '😀x', b: '😀x', order: 0 },
];
for (const c of codePointCases) {
  test(`by code points, ${JSON.stringify(c.a)} sorts ${['before', 'with', 'after'][c.order + 1]} ${JSON.stringify(c.b)}`, () => {
    assert.equal(compareCodePoints(c.a, c.b), c.order);
    assert.equal(compareCodePoints(c.b, c.a), 0 - c.order || 0);
  });
}

/** A string of UTF-16 units picked to meet at surrogates and at the top of the BMP. */
const trickyString = fc.string({
  unit: fc.constantFrom('a', 'b', '\ud83d', '\ud83e', '\ude00', '\udc00', '\uE000', '\uFFFD', '\uFFFF', '😀', '🤖'),
  maxLength: 6,
});
const codePointsOf = (s: string) => Array.from(s, (c) => c.codePointAt(0)!);

test('property: compareCodePoints orders as the lists of code points do, lone surrogates as their values', () => {
  fc.assert(
    fc.property(trickyString, trickyString, (a, b) => {
      const [x, y] = [codePointsOf(a), codePointsOf(b)];
      let expected = Math.sign(x.length - y.length);
      const i = x.findIndex((p, j) => p !== y[j]);
      if (i !== -1 && i < y.length) expected = x[i]! < y[i]! ? -1 : 1;
      assert.equal(compareCodePoints(a, b), expected);
    }),
    { numRuns: 2000 },
  );
});

test('property: co, sw and ew find the code points of the needle, never half a pair', () => {
  fc.assert(
    fc.property(trickyString, trickyString, (text, needle) => {
      const [t, n] = [codePointsOf(text), codePointsOf(needle)];
      const at = (i: number) => n.every((p, j) => t[i + j] === p);
      const offsets = Array.from({ length: t.length - n.length + 1 }, (_, i) => i);
      assert.equal(containsCodePoints(text, needle), offsets.some(at));
      assert.equal(startsWithCodePoints(text, needle), n.length <= t.length && at(0));
      assert.equal(endsWithCodePoints(text, needle), n.length <= t.length && at(t.length - n.length));
    }),
    { numRuns: 2000 },
  );
});

// ------------------------------------------------------------ the printer and the parser agree

// The parser builds plain objects; fast-check's records have no prototype unless told.
const PLAIN = { noNullPrototype: true };

const arbitraryPath = fc.array(fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_-]{0,4}$/), { minLength: 1, maxLength: 3 });
const filterValue: fc.Arbitrary<FilterValue> = fc.oneof(
  fc.constantFrom(null, true, false),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => n + 0),
  fc.string({ unit: 'binary', maxLength: 8 }),
  trickyString,
  fc.string({ unit: fc.constantFrom('"', '\\', '/', '\n', '\u0000', '\u001f', '\u2028', ' '), maxLength: 4 }),
);
const compare = fc.oneof(
  fc.record(
    {
      kind: fc.constant('compare' as const),
      path: arbitraryPath,
      op: fc.constantFrom<CompareOp>('eq', 'ne'),
      value: filterValue,
    },
    PLAIN,
  ),
  fc.record(
    {
      kind: fc.constant('compare' as const),
      path: arbitraryPath,
      op: fc.constantFrom<CompareOp>('co', 'sw', 'ew', 'gt', 'ge', 'lt', 'le'),
      value: fc.string({ unit: 'binary', maxLength: 6 }),
    },
    PLAIN,
  ),
  fc.record(
    {
      kind: fc.constant('compare' as const),
      path: arbitraryPath,
      op: fc.constantFrom<CompareOp>('gt', 'ge', 'lt', 'le'),
      value: fc.integer(),
    },
    PLAIN,
  ),
);
const { filter: arbitraryFilter } = fc.letrec<{ filter: Filter; leaf: Filter; notOr: Filter; notAnd: Filter }>(
  (tie) => ({
    filter: fc.oneof({ depthSize: 'small', withCrossShrink: true }, tie('leaf'), tie('notOr'), tie('notAnd')),
    leaf: fc.oneof(compare, fc.record({ kind: fc.constant('present' as const), path: arbitraryPath }, PLAIN)),
    notOr: fc.oneof(
      { depthSize: 'small' },
      tie('leaf'),
      fc.record(
        {
          kind: fc.constant('and' as const),
          operands: fc.array(tie('notAnd'), { minLength: 2, maxLength: 3 }),
        },
        PLAIN,
      ),
      fc.record({ kind: fc.constant('not' as const), operand: tie('filter') }, PLAIN),
      fc.record({ kind: fc.constant('some' as const), path: arbitraryPath, filter: tie('filter') }, PLAIN),
    ),
    notAnd: fc.oneof(
      { depthSize: 'small' },
      tie('leaf'),
      fc.record(
        { kind: fc.constant('or' as const), operands: fc.array(tie('notOr'), { minLength: 2, maxLength: 3 }) },
        PLAIN,
      ),
      fc.record({ kind: fc.constant('not' as const), operand: tie('filter') }, PLAIN),
    ),
  }),
);

/** The filter's conditions and deepest nesting, as the parser counts them for its bounds. */
function measure(filter: Filter): { conditions: number; depth: number } {
  switch (filter.kind) {
    case 'compare':
    case 'present':
      return { conditions: 1, depth: 0 };
    case 'some':
    case 'not': {
      const inner = measure(filter.kind === 'some' ? filter.filter : filter.operand);
      return { conditions: inner.conditions + (filter.kind === 'some' ? 1 : 0), depth: inner.depth + 1 };
    }
    default: {
      const parts = filter.operands.map(measure);
      const grouped = (f: Filter) => (filter.kind === 'and' && f.kind === 'or' ? 1 : 0);
      return {
        conditions: parts.reduce((sum, p) => sum + p.conditions, 0),
        depth: Math.max(...parts.map((p, i) => p.depth + grouped(filter.operands[i]!))),
      };
    }
  }
}

const withinBounds = arbitraryFilter.filter((f) => {
  const { conditions, depth } = measure(f);
  return conditions <= MAX_FILTER_CONDITIONS && depth <= MAX_FILTER_DEPTH;
});

test('property: parseFilter(printFilter(f)) gives f back, and the text prints the same again', () => {
  fc.assert(
    fc.property(withinBounds, (filter) => {
      const text = printFilter(filter);
      const result = parseFilter(text);
      if (!result.ok) assert.fail(`${text}: ${result.detail}`);
      assert.deepEqual(result.filter, filter);
      assert.equal(printFilter(result.filter), text);
    }),
    { numRuns: 1000 },
  );
});

test('property: parseFilter never throws, and a failure names a column within the text or just after it', () => {
  const pieces = fc.constantFrom(
    ' ',
    'a',
    'b.c',
    'eq',
    'pr',
    'and',
    'or',
    'not',
    '(',
    ')',
    '[',
    ']',
    '"x"',
    '1',
    '"\\',
  );
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string({ unit: 'binary' }),
        fc.array(pieces).map((p) => p.join('')),
      ),
      (text) => {
        const result = parseFilter(text);
        if (result.ok) return;
        assert.ok(result.column >= 1 && result.column <= [...text].length + 1, result.detail);
        assert.match(result.detail, /^at column \d+: /);
      },
    ),
    { numRuns: 2000 },
  );
});

test('memberOf reads own members of objects only', () => {
  assert.equal(memberOf({ a: 1 }, 'a'), 1);
  assert.equal(memberOf({}, 'constructor'), undefined);
  assert.equal(memberOf([1], 'length'), undefined);
  assert.equal(memberOf('abc', 'length'), undefined);
  assert.equal(memberOf(null, 'a'), undefined);
});

// ------------------------------------------------------------ sort: the parser

const sortParses: { text: string; keys: SortKey[] }[] = [
  { text: 'name', keys: [{ path: ['name'], descending: false }] },
  { text: '-age', keys: [{ path: ['age'], descending: true }] },
  {
    text: '-age,name,address.city,-id',
    keys: [
      { path: ['age'], descending: true },
      { path: ['name'], descending: false },
      { path: ['address', 'city'], descending: false },
      { path: ['id'], descending: true },
    ],
  },
  { text: '_a-b', keys: [{ path: ['_a-b'], descending: false }] },
];
for (const c of sortParses) {
  test(`the sort ${JSON.stringify(c.text)} parses, and prints back the same`, () => {
    const result: SortParse = parseSort(c.text);
    assert.deepEqual(result, { ok: true, keys: c.keys });
    assert.equal(printSort(c.keys), c.text);
  });
}

const sortFailures: { text: string; detail: string }[] = [
  { text: '', detail: 'sort is not a path, or `-` and a path' },
  { text: '-', detail: 'sort is not a path, or `-` and a path' },
  { text: '--age', detail: 'sort is not a path' },
  { text: '+age', detail: 'sort is not a path' },
  { text: 'age,', detail: 'sort key 2 is not a path' },
  { text: ',age', detail: 'sort key 1 is not a path' },
  { text: 'age, name', detail: 'sort key 2 is not a path' },
  { text: 'a..b', detail: 'sort is not a path' },
  { text: 'a.1', detail: 'sort is not a path' },
  { text: 'é', detail: 'sort is not a path' },
  { text: 'a,b,c,d,e', detail: 'sort has 5 keys: at most 4 are allowed' },
  { text: 'name,-name', detail: 'sort key 2 names the path `name` a second time' },
];
for (const c of sortFailures) {
  test(`the sort ${JSON.stringify(c.text)} is refused: ${c.detail}`, () => {
    const result = parseSort(c.text);
    assert.equal(result.ok, false);
    if (!result.ok) assert.ok(result.detail.startsWith(c.detail), result.detail);
  });
}

test(`the sort bound is ${MAX_SORT_KEYS} keys`, () => {
  assert.equal(parseSort(['a', 'b', 'c', 'd'].slice(0, MAX_SORT_KEYS).join(',')).ok, true);
});

test('property: the user-path grammar is the sort grammar and the filter grammar', () => {
  const unit = fc.constantFrom('a', 'Z', '_', '-', '.', '0', 'é', '[', '(');
  fc.assert(
    fc.property(
      fc.oneof(
        arbitraryPath.map((p) => p.join('.')),
        fc.string({ unit, maxLength: 6 }),
      ),
      (text) => {
        const path = parsePath(text);
        assert.equal(parseSort(text).ok, parsePath(text.replace(/^-/, '')) !== undefined);
        assert.equal(parseFilter(`${text} pr`).ok, path !== undefined, text);
      },
    ),
  );
});

// ------------------------------------------------------------ sort: the order

const sortUsers = [
  { id: 1, v: 2 },
  { id: 2, v: 'b' },
  { id: 3, v: null },
  { id: 4, v: true },
  { id: 5, v: -1 },
  { id: 6, v: '😀' },
  { id: 7 },
  { id: 8, v: false },
  { id: 9, v: 'B' },
  { id: 10, v: [1] },
  { id: 11, v: 10 },
  { id: 12, v: '\uFFFD' },
  { id: 13, v: {} },
  { id: 14, v: 'a' },
  { id: 15, v: 2.0 },
  { id: 16, v: 'b' },
];

function sortedIds(users: readonly { id: number }[], sort: string, folded: ReadonlySet<string> = NONE): number[] {
  const result = parseSort(sort);
  if (!result.ok) assert.fail(result.detail);
  const entries = users.map((u) => ({ id: u.id, values: sortValuesOf(u, result.keys, folded) }));
  return entries.sort((a, b) => compareSortEntries(a, b, result.keys)).map((e) => e.id);
}

const orders: { sort: string; folded?: string[]; ids: number[] }[] = [
  // -1, 2, 2.0, 10, "B", "a", "b", "b", U+FFFD, U+1F600, false, true, then null, missing, [1], {} by id
  { sort: 'v', ids: [5, 1, 15, 11, 9, 14, 2, 16, 12, 6, 8, 4, 3, 7, 10, 13] },
  { sort: '-v', ids: [4, 8, 6, 12, 2, 16, 14, 9, 11, 1, 15, 5, 3, 7, 10, 13] },
  { sort: 'v', folded: ['v'], ids: [5, 1, 15, 11, 14, 2, 9, 16, 12, 6, 8, 4, 3, 7, 10, 13] },
  { sort: '-v', folded: ['v'], ids: [4, 8, 6, 12, 2, 9, 16, 14, 11, 1, 15, 5, 3, 7, 10, 13] },
  { sort: 'missing', ids: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] },
  { sort: '-missing', ids: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16] },
  { sort: '-id', ids: [16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1] },
];
for (const c of orders) {
  const folded = c.folded === undefined ? '' : ' on a case-insensitive path';
  test(`sort=${c.sort}${folded} puts the users in API.md's order`, () => {
    assert.deepEqual(sortedIds(sortUsers, c.sort, new Set(c.folded)), c.ids);
  });
}

test('sort by several keys: each in its direction, then by id; a path through an array sorts last', () => {
  const users = [
    { id: 1, age: 30, name: 'b', a: { b: 1 } },
    { id: 2, age: 40, name: 'a', a: [{ b: 0 }] },
    { id: 3, age: 30, name: 'a', a: { b: 2 } },
    { id: 4, age: 30, name: 'a', a: { b: 2 } },
    { id: 5, name: 'a', a: { b: [0] } },
  ];
  assert.deepEqual(sortedIds(users, '-age,name'), [2, 3, 4, 1, 5]);
  assert.deepEqual(sortedIds(users, 'name,-age'), [2, 3, 4, 5, 1]);
  assert.deepEqual(sortedIds(users, '-a.b'), [3, 4, 1, 2, 5]);
  assert.deepEqual(
    sortValuesOf(
      users[4],
      [
        { path: ['name'], descending: false },
        { path: ['a', 'b'], descending: true },
      ],
      NONE,
    ),
    ['a', null],
  );
});

test('sort values are read as own members: constructor and toString sort last', () => {
  assert.deepEqual(
    sortedIds([{ id: 2 }, JSON.parse('{"id":1,"constructor":"x"}') as { id: number }], 'constructor'),
    [1, 2],
  );
  assert.deepEqual(sortValuesOf({ id: 1 }, parsedSort('toString,constructor.name'), NONE), [null, null]);
});

function parsedSort(text: string): SortKey[] {
  const result = parseSort(text);
  if (!result.ok) assert.fail(result.detail);
  return result.keys;
}

const sortValue: fc.Arbitrary<SortValue> = fc.oneof(
  fc.constantFrom(null, true, false, 0, 1, -1, 2.5, '', 'a', 'A', 'b', '😀', '\uFFFD'),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  trickyString,
);
const sortKeys: fc.Arbitrary<SortKey[]> = fc.array(fc.record({ path: fc.constant(['v']), descending: fc.boolean() }), {
  minLength: 0,
  maxLength: MAX_SORT_KEYS,
});
const entriesFor = (keys: number) =>
  fc.uniqueArray(
    fc.record({
      id: fc.integer({ min: 1, max: 50 }),
      values: fc.array(sortValue, { minLength: keys, maxLength: keys }),
    }),
    { selector: (e) => e.id, minLength: 1, maxLength: 12 },
  );
const withEntries = sortKeys.chain((keys) => fc.tuple(fc.constant(keys), entriesFor(keys.length)));

test('property: compareSortValues is a total order: antisymmetric, transitive, 0 only on equal values', () => {
  fc.assert(
    fc.property(sortValue, sortValue, sortValue, (a, b, c) => {
      assert.equal(compareSortValues(a, b) + compareSortValues(b, a), 0);
      assert.equal(compareSortValues(a, b) === 0, Object.is(a, b) || a === b);
      if (compareSortValues(a, b) <= 0 && compareSortValues(b, c) <= 0) assert.ok(compareSortValues(a, c) <= 0);
    }),
    { numRuns: 3000 },
  );
});

test('property: compareSortEntries is a total order, consistent with ties broken by ascending id', () => {
  fc.assert(
    fc.property(withEntries, ([keys, entries]) => {
      const cmp = (a: SortEntry, b: SortEntry) => compareSortEntries(a, b, keys);
      const sorted = [...entries].sort(cmp);
      for (const a of entries) {
        assert.equal(cmp(a, a), 0);
        for (const b of entries) {
          assert.equal(cmp(a, b) + cmp(b, a), 0);
          if (a.id !== b.id) assert.notEqual(cmp(a, b), 0, 'only an entry ties with itself');
          const same = a.values.every((v, i) => compareSortValues(v, b.values[i]!) === 0);
          if (same) assert.equal(cmp(a, b), Math.sign(a.id - b.id), 'equal on every key: by id');
        }
      }
      for (let i = 0; i + 1 < sorted.length; i++)
        for (let j = i + 1; j < sorted.length; j++) assert.equal(cmp(sorted[i]!, sorted[j]!), -1, 'transitive');
    }),
    { numRuns: 500 },
  );
});

test('property: a missing or non-scalar member sorts after every present value, in both directions', () => {
  fc.assert(
    fc.property(sortValue, fc.boolean(), (value, descending) => {
      const keys = [{ path: ['v'], descending }];
      const present = { id: 2, values: [value] };
      const absent = { id: 1, values: [null] };
      assert.equal(compareSortEntries(absent, present, keys), value === null ? -1 : 1);
    }),
  );
});

// ------------------------------------------------------------ the cursor

const byName = parsed('name sw "A"');
const byAge = parsedSort('-age,name');
const position: SortEntry = { id: 42, values: [30, 'Alice'] };

const NOTHING_FOLDED: ReadonlySet<string> = new Set();

function encodeCursor(last: SortEntry, filter: Filter | undefined, sort: SortKey[], folded = NOTHING_FOLDED) {
  return encodeListing(last, { filter, sort, folded });
}

function decodeCursor(text: string, filter: Filter | undefined, sort: SortKey[], folded = NOTHING_FOLDED) {
  return decodeListing(text, { filter, sort, folded });
}

function refused(result: CursorDecode, reason: 'malformed' | 'foreign'): void {
  assert.equal(result.ok, false);
  if (!result.ok) assert.equal(result.reason, reason, result.detail);
}

test('a cursor decodes to its position with the same filter and sort, spelt either way', () => {
  const cursor = encodeCursor(position, byName, byAge);
  assert.match(cursor, /^[A-Za-z0-9_-]+$/);
  assert.deepEqual(decodeCursor(cursor, byName, byAge), { ok: true, position });
  assert.deepEqual(decodeCursor(cursor, parsed('(name SW "A")'), parsedSort('-age,name')), {
    ok: true,
    position,
  });
});

test('a cursor given with another filter or sort, or with none, is foreign', () => {
  const cursor = encodeCursor(position, byName, byAge);
  refused(decodeCursor(cursor, parsed('name sw "B"'), byAge), 'foreign');
  refused(decodeCursor(cursor, undefined, byAge), 'foreign');
  refused(decodeCursor(cursor, byName, parsedSort('age,name')), 'foreign');
  refused(decodeCursor(cursor, byName, parsedSort('-age,-name')), 'foreign');
  refused(decodeCursor(encodeCursor({ id: 42, values: [] }, byName, []), byName, parsedSort('name')), 'foreign');
  refused(decodeCursor(encodeCursor({ id: 42, values: [] }, undefined, []), byName, []), 'foreign');
});

test('a cursor made while a path it compares or sorts on was case-insensitive is foreign once it is not, and the other way round', () => {
  const filter = parsed('emails[value eq "a"] and name pr');
  const sort = parsedSort('team');
  const folded = new Set(['emails.value', 'team', 'unrelated']);
  const position: SortEntry = { id: 42, values: ['red'] };
  const cursor = encodeCursor(position, filter, sort, folded);
  assert.equal(decodeCursor(cursor, filter, sort, new Set(['emails.value', 'team'])).ok, true);
  refused(decodeCursor(cursor, filter, sort, new Set(['team'])), 'foreign');
  refused(decodeCursor(cursor, filter, sort, new Set(['emails.value'])), 'foreign');
  refused(decodeCursor(encodeCursor(position, filter, sort), filter, sort, new Set(['team'])), 'foreign');
  // `pr` compares nothing: its path's case does not matter.
  assert.equal(decodeCursor(cursor, filter, sort, new Set([...folded, 'name'])).ok, true);
});

test('a cursor with a character changed, cut short or with junk added is refused', () => {
  const cursor = encodeCursor(position, byName, byAge);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  for (let i = 0; i < cursor.length; i++) {
    for (const c of [alphabet[(alphabet.indexOf(cursor[i]!) + 1) % 64]!, '=', '.', '+', ' ', '%']) {
      const changed = cursor.slice(0, i) + c + cursor.slice(i + 1);
      assert.equal(decodeCursor(changed, byName, byAge).ok, false, `${c} at ${i}`);
    }
    assert.equal(decodeCursor(cursor.slice(0, i), byName, byAge).ok, false, `cut at ${i}`);
  }
  for (const junk of ['A', 'AA', '=', '==', '\n', 'é', '%00'])
    assert.equal(decodeCursor(cursor + junk, byName, byAge).ok, false, junk);
});

test('a cursor that is not base64url, or too short to hold a check, is malformed', () => {
  for (const text of ['', 'A', '!!!!', 'AAAAAAAAAAAAAAAAAAAAAA', 'AAAAAAAAAAAAAAAAAAAAAAA=', '😀', 'a'.repeat(100_001)])
    refused(decodeCursor(text, byName, byAge), 'malformed');
});

test('property: decodeCursor never throws on junk, and a cursor round-trips any position', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), fc.base64String(), (junk, base64) => {
      for (const text of [junk, base64, base64.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')])
        assert.equal(decodeCursor(text, byName, byAge).ok, false);
    }),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(withEntries, withinBounds, ([keys, entries], filter) => {
      for (const entry of entries) {
        const last = { id: entry.id, values: entry.values.map((v) => (typeof v === 'number' ? v + 0 : v)) };
        assert.deepEqual(decodeCursor(encodeCursor(last, filter, keys), filter, keys), { ok: true, position: last });
      }
    }),
    { numRuns: 300 },
  );
});

test('a cursor whose check holds over a position that is not [id, ...values] is malformed', () => {
  // The check is no secret: a hand-made cursor passes it, and its position is still checked.
  const forge = (json: string) => {
    const payload = Buffer.from(json);
    const context = `users-server cursor 1\n${printFilter(byName)}\n${printSort(byAge)}\n`;
    const check = createHash('sha256').update(context).update(payload).digest().subarray(0, 16);
    return Buffer.concat([check, payload]).toString('base64url');
  };
  assert.deepEqual(decodeCursor(forge('[7,1,"a"]'), byName, byAge), {
    ok: true,
    position: { id: 7, values: [1, 'a'] },
  });
  for (const json of [
    '[7,1]',
    '[7,1,"a",2]',
    '[0,1,"a"]',
    '[1.5,1,"a"]',
    '["7",1,"a"]',
    '[7,{},"a"]',
    '[7,[1],"a"]',
    '{"id":7}',
    'nope',
    '[7,1,"a"',
    '\u00ff',
  ])
    refused(decodeCursor(forge(json), byName, byAge), 'malformed');
});

test('property: paging by cursor, each page the entries after the last one, lists every entry once in order', () => {
  fc.assert(
    fc.property(withEntries, fc.integer({ min: 1, max: 5 }), ([keys, entries], limit) => {
      const cmp = (a: SortEntry, b: SortEntry) => compareSortEntries(a, b, keys);
      const listed: SortEntry[] = [];
      let after: string | undefined;
      for (;;) {
        const decoded = after === undefined ? undefined : decodeCursor(after, byName, keys);
        if (decoded !== undefined && !decoded.ok) assert.fail(decoded.detail);
        const from = decoded?.position;
        const page = entries
          .filter((e) => from === undefined || cmp(e, from) > 0)
          .sort(cmp)
          .slice(0, limit);
        listed.push(...page);
        if (page.length < limit) break;
        after = encodeCursor(page.at(-1)!, byName, keys);
      }
      assert.deepEqual(listed, [...entries].sort(cmp));
    }),
    { numRuns: 300 },
  );
});
