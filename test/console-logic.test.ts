/**
 * The console's pure parts, run in node: what the filter box sends for
 * plain words and for the filter syntax, and how the status view reads the
 * Prometheus text of /metrics.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { filterFor, referenceIn } from '../console/filter-text.js';
import { durationText, parseMetrics, requestTotal } from '../console/metrics.js';
import { parseFilter } from '../server/users/filter-parse.js';

const boxCases: { text: string; declared?: string[]; filter: string | undefined }[] = [
  { text: '', filter: undefined },
  { text: '   ', filter: undefined },
  { text: 'ann', filter: 'name co "ann"' },
  { text: ' ann  lee ', filter: 'name co "ann" and name co "lee"' },
  { text: 'ann ann', filter: 'name co "ann"' },
  { text: 'say "hi"', filter: 'name co "say" and name co "\\"hi\\""' },
  { text: 'ann', declared: ['email', 'name', 'id'], filter: '(name co "ann" or email co "ann")' },
  { text: 'name eq "Ann"', filter: 'name eq "Ann"' },
  { text: '  age gt 30 ', filter: 'age gt 30' },
  { text: 'email pr', filter: 'email pr' },
  { text: 'not (team eq "red")', filter: 'not (team eq "red")' },
  { text: '(a eq 1) or b eq 2', filter: '(a eq 1) or b eq 2' },
  { text: 'emails[type eq "work"]', filter: 'emails[type eq "work"]' },
  { text: 'NAME SW "A"', filter: 'NAME SW "A"' },
  { text: 'team eq blue', filter: 'team eq blue' },
];
for (const c of boxCases) {
  test(`the filter box sends ${JSON.stringify(c.filter)} for ${JSON.stringify(c.text)}${c.declared ? ` with ${c.declared.join(', ')} declared` : ''}`, () => {
    assert.equal(filterFor(c.text, c.declared ?? []), c.filter);
  });
}

test('plain words always make a filter the server parses, within its bound of 32 conditions', () => {
  const declared = Array.from({ length: 7 }, (_, i) => `f${i}`);
  const words = Array.from({ length: 40 }, (_, i) => `w${i}"\\\u00e9`).join(' ');
  for (const text of [words, 'a b c', 'tricky"quote back\\slash', 'é ü ß']) {
    const filter = filterFor(text, declared)!;
    const parsed = parseFilter(filter);
    assert.ok(parsed.ok, `${filter}: ${parsed.ok ? '' : parsed.detail}`);
    assert.ok((filter.match(/ co /g) ?? []).length <= 32);
  }
});

test('one plain word that is an id or an alias is also looked up as a reference; anything else is not', () => {
  assert.equal(referenceIn('42'), '42');
  assert.equal(referenceIn(' alice '), 'alice');
  assert.equal(referenceIn('a.b_c~d-e'), 'a.b_c~d-e');
  for (const text of ['', 'ann lee', 'name eq "x"', '..', 'new', '007', 'a%20b', 'é'])
    assert.equal(referenceIn(text), undefined, text);
});

test('the status view reads each series of the exposition, adds up the request counter, and says durations in words', () => {
  const text = [
    '# HELP users_server_requests_total Requests answered.',
    '# TYPE users_server_requests_total counter',
    'users_server_requests_total{route="/users/:ref",method="GET",status="200"} 12',
    'users_server_requests_total{route="a b",method="PUT",status="201"} 3',
    'users_server_users 7',
    'process_start_time_seconds 1700000000.5',
    '',
  ].join('\n');
  const series = parseMetrics(text);
  assert.equal(series.get('users_server_users'), 7);
  assert.equal(series.get('process_start_time_seconds'), 1700000000.5);
  assert.equal(requestTotal(series), 15);
  assert.equal(requestTotal(parseMetrics('users_server_users 1\n')), undefined);
  assert.deepEqual([5, 59, 60, 3599, 3600, 7325, 86_400 * 2 + 3600 * 4].map(durationText), [
    '5 s',
    '59 s',
    '1 min',
    '59 min',
    '1 h 0 min',
    '2 h 2 min',
    '2 d 4 h',
  ]);
});
