/**
 * The durable journal store (issue 3, "What it stores"): after a restart on
 * the same data directory everything is as it was -- users with all their
 * fields, their byte-identical representation and ETag, aliases, the id
 * high-water mark (API.md "Reservations": ids are never reused, also across
 * restarts), live reservations with their expiry, idempotency records,
 * revoked sessions, moved ids (--allow-id-change) and deleted users. The same
 * holds when the state comes back from a snapshot (after one compaction, and
 * across several), and `--store memory` forgets everything.
 *
 * In-process: startTestServer with `data: dir`, `running.stop()`, start
 * again on the same directory. Expiry uses the injectable clock.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { test, type TestContext } from 'node:test';
import type { Config } from '../server/ops/config.js';
import type { StartOptions } from '../server/commands/serve.js';
import {
  assertProblem,
  listText,
  put,
  send,
  startTestServer,
  tempDir,
  type Reply,
  type TestServer,
} from './helpers.js';

const T0 = Date.UTC(2031, 4, 6, 7, 8, 9);
const COMPACTED = /^users-server: compacted \d+.* into a \d+-byte snapshot of \d+ users in \d+ ms$/;

/** A mutable fake clock shared by every start of one test. */
interface Clock {
  now: number;
}

interface Booted extends TestServer {
  /** The data directory in use (startTestServer's own fresh one is not). */
  dir: string;
  /** Every line the server logged (start-up notes, compaction reports). */
  logs: string[];
}

/** Starts the server on `dir` (in-process, port 0); stopped after the test if still running. */
async function start(t: TestContext, dir: string, overrides: Partial<Config> = {}, clock?: Clock): Promise<Booted> {
  const logs: string[] = [];
  const options: StartOptions = { logError: (line) => logs.push(line), ...(clock && { clock: () => clock.now }) };
  const server = await startTestServer(t, { data: dir, ...overrides }, options);
  return { ...server, dir, logs };
}

/** Stops `server` and starts a new one on the same directory. */
async function again(t: TestContext, server: Booted, overrides: Partial<Config> = {}, clock?: Clock): Promise<Booted> {
  await server.running.stop();
  return start(t, server.dir, overrides, clock);
}

function post(url: string, path: string, body: unknown = {}, headers: Record<string, string> = {}): Promise<Reply> {
  return send(url, 'POST', path, { json: body, headers });
}

function created(reply: Reply, where: string): number {
  assert.equal(reply.status, 201, `${where}: ${reply.status} ${reply.text}`);
  const id = (reply.json() as { id: number }).id;
  assert.equal(reply.headers.location, `/users/${id}`, `${where}: Location`);
  return id;
}

/** Everything a client can see of one GET: status, validators, locations and body. */
async function look(url: string, path: string, headers: Record<string, string> = {}): Promise<string> {
  const r = await send(url, 'GET', path, { headers });
  return [
    `GET ${path}`,
    r.status,
    `etag=${r.headers.etag}`,
    `location=${r.headers.location}`,
    `content-location=${r.headers['content-location']}`,
    r.text,
  ].join(' | ');
}

async function lookAll(url: string, paths: readonly string[]): Promise<string[]> {
  const seen: string[] = [await listText({ url })];
  for (const path of paths) seen.push(await look(url, path));
  return seen;
}

function dataFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => /^(journal|snapshot)-/.test(name))
    .sort();
}

// ---------------------------------------------------------------- users and aliases

