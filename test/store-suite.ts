/**
 * The store suite: every store implementation, through the Store interface
 * alone (server/store/store.ts), answers every operation as the rules of
 * API.md say. A store kind joins by adding an entry to STORE_KINDS and a
 * test/store-suite-*.test.ts that calls `storeSuite` with its name; durable
 * kinds also show that a reopened store holds everything acknowledged.
 * A file per kind, so that npm test runs the kinds in parallel.
 */
import assert from 'node:assert/strict';
import { describe, test, type TestContext } from 'node:test';
import { openStore, type StoreOptions } from '../server/store/open-store.js';
import {
  DEFAULT_CHANGES_RETENTION_MS,
  type ApiTokenRecord,
  type ChangePage,
  type Created,
  type FoundPage,
  type Lookup,
  type Reserved,
  type Store,
  type UserQuery,
} from '../server/store/store.js';
import type { KeyedRequest } from '../server/store/kept-answer.js';
import { entityTag } from '../server/users/entity-tag.js';
import { matches } from '../server/users/filter-match.js';
import { parseFilter } from '../server/users/filter-parse.js';
import { changeDeclarations } from '../server/store/postgres/declared-fields.js';
import { changeSchema } from '../server/store/postgres/user-schema.js';
import { UserSchema, type SchemaSetting } from '../server/users/user-schema.js';
import type { PostgresStore } from '../server/store/postgres/postgres-store.js';
import type { FieldDeclaration } from '../server/users/declared-fields.js';
import type { Preconditions, StoredUser, UserRef, WritePolicy } from '../server/users/rules.js';
import { compareSortEntries, parseSort, sortValuesOf } from '../server/users/sort.js';
import { tempDir } from './helpers.js';
import { pgbouncerDatabase, pgbouncerSkipReason } from './pgbouncer.js';
import { postgresSkipReason, testDatabase } from './postgres.js';

interface Opened {
  store: Store;
  /** Durable kinds: closes the store and opens it again on the same data. */
  reopen?: () => Promise<Store>;
}

interface StoreKind {
  name: string;
  /** `options`: what a test sets besides the kind's own (the budget of a find, say). */
  open(t: TestContext, options?: Partial<StoreOptions>): Promise<Opened>;
  /**
   * A kind that runs another kind's statements through other connections
   * (a pool replaced, a pooler): the find matrices, which check the
   * statements' answers, take a sample of their cases there.
   */
  sampled?: boolean;
  /** The kind opens a connection every few statements. */
  connecting?: boolean;
}

/** Every case, or every fourth of a sampled kind. */
function casesFor<T>(kind: StoreKind, cases: readonly T[]): readonly T[] {
  return kind.sampled === true ? cases.filter((_, i) => i % 4 === 0) : cases;
}

/** The page sizes of a find matrix: one user a page asks for a statement per user, which a sampled kind leaves out. */
function limitsFor<T extends number | readonly [number, boolean]>(kind: StoreKind, limits: readonly T[]): readonly T[] {
  return kind.sampled === true ? limits.filter((l) => (typeof l === 'number' ? l : l[0]) !== 1) : limits;
}

const quiet = { log: () => {}, onFatal: () => {} };

/** A kind that opens a store of `spec` on a fresh place per test (`where`), closed after it. */
function durableKind(
  name: string,
  where: (t: TestContext) => Promise<{ spec: string; dir: string }>,
  options: Partial<StoreOptions> = {},
): StoreKind {
  return {
    name,
    open: async (t, extra = {}) => {
      const { spec, dir } = await where(t);
      let store = await openStore(spec, dir, { ...quiet, ...options, ...extra });
      t.after(() => store.close());
      return {
        store,
        reopen: async () => {
          await store.close();
          store = await openStore(spec, dir, { ...quiet, ...options, ...extra });
          return store;
        },
      };
    },
  };
}

const STORE_KINDS: StoreKind[] = [
  {
    name: 'memory',
    open: async (_t, extra = {}) => ({ store: await openStore('memory', '', { ...quiet, ...extra }) }),
  },
  durableKind('journal', async (t) => ({ spec: 'journal', dir: tempDir(t) })),
  // Compaction as soon as the journal holds a few bytes: snapshots keep everything, the feed of changes included.
  durableKind('journal, compacting early', async (t) => ({ spec: 'journal', dir: tempDir(t) }), { compactionFloor: 1 }),
];
/** Kinds this machine cannot run, with the reason. */
const SKIPPED = new Map<string, string>();
const postgresSkip = postgresSkipReason();
// The suite checks outcomes, not deadlines: on a loaded machine a statement that waits behind 31 others'
// locks (32 creates at once) can pass the default 5 s, which is about a single slow statement.
const SUITE_DB_TIMEOUT_SECONDS = 60;
if (postgresSkip === undefined) {
  const database = async (t: TestContext) => ({ spec: await testDatabase(t), dir: tempDir(t) });
  STORE_KINDS.push(durableKind('postgres', database, { postgres: { timeoutSeconds: SUITE_DB_TIMEOUT_SECONDS } }));
  // The driver's pool replaced every 3 queries (driver.ts, RECYCLE_AFTER): every operation holds
  // across a replacement, transactions included.
  STORE_KINDS.push({
    ...durableKind('postgres, pool replaced every 3 queries', database, {
      postgres: { recycleAfter: 3, timeoutSeconds: SUITE_DB_TIMEOUT_SECONDS },
    }),
    sampled: true,
  });
} else
  for (const name of ['postgres', 'postgres, pool replaced every 3 queries'])
    SKIPPED.set(name, `PostgreSQL skipped: ${postgresSkip}`);
const pgbouncerSkip = pgbouncerSkipReason();
if (pgbouncerSkip === undefined)
  STORE_KINDS.push({
    ...durableKind(
      'postgres through pgbouncer, transaction pooling',
      async (t) => ({ spec: await pgbouncerDatabase(t), dir: tempDir(t) }),
      { postgres: { timeoutSeconds: SUITE_DB_TIMEOUT_SECONDS } },
    ),
    sampled: true,
  });
else
  SKIPPED.set(
    'postgres through pgbouncer, transaction pooling',
    `PostgreSQL through pgbouncer skipped: ${pgbouncerSkip}`,
  );

const T0 = Date.parse('2026-01-01T00:00:00Z');
const NO_PRECONDITIONS: Preconditions = { ifMatch: undefined, ifNoneMatch: undefined };
const DEFAULT_POLICY: WritePolicy = { allowIdChange: false, requireIfMatch: false };
const alias = (name: string): UserRef => ({ kind: 'alias', alias: name });
const id = (n: number): UserRef => ({ kind: 'id', id: n });

function put(
  store: Store,
  ref: UserRef,
  body: Record<string, unknown>,
  options: { pre?: Partial<Preconditions>; policy?: Partial<WritePolicy>; now?: number } = {},
) {
  return store.putUser({
    ref,
    body,
    preconditions: { ...NO_PRECONDITIONS, ...options.pre },
    policy: { ...DEFAULT_POLICY, ...options.policy },
    now: options.now ?? T0,
  });
}

/**
 * The answer a keyed create gets, as the HTTP layer builds it (routes/users.ts); the store keeps whatever it is given.
 */
function createdAnswer(created: Created) {
  return { status: 201, body: created.user.json, location: `/users/${created.user.id}` };
}

const createKey = (key: string, fingerprint: string): KeyedRequest<Created> => ({
  key,
  fingerprint,
  answerOf: createdAnswer,
});

const reserveKey = (key: string, fingerprint: string): KeyedRequest<Reserved> => ({
  key,
  fingerprint,
  answerOf: (r) => ({
    status: 201,
    body: JSON.stringify({ id: r.id, expiresAt: r.expiresAt }),
    location: `/users/${r.id}`,
  }),
});

function reserve(store: Store, now = T0, max = 10) {
  return store.reserveId({ idempotency: undefined, now, ttlMs: 300_000, max });
}

