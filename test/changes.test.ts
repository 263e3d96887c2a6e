/**
 * The feed of changes, GET /changes: NDJSON from a cursor, following, as
 * Server-Sent Events, its refusals, a reader too slow, a stop, and on the
 * journal a kill -9 in the middle; on PostgreSQL a change made through one
 * instance reaching a watcher on another.
 */
import assert from 'node:assert/strict';
import { request, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { test, type TestContext } from 'node:test';
import { DEFAULT_CHANGES_RETENTION_MS } from '../server/store/store.js';
import { assertProblem, put, send, startTestServer, tempDir } from './helpers.js';
import { pgbouncerDatabase, pgbouncerSkipReason } from './pgbouncer.js';
import { postgresSkipReason, testDatabase } from './postgres.js';
import { spawnServer } from './processes.js';

interface Line {
  cursor: string;
  op: 'put' | 'delete' | 'move';
  id: number;
  from?: number;
  user?: Record<string, unknown>;
}

/** An open feed: its lines as they come, and a wait for the next `n`. */
interface Watcher {
  response: IncomingMessage;
  lines: Line[];
  raw: string;
  /** Resolves once `count` lines in all have come. */
  until(count: number): Promise<Line[]>;
  close(): void;
}

/** Opens GET `path` with `headers` and reads its body as it comes; closed after the test. */
function watch(t: TestContext, url: string, path: string, headers: Record<string, string> = {}): Promise<Watcher> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { headers }, (response) => {
      const lines: Line[] = [];
      const waiting: { count: number; done: (l: Line[]) => void }[] = [];
      const watcher: Watcher = {
        response,
        lines,
        raw: '',
        until: (count) => new Promise((done) => (lines.length >= count ? done(lines) : waiting.push({ count, done }))),
        close: () => req.destroy(),
      };
      let partial = '';
      response.setEncoding('utf8').on('data', (chunk: string) => {
        watcher.raw += chunk;
        partial += chunk;
        const parts = partial.split('\n');
        partial = parts.pop()!;
        for (const part of parts) {
          const json = part.startsWith('data: ') ? part.slice(6) : part;
          if (json.startsWith('{')) lines.push(JSON.parse(json) as Line);
        }
        for (const w of [...waiting])
          if (lines.length >= w.count) {
            w.done(lines);
            waiting.splice(waiting.indexOf(w), 1);
          }
      });
      t.after(() => req.destroy());
      resolve(watcher);
    });
    req.on('error', reject);
    req.end();
  });
}

/** The lines of a feed that ends by itself. */
async function feed(url: string, path: string): Promise<{ status: number; type: string; lines: Line[]; text: string }> {
  const reply = await send(url, 'GET', path);
  const lines = reply.text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Line);
  return { status: reply.status, type: String(reply.headers['content-type']), lines, text: reply.text };
}

test('GET /changes?since=0 gives every change in commit order with a cursor each; since=CURSOR resumes after it with no gap and no duplicate; none means from now on', async (t) => {
  const server = await startTestServer(t, { allowIdChange: true });
  assert.equal((await put(server.url, '/users/ann', { name: 'Ann' })).status, 201);
  assert.equal((await send(server.url, 'POST', '/reservations')).status, 201);
  assert.equal((await put(server.url, '/users/1', { name: 'Ann', id: 10 })).status, 200);
  assert.equal((await send(server.url, 'POST', '/users/new', { json: { name: 'Bob' } })).status, 201);
  assert.equal((await send(server.url, 'DELETE', '/users/3')).status, 204);
  const all = await feed(server.url, '/changes?since=0');
  assert.equal(all.status, 200);
  assert.equal(all.type, 'application/x-ndjson');
  assert.deepEqual(
    all.lines.map(({ cursor: _c, ...l }) => l),
    [
      { op: 'put', id: 1, user: { name: 'Ann', id: 1 } },
      { op: 'move', id: 10, from: 1, user: { name: 'Ann', id: 10 } },
      { op: 'put', id: 3, user: { name: 'Bob', id: 3 } },
      { op: 'delete', id: 3 },
    ],
  );
  const rest = await feed(server.url, `/changes?since=${all.lines[1]!.cursor}`);
  assert.deepEqual(rest.lines, all.lines.slice(2));
  assert.deepEqual((await feed(server.url, `/changes?since=${all.lines[3]!.cursor}`)).lines, []);
  const now = await feed(server.url, '/changes');
  assert.equal(now.status, 200);
  assert.equal(now.text, '', 'without since: nothing committed before the request');
});

