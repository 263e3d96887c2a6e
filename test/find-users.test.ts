/**
 * Finding users through GET /users (API.md "Finding users: filter, sort,
 * count"), as an operator meets it over real sockets on the memory store:
 * a filter, a sort and a count, pages followed through `next` until null,
 * the 400s of a filter, a sort and a cursor that are not right, paging
 * while other users come and go, and the bounded scan of a filter that no
 * index serves (its budget set small here) that answers short pages and,
 * followed to the end, every match once. The store suite
 * (test/store-suite.ts) gives the same answers on every store.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { memoryStore } from '../server/store/memory/state-store.js';
import type { ScannedUser } from '../server/store/found-pages.js';
import { UserScans } from '../server/store/scan-users.js';
import type { UserQuery } from '../server/store/store.js';
import { MAX_FILTER_LENGTH } from '../server/users/filter-parse.js';
import { assertProblem, put, send, startTestServer, type TestServer } from './helpers.js';

interface User {
  id: number;
  name: string;
  [member: string]: unknown;
}

interface Page {
  items: User[];
  next: string | null;
  total?: number;
  aliases?: Record<string, string>;
}

async function getPage(server: TestServer, path: string): Promise<Page> {
  const reply = await send(server.url, 'GET', path);
  assert.equal(reply.status, 200, `GET ${path}: ${reply.text}`);
  return reply.json() as Page;
}

/** Every page from `path` on, following `next` until null. */
async function allPages(server: TestServer, path: string): Promise<Page[]> {
  const pages: Page[] = [];
  for (let next: string | null = path; next !== null;) {
    const page = await getPage(server, next);
    pages.push(page);
    next = page.next;
    assert.ok(pages.length < 1000, 'next never reaches null');
  }
  return pages;
}

const names = (pages: Page[]) => pages.flatMap((p) => p.items.map((u) => u.name));
const find = (query: Record<string, string>) => `/users?${new URLSearchParams(query)}`;

const TEAM = [
  { alias: 'ann', name: 'Ann', team: 'red', age: 41, emails: [{ type: 'work', value: 'ann@example.com' }] },
  { alias: 'bob', name: 'Bob', team: 'blue', age: 29 },
  { alias: 'cy', name: 'Cy', team: 'red', age: 29, emails: [{ type: 'home', value: 'cy@example.org' }] },
  { alias: 'dee', name: 'Dee', team: 'red' },
  { alias: 'eve', name: 'Eve', team: 'green', age: 35, emails: [{ type: 'work', value: 'eve@example.com' }] },
  { alias: 'fay', name: 'Fay', team: 'red', age: 52 },
];

/** A server holding TEAM, created in order (ids 1..6) through their aliases. */
async function teamServer(t: TestContext, store = memoryStore()): Promise<TestServer> {
  const server = await startTestServer(t, {}, { store });
  for (const { alias, ...user } of TEAM) {
    const reply = await put(server.url, `/users/${alias}`, user);
    assert.equal(reply.status, 201, reply.text);
  }
  return server;
}