function userOf(found: Lookup): StoredUser {
  assert.ok(found !== undefined && !('kind' in found), `expected a user, got ${JSON.stringify(found)}`);
  return found;
}

// ------------------------------------------------------------ finding users

/**
 * Users whose members are of every kind a filter and a sort meet: numbers, strings, booleans, null, missing, arrays,
 * objects.
 */
const FINDABLE: Record<string, unknown>[] = [
  { name: 'Ann', age: 41, team: 'red', tags: ['admin', 'staff'] },
  { name: 'bob', age: 29, team: 'blue' },
  { name: 'Cy', age: '29', team: 'red' },
  { name: 'Dee', team: 'red', age: null },
  { name: 'Eve', age: 35, team: 'green', tags: [] },
  { name: 'Fay', age: 52, team: 'red', address: { city: 'Paris' } },
  { name: 'Gus', age: true },
  { name: 'Hal', age: 29.5, address: { city: 'Lyon' }, team: 'blue' },
  { name: 'Ida', age: false, tags: ['staff'] },
  { name: '\u{1F600}', age: -3 },
  { name: '\uFFFD', age: [1] },
  { name: 'Jo', age: { n: 1 }, team: 'red' },
];

/**
 * FINDABLE `rounds` times over (ids 1..12*rounds); every other user is created through an alias, the others by POST
 * /users/new.
 */
async function storeFindable(store: Store, rounds: number): Promise<void> {
  for (let round = 0; round < rounds; round++)
    for (const [i, body] of FINDABLE.entries()) {
      const n = round * FINDABLE.length + i + 1;
      const outcome =
        n % 2 === 0
          ? await put(store, alias(`u${n}`), body)
          : await store.createUser({ body, idempotency: undefined, now: T0 });
      assert.equal(outcome.kind, 'created');
    }
}

/** A query of findUsers from the texts a client sends. */
function findQuery(filter: string | undefined, sort: string | undefined, limit: number, count = false): UserQuery {
  const parsedFilter = filter === undefined ? undefined : parseFilter(filter);
  if (parsedFilter !== undefined && !parsedFilter.ok) assert.fail(parsedFilter.detail);
  const parsedSort = sort === undefined ? undefined : parseSort(sort);
  if (parsedSort !== undefined && !parsedSort.ok) assert.fail(parsedSort.detail);
  return { filter: parsedFilter?.filter, sort: parsedSort?.keys ?? [], after: undefined, limit, count };
}

/** Every page of `query`, each from the `next` of the one before, until none follows. */
async function findAll(store: Store, query: UserQuery): Promise<FoundPage[]> {
  const pages: FoundPage[] = [];
  for (let after = query.after; ;) {
    const page = await store.findUsers({ ...query, after });
    pages.push(page);
    if (page.next === undefined) return pages;
    assert.ok(pages.length < 500, 'next never ends');
    after = page.next;
  }
}

const idsOf = (pages: readonly FoundPage[]) => pages.flatMap((p) => p.items.map((j) => JSON.parse(j).id as number));

/** The ids the definitions give (filter-match.ts, sort.ts): every user that matches, in the sort's order. */
async function definedIds(store: Store, query: UserQuery, folded: ReadonlySet<string> = new Set()): Promise<number[]> {
  const users = (await store.listUsers(0, 1000)).items.map((j) => JSON.parse(j) as { id: number });
  return users
    .filter((u) => query.filter === undefined || matches(query.filter, u, folded))
    .map((u) => ({ id: u.id, values: sortValuesOf(u, query.sort, folded) }))
    .sort((a, b) => compareSortEntries(a, b, query.sort))
    .map((e) => e.id);
}

const FIND_CASES: { filter?: string; sort?: string }[] = [
  { sort: 'age' },
  { sort: '-age,name' },
  { filter: 'team eq "red"' },
  { filter: 'team eq "red"', sort: '-age' },
  { filter: 'age ge 29 and age le 41', sort: 'name' },
  { filter: 'tags eq "staff" or address.city pr', sort: '-name' },
  { filter: 'not (team pr)' },
  { filter: 'name gt "E"', sort: 'name' },
  { filter: 'age ne 29', sort: 'team,-name' },
  {},
];

/** Declares `fields` on a store as `users-server index add` does; a refusal is its sentence. */
async function declare(store: Store, fields: FieldDeclaration[]): Promise<string | undefined> {
  if (store.declareFields !== undefined) return store.declareFields(fields);
  const database = store as PostgresStore;
  const { refused } = await changeDeclarations(database.sql, () => fields);
  // What the poll would do within half a second.
  await database.refreshFields();
  return refused;
}

/** A schema with the keywords every validator applies: a string email, required; an integer age. */
const USER_SCHEMA = {
  type: 'object',
  required: ['email'],
  properties: { email: { type: 'string', maxLength: 40 }, age: { type: 'integer' } },
};

/** Sets the schema on a store as `users-server schema set` does (null removes it); a refusal is its sentence. */
async function setSchema(store: Store, setting: SchemaSetting | null): Promise<string | undefined> {
  if (store.setUserSchema !== undefined)
    return store.setUserSchema(setting === null ? undefined : new UserSchema(setting), true);
  const database = store as PostgresStore;
  const { refused } = await changeSchema(database.sql, () => setting);
  await database.refreshFields();
  return refused;
}

const field = (path: string, flags: Partial<FieldDeclaration> = {}): FieldDeclaration => ({
  path,
  unique: false,
  caseInsensitive: false,
  ...flags,
});

/** Queries an index serves: a condition on a declared path, or a sort that starts with one. */
const INDEXED_CASES: { filter?: string; sort?: string }[] = [
  { filter: 'age eq 29' },
  { filter: 'team eq "RED"' },
  { filter: 'team sw "r" and age gt 30' },
  { filter: 'name ge "Cy"', sort: '-age' },
  { filter: 'age lt 35' },
  { filter: 'age le "29"' },
  { filter: 'tags eq "staff"', sort: 'name' },
  { filter: 'address.city sw "P"' },
  { filter: 'age eq true' },
  { sort: 'age' },
  { sort: '-age' },
  { sort: '-team,name' },
  { sort: 'team,-age' },
  { sort: 'name', filter: 'age pr' },
  { sort: '-name', filter: 'not (team eq "red")' },
];

/**
 * Tests of one kind at once: each has its own store (a database of its own
 * on PostgreSQL), and most of their time is waiting on it. A kind that
 * opens connections all the time (`connecting`) runs one at a time: at
 * once, their openings queue past the connect timeout on a loaded machine.
 */
const CONCURRENT_TESTS = 3;