test('GET /changes refuses a cursor the server never gave (400 invalid-cursor) and one it no longer keeps (410 changes-expired, naming the oldest cursor kept)', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/ann', { name: 'Ann' });
  await put(server.url, '/users/bob', { name: 'Bob' });
  for (const bad of ['abc', '-1', '01', '99', '1.5'])
    assertProblem(await send(server.url, 'GET', `/changes?since=${bad}`), 400, 'invalid-cursor');
  await server.running.store.sweep(Date.now() + DEFAULT_CHANGES_RETENTION_MS + 60_000);
  await put(server.url, '/users/cy', { name: 'Cy' });
  const expired = await send(server.url, 'GET', '/changes?since=1');
  assertProblem(expired, 410, 'changes-expired');
  assert.equal(expired.json().oldestCursor, '2');
  assert.deepEqual(
    (await feed(server.url, '/changes?since=0')).lines.map((l) => l.user?.name),
    ['Cy'],
    'since=0 starts at the oldest kept',
  );
  assert.deepEqual(
    (await feed(server.url, '/changes?since=2')).lines.map((l) => l.user?.name),
    ['Cy'],
    'the oldest cursor kept resumes',
  );
});

test('GET /changes: follow=0 and follow=false end after the changes kept, as no follow does; any other follow, or two, is 400 invalid-query', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/ann', { name: 'Ann' });
  for (const path of ['/changes?since=0&follow=0', '/changes?since=0&follow=false', '/changes?since=0']) {
    assert.deepEqual(
      (await feed(server.url, path)).lines.map((l) => l.user?.name),
      ['Ann'],
      path,
    );
  }
  for (const bad of ['yes', 'on', '', 'TRUE', '1&follow=1']) {
    const refused = await send(server.url, 'GET', `/changes?since=0&follow=${bad}`);
    assertProblem(refused, 400, 'invalid-query');
    assert.equal(refused.json().parameter, 'follow');
  }
});

test('GET /changes?follow=1 stays open and sends each change as it is acknowledged; reservations and tokens are not changes', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/ann', { name: 'Ann' });
  const watcher = await watch(t, server.url, '/changes?follow=1');
  assert.equal(watcher.response.statusCode, 200);
  await send(server.url, 'POST', '/reservations');
  const cookie = await server.login();
  assert.equal((await send(server.url, 'POST', '/tokens', { json: { name: 'ci' }, headers: { cookie } })).status, 201);
  await put(server.url, '/users/bob', { name: 'Bob' });
  const [first] = await watcher.until(1);
  assert.deepEqual(first, { cursor: '2', op: 'put', id: 3, user: { name: 'Bob', id: 3 } });
  await send(server.url, 'DELETE', '/users/ann');
  assert.deepEqual((await watcher.until(2))[1], { cursor: '3', op: 'delete', id: 1 });
});

test('Accept: text/event-stream gives the feed as Server-Sent Events, and Last-Event-ID resumes after that cursor', async (t) => {
  const server = await startTestServer(t);
  for (const name of ['ann', 'bob', 'cy']) await put(server.url, `/users/${name}`, { name });
  const events = await watch(t, server.url, '/changes', { accept: 'text/event-stream', 'last-event-id': '1' });
  assert.match(String(events.response.headers['content-type']), /^text\/event-stream/);
  await events.until(2);
  assert.match(
    events.raw,
    /^id: 2\nevent: put\ndata: \{"cursor":"2","op":"put","id":2,"user":\{"name":"bob","id":2\}\}\n\n/,
  );
  await put(server.url, '/users/dee', { name: 'dee' });
  assert.deepEqual(
    (await events.until(3)).map((l) => l.cursor),
    ['2', '3', '4'],
  );
});

