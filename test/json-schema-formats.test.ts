/**
 * The five asserted formats (docs/schema.md "Formats") on the edges the Test
 * Suite's optional/format files leave out: leap seconds with an offset,
 * label lengths, IP literals, characters outside ASCII, empty strings.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FORMAT_NAMES, FORMAT_PHRASES, FORMAT_TESTS, type FormatName } from '../server/users/json-schema/formats.js';

const CASES: Record<FormatName, Array<[text: string, valid: boolean]>> = {
  email: [
    ['alice@example.com', true],
    ['alice@localhost', true],
    ['a.b+tag@mail.example.org', true],
    ['"a@b"@example.com', true],
    ['a@[IPv6:2001:db8::1]', true],
    ['a@[192.0.2.1]', true],
    [`a@${'x'.repeat(63)}.com`, true],
    [`a@${'x'.repeat(64)}.com`, false],
    ['a@-example.com', false],
    ['a@example-.com', false],
    ['a@example..com', false],
    ['a@b@example.com', false],
    ['a@[IPv6:01.2.3.4]', false],
    ['a@[IPv6:::1', false],
    ['élise@example.com', false],
    ['alice@example.com ', false],
    ['', false],
  ],
  uri: [
    ['https://example.com', true],
    ['http://example.com:8080/a/b?c=d&e#f', true],
    ['urn:isbn:0451450523', true],
    ['mailto:', true],
    ['http://[v1.fe80::a+en1]/', true],
    ['http://[2001:db8::7]:80/', true],
    ['http://user:pass@example.com/', true],
    ['http://[::1', false],
    ['http://[example.com]/', false],
    ['https://example.com/ä', false],
    ['http://a b', false],
    ['example.com', false],
    ['', false],
  ],
  'date-time': [
    ['2024-05-01T12:00:00Z', true],
    ['2024-05-01T12:00:00.5+14:00', true],
    ['2024-02-29T00:00:00-00:00', true],
    ['2016-12-31T23:59:60Z', true],
    ['2017-01-01T01:29:60+01:30', true],
    ['2016-12-31T18:59:60-05:00', true],
    ['2016-12-31T23:59:60+01:00', false],
    ['2024-05-01T12:00:00', false],
    ['2024-05-01 12:00:00Z', false],
    ['2024-05-01T12:00:00.Z', false],
    ['2024-05-01T12:00Z', false],
    ['2024-05-01T12:00:00+0100', false],
    ['2023-02-29T12:00:00Z', false],
    ['', false],
  ],
  date: [
    ['2024-02-29', true],
    ['2000-02-29', true],
    ['1900-02-29', false],
    ['2024-1-01', false],
    ['2024-01-01T00:00:00Z', false],
    ['', false],
  ],
  uuid: [
    ['123e4567-e89b-12d3-a456-426614174000', true],
    ['{123e4567-e89b-12d3-a456-426614174000}', false],
    ['123e4567e89b12d3a456426614174000', false],
    ['', false],
  ],
};

for (const name of FORMAT_NAMES) {
  test(`format ${name}: ${FORMAT_PHRASES[name]}`, () => {
    const wrong = CASES[name].filter(([text, valid]) => FORMAT_TESTS[name](text) !== valid);
    assert.deepEqual(wrong, []);
  });
}

test('a format test reads a long hostile string in linear time', () => {
  const hostile = [
    `${'a.'.repeat(20_000)}@`,
    `a@${'a-'.repeat(20_000)}!`,
    `http://${'%41'.repeat(10_000)} `,
    `http:${'/a'.repeat(20_000)}[`,
    `1963-06-19T08:30:06.${'1'.repeat(40_000)}Q`,
  ];
  for (const name of FORMAT_NAMES)
    for (const text of hostile) {
      const start = performance.now();
      assert.equal(FORMAT_TESTS[name](text), false);
      assert.ok(performance.now() - start < 200, `${name} took ${performance.now() - start} ms`);
    }
});