test('restart: every user comes back with all its fields, its byte-identical representation and the same strong ETag', async (t) => {
  const dir = tempDir(t);
  let server = await start(t, dir);
  const odd = {
    name: 'Zoë 😀',
    z: 1,
    a: { deep: [1, { x: null }], empty: {} },
    text: 'tab\there\nnewline "quoted" \\ \u0001',
    n: -0.5e-7,
    big: 12345678901234567000,
  };
  assert.equal(created(await put(server.url, '/users/ann', odd), 'PUT /users/ann'), 1);
  assert.equal(created(await put(server.url, '/users/bob', { name: 'Bob' }), 'PUT /users/bob'), 2);
  assert.equal(created(await post(server.url, '/users/new', { name: 'Carl', tags: ['x', 'y'] }), 'POST /users/new'), 3);
  const reserved = created(await post(server.url, '/reservations'), 'POST /reservations');
  assert.equal(created(await put(server.url, `/users/${reserved}`, { name: 'Dora' }), 'PUT under the reservation'), 4);
  // A replace with the id first in the body: the id stays in place.
  const replaced = await send(server.url, 'PUT', '/users/2', {
    body: '{"id":2,"name":"Bob Two","extra":true}',
    headers: { 'content-type': 'application/json' },
  });
  assert.equal(replaced.status, 200, replaced.text);
  const paths = ['/users/1', '/users/2', '/users/3', '/users/4', '/users/ann', '/users/bob'];
  const before = await lookAll(server.url, paths);
  assert.match(
    before[1]!,
    /^GET \/users\/1 \| 200 \| etag="[^"]+" \| location=undefined \| content-location=undefined \| \{"name":"Zoë 😀","z":1,"a":\{"deep":\[1,\{"x":null\}\],"empty":\{\}\},"text":"tab\\there\\nnewline \\"quoted\\" \\\\ \\u0001","n":-5e-8,"big":12345678901234567000,"id":1\}$/,
  );
  assert.match(before[2]!, /\| \{"id":2,"name":"Bob Two","extra":true\}$/);

  server = await again(t, server);
  assert.deepEqual(await lookAll(server.url, paths), before);
});

test('restart: an alias still names its user (GET by alias has Content-Location, PUT by alias replaces: 200, not 201) and a pre-restart ETag still matches If-Match', async (t) => {
  const dir = tempDir(t);
  let server = await start(t, dir);
  assert.equal(created(await put(server.url, '/users/ann', { name: 'Ann' }), 'create ann'), 1);
  assert.equal(created(await put(server.url, '/users/bob', { name: 'Bob' }), 'create bob'), 2);
  const etag = (await send(server.url, 'GET', '/users/bob')).headers.etag as string;
  assert.match(etag, /^"[^"]+"$/);

  server = await again(t, server);
  const byAlias = await send(server.url, 'GET', '/users/ann');
  assert.equal(byAlias.status, 200);
  assert.equal(byAlias.headers['content-location'], '/users/1');
  assert.equal(byAlias.text, '{"name":"Ann","id":1}');
  const replaced = await put(server.url, '/users/ann', { name: 'Ann 2' });
  assert.equal(replaced.status, 200, replaced.text);
  assert.equal(replaced.text, '{"name":"Ann 2","id":1}');
  const matched = await put(server.url, '/users/bob', { name: 'Bob 2' }, { 'if-match': etag });
  assert.equal(matched.status, 200, `If-Match with the ETag from before the restart: ${matched.text}`);
  assert.equal(await listText(server), '{"items":[{"name":"Ann 2","id":1},{"name":"Bob 2","id":2}],"next":null}');
});

// ---------------------------------------------------------------- the id high-water mark

interface IdCase {
  name: string;
  overrides?: Partial<Config>;
  /** Builds the state before the restart; the clock starts at T0. */
  build(url: string, clock: Clock): Promise<void>;
  /** Advanced before the restart. */
  laterMs: number;
  /** Ids that must not be issued again, and the status a PUT to each answers after the restart. */
  refused: { id: number; status: 404 | 410 }[];
  /** What three POST /users/new answer after the restart. */
  next: number[];
}