test('HEAD /changes?follow=1 answers the fields a GET starts with and ends, so the next request on the connection is answered', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/ann', { name: 'Ann' });
  const socket = connect({ port: Number(new URL(server.url).port), host: '127.0.0.1' });
  t.after(() => socket.destroy());
  let text = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  socket.write(
    'HEAD /changes?follow=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
  );
  await new Promise<void>((resolve) => socket.on('data', () => text.includes('{"status":"ok"}') && resolve()));
  assert.match(text, /^HTTP\/1\.1 200 OK\r\n[\s\S]*X-Changes-Cursor: 1\r\n[\s\S]*\r\n\r\nHTTP\/1\.1 200 OK\r\n/);
});

test('under --require-session all the feed needs a session or a token, as GET /users does', async (t) => {
  const server = await startTestServer(t, { requireSession: 'all' });
  assertProblem(await send(server.url, 'GET', '/changes?since=0'), 401, 'unauthorized');
  const cookie = await server.login();
  assert.equal((await send(server.url, 'GET', '/changes?since=0', { headers: { cookie } })).status, 200);
});

test('a following feed checks its session or token again (every 15 s): a token revoked or expired and a session logged out end theirs, the others go on, and the reconnect is refused', async (t) => {
  let now = Date.now();
  const server = await startTestServer(t, { requireSession: 'all' }, { clock: () => now });
  const admin = await server.login();
  const token = async (body: Record<string, unknown>) => {
    const made = await send(server.url, 'POST', '/tokens', { json: body, headers: { cookie: admin } });
    assert.equal(made.status, 201, made.text);
    return made.json() as { id: string; token: string };
  };
  const [revoked, brief, stays] = [
    await token({ name: 'revoked' }),
    await token({ name: 'brief', expiresIn: 60 }),
    await token({ name: 'stays' }),
  ];
  const session = await server.login();
  const bearer = (t: { token: string }) => ({ authorization: `Bearer ${t.token}` });
  const follow = (headers: Record<string, string>) => watch(t, server.url, '/changes?follow=1', headers);
  const feeds = {
    revoked: await follow(bearer(revoked)),
    brief: await follow(bearer(brief)),
    loggedOut: await follow({ cookie: session }),
    stays: await follow(bearer(stays)),
    sse: await follow({ ...bearer(revoked), accept: 'text/event-stream' }),
  };
  const ended = (w: Watcher) =>
    new Promise<void>((resolve) => (w.response.complete ? resolve() : w.response.once('end', resolve)));

  assert.equal((await send(server.url, 'DELETE', `/tokens/${revoked.id}`, { headers: { cookie: admin } })).status, 204);
  assert.equal((await send(server.url, 'POST', '/logout', { headers: { cookie: session } })).status, 204);
  now += 61_000;
  server.running.app.feeds.recheck();
  await Promise.all([feeds.revoked, feeds.brief, feeds.loggedOut, feeds.sse].map(ended));
  assert.equal((await put(server.url, '/users/ann', { name: 'Ann' }, { cookie: admin })).status, 201);
  assert.deepEqual(
    (await feeds.stays.until(1)).map((l) => l.user?.name),
    ['Ann'],
    'a feed whose token holds goes on',
  );
  for (const [headers, type] of [
    [bearer(revoked), 'invalid-token'],
    [bearer(brief), 'invalid-token'],
    [{ cookie: session }, 'unauthorized'],
  ] as const) {
    assertProblem(await send(server.url, 'GET', '/changes?since=0', { headers }), 401, type);
  }
  for (const w of [feeds.revoked, feeds.brief, feeds.loggedOut])
    assert.deepEqual(w.lines, [], 'an ended feed got nothing after its end');
});

