/**
 * API.md "Endpoints": GET and HEAD /users/{ref}, DELETE /users/{ref} and the
 * listing GET /users?limit=N&after=ID.
 */
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import {
  put,
  rawExchange,
  send,
  startTestServer,
  type Reply,
  type TestServer,
  assertProblem,
  listText,
} from './helpers.js';

// RFC 9110 section 8.8.3: a strong entity-tag is a quoted opaque-tag without W/.
const STRONG_ETAG = /^"[\x21\x23-\x7e\x80-\xff]*"$/;

function get(server: TestServer, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  return send(server.url, 'GET', path, { headers });
}

interface Page {
  items: Array<{ id: number; name: string }>;
  next: string | null;
}

async function page(server: TestServer, path: string): Promise<Page> {
  const reply = await get(server, path);
  assert.equal(reply.status, 200, `GET ${path}: ${reply.text}`);
  assert.match(String(reply.headers['content-type']), /^application\/json/);
  const body = reply.json() as Page;
  assert.deepEqual(Object.keys(body), ['items', 'next'], `GET ${path}: exactly items and next`);
  return body;
}

/** Creates `count` users through POST /users/new, a few at a time; they get ids 1..count on a fresh server. */
async function createMany(server: TestServer, count: number): Promise<void> {
  const batch = 25;
  for (let start = 1; start <= count; start += batch) {
    const replies = await Promise.all(
      Array.from({ length: Math.min(batch, count - start + 1) }, (_, i) =>
        send(server.url, 'POST', '/users/new', { json: { name: `u${start + i}` } }),
      ),
    );
    for (const r of replies) assert.equal(r.status, 201, r.text);
  }
}

/** A server with user 1 "Alice" created through the alias "alice". */
async function seeded(t: TestContext): Promise<TestServer> {
  const server = await startTestServer(t);
  const created = await put(server.url, '/users/alice', { name: 'Alice', tags: ['x'] });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.headers.location, '/users/1');
  return server;
}