const idCases: IdCase[] = [
  {
    name: 'the highest id was a reservation that expired',
    async build(url) {
      assert.equal(created(await post(url, '/users/new', { name: 'A' }), 'user'), 1);
      assert.equal(created(await post(url, '/reservations'), 'reservation'), 2);
    },
    laterMs: 301_000,
    refused: [{ id: 2, status: 410 }],
    next: [3, 4, 5],
  },
  {
    name: 'the highest id was a user that was deleted',
    async build(url) {
      assert.equal(created(await post(url, '/users/new', { name: 'A' }), 'user 1'), 1);
      assert.equal(created(await put(url, '/users/b', { name: 'B' }), 'user 2'), 2);
      assert.equal((await send(url, 'DELETE', '/users/2')).status, 204);
    },
    laterMs: 0,
    refused: [{ id: 2, status: 410 }],
    next: [3, 4, 5],
  },
  {
    name: 'every id was issued to a reservation, all expired, none used',
    async build(url) {
      for (let i = 1; i <= 3; i++) assert.equal(created(await post(url, '/reservations'), `reservation ${i}`), i);
    },
    laterMs: 300_000,
    refused: [
      { id: 1, status: 410 },
      { id: 3, status: 410 },
    ],
    next: [4, 5, 6],
  },
  {
    name: 'a user moved to an id above the mark (--allow-id-change): that id is skipped, the ids below it stay never-issued',
    overrides: { allowIdChange: true },
    async build(url) {
      assert.equal(created(await put(url, '/users/a', { name: 'A' }), 'user'), 1);
      const moved = await put(url, '/users/1', { name: 'A', id: 4 });
      assert.equal(moved.status, 200, moved.text);
    },
    laterMs: 0,
    refused: [{ id: 3, status: 404 }],
    next: [2, 3, 5],
  },
];

for (const c of idCases) {
  test(`restart: ids are never reused (API.md "Reservations"): ${c.name}`, async (t) => {
    const dir = tempDir(t);
    const clock = { now: T0 };
    let server = await start(t, dir, c.overrides, clock);
    await c.build(server.url, clock);
    clock.now += c.laterMs;
    const before = await listText(server);
    server = await again(t, server, c.overrides, clock);
    assert.equal(await listText(server), before, 'the users are as they were');
    for (const r of c.refused) {
      assertProblem(
        await put(server.url, `/users/${r.id}`, { name: 'X' }),
        r.status,
        r.status === 410 ? 'gone' : 'not-found',
        `PUT /users/${r.id}`,
      );
    }
    assert.equal(await listText(server), before, 'the refused PUTs changed nothing');
    const next: number[] = [];
    for (let i = 0; i < c.next.length; i++)
      next.push(created(await post(server.url, '/users/new', { name: `N${i}` }), `POST /users/new #${i + 1}`));
    assert.deepEqual(next, c.next);
  });
}

test('restart: a reservation made after a restart never takes an id issued before it, also after a second restart', async (t) => {
  const dir = tempDir(t);
  const clock = { now: T0 };
  let server = await start(t, dir, {}, clock);
  assert.equal(created(await post(server.url, '/reservations'), 'first'), 1);
  assert.equal(created(await post(server.url, '/users/new', { name: 'A' }), 'user'), 2);
  assert.equal((await send(server.url, 'DELETE', '/users/2')).status, 204);
  clock.now += 400_000;
  server = await again(t, server, {}, clock);
  assert.equal(created(await post(server.url, '/reservations'), 'after the first restart'), 3);
  server = await again(t, server, {}, clock);
  assert.equal(created(await post(server.url, '/reservations'), 'after the second restart'), 4);
});

// ---------------------------------------------------------------- reservations