test('an operator finds the red team by a filter, sorts it by age, counts it, and pages through it with next', async (t) => {
  const server = await teamServer(t);

  const red = await getPage(server, find({ filter: 'team eq "red"' }));
  assert.deepEqual(
    red.items.map((u) => u.name),
    ['Ann', 'Cy', 'Dee', 'Fay'],
  );
  assert.equal(red.next, null);
  assert.equal('total' in red, false, 'total only with count=true');

  // Oldest first; Dee has no age and comes last in both directions.
  const byAge = await getPage(server, find({ filter: 'team eq "red"', sort: '-age' }));
  assert.deepEqual(
    byAge.items.map((u) => u.name),
    ['Fay', 'Ann', 'Cy', 'Dee'],
  );
  const youngest = await getPage(server, find({ sort: 'age,name' }));
  assert.deepEqual(
    youngest.items.map((u) => u.name),
    ['Bob', 'Cy', 'Eve', 'Ann', 'Fay', 'Dee'],
  );

  const pages = await allPages(server, find({ filter: 'team eq "red"', sort: '-age', limit: '1', count: 'true' }));
  assert.deepEqual(names(pages), ['Fay', 'Ann', 'Cy', 'Dee']);
  assert.deepEqual(
    pages.map((p) => p.total),
    [4, 4, 4, 4],
  );
  // next repeats the query, with a cursor of its own in `after`.
  const next = new URLSearchParams(pages[0]!.next!.split('?')[1]);
  assert.equal(next.get('filter'), 'team eq "red"');
  assert.equal(next.get('sort'), '-age');
  assert.equal(next.get('count'), 'true');
  assert.equal(next.get('limit'), '1');
  assert.match(next.get('after')!, /^[A-Za-z0-9_-]+$/);

  const work = await getPage(server, find({ filter: 'emails[type eq "work" and value ew "@example.com"]' }));
  assert.deepEqual(
    work.items.map((u) => u.name),
    ['Ann', 'Eve'],
  );
  const noAge = await getPage(server, find({ filter: 'not (age pr) or age lt 30', count: 'true' }));
  assert.deepEqual(
    noAge.items.map((u) => u.name),
    ['Bob', 'Cy', 'Dee'],
  );
  assert.equal(noAge.total, 3);
});

test('count=true alone counts every user and pages by id, as the plain listing does', async (t) => {
  const server = await teamServer(t);
  const first = await getPage(server, '/users?count=true&limit=4');
  assert.equal(first.total, 6);
  assert.deepEqual(
    first.items.map((u) => u.id),
    [1, 2, 3, 4],
  );
  assert.equal(first.next, '/users?count=true&limit=4&after=4');
  const second = await getPage(server, first.next!);
  assert.deepEqual(
    second.items.map((u) => u.id),
    [5, 6],
  );
  assert.equal(second.next, null);
  assert.equal(second.total, 6);
});

test('aliases=true maps the found users that have an alias, and next keeps it', async (t) => {
  const server = await teamServer(t);
  const page = await getPage(server, find({ filter: 'age gt 30', sort: 'name', limit: '2', aliases: 'true' }));
  assert.deepEqual(page.aliases, { '1': 'ann', '5': 'eve' });
  assert.deepEqual(Object.keys(page), ['items', 'aliases', 'next']);
  const rest = await getPage(server, page.next!);
  assert.deepEqual(rest.aliases, { '6': 'fay' });
});

test('a filter that does not parse is 400 invalid-filter naming the column and what was expected, and never lists users', async (t) => {
  const server = await teamServer(t);
  const cases = [
    { filter: 'team eq', column: 8, expected: /expected a value/ },
    { filter: 'team equals "red"', column: 6, expected: /expected an operator/ },
    { filter: 'age co 3', column: 8, expected: /expected a string after `co`/ },
    { filter: 'active gt true', column: 11, expected: /true, false and null have no order/ },
    { filter: '', column: 1, expected: /expected a path/ },
    { filter: 'team eq "red" and', column: 18, expected: /expected a path/ },
    { filter: `name eq "${'x'.repeat(MAX_FILTER_LENGTH)}"`, column: MAX_FILTER_LENGTH + 1, expected: /at most/ },
  ];
  for (const c of cases) {
    const reply = await send(server.url, 'GET', find({ filter: c.filter }));
    const problem = assertProblem(reply, 400, 'invalid-filter', c.filter);
    assert.equal(problem.column, c.column, `${c.filter}: ${String(problem.detail)}`);
    assert.match(String(problem.detail), new RegExp(`column ${c.column}\\b`));
    assert.match(String(problem.detail), c.expected);
    assert.equal('items' in problem, false);
  }
});