/** The suite, for the kinds named (a kind this machine skips, PostgreSQL without its binaries say, runs nothing). */
export function storeSuite(...names: string[]): void {
  for (const name of names) {
    const skipped = SKIPPED.get(name);
    if (skipped !== undefined) console.log(`# store suite: ${skipped}`);
    else if (!STORE_KINDS.some((k) => k.name === name)) throw new Error(`no store kind named ${name}`);
  }
  for (const kind of STORE_KINDS.filter((k) => names.includes(k.name)))
    describe(`store (${kind.name})`, { concurrency: kind.connecting === true ? 1 : CONCURRENT_TESTS }, () => {
      const name = (what: string) => `store (${kind.name}): ${what}`;

      test(
        name('a PUT to an unbound alias creates the next id, binds the alias, and both references find it'),
        async (t) => {
          const { store } = await kind.open(t);
          const first = await put(store, alias('ann'), { name: 'Ann' });
          assert.equal(first.kind, 'created');
          const second = await put(store, alias('bob'), { name: 'Bob' });
          assert.deepEqual(
            [first, second].map((o) => ('user' in o ? o.user.id : 0)),
            [1, 2],
          );
          const byAlias = userOf(await store.findUser(alias('ann')));
          const byId = userOf(await store.findUser(id(1)));
          assert.equal(byAlias.json, '{"name":"Ann","id":1}');
          assert.equal(byId.json, byAlias.json);
          assert.equal(await store.findUser(id(3)), undefined);
        },
      );

      test(
        name('a replace keeps the id and alias, and the entity tag is the hash of the representation'),
        async (t) => {
          const { store } = await kind.open(t);
          await put(store, alias('ann'), { name: 'Ann' });
          const replaced = await put(store, alias('ann'), { name: 'Anne', tags: ['x'] });
          assert.equal(replaced.kind, 'replaced');
          const user = userOf(await store.findUser(id(1)));
          assert.equal(user.json, '{"name":"Anne","tags":["x"],"id":1}');
          assert.equal(user.alias, 'ann');
          assert.equal(user.etag ?? entityTag(user.json), entityTag(user.json));
        },
      );

      test(
        name('If-Match, If-None-Match and require-if-match are decided in the store, and a refusal changes nothing'),
        async (t) => {
          const { store } = await kind.open(t);
          await put(store, alias('ann'), { name: 'Ann' });
          const tag = entityTag('{"name":"Ann","id":1}');
          assert.equal(
            (await put(store, id(1), { name: 'X' }, { pre: { ifMatch: '"nope"' } })).kind,
            'precondition-failed',
          );
          assert.equal(
            (await put(store, id(1), { name: 'X' }, { pre: { ifNoneMatch: '*' } })).kind,
            'precondition-failed',
          );
          assert.equal(
            (await put(store, id(1), { name: 'X' }, { policy: { requireIfMatch: true } })).kind,
            'precondition-required',
          );
          assert.equal(
            (
              await store.deleteUser({
                ref: id(1),
                preconditions: { ...NO_PRECONDITIONS, ifMatch: '"nope"' },
                policy: DEFAULT_POLICY,
              })
            ).kind,
            'precondition-failed',
          );
          assert.equal(userOf(await store.findUser(id(1))).json, '{"name":"Ann","id":1}');
          assert.equal(
            (await put(store, id(1), { name: 'Y' }, { pre: { ifMatch: tag }, policy: { requireIfMatch: true } })).kind,
            'replaced',
          );
          assert.equal(
            (await put(store, alias('new-one'), { name: 'Z' }, { pre: { ifMatch: tag } })).kind,
            'precondition-failed',
          );
          assert.equal(await store.findUser(alias('new-one')), undefined);
          // A list of tags, a weak tag (never matches If-Match), `*`, and the body's own id.
          const current = entityTag('{"name":"Y","id":1}');
          assert.equal(
            (await put(store, id(1), { name: 'X' }, { pre: { ifMatch: `W/${current}` } })).kind,
            'precondition-failed',
          );
          assert.equal(
            (await put(store, id(1), { name: 'X' }, { pre: { ifMatch: `"a", ${current}` } })).kind,
            'replaced',
          );
          assert.equal((await put(store, id(1), { name: 'W', id: 1 }, { pre: { ifMatch: '*' } })).kind, 'replaced');
          assert.equal((await put(store, id(2), { name: 'V' }, { pre: { ifMatch: '*' } })).kind, 'not-found');
          const replaced = await put(
            store,
            id(1),
            { name: 'V' },
            { pre: { ifMatch: entityTag('{"name":"W","id":1}') } },
          );
          assert.equal(replaced.kind === 'replaced' && replaced.user.alias, 'ann');
          assert.equal(userOf(await store.findUser(alias('ann'))).json, '{"name":"V","id":1}');
        },
      );

      test(
        name('an id is created only under a live reservation: never issued is not-found, expired or deleted is gone'),
        async (t) => {
          const { store } = await kind.open(t);
          assert.equal((await put(store, id(1), { name: 'A' })).kind, 'not-found');
          const reserved = await reserve(store);
          assert.equal(reserved.kind, 'reserved');
          assert.ok(reserved.kind === 'reserved');
          assert.equal(reserved.id, 1);
          assert.equal(reserved.expiresAt, T0 + 300_000);
          assert.equal((await put(store, id(1), { name: 'A' })).kind, 'created');
          assert.equal((await put(store, id(1), { name: 'B' })).kind, 'replaced');
          assert.equal(
            (await store.deleteUser({ ref: id(1), preconditions: NO_PRECONDITIONS, policy: DEFAULT_POLICY })).kind,
            'deleted',
          );
          assert.equal(await store.findUser(id(1)), undefined);
          assert.equal((await put(store, id(1), { name: 'C' })).kind, 'gone');
          await reserve(store);
          assert.equal((await put(store, id(2), { name: 'late' }, { now: T0 + 300_001 })).kind, 'gone');
        },
      );

      test(
        name('a deleted user releases its alias, its id is never reused, and a second delete is not-found'),
        async (t) => {
          const { store } = await kind.open(t);
          await put(store, alias('ann'), { name: 'Ann' });
          await store.deleteUser({ ref: alias('ann'), preconditions: NO_PRECONDITIONS, policy: DEFAULT_POLICY });
          assert.equal(
            (await store.deleteUser({ ref: alias('ann'), preconditions: NO_PRECONDITIONS, policy: DEFAULT_POLICY }))
              .kind,
            'not-found',
          );
          const again = await put(store, alias('ann'), { name: 'Ann again' });
          assert.ok(again.kind === 'created');
          assert.equal(again.user.id, 2);
        },
      );

      test(
        name(
          'an id in the body: equal is accepted, different is id-conflict, and with id change the user moves and old ids redirect',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          await put(store, alias('ann'), { name: 'Ann' });
          assert.equal((await put(store, id(1), { name: 'Ann', id: 1 })).kind, 'replaced');
          assert.equal((await put(store, id(1), { name: 'Ann', id: 7 })).kind, 'id-conflict');
          const moved = await put(store, id(1), { name: 'Ann', id: 7 }, { policy: { allowIdChange: true } });
          assert.ok(moved.kind === 'moved');
          assert.equal(moved.user.id, 7);
          await put(store, id(7), { name: 'Ann', id: 9 }, { policy: { allowIdChange: true } });
          assert.deepEqual(await store.findUser(id(1)), { kind: 'old-id', currentId: 9 });
          assert.equal(await store.movedTo(7), 9);
          assert.equal(await store.movedTo(9), undefined);
          assert.equal(userOf(await store.findUser(alias('ann'))).id, 9);
          assert.equal(
            (await put(store, id(9), { name: 'Ann', id: 7 }, { policy: { allowIdChange: true } })).kind,
            'id-conflict',
            'an issued id cannot be moved to',
          );
          assert.deepEqual(await put(store, id(1), { name: 'x' }), { kind: 'old-id', currentId: 9 });
        },
      );

      test(
        name(
          '30 creates, 30 alias PUTs and 30 replaces at once all succeed, with 60 different ids, every user reads back as written, and 121 reads at once each find their own',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          const created = Promise.all(
            Array.from({ length: 30 }, (_, i) =>
              store.createUser({ body: { name: `c${i}` }, idempotency: undefined, now: T0 }),
            ),
          );
          const aliased = Promise.all(
            Array.from({ length: 30 }, (_, i) => put(store, alias(`a${i}`), { name: `a${i}` })),
          );
          const ids = [
            ...(await created).map((c) => (c.kind === 'created' ? c.user.id : -1)),
            ...(await aliased).map((p) => ('user' in p ? p.user.id : -1)),
          ];
          assert.equal(new Set(ids).size, 60);
          assert.ok(ids.every((n) => n > 0));
          const replaced = await Promise.all(ids.slice(0, 30).map((n, i) => put(store, id(n), { name: `r${i}` })));
          assert.ok(
            replaced.every((r) => r.kind === 'replaced'),
            JSON.stringify(replaced.find((r) => r.kind !== 'replaced')),
          );
          for (const [i, n] of ids.slice(0, 30).entries())
            assert.equal(userOf(await store.findUser(id(n))).json, JSON.stringify({ name: `r${i}`, id: n }));
          // Read all at once (one statement on PostgreSQL: GatheredStatements), each id twice, with a moved id and one
          // never issued.
          assert.equal(
            (await put(store, id(ids[0]!), { name: 'r0', id: 500 }, { policy: { allowIdChange: true } })).kind,
            'moved',
          );
          const wanted = [...ids, ...ids, 999];
          const found = await Promise.all(wanted.map((n) => store.findUser(id(n))));
          assert.deepEqual(found[0], { kind: 'old-id', currentId: 500 });
          assert.equal(found.at(-1), undefined);
          for (const [i, n] of wanted.slice(0, -1).entries()) {
            if (n === ids[0]) continue;
            assert.equal(userOf(found[i]!).id, n);
          }
        },
      );

      test(
        name(
          'replaces at once: of one tag, exactly one wins; each keeps its own alias and outcome, beside refusals, moves and unknown ids',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          for (const n of ['a', 'b', 'c', 'd', 'e', 'f']) await put(store, alias(n), { name: n });
          assert.equal(
            (await put(store, id(6), { name: 'f', id: 60 }, { policy: { allowIdChange: true } })).kind,
            'moved',
          );
          const tagOf1 = entityTag('{"name":"a","id":1}');
          // On PostgreSQL these are sent while others are under way, so most share a statement:
          // ten conditional replaces of user 1 on one tag, five unconditional of user 2, one of each other kind.
          const outcomes = await Promise.all([
            ...Array.from({ length: 10 }, (_, i) =>
              put(store, id(1), { name: `one-${i}` }, { pre: { ifMatch: tagOf1 } }),
            ),
            ...Array.from({ length: 5 }, (_, i) => put(store, id(2), { name: `two-${i}` })),
            put(store, id(3), { name: 'three' }, { pre: { ifMatch: '"stale"' } }),
            put(store, id(4), { name: 'four' }, { pre: { ifMatch: `"x", ${entityTag('{"name":"d","id":4}')}` } }),
            put(store, id(5), { name: 'five' }),
            put(store, id(6), { name: 'six' }),
            put(store, id(99), { name: 'never issued' }, { pre: { ifMatch: '*' } }),
          ]);
          const ones = outcomes.slice(0, 10);
          const winners = ones.filter((o) => o.kind === 'replaced');
          assert.equal(winners.length, 1, JSON.stringify(ones.map((o) => o.kind)));
          assert.ok(ones.every((o) => o.kind === 'replaced' || o.kind === 'precondition-failed'));
          assert.equal(
            userOf(await store.findUser(id(1))).json,
            winners[0]!.kind === 'replaced' ? winners[0]!.user.json : '',
          );
          assert.ok(outcomes.slice(10, 15).every((o) => o.kind === 'replaced' && o.user.alias === 'b'));
          const two = userOf(await store.findUser(id(2)));
          assert.match(two.json, /^\{"name":"two-\d","id":2\}$/);
          assert.equal(two.etag ?? entityTag(two.json), entityTag(two.json));
          assert.deepEqual(
            outcomes.slice(15).map((o) => o.kind),
            ['precondition-failed', 'replaced', 'replaced', 'old-id', 'not-found'],
          );
          assert.equal(outcomes[16]!.kind === 'replaced' && outcomes[16]!.user.alias, 'd');
          assert.equal(
            userOf(await store.findUser(alias('c'))).json,
            '{"name":"c","id":3}',
            'a refused replace changed nothing',
          );
          assert.equal(userOf(await store.findUser(alias('e'))).json, '{"name":"five","id":5}');
        },
      );

      test(
        name(
          'creates at once, beside a refusal, a reservation and a keyed create, issue each id once with no gap, each answered with its own user',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          // On PostgreSQL the creates without a key share transactions (GatheredStatements); the others run beside
          // them.
          const outcomes = await Promise.all([
            ...Array.from({ length: 12 }, (_, i) =>
              store.createUser({ body: { name: `n${i}` }, idempotency: undefined, now: T0 }),
            ),
            store.createUser({ body: { name: 'x', id: 3 }, idempotency: undefined, now: T0 }),
            store.reserveId({ idempotency: undefined, now: T0, ttlMs: 60_000, max: 10 }),
            store.createUser({ body: { name: 'keyed' }, idempotency: createKey('k', 'f'), now: T0 }),
          ]);
          assert.equal(outcomes[12]!.kind, 'id-conflict', 'a refused create issues no id');
          const issued = outcomes.flatMap((o) =>
            o.kind === 'created' ? [o.user.id] : o.kind === 'reserved' ? [o.id] : [],
          );
          assert.deepEqual(
            [...issued].sort((a, b) => a - b),
            Array.from({ length: 14 }, (_, i) => i + 1),
          );
          for (const [i, o] of outcomes.slice(0, 12).entries()) {
            assert.ok(o.kind === 'created');
            const json = JSON.stringify({ name: `n${i}`, id: o.user.id });
            assert.equal(o.user.json, json);
            assert.equal(userOf(await store.findUser(id(o.user.id))).json, json);
          }
          const next = await store.createUser({ body: { name: 'next' }, idempotency: undefined, now: T0 });
          assert.equal(next.kind === 'created' && next.user.id, 15);
        },
      );

      test(
        name('17,000 creates at once all succeed (on PostgreSQL more than one statement could take as parameters)'),
        async (t) => {
          const { store } = await kind.open(t);
          const outcomes = await Promise.all(
            Array.from({ length: 17_000 }, (_, i) =>
              store.createUser({ body: { name: `n${i}` }, idempotency: undefined, now: T0 }),
            ),
          );
          assert.equal(new Set(outcomes.map((o) => (o.kind === 'created' ? o.user.id : -1))).size, 17_000);
          assert.equal(Math.max(...outcomes.map((o) => (o.kind === 'created' ? o.user.id : -1))), 17_000);
          assert.equal(
            userOf(await store.findUser(id(17_000))).json,
            JSON.stringify({
              name: `n${outcomes.findIndex((o) => o.kind === 'created' && o.user.id === 17_000)}`,
              id: 17_000,
            }),
          );
        },
      );

      test(
        name(
          'createUser assigns the next id, and an Idempotency-Key replays the first answer, refuses another body, and is scoped per operation',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          const key = createKey('k1', 'f1');
          const first = await store.createUser({ body: { name: 'Ann' }, idempotency: key, now: T0 });
          assert.ok(first.kind === 'created');
          assert.equal(first.user.json, '{"name":"Ann","id":1}');
          assert.deepEqual(await store.createUser({ body: { name: 'Ann' }, idempotency: key, now: T0 + 1 }), {
            kind: 'replayed',
            answer: { status: 201, body: '{"name":"Ann","id":1}', location: '/users/1' },
          });
          assert.equal(
            (await store.createUser({ body: undefined, idempotency: key, now: T0 })).kind,
            'replayed',
            'a kept key replays before the body is looked at',
          );
          assert.equal(
            (await store.createUser({ body: { name: 'Bob' }, idempotency: createKey('k1', 'f2'), now: T0 })).kind,
            'idempotency-key-reused',
          );
          assert.equal(
            (await store.createUser({ body: undefined, idempotency: undefined, now: T0 })).kind,
            'invalid-body',
          );
          assert.equal(
            (await store.createUser({ body: { name: 'x', id: 5 }, idempotency: undefined, now: T0 })).kind,
            'id-conflict',
          );
          const reserved = await store.reserveId({
            idempotency: reserveKey('k1', 'f1'),
            now: T0,
            ttlMs: 1000,
            max: 10,
          });
          assert.equal(reserved.kind, 'reserved', 'the same key on POST /reservations is another key');
          assert.equal(
            (await store.createUser({ body: { name: 'Ann' }, idempotency: key, now: T0 + 24 * 3600_000 })).kind,
            'created',
            'a key expires after 24 h',
          );
        },
      );

      test(
        name('reservations are capped; past the cap the refusal says when to retry, and expired ones make room'),
        async (t) => {
          const { store } = await kind.open(t);
          assert.equal((await reserve(store, T0, 2)).kind, 'reserved');
          assert.equal((await reserve(store, T0 + 1000, 2)).kind, 'reserved');
          const refused = await reserve(store, T0 + 2000, 2);
          assert.equal(refused.kind, 'too-many-reservations');
          assert.ok('retryAfter' in refused && refused.retryAfter === 298, JSON.stringify(refused));
          assert.equal((await store.stats(T0 + 2000)).reservations, 2);
          assert.equal((await reserve(store, T0 + 300_001, 2)).kind, 'reserved');
          assert.equal((await store.stats(T0 + 300_001)).reservations, 2);
        },
      );

      test(
        name(
          'reservations at once past the cap: exactly the cap is reserved, each with its own id, beside creates; the rest are refused with when to retry',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          // On PostgreSQL the reservations and the creates without a key each share transactions.
          const [reservations, creates] = await Promise.all([
            Promise.all(Array.from({ length: 15 }, () => reserve(store, T0, 10))),
            Promise.all(
              Array.from({ length: 5 }, (_, i) =>
                store.createUser({ body: { name: `c${i}` }, idempotency: undefined, now: T0 }),
              ),
            ),
          ]);
          const reserved = reservations.flatMap((o) => (o.kind === 'reserved' ? [o] : []));
          assert.equal(reserved.length, 10);
          for (const r of reserved) assert.equal(r.expiresAt, T0 + 300_000);
          for (const refused of reservations.filter((o) => o.kind !== 'reserved')) {
            assert.ok(
              refused.kind === 'too-many-reservations' && 'retryAfter' in refused && refused.retryAfter === 300,
              JSON.stringify(refused),
            );
          }
          const ids = [...reserved.map((r) => r.id), ...creates.map((c) => (c.kind === 'created' ? c.user.id : -1))];
          assert.deepEqual(
            ids.sort((a, b) => a - b),
            Array.from({ length: 15 }, (_, i) => i + 1),
          );
          assert.equal((await store.stats(T0)).reservations, 10);
        },
      );

      test(
        name(
          'listUsers pages in ascending id order, with the aliases of the listed users, and names the last id of a page when more follow',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          for (const n of ['a', 'b', 'c', 'd', 'e']) await put(store, alias(`user-${n}`), { name: n });
          await store.deleteUser({ ref: id(3), preconditions: NO_PRECONDITIONS, policy: DEFAULT_POLICY });
          const first = await store.listUsers(0, 2);
          assert.deepEqual(
            first.items.map((j) => JSON.parse(j).id),
            [1, 2],
          );
          assert.equal(first.next, 2);
          const second = await store.listUsers(2, 2);
          assert.deepEqual(
            second.items.map((j) => JSON.parse(j).id),
            [4, 5],
          );
          assert.equal(second.next, undefined);
          assert.deepEqual(
            first.aliases,
            [
              [1, 'user-a'],
              [2, 'user-b'],
            ],
            "each listed user's alias, with its id",
          );
          assert.deepEqual(second.aliases, [
            [4, 'user-d'],
            [5, 'user-e'],
          ]);
          assert.deepEqual(await store.listUsers(5, 2), { items: [], aliases: [], next: undefined });
          assert.equal((await store.stats(T0)).users, 4);
        },
      );

      test(name('a revoked session stays revoked until it expires, and a sweep drops it after that'), async (t) => {
        const { store } = await kind.open(t);
        assert.equal(await store.isRevoked('s1'), false);
        await store.revokeSessions([{ sessionId: 's1', expiresAt: T0 + 1000 }]);
        assert.equal(await store.isRevoked('s1'), true);
        await store.sweep(T0 + 999);
        assert.equal(await store.isRevoked('s1'), true);
        await store.sweep(T0 + 1000);
        assert.equal(await store.isRevoked('s1'), false);
      });

      test(name('revocation checks and token lookups asked at once each get their own answer'), async (t) => {
        const { store } = await kind.open(t);
        await store.revokeSessions([
          { sessionId: 's1', expiresAt: T0 + 1000 },
          { sessionId: 's3', expiresAt: T0 + 1000 },
        ]);
        const sessions = ['s1', 's2', 's3', 's1', 'missing', "quote'd"];
        assert.deepEqual(await Promise.all(sessions.map((s) => store.isRevoked(s))), [
          true,
          false,
          true,
          true,
          false,
          false,
        ]);
        const token = (id: string, name: string): ApiTokenRecord => ({
          id,
          name,
          role: 'reader',
          hash: 'cd'.repeat(32),
          createdBy: 'admin',
          createdAt: T0,
          expiresAt: undefined,
        });
        const [a, b] = [token('000000000000000a', 'a'), token('000000000000000b', 'b')];
        assert.equal(await store.createToken(a), 'created');
        assert.equal(await store.createToken(b), 'created');
        const found = await Promise.all(
          ['000000000000000b', '000000000000000c', '000000000000000a', '000000000000000b'].map((id) =>
            store.findToken(id),
          ),
        );
        assert.deepEqual(found, [b, undefined, a, b]);
      });

      test(
        name(
          'a durable store reopened holds every acknowledged write: users, aliases, moves, issued ids, reservations, keys, revocations',
        ),
        async (t) => {
          const opened = await kind.open(t);
          if (opened.reopen === undefined) {
            t.skip(`${kind.name} is not durable`);
            return;
          }
          const { store } = opened;
          await put(store, alias('ann'), { name: 'Ann' });
          await put(store, id(1), { name: 'Ann', id: 5 }, { policy: { allowIdChange: true } });
          // Reopening sweeps with the real clock: what must survive is live now.
          const now = Date.now();
          const reserved = await reserve(store, now);
          assert.ok(reserved.kind === 'reserved');
          const created = await store.createUser({
            body: { name: 'Bob' },
            idempotency: createKey('k', 'f'),
            now,
          });
          await store.revokeSessions([{ sessionId: 's1', expiresAt: Date.now() + 60_000 }]);
          await put(store, alias('gone'), { name: 'Gone' });
          await store.deleteUser({ ref: alias('gone'), preconditions: NO_PRECONDITIONS, policy: DEFAULT_POLICY });
          const before = await store.listUsers(0, 100);
          const again = await opened.reopen();
          assert.deepEqual(await again.listUsers(0, 100), before);
          assert.equal(userOf(await again.findUser(alias('ann'))).id, 5);
          assert.deepEqual(await again.findUser(id(1)), { kind: 'old-id', currentId: 5 });
          assert.equal(
            (await put(again, id(reserved.id), { name: 'reserved' }, { now })).kind,
            'created',
            'the reservation survived',
          );
          assert.ok(created.kind === 'created');
          assert.deepEqual(await again.createUser({ body: { name: 'Bob' }, idempotency: createKey('k', 'f'), now }), {
            kind: 'replayed',
            answer: createdAnswer(created),
          });
          assert.equal(await again.isRevoked('s1'), true);
          assert.equal(
            (await put(again, id(4), { name: 'x' }, { now })).kind,
            'gone',
            'the deleted id 4 stays retired',
          );
          const next = await put(again, alias('new'), { name: 'New' });
          assert.ok(next.kind === 'created');
          assert.equal(next.user.id, 6, 'ids continue in turn, past 5, which the move issued');
        },
      );

      test(
        name(
          'changes: puts, a move and a delete in commit order, numbered without a gap, each with its representation; reservations, keys, revocations and tokens are none; kept across a reopen, numbered on',
        ),
        async (t) => {
          const opened = await kind.open(t);
          let { store } = opened;
          let heard = 0;
          const stop = store.onChanges(() => heard++);
          t.after(stop);
          const before = await store.changesAfter(0, 100);
          assert.deepEqual(before, { changes: [], trimmedThrough: 0, lastSeq: 0 });
          await put(store, alias('ann'), { name: 'Ann' });
          await put(store, id(1), { name: 'Anne' });
          await store.createUser({
            body: { name: 'Bob' } as never,
            idempotency: createKey('k', 'f'),
            now: T0,
          });
          await reserve(store);
          await store.revokeSessions([{ sessionId: 's', expiresAt: T0 + 1000 }]);
          await put(store, id(1), { name: 'Anne', id: 40 }, { policy: { allowIdChange: true } });
          await store.deleteUser({ ref: id(2), preconditions: NO_PRECONDITIONS, policy: DEFAULT_POLICY });
          const shape = (page: ChangePage) => page.changes.map(({ at: _at, ...c }) => c);
          const expected = [
            { seq: 1, op: 'put', id: 1, json: '{"name":"Ann","id":1}' },
            { seq: 2, op: 'put', id: 1, json: '{"name":"Anne","id":1}' },
            { seq: 3, op: 'put', id: 2, json: '{"name":"Bob","id":2}' },
            { seq: 4, op: 'move', id: 40, from: 1, json: '{"name":"Anne","id":40}' },
            { seq: 5, op: 'delete', id: 2 },
          ];
          const all = await store.changesAfter(0, 100);
          assert.deepEqual(shape(all), expected);
          assert.equal(all.lastSeq, 5);
          for (const change of all.changes)
            assert.ok(Math.abs(change.at - Date.now()) < 60_000, `a change's time is the clock's: ${change.at}`);
          assert.deepEqual(shape(await store.changesAfter(2, 2)), expected.slice(2, 4), 'pages from any number');
          await new Promise((resolve) => setImmediate(resolve));
          assert.ok(heard >= 1, 'the listener heard of the changes');
          if (opened.reopen !== undefined) {
            store = await opened.reopen();
            assert.deepEqual(shape(await store.changesAfter(0, 100)), expected, 'kept across a reopen');
            await put(store, alias('cy'), { name: 'Cy' });
            const after = await store.changesAfter(5, 100);
            assert.deepEqual(
              shape(after),
              [{ seq: 6, op: 'put', id: 4, json: '{"name":"Cy","id":4}' }],
              'numbered on after a reopen',
            );
          }
        },
      );

      test(
        name(
          'changes: a replace with the representation the user already has is answered as a replace and is no change, by id (with If-Match or without) and by alias; a different one is again',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          const created = await put(store, alias('ann'), { name: 'Ann' });
          assert.ok(created.kind === 'created');
          const tag = entityTag(created.user.json);
          const same = [
            await put(store, id(1), { name: 'Ann' }),
            await put(store, id(1), { name: 'Ann', id: 1 }, { pre: { ifMatch: tag } }),
            await put(store, alias('ann'), { name: 'Ann' }),
          ];
          for (const outcome of same) {
            assert.ok(outcome.kind === 'replaced', JSON.stringify(outcome));
            assert.deepEqual(
              [outcome.user.id, outcome.user.alias, outcome.user.json],
              [1, 'ann', '{"name":"Ann","id":1}'],
            );
          }
          assert.equal(
            (await put(store, id(1), { name: 'Ann' }, { pre: { ifMatch: '"other"' } })).kind,
            'precondition-failed',
            'preconditions still hold',
          );
          assert.equal((await store.changesAfter(0, 100)).lastSeq, 1, 'only the create is a change');
          assert.equal(userOf(await store.findUser(id(1))).etag ?? tag, tag);
          assert.equal((await put(store, id(1), { name: 'Anne' })).kind, 'replaced');
          assert.deepEqual(
            (await store.changesAfter(1, 100)).changes.map((c) => [c.seq, c.op, c.json]),
            [[2, 'put', '{"name":"Anne","id":1}']],
          );
        },
      );

      test(
        name('changes: a sweep past the retention drops the oldest and says through which number; the numbers go on'),
        async (t) => {
          const opened = await kind.open(t);
          let { store } = opened;
          await put(store, alias('ann'), { name: 'Ann' });
          await put(store, alias('bob'), { name: 'Bob' });
          await store.sweep(Date.now() + DEFAULT_CHANGES_RETENTION_MS + 60_000);
          assert.deepEqual(await store.changesAfter(0, 100), { changes: [], trimmedThrough: 2, lastSeq: 2 });
          if (opened.reopen !== undefined) store = await opened.reopen();
          await put(store, alias('cy'), { name: 'Cy' });
          const page = await store.changesAfter(0, 100);
          assert.deepEqual([page.trimmedThrough, page.lastSeq, page.changes.map((c) => c.seq)], [2, 3, [3]]);
        },
      );

      test(
        name(
          'API tokens: created, refused under a taken name, listed oldest first, found by id, revoked once, and (durable kinds) kept across a reopen',
        ),
        async (t) => {
          const opened = await kind.open(t);
          const { store } = opened;
          const token = (id: string, name: string, createdAt: number, expiresAt?: number): ApiTokenRecord => ({
            id,
            name,
            role: 'reader',
            hash: 'ab'.repeat(32),
            createdBy: 'admin',
            createdAt,
            expiresAt,
          });
          const first = token('0000000000000001', 'ci', T0, T0 + 1000);
          const second = { ...token('0000000000000002', 'scraper', T0 + 1), role: 'admin' as const };
          assert.equal(await store.createToken(first), 'created');
          assert.equal(await store.createToken(second), 'created');
          assert.equal(await store.createToken(token('0000000000000003', 'ci', T0 + 2)), 'name-taken');
          assert.deepEqual(await store.listTokens(), [first, second]);
          assert.deepEqual(await store.findToken('0000000000000002'), second);
          assert.equal(await store.findToken('0000000000000003'), undefined);
          if (opened.reopen !== undefined) {
            const again = await opened.reopen();
            assert.deepEqual(await again.listTokens(), [first, second], 'kept across a reopen, expiry included');
            assert.equal(await again.revokeToken('0000000000000001'), true);
            assert.equal(await again.revokeToken('0000000000000001'), false);
            assert.equal(await again.findToken('0000000000000001'), undefined);
            assert.equal(
              await again.createToken(token('0000000000000004', 'ci', T0 + 3)),
              'created',
              "a revoked token's name is free again",
            );
            const reopened = await opened.reopen();
            assert.deepEqual(
              (await reopened.listTokens()).map((x) => x.name),
              ['scraper', 'ci'],
              'the revocation is kept across a reopen',
            );
          } else {
            assert.equal(await store.revokeToken('0000000000000001'), true);
            assert.equal(await store.revokeToken('0000000000000001'), false);
            assert.deepEqual(await store.listTokens(), [second]);
          }
        },
      );

      test(
        name(
          'API tokens: the owner and the token that made one are kept; revoking a token revokes those made with it, and theirs, and no other',
        ),
        async (t) => {
          const opened = await kind.open(t);
          const token = (id: string, parent?: string): ApiTokenRecord => ({
            id,
            name: `t${id}`,
            role: 'admin',
            hash: 'cd'.repeat(32),
            createdBy: 'carol',
            ownerSince: '2026-01-01T00:00:00.000Z',
            createdAt: T0,
            expiresAt: undefined,
            ...(parent && { parent }),
          });
          const chain = [
            token('00000000000000a1'),
            token('00000000000000a2', '00000000000000a1'),
            token('00000000000000a3', '00000000000000a2'),
            token('00000000000000a4', '00000000000000a1'),
            token('00000000000000b1'),
          ];
          for (const t of chain) assert.equal(await opened.store.createToken(t), 'created');
          const store = opened.reopen === undefined ? opened.store : await opened.reopen();
          assert.deepEqual(await store.findToken('00000000000000a3'), chain[2], 'owner and parent kept');
          assert.equal(await store.revokeToken('00000000000000a2'), true);
          assert.deepEqual(
            (await store.listTokens()).map((x) => x.id),
            ['00000000000000a1', '00000000000000a4', '00000000000000b1'],
          );
          assert.equal(await store.revokeToken('00000000000000a1'), true);
          assert.deepEqual(
            (await store.listTokens()).map((x) => x.id),
            ['00000000000000b1'],
          );
          if (opened.reopen !== undefined)
            assert.deepEqual(
              (await (await opened.reopen()).listTokens()).map((x) => x.id),
              ['00000000000000b1'],
              'kept across a reopen',
            );
        },
      );

      test(
        name(
          'findUsers answers every filter and sort as the definitions do, page after page from each next, with the aliases and the total',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          await storeFindable(store, 3);
          for (const c of casesFor(kind, FIND_CASES))
            for (const limit of limitsFor(kind, [1, 5, 100])) {
              const query = findQuery(c.filter, c.sort, limit, true);
              const label = `${JSON.stringify(c)}, limit ${limit}`;
              const wanted = await definedIds(store, query);
              const pages = await findAll(store, query);
              assert.deepEqual(idsOf(pages), wanted, label);
              for (const page of pages) {
                assert.ok(page.items.length <= limit, label);
                assert.equal(page.total, wanted.length, `${label}: total`);
                const listed = page.items.map((j) => JSON.parse(j).id as number);
                assert.deepEqual(
                  page.aliases,
                  listed.filter((n) => n % 2 === 0).map((n) => [n, `u${n}`]),
                  `${label}: aliases`,
                );
              }
              // A sort or a count evaluates every user: every page but the last is full.
              assert.ok(
                pages.slice(0, -1).every((p) => p.items.length === limit),
                label,
              );
              const uncounted = await store.findUsers({ ...query, count: false });
              assert.equal(uncounted.total, undefined, `${label}: no total without count`);
            }
          // Written out once, so that the definitions are not the only judge: descending, the
          // string "29" (strings rank above numbers) comes first; null and an object sort last, by id.
          const red = await store.findUsers(findQuery('team eq "red"', '-age', 100));
          assert.deepEqual(
            red.items.slice(0, 6).map((j) => JSON.parse(j).name),
            ['Cy', 'Cy', 'Cy', 'Fay', 'Fay', 'Fay'],
          );
          assert.deepEqual(
            red.items.slice(-6).map((j) => JSON.parse(j).id),
            [4, 12, 16, 24, 28, 36],
          );
        },
      );

      test(
        name(
          'a filter with no sort and no count examines at most the budget per page: short pages, even empty, with next, and followed to the end every match once',
        ),
        async (t) => {
          const { store } = await kind.open(t, { findBudget: 4 });
          await storeFindable(store, 3);
          const pages = await findAll(store, findQuery('name eq "Gus"', undefined, 100));
          assert.deepEqual(idsOf(pages), [7, 19, 31]);
          assert.ok(pages.length >= 9, `${pages.length} pages: 4 of the 36 users examined per page`);
          assert.ok(
            pages.some((p) => p.items.length === 0 && p.next !== undefined),
            'an empty page that goes on',
          );
          // The limit ends a page before the budget does.
          const first = await store.findUsers(findQuery('team pr', undefined, 2));
          assert.deepEqual(idsOf([first]), [1, 2]);
          assert.deepEqual(first.next, { id: 2, values: [] });
          // A sort evaluates every user, four at a time: its pages are full.
          const sorted = await findAll(store, findQuery('team eq "red"', 'name', 5));
          assert.deepEqual(
            sorted.map((p) => p.items.length),
            [5, 5, 5],
          );
          assert.deepEqual(idsOf(sorted), await definedIds(store, findQuery('team eq "red"', 'name', 5)));
        },
      );

      test(
        name(
          'paging a find gives every user that stays unchanged exactly once, in order, while users are created and deleted between pages',
        ),
        async (t) => {
          const { store } = await kind.open(t, { findBudget: 5 });
          await storeFindable(store, 2);
          for (const c of [{ filter: 'team eq "red"', sort: 'name' }, { filter: 'team eq "red"' }, { sort: '-age' }]) {
            const query = findQuery(c.filter, c.sort, 2);
            const before = await definedIds(store, query);
            const seen: number[] = [];
            let made: number[] = [];
            for (let after = query.after; ;) {
              const page = await store.findUsers({ ...query, after });
              seen.push(...idsOf([page]));
              // Between pages: one red user comes, and every other time the one before it goes.
              const outcome = await store.createUser({
                body: { name: 'New', team: 'red', age: 30 },
                idempotency: undefined,
                now: T0,
              });
              assert.equal(outcome.kind, 'created');
              if ('user' in outcome) made.push(outcome.user.id);
              if (made.length === 2) {
                const gone = await store.deleteUser({
                  ref: id(made[0]!),
                  preconditions: NO_PRECONDITIONS,
                  policy: DEFAULT_POLICY,
                });
                assert.equal(gone.kind, 'deleted');
                made = made.slice(1);
              }
              if (page.next === undefined) break;
              after = page.next;
            }
            const kept = seen.filter((n) => before.includes(n));
            assert.deepEqual(kept, before, JSON.stringify(c));
            assert.equal(new Set(seen).size, seen.length, `${JSON.stringify(c)}: a user listed twice`);
          }
        },
      );

      test(
        name(
          'with fields declared, findUsers answers from their indexes as the definitions do, page after page, case-insensitive fields lowercased',
        ),
        async (t) => {
          const { store } = await kind.open(t, { findBudget: 4 });
          await storeFindable(store, 3);
          const fields = [
            field('age'),
            field('name'),
            field('team', { caseInsensitive: true }),
            field('tags'),
            field('address.city'),
          ];
          assert.equal(await declare(store, fields), undefined);
          assert.deepEqual(
            store.declaredFields(),
            [...fields].sort((a, b) => (a.path < b.path ? -1 : 1)),
            'in path order',
          );
          const folded = new Set(['team']);
          for (const c of casesFor(kind, [...INDEXED_CASES, ...FIND_CASES]))
            for (const [limit, count] of limitsFor(kind, [
              [1, false],
              [5, true],
              [100, false],
            ] as const)) {
              const query = findQuery(c.filter, c.sort, limit, count);
              const label = `${JSON.stringify(c)}, limit ${limit}`;
              const wanted = await definedIds(store, query, folded);
              const pages = await findAll(store, query);
              assert.deepEqual(idsOf(pages), wanted, label);
              if (count) for (const page of pages) assert.equal(page.total, wanted.length, `${label}: total`);
            }
          // The bounded scan would examine 4 users a page: a page full at once came from the index.
          const red = await store.findUsers(findQuery('team eq "Red"', undefined, 5));
          assert.equal(red.items.length, 5);
          // A user written after the declaration is in the index at once; one deleted is gone from it.
          const made = await store.createUser({
            body: { name: 'Kim', team: 'RED', age: 29 },
            idempotency: undefined,
            now: T0,
          });
          assert.ok(made.kind === 'created');
          const byTeam = await findAll(store, findQuery('team eq "red" and age eq 29', undefined, 100));
          assert.deepEqual(idsOf(byTeam).slice(-1), [made.user.id]);
          await store.deleteUser({ ref: id(made.user.id), preconditions: NO_PRECONDITIONS, policy: DEFAULT_POLICY });
          assert.ok(!idsOf(await findAll(store, findQuery('team eq "red"', '-age', 100))).includes(made.user.id));
        },
      );

      test(
        name(
          'a unique field refuses a put, a create or a move that would give another user its value, naming the field and that user; deleting frees the value',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          assert.equal(await declare(store, [field('email', { unique: true, caseInsensitive: true })]), undefined);
          assert.equal((await put(store, alias('ann'), { name: 'Ann', email: 'ann@example.org' })).kind, 'created');
          const refused = {
            kind: 'unique-violation',
            field: 'email',
            conflictsWith: 1,
            detail:
              'The user /users/1 already holds this value of email, which is declared unique: no two users may hold equal values there.',
          };
          assert.deepEqual(await put(store, alias('bob'), { name: 'Bob', email: 'ANN@example.org' }), refused);
          assert.deepEqual(
            await store.createUser({
              body: { name: 'Bob', email: 'Ann@Example.org' },
              idempotency: undefined,
              now: T0,
            }),
            refused,
          );
          assert.equal(await store.findUser(alias('bob')), undefined);
          // Users without the member never conflict; a user keeps its own value.
          for (const n of ['Cy', 'Dee']) assert.equal((await put(store, alias(n), { name: n })).kind, 'created');
          assert.equal((await put(store, alias('cy'), { name: 'Cy', email: null })).kind, 'created');
          assert.equal((await put(store, alias('ann'), { name: 'Ann B.', email: 'ann@example.org' })).kind, 'replaced');
          assert.equal((await put(store, alias('bob'), { name: 'Bob', email: 'bob@example.org' })).kind, 'created');
          const bob = userOf(await store.findUser(alias('bob')));
          assert.deepEqual(await put(store, id(bob.id), { name: 'Bob', email: 'ann@EXAMPLE.org' }), refused);
          const moved = await put(
            store,
            id(bob.id),
            { name: 'Bob', email: 'ann@example.org', id: 99 },
            { policy: { allowIdChange: true } },
          );
          assert.deepEqual(moved, refused);
          assert.equal(
            (await store.deleteUser({ ref: alias('ann'), preconditions: NO_PRECONDITIONS, policy: DEFAULT_POLICY }))
              .kind,
            'deleted',
          );
          assert.equal((await put(store, id(bob.id), { name: 'Bob', email: 'Ann@example.org' })).kind, 'replaced');
          // An eq of the unique field answers its holder alone, in any case, and nothing after it.
          for (const [value, holders] of [
            ['ANN@example.org', [bob.id]],
            ['bob@example.org', []],
            ['nobody@example.org', []],
            ['\\ud800@example.org', []],
          ] as const) {
            const query = findQuery(`email eq "${value}"`, undefined, 1);
            assert.deepEqual(idsOf(await findAll(store, query)), holders, value);
            for (const after of [bob.id - 1, bob.id])
              assert.deepEqual(
                idsOf([await store.findUsers({ ...query, after: { id: after, values: [] } })]),
                holders.filter((holder) => holder > after),
                `${value} after ${after}`,
              );
          }
        },
      );

      test(name('of 32 creates of one value of a unique field at once, exactly one is made'), async (t) => {
        const { store } = await kind.open(t);
        assert.equal(await declare(store, [field('email', { unique: true })]), undefined);
        const outcomes = await Promise.all(
          Array.from({ length: 32 }, (_, i) =>
            i % 2 === 0
              ? store.createUser({ body: { name: `n${i}`, email: 'one@example.org' }, idempotency: undefined, now: T0 })
              : put(store, alias(`a${i}`), { name: `n${i}`, email: 'one@example.org' }),
          ),
        );
        const made = outcomes.filter((o) => o.kind === 'created');
        assert.equal(made.length, 1, JSON.stringify(outcomes.map((o) => o.kind)));
        const winner = 'user' in made[0]! ? made[0].user.id : 0;
        for (const o of outcomes.filter((o) => o.kind !== 'created'))
          assert.deepEqual([o.kind, 'conflictsWith' in o && o.conflictsWith], ['unique-violation', winner]);
        assert.equal(
          (await findAll(store, findQuery('email eq "one@example.org"', undefined, 100)))[0]!.items.length,
          1,
        );
      });

      test(
        name(
          'declaring a field unique over values two users hold is refused, naming the values and their users, and nothing changes',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          assert.equal(await declare(store, [field('name')]), undefined);
          const users: [string, string][] = [
            ['Ann', 'a@x'],
            ['Bob', 'A@x'],
            ['Cy', 'c@x'],
            ['Dee', 'c@x'],
          ];
          for (const [n, email] of users)
            assert.equal((await put(store, alias(n), { name: n, email })).kind, 'created');
          assert.equal(
            await declare(store, [field('name'), field('email', { unique: true })]),
            'email cannot be unique: a value is held by more than one user: "c@x" (users 3, 4)',
          );
          assert.equal(
            await declare(store, [field('email', { unique: true, caseInsensitive: true })]),
            'email cannot be unique: 2 values are held by more than one user (lowercased): "a@x" (users 1, 2), "c@x" (users 3, 4)',
          );
          assert.deepEqual(store.declaredFields(), [field('name')]);
          assert.equal((await put(store, alias('eve'), { name: 'Eve', email: 'c@x' })).kind, 'created');
        },
      );

      test(
        name(
          'a schema refuses a put, a create, a patch and a move that break it, listing every violation, and changes nothing; the other rules answer first',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          assert.equal((await put(store, alias('ann'), { name: 'Ann', email: 'ann@x', age: 41 })).kind, 'created');
          assert.equal(await setSchema(store, { document: USER_SCHEMA, checkedExisting: true }), undefined);
          assert.deepEqual(store.userSchema()?.setting.document, USER_SCHEMA);
          const before = userOf(await store.findUser(id(1)));
          const refusal = (user: unknown) =>
            new UserSchema({ document: USER_SCHEMA, checkedExisting: true }).refusal(user);
          const broken = { name: 'Bob', email: 5, age: 'old' };
          const expected = refusal({ ...broken, id: 1 });
          assert.equal(expected?.errors.length, 2);
          // A replace by id (the conditional write of a database first), by alias, a patch, a move.
          assert.deepEqual(await put(store, id(1), broken), expected);
          assert.deepEqual(await put(store, alias('ann'), broken), expected);
          assert.deepEqual(
            await store.putUser({
              ref: id(1),
              body: { email: null },
              merge: true,
              preconditions: NO_PRECONDITIONS,
              policy: DEFAULT_POLICY,
              now: T0,
            }),
            refusal({ name: 'Ann', age: 41, id: 1 }),
          );
          assert.deepEqual(
            await put(store, id(1), { ...broken, id: 7 }, { policy: { allowIdChange: true } }),
            refusal({ ...broken, id: 7 }),
          );
          assert.deepEqual(userOf(await store.findUser(id(1))), before);
          // Creates, by alias and by POST, under the next id, which stays unused.
          assert.deepEqual(await put(store, alias('bob'), broken), refusal({ ...broken, id: 2 }));
          assert.deepEqual(
            await store.createUser({ body: broken, idempotency: undefined, now: T0 }),
            refusal({ ...broken, id: 2 }),
          );
          assert.equal(await store.findUser(alias('bob')), undefined);
          assert.deepEqual((await store.listUsers(0, 10)).items, [before.json]);
          // What the rules refuse without a schema is refused so with one.
          assert.equal((await put(store, id(1), broken, { pre: { ifMatch: '"other"' } })).kind, 'precondition-failed');
          assert.equal((await put(store, id(9), broken)).kind, 'not-found');
          const fits = await put(store, id(1), { name: 'Ann', email: 'ann@y' });
          assert.equal(fits.kind, 'replaced');
          const created = await store.createUser({
            body: { name: 'Cy', email: 'cy@x' },
            idempotency: undefined,
            now: T0,
          });
          assert.deepEqual([created.kind, 'user' in created && created.user.id], ['created', 2]);
          assert.equal(await setSchema(store, null), undefined);
          assert.equal(store.userSchema(), undefined);
          assert.equal((await put(store, id(1), broken)).kind, 'replaced');
        },
      );

      test(
        name(
          'setting a schema over users that break it is refused naming them, and nothing changes; set without the check, it holds for new writes',
        ),
        async (t) => {
          const { store } = await kind.open(t);
          for (const body of [{ name: 'Ann', email: 'a@x' }, { name: 'Bob' }, { name: 'Cy', email: 5 }])
            assert.equal((await put(store, alias(body.name), body)).kind, 'created');
          assert.equal(
            await setSchema(store, { document: USER_SCHEMA, checkedExisting: true }),
            '2 users break the schema: users 2 (email), 3 (email); change them first, or set it with --check-existing no to check only what is written from now on',
          );
          assert.equal(store.userSchema(), undefined);
          assert.equal(await setSchema(store, { document: USER_SCHEMA, checkedExisting: false }), undefined);
          assert.equal(store.userSchema()?.setting.checkedExisting, false);
          assert.equal((await put(store, alias('dee'), { name: 'Dee' })).kind, 'schema-violation');
          assert.equal(userOf(await store.findUser(alias('Bob'))).json, '{"name":"Bob","id":2}');
        },
      );
    });
}
