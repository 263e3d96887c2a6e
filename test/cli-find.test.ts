/**
 * usersctl finds users (docs/cli.md "list, find and export"): `list
 * --filter --sort --count`, `find PATH VALUE [--json-value]` and `export
 * --filter`, each following every page; the table shows the paths filtered
 * and sorted on as columns; a filter the server refuses is one sentence
 * with its column, exit 2.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { equalsFilter, namedPaths } from '../cli/find-query.js';
import { lines, startCliServer, type CliServer } from './cli-helpers.js';
import { put } from './helpers.js';

const TEAM = [
  { alias: 'ann', name: 'Ann', team: 'red', age: 41, email: 'ann@example.com', address: { city: 'Paris' } },
  { alias: 'bob', name: 'Bob', team: 'blue', age: 29, email: 'bob@example.org' },
  { alias: 'cy', name: 'Cy "the kid"', team: 'red', age: 29, email: 'cy@example.com' },
  { alias: 'dee', name: 'Dee', team: 'red', email: 'dee@example.com' },
];

async function teamCli(t: TestContext): Promise<CliServer> {
  const cli = await startCliServer(t);
  for (const { alias, ...user } of TEAM) assert.equal((await put(cli.server.url, `/users/${alias}`, user)).status, 201);
  return cli;
}

const namesOf = (stdout: string) => lines(stdout).map((line) => JSON.parse(line).name as string);

test('list --filter --sort prints the matches in order, following every page; --count prints how many match', async (t) => {
  const cli = await teamCli(t);
  const red = await cli.run(['list', '--filter', 'team eq "red"', '--sort', '-age,name', '--limit', '1']);
  assert.equal(red.code, 0, red.stderr);
  assert.deepEqual(namesOf(red.stdout), ['Ann', 'Cy "the kid"', 'Dee']);
  const counted = await cli.run(['list', '--filter', 'email ew "@example.com"', '--count']);
  assert.deepEqual([counted.code, counted.stdout, counted.stderr], [0, '3\n', '']);
  const all = await cli.run(['list', '--count']);
  assert.equal(all.stdout, '4\n');
  const sorted = await cli.run(['list', '--sort', 'name']);
  assert.deepEqual(namesOf(sorted.stdout), ['Ann', 'Bob', 'Cy "the kid"', 'Dee']);
});

test('the table of a find shows the paths filtered and sorted on as columns', async (t) => {
  const cli = await teamCli(t);
  const table = await cli.run([
    'list',
    '--filter',
    'address.city pr or team eq "blue"',
    '--sort',
    'age',
    '-o',
    'table',
  ]);
  assert.equal(table.code, 0, table.stderr);
  assert.deepEqual(lines(table.stdout), [
    'ID  ALIAS  NAME  ADDRESS.CITY  TEAM  AGE',
    '2   bob    Bob   -             blue  29',
    '1   ann    Ann   Paris         red   41',
  ]);
  const found = await cli.run(['find', 'team', 'blue', '-o', 'table']);
  assert.deepEqual(lines(found.stdout), ['ID  ALIAS  NAME  TEAM', '2   bob    Bob   blue']);
});

test('find PATH VALUE prints the users whose PATH equals VALUE, a string escaped as JSON, or with --json-value a JSON literal', async (t) => {
  const cli = await teamCli(t);
  const byName = await cli.run(['find', 'name', 'Cy "the kid"']);
  assert.equal(byName.code, 0, byName.stderr);
  assert.deepEqual(namesOf(byName.stdout), ['Cy "the kid"']);
  const byAge = await cli.run(['find', 'age', '29', '--json-value']);
  assert.deepEqual(namesOf(byAge.stdout), ['Bob', 'Cy "the kid"']);
  // Without --json-value, 29 is the string "29", which no user holds.
  const asText = await cli.run(['find', 'age', '29']);
  assert.deepEqual([asText.code, asText.stdout], [0, '']);
  const nested = await cli.run(['find', 'address.city', 'Paris']);
  assert.deepEqual(namesOf(nested.stdout), ['Ann']);
  const missing = await cli.run(['find', 'age', 'null', '--json-value']);
  assert.deepEqual(namesOf(missing.stdout), ['Dee']);
});

test('find refuses a PATH that is not a path and a --json-value that is not a JSON literal (exit 2), before any request', async (t) => {
  const cli = await teamCli(t);
  for (const args of [
    ['find', 'a b', 'x'],
    ['find', '1age', 'x'],
    ['find', 'age', '{"a":1}', '--json-value'],
    ['find', 'age', '[29]', '--json-value'],
    ['find', 'age', 'twenty', '--json-value'],
    ['find', 'age', '1e400', '--json-value'],
  ]) {
    const result = await cli.run(args);
    assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
    assert.equal(lines(result.stderr).length, 1, result.stderr);
    assert.equal(result.stdout, '');
  }
});

test('a filter or sort the server refuses is one sentence naming the column (or the sort), exit 2, and prints no user', async (t) => {
  const cli = await teamCli(t);
  const bad = await cli.run(['list', '--filter', 'team eq']);
  assert.equal(bad.code, 2, bad.stderr);
  assert.equal(bad.stdout, '');
  assert.deepEqual(lines(bad.stderr), [
    'usersctl: The filter does not parse at column 8: expected a value (a JSON string, number, true, false or null) after `eq`.',
  ]);
  const badSort = await cli.run(['list', '--sort', 'age,,name']);
  assert.equal(badSort.code, 2, badSort.stderr);
  assert.match(badSort.stderr, /sort key 2 is not a path/);
  const json = await cli.run(['--json', 'list', '--filter', 'age co 3', '--count']);
  assert.equal(json.code, 2);
  const record = JSON.parse(lines(json.stderr)[0]!);
  assert.equal(record.status, 400);
  assert.equal(record.type, 'tag:users-server,2026:problem/invalid-filter');
  assert.equal(record.exit, 2);
  const exported = await cli.run(['export', '--filter', '(team eq "red"']);
  assert.equal(exported.code, 2, exported.stderr);
  assert.match(exported.stderr, /column 15/);
});

test('export --filter writes the records of the matching users with their aliases, following every page, and its end record counts them', async (t) => {
  const cli = await teamCli(t);
  const result = await cli.run(['export', '--filter', 'team eq "red" and age pr']);
  assert.equal(result.code, 0, result.stderr);
  const records = lines(result.stdout).map((line) => JSON.parse(line));
  assert.deepEqual(records[0], { usersctl: 'export', version: 2 });
  assert.deepEqual(
    records.slice(1, -1).map((r) => [r.id, r.alias, r.user.name]),
    [
      [1, 'ann', 'Ann'],
      [3, 'cy', 'Cy "the kid"'],
    ],
  );
  assert.deepEqual(records.at(-1), { usersctl: 'end', users: 2 });
});

test('export --filter follows every page of more than a thousand matches', async (t) => {
  const cli = await startCliServer(t);
  for (let start = 0; start < 1500; start += 100)
    await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        put(cli.server.url, `/users/u${start + i}`, { name: `u${start + i}`, odd: (start + i) % 2 === 1 }),
      ),
    );
  const result = await cli.run(['export', '--filter', 'odd eq false']);
  assert.equal(result.code, 0, result.stderr);
  const records = lines(result.stdout).map((line) => JSON.parse(line));
  assert.deepEqual(records.at(-1), { usersctl: 'end', users: 750 });
  assert.equal(new Set(records.slice(1, -1).map((r) => r.id)).size, 750);
});

const PATH_CASES: { filter?: string; sort?: string; paths: string[] }[] = [
  { filter: 'team eq "red"', paths: ['team'] },
  { filter: 'team EQ "a eq b" and not (age pr)', paths: ['team', 'age'] },
  { filter: 'emails[type eq "work" and value ew "x"] or address.city sw "P"', paths: ['emails', 'address.city'] },
  { filter: 'name eq "x"', sort: '-age,team', paths: ['name', 'age', 'team'] },
  { filter: '(a gt 1 or b lt -2.5e3) and a le 9', paths: ['a', 'b'] },
  { sort: 'x.y', paths: ['x.y'] },
];

for (const c of PATH_CASES)
  test(`the columns of filter ${JSON.stringify(c.filter ?? '')} and sort ${JSON.stringify(c.sort ?? '')} are ${c.paths.join(', ')}`, () => {
    assert.deepEqual(namedPaths(c), c.paths);
  });

test('the filter of find escapes its value as a JSON string: quotes, backslashes, controls and a lone surrogate', () => {
  assert.equal(equalsFilter('name', 'a "b" \\ c', false), 'name eq "a \\"b\\" \\\\ c"');
  assert.equal(equalsFilter('name', 'tab\there', false), 'name eq "tab\\there"');
  assert.equal(equalsFilter('name', '\ud800', false), 'name eq "\\ud800"');
  assert.equal(equalsFilter('age', ' 1.50 ', true), 'age eq 1.5');
  assert.equal(equalsFilter('ok', 'true', true), 'ok eq true');
  assert.equal(equalsFilter('tag', '"x"', true), 'tag eq "x"');
});