test('restart: a live reservation survives with its exact expiry: a PUT under it just before expiresAt creates the user (201), at expiresAt it is 410', async (t) => {
  const dir = tempDir(t);
  const clock = { now: T0 };
  let server = await start(t, dir, { reservationTtl: 300 }, clock);
  const first = await post(server.url, '/reservations');
  const a = created(first, 'reservation a');
  const expiresA = Date.parse((first.json() as { expiresAt: string }).expiresAt);
  assert.equal(expiresA, T0 + 300_000);
  clock.now = T0 + 1000;
  const b = created(await post(server.url, '/reservations'), 'reservation b');
  const expiresB = T0 + 1000 + 300_000;

  // At a's expiry: a is gone, b (one second younger) is still live.
  clock.now = expiresA;
  server = await again(t, server, { reservationTtl: 300 }, clock);
  assertProblem(
    await put(server.url, `/users/${a}`, { name: 'A' }),
    410,
    'gone',
    'PUT under a reservation that expired at the restart',
  );
  assert.equal(await listText(server), '{"items":[],"next":null}');

  // One millisecond before b's expiry, after another restart, b still holds.
  clock.now = expiresB - 1;
  server = await again(t, server, { reservationTtl: 300 }, clock);
  const used = await put(server.url, `/users/${b}`, { name: 'B' });
  assert.equal(used.status, 201, `PUT under the live reservation after a restart: ${used.text}`);
  assert.equal(used.headers.location, `/users/${b}`);
  assert.equal(await listText(server), `{"items":[{"name":"B","id":${b}}],"next":null}`);
});

test('restart: a reservation that expired before the restart stays 410, and a used-up one stays its user', async (t) => {
  const dir = tempDir(t);
  const clock = { now: T0 };
  let server = await start(t, dir, { reservationTtl: 1 }, clock);
  const expired = created(await post(server.url, '/reservations'), 'expired');
  const used = created(await post(server.url, '/reservations'), 'used');
  assert.equal((await put(server.url, `/users/${used}`, { name: 'U' })).status, 201);
  clock.now += 1000;
  assertProblem(await put(server.url, `/users/${expired}`, { name: 'X' }), 410, 'gone', 'before the restart');
  server = await again(t, server, { reservationTtl: 1 }, clock);
  assertProblem(await put(server.url, `/users/${expired}`, { name: 'X' }), 410, 'gone', 'after the restart');
  const replaced = await put(server.url, `/users/${used}`, { name: 'U2' });
  assert.equal(replaced.status, 200, 'the user created under the reservation is replaced, not created again');
  assert.equal(await listText(server), `{"items":[{"name":"U2","id":${used}}],"next":null}`);
});

// ---------------------------------------------------------------- idempotency

test('restart: an Idempotency-Key replay after a restart answers the same status, body and Location with Idempotent-Replayed: true, and issues no id', async (t) => {
  const dir = tempDir(t);
  let server = await start(t, dir);
  const endpoints = [
    { path: '/users/new', body: { name: 'Keyed' }, other: { name: 'Other' } },
    { path: '/reservations', body: { note: 'r' }, other: { note: 's' } },
  ];
  const first: Reply[] = [];
  for (const e of endpoints) first.push(await post(server.url, e.path, e.body, { 'idempotency-key': 'key-1' }));
  assert.deepEqual(
    first.map((r) => r.status),
    [201, 201],
  );
  const listing = await listText(server);

  server = await again(t, server);
  for (const [i, e] of endpoints.entries()) {
    const replay = await post(server.url, e.path, e.body, { 'idempotency-key': 'key-1' });
    assert.equal(replay.status, first[i]!.status, `${e.path}: status`);
    assert.equal(replay.text, first[i]!.text, `${e.path}: body`);
    assert.equal(replay.headers.location, first[i]!.headers.location, `${e.path}: Location`);
    assert.equal(replay.headers['idempotent-replayed'], 'true', `${e.path}: Idempotent-Replayed`);
    assertProblem(
      await post(server.url, e.path, e.other, { 'idempotency-key': 'key-1' }),
      422,
      'idempotency-key-reused',
      `${e.path} with another body`,
    );
  }
  assert.equal(await listText(server), listing, 'replays and refusals changed nothing');
  assert.equal(
    created(await post(server.url, '/users/new', { name: 'Next' }), 'a fresh create'),
    3,
    'the replays issued no id',
  );
});

// ---------------------------------------------------------------- sessions