test('a bad sort is 400 invalid-query with parameter sort; a repeated filter, and a count other than true, are 400 invalid-query', async (t) => {
  const server = await teamServer(t);
  for (const sort of ['', 'age,', '-', 'a..b', 'age,-age', 'a,b,c,d,e', '+age']) {
    const problem = assertProblem(await send(server.url, 'GET', find({ sort })), 400, 'invalid-query', sort);
    assert.equal(problem.parameter, 'sort');
  }
  const twice = await send(server.url, 'GET', '/users?filter=age+pr&filter=name+pr');
  assert.equal(assertProblem(twice, 400, 'invalid-query').parameter, 'filter');
  const count = await send(server.url, 'GET', '/users?count=yes');
  assert.equal(assertProblem(count, 400, 'invalid-query').parameter, 'count');
});

test('a cursor is 400 invalid-cursor with another filter or sort, altered, or not a cursor at all', async (t) => {
  const server = await teamServer(t);
  const page = await getPage(server, find({ filter: 'team eq "red"', sort: 'name', limit: '1' }));
  const after = new URLSearchParams(page.next!.split('?')[1]).get('after')!;
  const refused = [
    find({ filter: 'team eq "blue"', sort: 'name', after }),
    find({ filter: 'team eq "red"', sort: '-name', after }),
    find({ filter: 'team eq "red"', after }),
    find({ sort: 'name', after }),
    find({ filter: 'team eq "red"', sort: 'name', after: `${after.slice(0, -1)}${after.endsWith('A') ? 'B' : 'A'}` }),
    find({ filter: 'team eq "red"', sort: 'name', after: '3' }),
    find({ filter: 'team eq "red"', sort: 'name', after: 'not a cursor' }),
  ];
  for (const path of refused) assertProblem(await send(server.url, 'GET', path), 400, 'invalid-cursor', path);
  // The same filter spelled otherwise is the same filter: its cursor holds.
  const respelled = await getPage(server, find({ filter: '(team  EQ "red")', sort: 'name', limit: '1', after }));
  assert.deepEqual(
    respelled.items.map((u) => u.name),
    ['Cy'],
  );
});

test('paging with next until null gives every match that stays once, in order, while other users are created and deleted between pages', async (t) => {
  const server = await startTestServer(t, {}, { store: memoryStore() });
  for (let i = 1; i <= 40; i++) {
    const reply = await send(server.url, 'POST', '/users/new', {
      json: { name: `u${i}`, n: (i * 7) % 40, even: i % 2 === 0 },
    });
    assert.equal(reply.status, 201, reply.text);
  }
  const queries: Record<string, string>[] = [
    { filter: 'even eq true', limit: '3' },
    { filter: 'even eq true', sort: '-n', limit: '3' },
    { sort: 'n', limit: '4', count: 'true' },
  ];
  for (const query of queries) {
    const seen: string[] = [];
    const order: number[] = [];
    let created = 0;
    for (let next: string | null = find(query); next !== null;) {
      const page = await getPage(server, next);
      for (const user of page.items) {
        seen.push(user.name);
        order.push(user.n as number);
      }
      next = page.next;
      // Between pages: a new user that matches, and the deletion of one of the new ones.
      const made = await send(server.url, 'POST', '/users/new', {
        json: { name: `new${created++}`, n: created, even: true },
      });
      assert.equal(made.status, 201, made.text);
      if (created % 2 === 0)
        assert.equal((await send(server.url, 'DELETE', made.headers.location as string)).status, 204);
    }
    const kept = seen.filter((name) => name.startsWith('u'));
    assert.equal(new Set(kept).size, kept.length, `${JSON.stringify(query)}: a user listed twice`);
    const wanted = Array.from({ length: 40 }, (_, i) => i + 1)
      .filter((i) => query.filter === undefined || i % 2 === 0)
      .map((i) => `u${i}`);
    assert.deepEqual([...kept].sort(), [...wanted].sort(), JSON.stringify(query));
    if (query.sort === '-n')
      assert.deepEqual(
        order,
        [...order].sort((a, b) => b - a),
      );
    if (query.sort === 'n')
      assert.deepEqual(
        order,
        [...order].sort((a, b) => a - b),
      );
  }
});

