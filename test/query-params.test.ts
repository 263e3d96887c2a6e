/**
 * A request's query read by server/http/query-params.ts gives what
 * `URLSearchParams` gives for every name, on a table of the tricky cases and
 * on random queries of the characters that matter (`&`, `=`, `+`, `%`, hex
 * digits, Latin-1, astral and lone surrogates).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { QueryParams } from '../server/http/query-params.js';

/** Every name `URLSearchParams` finds in `query`, and a few it does not, asked of both. */
function assertSameAsStandard(query: string): void {
  const standard = new URLSearchParams(query);
  const ours = new QueryParams(query);
  for (const name of new Set([...standard.keys(), '', 'a', 'a b', 'filter', '%', '+'])) {
    assert.deepEqual(ours.getAll(name), standard.getAll(name), `getAll(${JSON.stringify(name)}) of ${query}`);
    assert.equal(ours.get(name), standard.get(name), `get(${JSON.stringify(name)}) of ${query}`);
    assert.equal(ours.has(name), standard.has(name), `has(${JSON.stringify(name)}) of ${query}`);
  }
}

const CASES = [
  '',
  '&',
  '&&a=1&&',
  'a',
  'a=',
  '=',
  '=1',
  'a=1&a=2&b=3&a=4',
  'a==b=c',
  'filter=email%20eq%20%22bob%40example.com%22&limit=10',
  'filter=name+co+%22a%2Bb%22',
  'a%20b=%26%3D',
  'a=%',
  'a=%2',
  'a=%zz&b=1',
  'a=%C3%A9',
  'a=%7F%7f%6A%6a%4A',
  'a=%80',
  'a=%4g',
  'a=%g4',
  'a=b%',
  'a=%C3',
  'a=%C3é',
  'a=%E2%82&b=%AC',
  'a=%ED%A0%80',
  'a=%F0%9F%98%80',
  'a=%EF%BB%BF',
  'a=é&%C3%A9=2',
  'a=\ud83d\ude00',
  'a=\ud83d',
  'a=\ude00&b=1',
  '%61=1&a=2',
];

for (const query of CASES) {
  test(`query ${JSON.stringify(query)} reads as URLSearchParams reads it`, () => assertSameAsStandard(query));
}

test('random queries read as URLSearchParams reads them', () => {
  const piece = fc.constantFrom(
    'a',
    'b',
    '&',
    '=',
    '+',
    '%',
    '2',
    'C',
    '3',
    'A9',
    'e',
    'é',
    '%C3',
    '%A9',
    '%20',
    '%7F',
    '%7f',
    '%80',
    '%6a',
    '%4',
    'F',
    'g',
    '%2B',
    '%25',
    '%00',
    '%0',
    '%26',
    '%3D',
    '%ED',
    '%F0%9F',
    '\ud83d',
    '\ude00',
    '\ud83d\ude00',
  );
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 24 }), (pieces) => assertSameAsStandard(pieces.join(''))),
    { numRuns: 2000 },
  );
});