test('restart: a session revoked by POST /logout stays 401 on GET / after a restart, while another session stays valid', async (t) => {
  const dir = tempDir(t);
  let server = await start(t, dir);
  const revoked = await server.login();
  const kept = await server.login();
  assert.equal((await send(server.url, 'POST', '/logout', { headers: { cookie: revoked } })).status, 204);
  assert.equal((await send(server.url, 'GET', '/', { headers: { cookie: revoked } })).status, 401);

  server = await again(t, server);
  const after = await send(server.url, 'GET', '/', { headers: { cookie: revoked } });
  assert.equal(after.status, 401, 'the logged-out cookie passes GET / again after the restart');
  assert.equal(after.text, '"not authorized"');
  assert.equal(
    (await send(server.url, 'GET', '/', { headers: { cookie: kept } })).status,
    200,
    'the other session survives the restart',
  );
});

// ---------------------------------------------------------------- moves and deletions

test("restart: with --allow-id-change a moved user's old ids still answer 301 to the current id (chains collapsed), and its alias follows it", async (t) => {
  const dir = tempDir(t);
  const overrides = { allowIdChange: true };
  let server = await start(t, dir, overrides);
  assert.equal(created(await put(server.url, '/users/ann', { name: 'Ann' }), 'create'), 1);
  assert.equal((await put(server.url, '/users/1', { name: 'Ann', id: 7 })).status, 200);
  server = await again(t, server, overrides);
  assert.equal(
    (await put(server.url, '/users/7', { name: 'Ann', id: 9 })).status,
    200,
    'a second move after the restart',
  );
  server = await again(t, server, overrides);
  for (const old of [1, 7]) {
    const r = await send(server.url, 'GET', `/users/${old}`);
    assert.equal(r.status, 301, `GET /users/${old}: ${r.text}`);
    assert.equal(r.headers.location, '/users/9', `GET /users/${old}: Location`);
  }
  const byAlias = await send(server.url, 'GET', '/users/ann');
  assert.equal(byAlias.status, 200);
  assert.equal(byAlias.headers['content-location'], '/users/9');
  assert.equal(byAlias.text, '{"name":"Ann","id":9}');
  assert.equal(created(await post(server.url, '/users/new', { name: 'B' }), 'next'), 2);
});

test('restart: a deleted user stays deleted: GET and DELETE answer 404, PUT to its id 410, and its alias is free for a new user', async (t) => {
  const dir = tempDir(t);
  let server = await start(t, dir);
  assert.equal(created(await put(server.url, '/users/ann', { name: 'Ann' }), 'create'), 1);
  assert.equal(created(await put(server.url, '/users/bob', { name: 'Bob' }), 'create'), 2);
  assert.equal((await send(server.url, 'DELETE', '/users/ann')).status, 204);
  server = await again(t, server);
  assertProblem(await send(server.url, 'GET', '/users/1'), 404, 'not-found', 'GET by id');
  assertProblem(await send(server.url, 'GET', '/users/ann'), 404, 'not-found', 'GET by alias');
  assertProblem(await send(server.url, 'DELETE', '/users/1'), 404, 'not-found', 'DELETE');
  assertProblem(await put(server.url, '/users/1', { name: 'Again' }), 410, 'gone', 'PUT by id');
  assert.equal(await listText(server), '{"items":[{"name":"Bob","id":2}],"next":null}');
  const reused = await put(server.url, '/users/ann', { name: 'New Ann' });
  assert.equal(created(reused, 'PUT to the released alias'), 3);
});

// ---------------------------------------------------------------- compaction

/**
 * Everything the store holds, built in three phases on a server with
 * --allow-id-change, a fake clock and the default reservation TTL. Returns
 * the paths worth looking at and the cookies. Ids: 1 ann (moved to 7, then
 * 12), 2 bob, 3 carl (deleted), 4 reservation (expires), 5 reservation
 * (live, keyed), 6 dee (keyed POST), 8 eve (created under a reservation),
 * 9 dan.
 */