test('a filter no index serves is scanned in bounded steps: short pages, even empty ones, with next, and followed to the end every match once', async (t) => {
  // Three users examined per request.
  const server = await startTestServer(t, {}, { store: memoryStore({ findBudget: 3 }) });
  for (let i = 1; i <= 20; i++) {
    const reply = await send(server.url, 'POST', '/users/new', { json: { name: `u${i}`, rare: i === 2 || i === 17 } });
    assert.equal(reply.status, 201, reply.text);
  }
  const pages = await allPages(server, find({ filter: 'rare eq true', limit: '10' }));
  assert.deepEqual(names(pages), ['u2', 'u17']);
  assert.ok(pages.length >= 7, `${pages.length} pages: each examines at most 3 of the 20 users`);
  assert.ok(
    pages.some((p) => p.items.length === 0 && p.next !== null),
    'an empty page that goes on',
  );
  // A sort and a count evaluate every user, in steps of three: the pages are full.
  const sorted = await allPages(server, find({ filter: 'rare eq false', sort: '-name', limit: '6', count: 'true' }));
  assert.deepEqual(
    sorted.map((p) => p.items.length),
    [6, 6, 6],
  );
  assert.deepEqual(
    sorted.map((p) => p.total),
    [18, 18, 18],
  );
  assert.equal(names(sorted)[0], 'u9');
});

test('under --require-session all a find needs a session like the listing, and gets one answer with it', async (t) => {
  const server = await startTestServer(t, { requireSession: 'all' }, { store: memoryStore() });
  assertProblem(await send(server.url, 'GET', find({ filter: 'name pr' })), 401, 'unauthorized');
  // A filter that does not parse is refused only after the session check: it tells a stranger nothing.
  assertProblem(await send(server.url, 'GET', find({ filter: 'name' })), 401, 'unauthorized');
  const cookie = await server.login();
  const reply = await send(server.url, 'GET', find({ filter: 'name pr', count: 'true' }), { headers: { cookie } });
  assert.equal(reply.status, 200, reply.text);
  assert.deepEqual(reply.json(), { items: [], next: null, total: 0 });
});

// ------------------------------------------------------------ the scan itself

const BY_NAME: UserQuery = {
  filter: undefined,
  sort: [{ path: ['name'], descending: false }],
  after: undefined,
  limit: 10,
  count: false,
};

/** A few turns of the event loop: what the scans can do before a step answers. */
async function turns(): Promise<void> {
  for (let i = 0; i < 5; i++) await nextTurn();
}

test('at most two full evaluations run at once per store; a third starts when one ends', async () => {
  const steps: { after: number; answer: (users: ScannedUser[]) => void }[] = [];
  const scans = new UserScans({
    usersAfter: (after) => new Promise((answer) => steps.push({ after, answer })),
    userCount: () => 0,
  });
  const finds = [scans.find(BY_NAME), scans.find(BY_NAME), scans.find(BY_NAME)];
  await turns();
  assert.equal(steps.length, 2, 'two scans read their first step, the third waits');
  // A step with no users ends its scan.
  steps.shift()!.answer([]);
  await turns();
  assert.equal(steps.length, 2, 'the third scan began');
  while (steps.length > 0) {
    steps.shift()!.answer([]);
    await turns();
  }
  for (const page of await Promise.all(finds)) assert.deepEqual(page, { items: [], aliases: [], next: undefined });
});

test('a scan whose client is gone stops at its next step, over a store that never ends', async () => {
  let read = 0;
  const endless = new UserScans(
    {
      usersAfter: (after, limit) => {
        read += limit;
        return Array.from({ length: limit }, (_, i) => ({ id: after + i + 1, alias: undefined, json: '{"name":"u"}' }));
      },
      userCount: () => Infinity,
    },
    100,
  );
  const gone = new AbortController();
  const find = Promise.resolve(endless.find({ ...BY_NAME, signal: gone.signal }));
  await turns();
  gone.abort();
  await assert.rejects(find, { name: 'AbortError' });
  const stoppedAt = read;
  await turns();
  assert.equal(read, stoppedAt, 'no step after the abort');
  assert.ok(read > 0 && read % 100 === 0, `steps of 100 users each: ${read}`);
});