test('a watcher that stops reading is cut once its backlog passes the limit; writes and other watchers go on, and /metrics counts it', async (t) => {
  const server = await startTestServer(t);
  const reader = await watch(t, server.url, '/changes?follow=1');
  // A raw connection that asks to follow and never reads.
  const port = Number(new URL(server.url).port);
  const stalled = connect({ port, host: '127.0.0.1' });
  stalled.pause();
  stalled.write('GET /changes?follow=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  const closed = new Promise<void>((resolve) => stalled.once('close', () => resolve()).once('error', () => resolve()));
  t.after(() => stalled.destroy());
  const big = 'x'.repeat(12_000);
  const user = (n: number) => ({ name: `U${n}`, note: big });
  let written = 0;
  let cut = false;
  void closed.then(() => (cut = true));
  while (!cut) {
    await Promise.all(Array.from({ length: 20 }, () => put(server.url, `/users/u${written}`, user(written++))));
    const metrics = (await send(server.url, 'GET', '/metrics')).text;
    if (/users_server_change_feeds_cut_total [1-9]/.test(metrics)) break;
  }
  await reader.until(written);
  assert.equal(reader.lines.length, written, 'the reading watcher got every change');
  assert.match((await send(server.url, 'GET', '/metrics')).text, /users_server_change_feeds_cut_total 1\n/);
});

test('150 following watchers (their feeds take turns) each get every change once, in order', async (t) => {
  const server = await startTestServer(t);
  const watchers = await Promise.all(Array.from({ length: 150 }, () => watch(t, server.url, '/changes?follow=1')));
  await Promise.all(Array.from({ length: 30 }, (_, i) => put(server.url, `/users/u${i}`, { name: `U${i}` })));
  for (const watcher of watchers) {
    const lines = await watcher.until(30);
    assert.deepEqual(
      lines.map((l) => Number(l.cursor)),
      Array.from({ length: 30 }, (_, i) => i + 1),
    );
  }
  assert.match((await send(server.url, 'GET', '/metrics')).text, /users_server_change_feeds 150\n/);
});

test('a stop ends a following feed (the reader resumes elsewhere with its cursor) instead of waiting for it', async (t) => {
  const server = await startTestServer(t);
  await put(server.url, '/users/ann', { name: 'Ann' });
  const watcher = await watch(t, server.url, '/changes?since=0&follow=1');
  await watcher.until(1);
  const ended = new Promise<void>((resolve) => watcher.response.once('end', () => resolve()));
  const started = performance.now();
  await server.running.stop();
  await ended;
  assert.ok(performance.now() - started < 5000, 'the stop did not wait for the feed');
});

test('node bin/users-server.js on the journal: a watcher that resumes with its last cursor after kill -9 and a restart sees every change once', async (t) => {
  const dir = tempDir(t);
  const first = await spawnServer(t, ['--port', '0', '--data', dir]);
  const watcher = await watch(t, first.url, '/changes?since=0&follow=1');
  for (let i = 0; i < 20; i++) assert.equal((await put(first.url, `/users/u${i}`, { name: `U${i}` })).status, 201);
  const seen = await watcher.until(20);
  first.kill('SIGKILL');
  await first.exited;
  const second = await spawnServer(t, ['--port', '0', '--data', dir]);
  for (let i = 20; i < 25; i++) assert.equal((await put(second.url, `/users/u${i}`, { name: `U${i}` })).status, 201);
  const resumed = await feed(second.url, `/changes?since=${seen[14]!.cursor}`);
  assert.deepEqual(
    resumed.lines.map((l) => l.user?.name),
    Array.from({ length: 10 }, (_, i) => `U${15 + i}`),
  );
  assert.deepEqual(resumed.lines.slice(0, 5), seen.slice(15, 20), 'the same cursors and lines as before the kill');
});

const skipPostgres = postgresSkipReason();

for (const [route, database, skip] of [
  ['', testDatabase, skipPostgres],
  [' through pgbouncer (transaction pooling)', pgbouncerDatabase, pgbouncerSkipReason()],
] as const) {
  test(`PostgreSQL${route}: a change made through one instance reaches a watcher on another, in commit order across instances`, async (t) => {
    if (skip !== undefined) return t.skip(skip);
    await acrossInstances(t, await database(t));
  });
}

async function acrossInstances(t: TestContext, url: string): Promise<void> {
  const a = await startTestServer(t, { store: url });
  const b = await startTestServer(t, { store: url });
  const watcher = await watch(t, b.url, '/changes?follow=1');
  await Promise.all(
    Array.from({ length: 10 }, (_, i) => put((i % 2 === 0 ? a : b).url, `/users/u${i}`, { name: `U${i}` })),
  );
  const lines = await watcher.until(10);
  assert.deepEqual(
    lines.map((l) => Number(l.cursor)),
    Array.from({ length: 10 }, (_, i) => i + 1),
  );
  assert.deepEqual(new Set(lines.map((l) => l.user?.name)).size, 10);
  assert.deepEqual((await feed(a.url, '/changes?since=0')).lines, lines, 'both instances give the same feed');
}