interface World {
  revoked: string;
  kept: string;
}

const ANN = { name: 'Ann', deep: { list: [1, 'two', null] }, text: 'a\tb\nc' };

const phases: ((server: Booted, clock: Clock, world: Partial<World>) => Promise<void>)[] = [
  async (server) => {
    const url = server.url;
    assert.equal(created(await put(url, '/users/ann', ANN), 'ann'), 1);
    assert.equal(created(await put(url, '/users/bob', { name: 'Bob' }), 'bob'), 2);
    assert.equal(created(await post(url, '/users/new', { name: 'Carl' }), 'carl'), 3);
    assert.equal(
      (
        await send(url, 'PUT', '/users/2', {
          body: '{"id":2,"name":"Bob Two","extra":true}',
          headers: { 'content-type': 'application/json' },
        })
      ).status,
      200,
    );
    assert.equal((await send(url, 'DELETE', '/users/3')).status, 204);
    assert.equal((await put(url, '/users/1', { ...ANN, id: 7 })).status, 200, 'move 1 -> 7');
  },
  async (server, clock) => {
    const url = server.url;
    assert.equal(created(await post(url, '/reservations'), 'reservation 4'), 4);
    clock.now += 200_000;
    assert.equal(created(await post(url, '/reservations', {}, { 'idempotency-key': 'res-key' }), 'reservation 5'), 5);
    assert.equal(created(await post(url, '/users/new', { name: 'Dee' }, { 'idempotency-key': 'new-key' }), 'dee'), 6);
    assert.equal(created(await post(url, '/reservations'), 'reservation 8 (7 was claimed by the move)'), 8);
    assert.equal(created(await put(url, '/users/8', { name: 'Eve' }), 'eve'), 8);
  },
  async (server, clock, world) => {
    const url = server.url;
    world.revoked = await server.login();
    world.kept = await server.login();
    assert.equal((await send(url, 'POST', '/logout', { headers: { cookie: world.revoked } })).status, 204);
    assert.equal((await put(url, '/users/7', { ...ANN, id: 12 })).status, 200, 'move 7 -> 12');
    assert.equal(created(await put(url, '/users/dan', { name: 'Dan' }), 'dan'), 9);
    // Reservation 4 (T0 + 300 s) has expired; 5 (T0 + 500 s) is live.
    clock.now += 150_000;
  },
];

const WORLD_PATHS = [
  '/users/1',
  '/users/2',
  '/users/3',
  '/users/4',
  '/users/5',
  '/users/6',
  '/users/7',
  '/users/8',
  '/users/9',
  '/users/10',
  '/users/12',
  '/users/ann',
  '/users/bob',
  '/users/dan',
];

/** What the world looks like, without changing it. */
async function observeWorld(server: Booted, world: World): Promise<string[]> {
  const seen = await lookAll(server.url, WORLD_PATHS);
  for (const cookie of [world.revoked, world.kept])
    seen.push(`GET / ${(await send(server.url, 'GET', '/', { headers: { cookie } })).status}`);
  for (const [path, key, body] of [
    ['/users/new', 'new-key', { name: 'Dee' }],
    ['/reservations', 'res-key', {}],
  ] as const) {
    const r = await post(server.url, path, body, { 'idempotency-key': key });
    seen.push(`replay ${path} ${r.status} ${r.headers.location} ${r.headers['idempotent-replayed']} ${r.text}`);
  }
  for (const id of [3, 4, 10]) {
    const r = await put(server.url, `/users/${id}`, { name: 'Refused' });
    seen.push(`PUT /users/${id} ${r.status} ${r.text}`);
  }
  return seen;
}