/** One response head read off the wire: status, lower-cased fields, and what followed the head. */
function parseHead(raw: string): { status: number; headers: Record<string, string>; rest: string } {
  const end = raw.indexOf('\r\n\r\n');
  assert.notEqual(end, -1, `a complete response head in ${JSON.stringify(raw.slice(0, 200))}`);
  const [statusLine, ...lines] = raw.slice(0, end).split('\r\n');
  const match = /^HTTP\/1\.1 (\d{3})/.exec(statusLine!);
  assert.ok(match, `a status line: ${statusLine}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(match[1]), headers, rest: raw.slice(end + 4) };
}

function rawHead(server: TestServer, path: string, extra = ''): Promise<string> {
  return rawExchange(server.url, `HEAD ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}Connection: close\r\n\r\n`);
}

// ---------------------------------------------------------------- GET

test('GET /users/{id} answers 200 with the representation as application/json and a strong ETag', async (t) => {
  const server = await seeded(t);
  const read = await get(server, '/users/1');
  assert.equal(read.status, 200);
  assert.match(String(read.headers['content-type']), /^application\/json/);
  assert.equal(read.text, '{"name":"Alice","tags":["x"],"id":1}');
  assert.equal(read.headers['content-length'], String(Buffer.byteLength(read.text)));
  assert.match(String(read.headers.etag), STRONG_ETAG);
  // The same representation keeps the same tag.
  assert.equal((await get(server, '/users/1')).headers.etag, read.headers.etag);
});

test('GET /users/{alias} answers the same representation and ETag as by id, plus Content-Location: /users/{id}', async (t) => {
  const server = await seeded(t);
  const byId = await get(server, '/users/1');
  const byAlias = await get(server, '/users/alice');
  assert.equal(byAlias.status, 200);
  assert.equal(byAlias.text, byId.text);
  assert.equal(byAlias.headers.etag, byId.headers.etag);
  assert.equal(byAlias.headers['content-location'], '/users/1');
});

test('GET /users/{ref} on an unknown id or alias answers 404 not-found', async (t) => {
  const server = await seeded(t);
  assertProblem(await get(server, '/users/2'), 404, 'not-found', 'unknown id');
  assertProblem(await get(server, '/users/bob'), 404, 'not-found', 'unknown alias');
  // A live reservation has no representation yet.
  assert.equal((await send(server.url, 'POST', '/reservations')).headers.location, '/users/2');
  assertProblem(await get(server, '/users/2'), 404, 'not-found', 'reserved id');
});

const conditionalGets: Array<{ name: string; ifNoneMatch: (etag: string) => string; status: 200 | 304 }> = [
  { name: 'the current ETag', ifNoneMatch: (etag) => etag, status: 304 },
  { name: 'the current ETag marked weak (W/, weak comparison)', ifNoneMatch: (etag) => `W/${etag}`, status: 304 },
  { name: '*', ifNoneMatch: () => '*', status: 304 },
  { name: 'a list holding the current ETag', ifNoneMatch: (etag) => `"a", W/"b", ${etag}`, status: 304 },
  { name: 'an ETag that does not match', ifNoneMatch: () => '"not-the-tag"', status: 200 },
  { name: 'a list of ETags that do not match', ifNoneMatch: () => '"a", W/"b"', status: 200 },
];

for (const c of conditionalGets) {
  test(`GET /users/{ref} with If-None-Match: ${c.name} answers ${c.status}${c.status === 304 ? ' with the ETag and no body' : ' with the representation'}`, async (t) => {
    const server = await seeded(t);
    const plain = await get(server, '/users/1');
    const etag = plain.headers.etag as string;
    for (const path of ['/users/1', '/users/alice']) {
      const reply = await get(server, path, { 'if-none-match': c.ifNoneMatch(etag) });
      assert.equal(reply.status, c.status, `${path}: ${reply.text}`);
      assert.equal(reply.headers.etag, etag, `${path}: ETag`);
      if (c.status === 304) {
        assert.equal(reply.text, '', `${path}: a 304 has no body`);
        // RFC 9110 section 15.4.5: a 304 carries the Content-Location a 200 would.
        if (path === '/users/alice') assert.equal(reply.headers['content-location'], '/users/1');
      } else {
        assert.equal(reply.text, plain.text, `${path}: the representation`);
      }
    }
  });
}

test('GET /users/{ref} with If-None-Match: an old ETag answers 200 with the new representation after a replace', async (t) => {
  const server = await seeded(t);
  const old = (await get(server, '/users/1')).headers.etag as string;
  assert.equal((await put(server.url, '/users/1', { name: 'Alice 2' })).status, 200);
  const reply = await get(server, '/users/1', { 'if-none-match': old });
  assert.equal(reply.status, 200);
  assert.equal(reply.text, '{"name":"Alice 2","id":1}');
  assert.notEqual(reply.headers.etag, old);
});

test('GET /users/{ref} with If-None-Match: * on an unknown user answers 404, not 304', async (t) => {
  const server = await seeded(t);
  assertProblem(await get(server, '/users/9', { 'if-none-match': '*' }), 404, 'not-found');
});

// ---------------------------------------------------------------- HEAD

for (const path of ['/users/1', '/users/alice']) {
  test(`HEAD ${path} answers 200 with the headers of GET (ETag, Content-Type, Content-Length${path.endsWith('alice') ? ', Content-Location' : ''}) and no body on the wire`, async (t) => {
    const server = await seeded(t);
    const getReply = await get(server, path);
    const head = parseHead(await rawHead(server, path));
    assert.equal(head.status, 200);
    assert.equal(head.rest, '', 'nothing after the head');
    assert.equal(head.headers.etag, getReply.headers.etag);
    assert.equal(head.headers['content-type'], getReply.headers['content-type']);
    assert.equal(head.headers['content-length'], getReply.headers['content-length']);
    assert.equal(head.headers['content-location'], getReply.headers['content-location']);
  });
}

test('HEAD /users/{ref} with a matching If-None-Match answers 304 with the ETag; on an unknown user 404; neither has a body', async (t) => {
  const server = await seeded(t);
  const etag = (await get(server, '/users/1')).headers.etag as string;
  const notModified = parseHead(await rawHead(server, '/users/1', `If-None-Match: ${etag}\r\n`));
  assert.equal(notModified.status, 304);
  assert.equal(notModified.headers.etag, etag);
  assert.equal(notModified.rest, '');
  const unknown = parseHead(await rawHead(server, '/users/bob'));
  assert.equal(unknown.status, 404);
  assert.equal(unknown.rest, '');
});

// ---------------------------------------------------------------- DELETE

test('DELETE /users/{id} answers 204 with no body; then GET answers 404 and a repeated DELETE answers 404', async (t) => {
  const server = await seeded(t);
  const deleted = await send(server.url, 'DELETE', '/users/1');
  assert.equal(deleted.status, 204);
  assert.equal(deleted.text, '');
  assertProblem(await get(server, '/users/1'), 404, 'not-found', 'GET by id');
  assertProblem(await get(server, '/users/alice'), 404, 'not-found', 'GET by alias');
  assertProblem(await send(server.url, 'DELETE', '/users/1'), 404, 'not-found', 'repeated DELETE by id');
  assertProblem(await send(server.url, 'DELETE', '/users/alice'), 404, 'not-found', 'repeated DELETE by alias');
  assert.equal(await listText(server), '{"items":[],"next":null}');
});

test('DELETE with Prefer: return=representation answers 200 with the user as it was and Preference-Applied; return=minimal or another preference keeps 204', async (t) => {
  const server = await seeded(t);
  assert.equal((await put(server.url, '/users/bob', { name: 'Bob', tags: ['x'] })).status, 201);
  const kept = await send(server.url, 'DELETE', '/users/bob', {
    headers: { prefer: 'respond-async, return=representation' },
  });
  assert.equal(kept.status, 200);
  assert.equal(kept.text, '{"name":"Bob","tags":["x"],"id":2}');
  assert.equal(kept.headers['content-type'], 'application/json');
  assert.equal(kept.headers['preference-applied'], 'return=representation');
  assertProblem(await get(server, '/users/2'), 404, 'not-found', 'deleted all the same');
  for (const prefer of ['return=minimal', 'handling=lenient']) {
    assert.equal((await put(server.url, '/users/cy', { name: 'Cy' })).status, 201);
    const plain = await send(server.url, 'DELETE', '/users/cy', { headers: { prefer } });
    assert.deepEqual([plain.status, plain.text, plain.headers['preference-applied']], [204, '', undefined], prefer);
  }
});

test('DELETE /users/{alias} deletes the user the alias names, reachable by neither afterwards', async (t) => {
  const server = await seeded(t);
  assert.equal((await put(server.url, '/users/bob', { name: 'Bob' })).headers.location, '/users/2');
  assert.equal((await send(server.url, 'DELETE', '/users/alice')).status, 204);
  assertProblem(await get(server, '/users/1'), 404, 'not-found');
  assertProblem(await get(server, '/users/alice'), 404, 'not-found');
  assert.equal(await listText(server), '{"items":[{"name":"Bob","id":2}],"next":null}');
});

test('DELETE releases the alias: a new PUT to it creates a NEW user with a fresh id (201), never the old id', async (t) => {
  const server = await seeded(t);
  assert.equal((await send(server.url, 'DELETE', '/users/1')).status, 204);
  const again = await put(server.url, '/users/alice', { name: 'Alice the second' });
  assert.equal(again.status, 201, again.text);
  assert.equal(again.headers.location, '/users/2');
  assert.equal(again.text, '{"name":"Alice the second","id":2}');
  const byAlias = await get(server, '/users/alice');
  assert.equal(byAlias.headers['content-location'], '/users/2');
  assertProblem(await get(server, '/users/1'), 404, 'not-found');
});

test('DELETE retires the id: a PUT to the old id answers 410 gone and later ids keep increasing', async (t) => {
  const server = await seeded(t);
  assert.equal((await send(server.url, 'DELETE', '/users/1')).status, 204);
  assertProblem(await put(server.url, '/users/1', { name: 'Zombie' }), 410, 'gone');
  assertProblem(await get(server, '/users/1'), 404, 'not-found');
  assert.equal((await send(server.url, 'POST', '/users/new', { json: { name: 'n' } })).headers.location, '/users/2');
  assert.equal((await send(server.url, 'POST', '/reservations')).headers.location, '/users/3');
});

test('DELETE of an unknown id, a never-issued id, an unknown alias or a reserved id without user answers 404 and changes nothing', async (t) => {
  const server = await seeded(t);
  assert.equal((await send(server.url, 'POST', '/reservations')).headers.location, '/users/2');
  const before = await listText(server);
  for (const path of ['/users/3', '/users/999', '/users/bob', '/users/2']) {
    assertProblem(await send(server.url, 'DELETE', path), 404, 'not-found', path);
  }
  assert.equal(await listText(server), before);
  // The reservation of id 2 survived the DELETE.
  assert.equal((await put(server.url, '/users/2', { name: 'Res' })).status, 201);
});

test('DELETE with a matching If-Match answers 204; with a stale one 412 and the user stays', async (t) => {
  const server = await seeded(t);
  const etag = (await get(server, '/users/1')).headers.etag as string;
  assert.equal((await put(server.url, '/users/1', { name: 'Changed' })).status, 200);
  assertProblem(
    await send(server.url, 'DELETE', '/users/1', { headers: { 'if-match': etag } }),
    412,
    'precondition-failed',
  );
  assert.equal((await get(server, '/users/1')).text, '{"name":"Changed","id":1}');
  const current = (await get(server, '/users/1')).headers.etag as string;
  assert.equal((await send(server.url, 'DELETE', '/users/alice', { headers: { 'if-match': current } })).status, 204);
});

// ---------------------------------------------------------------- listing

test('GET /users on an empty store answers {"items":[],"next":null}', async (t) => {
  const server = await startTestServer(t);
  const reply = await get(server, '/users');
  assert.equal(reply.status, 200);
  assert.equal(reply.text, '{"items":[],"next":null}');
});

test('GET /users lists the representations in ascending id order, whatever way each user was created', async (t) => {
  const server = await startTestServer(t);
  // id 1 reserved, 2 from POST, 3 through an alias, 4 from POST; then 1 created late.
  assert.equal((await send(server.url, 'POST', '/reservations')).headers.location, '/users/1');
  assert.equal((await send(server.url, 'POST', '/users/new', { json: { name: 'two' } })).headers.location, '/users/2');
  assert.equal((await put(server.url, '/users/three', { name: 'three', extra: true })).headers.location, '/users/3');
  assert.equal((await send(server.url, 'POST', '/users/new', { json: { name: 'four' } })).headers.location, '/users/4');
  assert.equal((await put(server.url, '/users/1', { name: 'one' })).status, 201);
  const reply = await get(server, '/users');
  assert.equal(
    reply.text,
    '{"items":[{"name":"one","id":1},{"name":"two","id":2},{"name":"three","extra":true,"id":3},{"name":"four","id":4}],"next":null}',
  );
});

test('GET /users: a user created late under an old reservation appears in id order, also across pages', async (t) => {
  const server = await startTestServer(t);
  assert.equal((await send(server.url, 'POST', '/reservations')).headers.location, '/users/1');
  await createManyAfter(server, 2, 5);
  assert.equal((await put(server.url, '/users/1', { name: 'late' })).status, 201);
  const first = await page(server, '/users?limit=2');
  assert.deepEqual(
    first.items.map((u) => u.id),
    [1, 2],
  );
  assert.equal(first.items[0]!.name, 'late');
  assert.equal(first.next, '/users?after=2&limit=2');
});

/** Creates users with the ids from..to through POST /users/new (the server must be at from-1). */
async function createManyAfter(server: TestServer, from: number, to: number): Promise<void> {
  for (let id = from; id <= to; id++) {
    assert.equal(
      (await send(server.url, 'POST', '/users/new', { json: { name: `u${id}` } })).headers.location,
      `/users/${id}`,
    );
  }
}

test('GET /users without limit answers a page of 100 and a next link with limit=100', async (t) => {
  const server = await startTestServer(t);
  await createMany(server, 101);
  const first = await page(server, '/users');
  assert.equal(first.items.length, 100);
  assert.deepEqual(
    first.items.map((u) => u.id),
    Array.from({ length: 100 }, (_, i) => i + 1),
  );
  assert.equal(first.next, '/users?after=100&limit=100');
  const second = await page(server, first.next!);
  assert.deepEqual(
    second.items.map((u) => u.id),
    [101],
  );
  assert.equal(second.next, null);
});

test('GET /users?limit=1000 (the maximum) answers a page of 1000; the next page holds the rest and ends with next null', async (t) => {
  const server = await startTestServer(t);
  await createMany(server, 1001);
  const first = await page(server, '/users?limit=1000');
  assert.equal(first.items.length, 1000);
  assert.equal(first.items[999]!.id, 1000);
  assert.equal(first.next, '/users?after=1000&limit=1000');
  const second = await page(server, first.next!);
  assert.deepEqual(
    second.items.map((u) => u.id),
    [1001],
  );
  assert.equal(second.next, null);
  assertProblem(await get(server, '/users?limit=1001'), 400, 'invalid-query');
});

test('GET /users: following next visits every user once in ascending order, skipping deleted ones, and the last page has next null', async (t) => {
  const server = await startTestServer(t);
  await createMany(server, 11);
  for (const id of [2, 6, 7]) assert.equal((await send(server.url, 'DELETE', `/users/${id}`)).status, 204);
  const seen: number[] = [];
  const links: Array<string | null> = [];
  let next: string | null = '/users?limit=3';
  while (next !== null) {
    const p: Page = await page(server, next);
    assert.ok(p.items.length <= 3);
    seen.push(...p.items.map((u) => u.id));
    next = p.next;
    links.push(next);
    assert.ok(links.length < 10, 'next ends');
  }
  assert.deepEqual(seen, [1, 3, 4, 5, 8, 9, 10, 11]);
  assert.deepEqual(links, ['/users?after=4&limit=3', '/users?after=9&limit=3', null]);
});

test('GET /users: when the last page is exactly full its next is null', async (t) => {
  const server = await startTestServer(t);
  await createMany(server, 6);
  const first = await page(server, '/users?limit=3');
  assert.equal(first.next, '/users?after=3&limit=3');
  const second = await page(server, first.next!);
  assert.deepEqual(
    second.items.map((u) => u.id),
    [4, 5, 6],
  );
  assert.equal(second.next, null);
  const all = await page(server, '/users?limit=6');
  assert.equal(all.next, null);
});

const afterCases: Array<{ name: string; query: string; ids: number[] }> = [
  { name: 'after=0 starts at the beginning', query: 'after=0', ids: [1, 3, 4, 5] },
  { name: 'after=an existing id starts after it', query: 'after=3', ids: [4, 5] },
  { name: 'after=a deleted id starts after it', query: 'after=2', ids: [3, 4, 5] },
  { name: 'after=the last id answers an empty page', query: 'after=5', ids: [] },
  { name: 'after=an id never issued answers an empty page', query: 'after=500', ids: [] },
  { name: 'after with limit answers that many', query: 'after=1&limit=2', ids: [3, 4] },
  { name: 'an unknown query parameter is ignored', query: 'after=3&order=desc&x', ids: [4, 5] },
];

for (const c of afterCases) {
  test(`GET /users?${c.query}: ${c.name}`, async (t) => {
    const server = await startTestServer(t);
    await createMany(server, 5);
    assert.equal((await send(server.url, 'DELETE', '/users/2')).status, 204);
    const p = await page(server, `/users?${c.query}`);
    assert.deepEqual(
      p.items.map((u) => u.id),
      c.ids,
    );
    if (c.ids.length === 0 || c.ids.at(-1) === 5) assert.equal(p.next, null);
  });
}

const badQueries = [
  'limit=0',
  'limit=1001',
  'limit=x',
  'limit=-1',
  'limit=1.5',
  'limit=',
  'limit=1e2',
  'limit=1&limit=2',
  'limit=99999999999999999999',
  'after=x',
  'after=-1',
  'after=1.5',
  'after=',
  'after=1&after=2',
  'after=9007199254740992',
];

for (const query of badQueries) {
  test(`GET /users?${query} answers 400 invalid-query`, async (t) => {
    const server = await seeded(t);
    assertProblem(await get(server, `/users?${query}`), 400, 'invalid-query');
  });
}

test('GET /users?limit=1 and limit=1000 are the accepted bounds', async (t) => {
  const server = await seeded(t);
  assert.deepEqual(
    (await page(server, '/users?limit=1')).items.map((u) => u.id),
    [1],
  );
  assert.deepEqual(
    (await page(server, '/users?limit=1000')).items.map((u) => u.id),
    [1],
  );
});

test('HEAD /users answers the headers of GET /users and no body', async (t) => {
  const server = await seeded(t);
  const getReply = await get(server, '/users');
  const head = parseHead(await rawHead(server, '/users'));
  assert.equal(head.status, 200);
  assert.equal(head.rest, '');
  assert.equal(head.headers['content-type'], getReply.headers['content-type']);
  assert.equal(head.headers['content-length'], getReply.headers['content-length']);
});
