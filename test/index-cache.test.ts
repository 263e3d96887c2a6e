/**
 * The journal store's index cache (store/journal/index-cache.ts): a store
 * that closes keeps its indexes, the next start reads them and enters the
 * users written since again, after a crash too, and answers every find as
 * a store that built its indexes does. A cache that is damaged, comes from
 * another data directory or was made for other declarations is not taken.
 */
import assert from 'node:assert/strict';
import { cpSync, existsSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { crc32 } from 'node:zlib';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { INDEX_CACHE_FILE } from '../server/store/journal/index-cache.js';
import { openStore } from '../server/store/open-store.js';
import type { FoundPage, Store, UserQuery } from '../server/store/store.js';
import type { FieldDeclaration } from '../server/users/declared-fields.js';
import { parseFilter } from '../server/users/filter-parse.js';
import type { UserRef } from '../server/users/rules.js';
import { parseSort } from '../server/users/sort.js';
import { runUsersServer, send, tempDir } from './helpers.js';
import { spawnServer } from './processes.js';

const FIELDS: FieldDeclaration[] = [
  { path: 'email', unique: true, caseInsensitive: true },
  { path: 'tags', unique: false, caseInsensitive: false },
  { path: 'age', unique: false, caseInsensitive: false },
];
const T0 = Date.parse('2026-01-01T00:00:00Z');
const POLICY = { allowIdChange: false, requireIfMatch: false };
const NONE = { ifMatch: undefined, ifNoneMatch: undefined };
const QUERIES: { filter?: string; sort?: string }[] = [
  { sort: 'email' },
  { sort: '-email' },
  { sort: 'tags,-age' },
  { sort: 'age' },
  { filter: 'email sw "u1"', sort: 'email' },
  { filter: 'tags eq "t2"' },
  { filter: 'age ge 30 and age lt 60', sort: '-age' },
  { filter: 'email pr' },
];

/** A store on `dir` whose log lines go to `lines`. */
async function open(t: TestContext, dir: string, lines: string[] = []): Promise<Store> {
  const store = await openStore('journal', dir, { log: (line) => lines.push(line), onFatal: () => {} });
  t.after(() => store.close());
  return store;
}

/** A pseudo-random user `n` of a seeded sequence: emails in mixed case, lone surrogates, arrays of tags. */
function userBody(n: number, round: number): Record<string, unknown> {
  const pick = (n * 7919 + round * 104729) % 97;
  const body: Record<string, unknown> = { name: `User ${n}`, age: pick % 70 };
  if (pick % 11 !== 0) body.email = `${pick % 3 === 0 ? 'U' : 'u'}${n}-${round}@Example.org`;
  if (pick % 13 === 0) body.email = `odd\uD800${n}-${round}`;
  if (pick % 5 === 0) body.tags = [`t${pick % 4}`, `t${(pick + 1) % 4}`];
  else if (pick % 5 === 1) body.tags = `t${pick % 4}`;
  return body;
}

const alias = (n: number): UserRef => ({ kind: 'alias', alias: `a${n}` });

async function write(store: Store, n: number, round: number, body = userBody(n, round)): Promise<void> {
  const outcome = await store.putUser({
    ref: alias(n),
    body,
    preconditions: NONE,
    policy: POLICY,
    now: T0,
  });
  assert.ok(outcome.kind === 'created' || outcome.kind === 'replaced', JSON.stringify(outcome));
}

function query(filter: string | undefined, sort: string | undefined): UserQuery {
  const f = filter === undefined ? undefined : parseFilter(filter);
  if (f !== undefined && !f.ok) assert.fail(f.detail);
  const s = sort === undefined ? undefined : parseSort(sort);
  if (s !== undefined && !s.ok) assert.fail(s.detail);
  return { filter: f?.filter, sort: s?.keys ?? [], after: undefined, limit: 50, count: false };
}

/** The ids every query of QUERIES finds, page after page. */
async function answers(store: Store): Promise<number[][]> {
  const all: number[][] = [];
  for (const { filter, sort } of QUERIES) {
    const ids: number[] = [];
    let page: FoundPage = await store.findUsers(query(filter, sort));
    for (;;) {
      ids.push(...page.items.map((j) => JSON.parse(j).id as number));
      if (page.next === undefined) break;
      page = await store.findUsers({ ...query(filter, sort), after: page.next });
    }
    all.push(ids);
  }
  return all;
}

/** The parts of a cache's header the tests change. */
interface CacheHeader {
  point: unknown;
  indexes: { lists: { entries: number }[][] }[];
}

/** `cache` with its header changed by `edit` and its checksum made again: what only a deliberate edit makes. */
function withHeader(cache: Buffer, edit: (header: CacheHeader) => unknown): Buffer {
  const eight = (n: number) => Buffer.alloc((8 - (n % 8)) % 8);
  const headerBytes = cache.readUInt32LE(cache.length - 8);
  const headerAt = cache.length - 8 - headerBytes - eight(headerBytes).length;
  const header = JSON.parse(cache.toString('utf8', headerAt, headerAt + headerBytes)) as CacheHeader;
  const line = Buffer.from(JSON.stringify(edit(header)));
  const file = Buffer.concat([cache.subarray(0, headerAt), line, eight(line.length), Buffer.alloc(8)]);
  file.writeUInt32LE(line.length, file.length - 8);
  file.writeUInt32LE(crc32(file.subarray(0, file.length - 4)), file.length - 4);
  return file;
}

/** A copy of `dir` without the cache: what a store that builds its indexes answers. */
async function builtAnswers(t: TestContext, dir: string): Promise<number[][]> {
  const copy = tempDir(t);
  cpSync(dir, copy, { recursive: true });
  rmSync(join(copy, INDEX_CACHE_FILE), { force: true });
  const store = await open(t, copy);
  assert.equal(await store.declareFields!(FIELDS), undefined);
  const found = await answers(store);
  await store.close();
  return found;
}

/**
 * A data directory of `users` users (of `round`) with FIELDS declared, closed once: its cache written. `twin`: the
 * same but for one letter of user 5's email, so its journal has the same length and the same records after it.
 */
async function cachedDir(t: TestContext, users = 300, round = 0, twin = false): Promise<string> {
  const dir = tempDir(t);
  const store = await open(t, dir);
  for (let n = 1; n <= users; n++) {
    const body = userBody(n, round);
    if (twin && n === 5) body.email = `x${String(body.email).slice(1)}`;
    await write(store, n, round, body);
  }
  assert.equal(await store.declareFields!(FIELDS), undefined);
  await store.close();
  return dir;
}

test('a closed store keeps its indexes: the next start reads them, finds as a build does, and still refuses a taken email', async (t) => {
  const dir = await cachedDir(t);
  const leftover = join(dir, `${INDEX_CACHE_FILE}.4242.0badcafe.tmp`);
  writeFileSync(leftover, 'a write a kill -9 cut short');
  const lines: string[] = [];
  const store = await open(t, dir, lines);
  assert.equal(existsSync(leftover), false, 'what a cut write of the cache left is removed');
  assert.equal(await store.declareFields!(FIELDS), undefined);
  assert.deepEqual(lines, [
    `users-server: read the indexes from ${INDEX_CACHE_FILE}, 0 users written since entered again`,
  ]);
  assert.deepEqual(await answers(store), await builtAnswers(t, dir));
  const taken = await store.putUser({
    ref: alias(1000),
    body: { email: String(userBody(1, 0).email).toUpperCase() },
    preconditions: NONE,
    policy: POLICY,
    now: T0,
  });
  assert.equal(taken.kind, 'unique-violation');
});

test('after a crash, the users written since the cache are entered again: changed, removed and new ones', async (t) => {
  const dir = await cachedDir(t);
  const store = await open(t, dir);
  assert.equal(await store.declareFields!(FIELDS), undefined);
  for (let n = 1; n <= 300; n += 10) await write(store, n, 1);
  for (let n = 301; n <= 320; n++) await write(store, n, 1);
  for (let n = 2; n <= 300; n += 37)
    assert.equal((await store.deleteUser({ ref: alias(n), preconditions: NONE, policy: POLICY })).kind, 'deleted');
  // The directory as a kill -9 leaves it: every write durable, the cache as the last close wrote it.
  const crashed = tempDir(t);
  cpSync(dir, crashed, { recursive: true });
  const lines: string[] = [];
  const reopened = await open(t, crashed, lines);
  assert.equal(await reopened.declareFields!(FIELDS), undefined);
  assert.match(lines.join('\n'), /read the indexes from index-cache, 58 users written since entered again/);
  assert.deepEqual(await answers(reopened), await builtAnswers(t, crashed));
});

test('a damaged cache, one from another data directory, a cut one and one of other declarations are not taken', async (t) => {
  const dir = await cachedDir(t);
  const cache = readFileSync(join(dir, INDEX_CACHE_FILE));
  const expected = await builtAnswers(t, dir);
  const flipped = Buffer.from(cache);
  flipped[flipped.length - 12]! ^= 0x20;
  // Fewer users of other values: its journal ends inside a record of this one's.
  const other = await cachedDir(t, 280, 5);
  const twin = await cachedDir(t, 300, 0, true);
  const cachePath = (copy: string) => join(copy, INDEX_CACHE_FILE);
  const cases: [string, (copy: string) => void, RegExp][] = [
    ['a flipped bit', (copy) => writeFileSync(cachePath(copy), flipped), /fails its checksum/],
    ['a cut file', (copy) => writeFileSync(cachePath(copy), cache.subarray(0, cache.length - 8)), /fails its checksum/],
    ['another directory', (copy) => cpSync(cachePath(other), cachePath(copy)), /no longer run through/],
    ['a twin directory', (copy) => cpSync(cachePath(twin), cachePath(copy)), /written over other data files/],
    [
      'a header of wrong shapes, its checksum made again',
      (copy) =>
        writeFileSync(
          cachePath(copy),
          withHeader(cache, (h) => ({ ...h, point: null })),
        ),
      /another version/,
    ],
    [
      'lists longer than the file, checksum made again',
      (copy) =>
        writeFileSync(
          cachePath(copy),
          withHeader(cache, (h) => ({
            ...h,
            indexes: h.indexes.map((i) => ({
              ...i,
              lists: i.lists.map((segments) => segments.map((l) => ({ ...l, entries: l.entries + 1e6 }))),
            })),
          })),
        ),
      /do not add up/,
    ],
    [
      'a link to a device',
      (copy) => (rmSync(cachePath(copy)), symlinkSync('/dev/zero', cachePath(copy))),
      /cannot be read/,
    ],
  ];
  for (const [what, spoil, says] of cases) {
    const copy = tempDir(t);
    cpSync(dir, copy, { recursive: true });
    spoil(copy);
    const lines: string[] = [];
    const spoiled = await open(t, copy, lines);
    assert.equal(await spoiled.declareFields!(FIELDS), undefined);
    assert.match(lines.join('\n'), says, what);
    assert.equal(existsSync(cachePath(copy)), false, `${what}: the cache is removed`);
    assert.deepEqual(await answers(spoiled), expected, what);
    await spoiled.close();
  }
  const lines: string[] = [];
  const redeclared = await open(t, dir, lines);
  const sensitive = [{ ...FIELDS[0]!, caseInsensitive: false }];
  assert.equal(await redeclared.declareFields!(sensitive), undefined);
  assert.deepEqual(lines, [], 'a field declared otherwise is built');
  const email = String(userBody(3, 0).email);
  const found = async (value: string) =>
    (await redeclared.findUsers(query(`email eq ${JSON.stringify(value)}`, undefined))).items.map(
      (j) => JSON.parse(j).id,
    );
  assert.deepEqual(await found(email), [3]);
  assert.deepEqual(await found(email.toLowerCase()), []);
});

test('node bin/users-server.js: a stop keeps the indexes, the next start reads them, and after kill -9 the writes since are found', async (t) => {
  const data = tempDir(t);
  const started = async () => spawnServer(t, ['--port', '0', '--data', data]);
  const findEmail = async (url: string, email: string) => {
    const reply = await send(url, 'GET', `/users?${new URLSearchParams({ filter: `email eq "${email}"` })}`);
    assert.equal(reply.status, 200, reply.text);
    return (reply.json() as { items: { name: string }[] }).items.map((u) => u.name);
  };
  let server = await started();
  for (const name of ['Ann', 'Bob', 'Cy'])
    assert.equal(
      (await send(server.url, 'POST', '/users/new', { json: { name, email: `${name}@Example.org` } })).status,
      201,
    );
  const added = await runUsersServer(['index', 'add', 'email', '--unique', '--case-insensitive', '--data', data]);
  assert.equal(added.code, 0, added.stderr);
  server.kill('SIGTERM');
  assert.equal((await server.exited).code, 0);
  assert.ok(existsSync(join(data, INDEX_CACHE_FILE)), 'the stop wrote the cache');

  server = await started();
  assert.match(
    server.stderr() + server.stdout(),
    /read the indexes from index-cache, 0 users written since entered again/,
  );
  assert.deepEqual(await findEmail(server.url, 'bob@example.org'), ['Bob']);
  assert.equal(
    (await send(server.url, 'PUT', '/users/2', { json: { name: 'Bob', email: 'robert@example.org' } })).status,
    200,
  );
  assert.equal(
    (await send(server.url, 'POST', '/users/new', { json: { name: 'Dee', email: 'bob@example.org' } })).status,
    201,
  );
  server.kill('SIGKILL');
  await server.exited;

  server = await started();
  assert.match(
    server.stderr() + server.stdout(),
    /read the indexes from index-cache, 2 users written since entered again/,
  );
  assert.deepEqual(await findEmail(server.url, 'BOB@example.org'), ['Dee']);
  assert.deepEqual(await findEmail(server.url, 'robert@example.org'), ['Bob']);
  const taken = await send(server.url, 'POST', '/users/new', { json: { name: 'Eve', email: 'Robert@example.org' } });
  assert.equal(taken.status, 409, taken.text);
});

test('a value made shared by a run that did not declare the field, then kill -9: the next start refuses it as a build does', async (t) => {
  const dir = await cachedDir(t);
  const run = await open(t, dir);
  assert.equal(await run.declareFields!([]), undefined);
  for (const [n, email] of [
    [1, 'dup@example.org'],
    [2, 'DUP@example.org'],
  ] as const) {
    const outcome = await run.putUser({ ref: alias(n), body: { email }, preconditions: NONE, policy: POLICY, now: T0 });
    assert.equal(outcome.kind, 'replaced');
  }
  const crashed = tempDir(t);
  cpSync(dir, crashed, { recursive: true });
  const fresh = tempDir(t);
  cpSync(dir, fresh, { recursive: true });
  rmSync(join(fresh, INDEX_CACHE_FILE));
  const lines: string[] = [];
  const cached = await open(t, crashed, lines);
  const refusal = await cached.declareFields!(FIELDS);
  assert.match(lines.join('\n'), /read the indexes from index-cache, 2 users written since/);
  assert.match(String(refusal), /email cannot be unique: .*"dup@example\.org" \(users 1, 2\)/);
  assert.equal(refusal, await (await open(t, fresh)).declareFields!(FIELDS));
});

test('a compaction keeps the indexes at the journal it starts: after kill -9, the next start reads them and enters the users written since', async (t) => {
  const dir = await cachedDir(t);
  let kept: () => void;
  const keptAtCompaction = new Promise<void>((resolve) => (kept = resolve));
  let done = false;
  void keptAtCompaction.then(() => (done = true));
  const run = await openStore('journal', dir, {
    compactionFloor: 4096,
    log: (line) => /kept the indexes of 3 fields in index-cache/.test(line) && kept(),
    onFatal: () => {},
  });
  t.after(() => run.close());
  assert.equal(await run.declareFields!(FIELDS), undefined);
  for (let round = 1; !done; round++) for (let n = 1; n <= 300 && !done; n += 2) await write(run, n, round);
  await keptAtCompaction;
  for (let n = 2; n <= 10; n += 2) await write(run, n, 99);
  const crashed = tempDir(t);
  cpSync(dir, crashed, { recursive: true });
  const after: string[] = [];
  const reopened = await open(t, crashed, after);
  assert.equal(await reopened.declareFields!(FIELDS), undefined);
  assert.match(after.join('\n'), /read the indexes from index-cache, \d+ users written since entered again/);
  assert.deepEqual(await answers(reopened), await builtAnswers(t, crashed));
});