/** PUT the user bob (id 2) until the journal compacts `n` more times; bob ends as he was. */
async function compact(server: Booted, n: number): Promise<void> {
  const count = () => server.logs.filter((l) => COMPACTED.test(l)).length;
  const target = count() + n;
  const pad = 'x'.repeat(400);
  for (let i = 0; count() < target; i++) {
    assert.ok(i < 400, `no compaction after ${i} writes; logs: ${server.logs.join('\n')}`);
    assert.equal(
      (
        await send(server.url, 'PUT', '/users/2', {
          body: `{"id":2,"name":"Bob Two","extra":true,"pad":"${pad}${i}"}`,
          headers: { 'content-type': 'application/json' },
        })
      ).status,
      200,
    );
  }
  assert.equal(
    (
      await send(server.url, 'PUT', '/users/2', {
        body: '{"id":2,"name":"Bob Two","extra":true}',
        headers: { 'content-type': 'application/json' },
      })
    ).status,
    200,
  );
}

interface Mode {
  name: string;
  /** Compactions to force after phase i (0-based). */
  compactAfter: number[];
  /** Restart after phase i (after its compactions). */
  restartAfter: number[];
  /** The generation of the files left in the directory at the end. */
  generation: number;
}

const modes: Mode[] = [
  { name: 'a plain restart (journal only)', compactAfter: [], restartAfter: [], generation: 1 },
  {
    name: 'a compaction (state split between a snapshot and the journal after it)',
    compactAfter: [1],
    restartAfter: [],
    generation: 2,
  },
  {
    name: 'several compactions with a restart between them (snapshots carried forward)',
    compactAfter: [0, 1, 1, 2],
    restartAfter: [1],
    generation: 5,
  },
];

for (const mode of modes) {
  test(`restart after ${mode.name}: users, aliases, the id high-water mark, reservations and their expiry, idempotency records, revoked sessions, moved and deleted ids are all as they were`, async (t) => {
    const dir = tempDir(t);
    const clock = { now: T0 };
    const overrides: Partial<Config> = { allowIdChange: true, compactionFloor: 4096 };
    let server = await start(t, dir, overrides, clock);
    const world: Partial<World> = {};
    for (const [i, phase] of phases.entries()) {
      await phase(server, clock, world);
      for (const at of mode.compactAfter) if (at === i) await compact(server, 1);
      if (mode.restartAfter.includes(i)) server = await again(t, server, overrides, clock);
    }
    const w = world as World;
    const before = await observeWorld(server, w);
    await server.running.stop();
    assert.deepEqual(
      dataFiles(dir),
      mode.generation === 1
        ? ['journal-00000001']
        : [
            `journal-${String(mode.generation).padStart(8, '0')}`,
            `snapshot-${String(mode.generation).padStart(8, '0')}`,
          ],
      'the data files',
    );

    server = await start(t, dir, overrides, clock);
    assert.deepEqual(await observeWorld(server, w), before);
    // The same, spelled out, so that a state lost both before and after cannot pass.
    const url = server.url;
    assert.equal(
      await listText(server),
      '{"items":[{"id":2,"name":"Bob Two","extra":true},{"name":"Dee","id":6},{"name":"Eve","id":8},{"name":"Dan","id":9},{"name":"Ann","deep":{"list":[1,"two",null]},"text":"a\\tb\\nc","id":12}],"next":null}',
    );
    for (const old of [1, 7])
      assert.equal(
        (await send(url, 'GET', `/users/${old}`)).headers.location,
        '/users/12',
        `GET /users/${old} redirects`,
      );
    assert.equal((await send(url, 'GET', '/users/ann')).headers['content-location'], '/users/12');
    assertProblem(await send(url, 'GET', '/users/3'), 404, 'not-found', 'deleted');
    assertProblem(await put(url, '/users/3', { name: 'X' }), 410, 'gone', 'deleted id');
    assertProblem(await put(url, '/users/4', { name: 'X' }), 410, 'gone', 'expired reservation');
    assertProblem(await put(url, '/users/10', { name: 'X' }), 404, 'not-found', 'never issued');
    assert.equal((await send(url, 'GET', '/', { headers: { cookie: w.revoked } })).status, 401, 'revoked session');
    assert.equal((await send(url, 'GET', '/', { headers: { cookie: w.kept } })).status, 200, 'live session');
    const replay = await post(url, '/users/new', { name: 'Dee' }, { 'idempotency-key': 'new-key' });
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    assert.equal(replay.text, '{"name":"Dee","id":6}');
    const replayed = await post(url, '/reservations', {}, { 'idempotency-key': 'res-key' });
    assert.equal(replayed.headers.location, '/users/5');
    assert.equal(replayed.headers['idempotent-replayed'], 'true');
    // Destructive checks last: the live reservation, then fresh ids skip every issued one (12 was claimed by a move).
    assert.equal(created(await put(url, '/users/5', { name: 'Fay' }), 'PUT under the live reservation'), 5);
    const next: number[] = [];
    for (let i = 0; i < 3; i++) next.push(created(await post(url, '/users/new', { name: `N${i}` }), 'fresh'));
    assert.deepEqual(next, [10, 11, 13]);
  });
}

test('restart with compactionFloor 4096: a snapshot-G file appears, the journal of the old generation is removed, and a restart serves the same listing', async (t) => {
  const dir = tempDir(t);
  let server = await start(t, dir, { compactionFloor: 4096 });
  assert.equal(created(await put(server.url, '/users/bob', { name: 'Bob' }), 'bob'), 1);
  for (let i = 0; i < 30; i++)
    assert.equal((await put(server.url, `/users/u${i}`, { name: `User ${i}`, pad: 'p'.repeat(200) })).status, 201);
  const count = () => server.logs.filter((l) => COMPACTED.test(l)).length;
  for (let i = 0; count() === 0; i++) {
    assert.ok(i < 400, 'no compaction');
    assert.equal((await put(server.url, '/users/1', { name: 'Bob', pad: 'q'.repeat(400), i })).status, 200);
  }
  assert.equal((await put(server.url, '/users/1', { name: 'Bob' })).status, 200);
  const before = await listText(server);
  await server.running.stop();
  const files = dataFiles(dir);
  assert.ok(
    files.some((f) => /^snapshot-\d{8}$/.test(f)),
    `no snapshot file: ${files.join(' ')}`,
  );
  assert.ok(!files.includes('journal-00000001'), `generation 1 was not removed: ${files.join(' ')}`);
  server = await start(t, dir, { compactionFloor: 4096 });
  assert.equal(await listText(server), before);
  assert.equal(created(await put(server.url, '/users/late', { name: 'Late' }), 'next'), 32);
});

// ---------------------------------------------------------------- memory

test('--store memory forgets everything on restart: no users, no aliases, ids start again at 1, and no journal or snapshot is written', async (t) => {
  const dir = tempDir(t);
  let server = await start(t, dir, { store: 'memory' });
  assert.equal(created(await put(server.url, '/users/ann', { name: 'Ann' }), 'ann'), 1);
  assert.equal(created(await post(server.url, '/reservations'), 'reservation'), 2);
  assert.equal(created(await post(server.url, '/users/new', { name: 'K' }, { 'idempotency-key': 'k' }), 'keyed'), 3);
  server = await again(t, server, { store: 'memory' });
  assert.equal(await listText(server), '{"items":[],"next":null}');
  assertProblem(await send(server.url, 'GET', '/users/ann'), 404, 'not-found', 'the alias');
  assertProblem(
    await put(server.url, '/users/2', { name: 'X' }),
    404,
    'not-found',
    'the reservation is forgotten: its id was never issued',
  );
  const keyed = await post(server.url, '/users/new', { name: 'K' }, { 'idempotency-key': 'k' });
  assert.equal(keyed.headers['idempotent-replayed'], undefined, 'the idempotency record is forgotten');
  assert.equal(created(keyed, 'after the restart'), 1);
  assert.deepEqual(dataFiles(dir), []);
});
